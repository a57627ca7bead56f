"""Writes expfmt.json: upstream's parser test cases transcribed by hand (README.md here).

Kept to regenerate the JSON after a correction; nothing runs it at test time.
    python tests/sources/conformance/transcribe_expfmt.py
"""

# ruff: noqa: E501, SIM115, B905  (upstream's test text, verbatim, one case per call)
import json
from pathlib import Path

INF, NINF, NAN = "+Inf", "-Inf", "NaN"
src = {
    "repo": "prometheus/common",
    "path": "expfmt/text_parse_test.go",
    "commit": "06f751e981c75d28b9c3e4758ab7681c2384b08d",
}
cases = []


def case(id, input, samples=(), errors=(), **kw):
    c = {"id": id, "input": input, "samples": [list(s) for s in samples], "errors": list(errors)}
    c.update(kw)
    cases.append(c)


case("testTextParse/0", "\n\n")
case(
    "testTextParse/1",
    "\nminimal_metric 1.234\nanother_metric -3e3 103948\n# Even that:\nno_labels{} 3\n# HELP line for non-existing metric will be ignored.\n",
    [("minimal_metric", {}, 1.234), ("another_metric", {}, -3000), ("no_labels", {}, 3)],
)
case(
    "testTextParse/2",
    "\n# A normal comment.\n#\n# TYPE name counter\n"
    'name{labelname="val1",basename="basevalue"} NaN\n'
    'name {labelname="val2",basename="base\\"v\\\\al\\nue"} 0.23 1234567890\n'
    "# HELP name two-line\\n doc  str\\\\ing\n\n"
    ' # HELP  name2  \tdoc str"ing 2\n'
    "  #    TYPE    name2 gauge\n"
    'name2{labelname="val2"\t,basename   =   "basevalue2"\t\t} +Inf 54321\n'
    'name2{ labelname = "val1" , }-Inf\n',
    [
        ("name", {"labelname": "val1", "basename": "basevalue"}, NAN),
        ("name", {"labelname": "val2", "basename": 'base"v\\al\nue'}, 0.23),
        ("name2", {"labelname": "val2", "basename": "basevalue2"}, INF),
        ("name2", {"labelname": "val1"}, NINF),
    ],
    types={"name": "counter", "name2": "gauge"},
)
case(
    "testTextParse/3",
    "\n# TYPE my_summary summary\n"
    'my_summary{n1="val1",quantile="0.5"} 110\n'
    "decoy -1 -2\n"
    'my_summary{n1="val1",quantile="0.9"} 140 1\n'
    'my_summary_count{n1="val1"} 42\n'
    "# Latest timestamp wins in case of a summary.\n"
    'my_summary_sum{n1="val1"} 4711 2\n'
    'fake_sum{n1="val1"} 2001\n'
    "# TYPE another_summary summary\n"
    'another_summary_count{n2="val2",n1="val1"} 20\n'
    'my_summary_count{n2="val2",n1="val1"} 5 5\n'
    'another_summary{n1="val1",n2="val2",quantile=".3"} -1.2\n'
    'my_summary_sum{n1="val2"} 08 15\n'
    'my_summary{n1="val3", quantile="0.2"} 4711\n'
    '  my_summary{n1="val1",n2="val2",quantile="-12.34",} NaN\n'
    "# some\n# funny comments\n# HELP\n# HELP\n# HELP my_summary\n# HELP my_summary\n",
    [
        ("my_summary", {"n1": "val1", "quantile": "0.5"}, 110),
        ("decoy", {}, -1),
        ("my_summary", {"n1": "val1", "quantile": "0.9"}, 140),
        ("my_summary_count", {"n1": "val1"}, 42),
        ("my_summary_sum", {"n1": "val1"}, 4711),
        ("fake_sum", {"n1": "val1"}, 2001),
        ("another_summary_count", {"n2": "val2", "n1": "val1"}, 20),
        ("my_summary_count", {"n2": "val2", "n1": "val1"}, 5),
        ("another_summary", {"n1": "val1", "n2": "val2", "quantile": ".3"}, -1.2),
        ("my_summary_sum", {"n1": "val2"}, 8),
        ("my_summary", {"n1": "val3", "quantile": "0.2"}, 4711),
        ("my_summary", {"n1": "val1", "n2": "val2", "quantile": "-12.34"}, NAN),
    ],
    types={"my_summary": "summary", "another_summary": "summary"},
    note="expfmt folds samples into families (a summary's quantiles, count and sum); kvops keeps each sample line as written, so the expected samples are the lines themselves",
)
HIST = ["100", "120", "144", "172.8", "+Inf"]


def hist(typ, buckets, count, le=HIST):
    text = (
        "\n# HELP request_duration_microseconds The response latency.\n"
        f"# TYPE request_duration_microseconds {typ}\n"
    )
    samples = []
    for b, v in zip(le, buckets):
        text += f'request_duration_microseconds_bucket{{le="{b}"}} {v}\n'
        samples.append(("request_duration_microseconds_bucket", {"le": b}, float(v)))
    text += "request_duration_microseconds_sum 1.7560473e+06\n"
    text += f"request_duration_microseconds_count {count}\n"
    samples += [
        ("request_duration_microseconds_sum", {}, 1756047.3),
        ("request_duration_microseconds_count", {}, float(count)),
    ]
    return text, samples


t, s = hist("histogram", ["123", "412", "592", "1524", "2693"], "2693")
case("testTextParse/4", t, s, types={"request_duration_microseconds": "histogram"})
case(
    "testTextParse/5",
    '\n# HELP "my.noncompliant.metric" help text\n# TYPE "my.noncompliant.metric" counter\n'
    '{"my.noncompliant.metric","label.name"="value"} 1\n',
    [("my.noncompliant.metric", {"label.name": "value"}, 1)],
    types={"my.noncompliant.metric": "counter"},
)
case(
    "testTextParse/6",
    '\n# HELP "name.with.dots" boring help\n# TYPE "name.with.dots" counter\n'
    '{"name.with.dots",labelname="val1",basename="basevalue"} 42.0\n'
    '{"name.with.dots",labelname="val2",basename="basevalue"} 0.23 1234567890\n',
    [
        ("name.with.dots", {"labelname": "val1", "basename": "basevalue"}, 42),
        ("name.with.dots", {"labelname": "val2", "basename": "basevalue"}, 0.23),
    ],
    types={"name.with.dots": "counter"},
)
case(
    "testTextParse/7",
    '\n\t\t\t\t# HELP "name.with.dots" boring help\n\t\t\t\t# TYPE "name.with.dots" counter\n'
    '\t\t\t\t{"name.with.dots"} 42.0\n\t\t\t\t{"name.with.dots"} 0.23 1234567890\n\t\t\t\t',
    [("name.with.dots", {}, 42), ("name.with.dots", {}, 0.23)],
    types={"name.with.dots": "counter"},
)
case(
    "testTextParse/8",
    '# HELP "gauge.name" gauge\\ndoc\\nstr\\"ing\n# TYPE "gauge.name" gauge\n'
    '{"gauge.name","name.1"="val with\\nnew line","name*2"="val with \\\\backslash and \\"quotes\\""} +Inf\n'
    '{"gauge.name","name.1"="Björn","name*2"="佖佥"} 3.14e+42\n',
    [
        ("gauge.name", {"name.1": "val with\nnew line", "name*2": 'val with \\backslash and "quotes"'}, INF),
        ("gauge.name", {"name.1": "Björn", "name*2": "佖佥"}, 3.14e42),
    ],
    types={"gauge.name": "gauge"},
)
case(
    "testTextParse/9",
    '\n# HELP "my\\"noncompliant\\nmetric\\\\" help text\n# TYPE "my\\"noncompliant\\nmetric\\\\" counter\n'
    '{"my\\"noncompliant\\nmetric\\\\","label\\"name\\n"="value"} 1\n',
    [('my"noncompliant\nmetric\\', {'label"name\n': "value"}, 1)],
    types={'my"noncompliant\nmetric\\': "counter"},
)
case(
    "testTextParse/10",
    '\n# HELP "my.noncompliant.metric" help text\n# TYPE "my.noncompliant.metric" counter\n'
    '{labelname="value", "my.noncompliant.metric"} 1\n',
    [("my.noncompliant.metric", {"labelname": "value"}, 1)],
    types={"my.noncompliant.metric": "counter"},
)
case(
    "testTextParse/11",
    '\n{"name.1"} 1\n{"name.2"} 1\n{"name.3"} 1\n',
    [("name.1", {}, 1), ("name.2", {}, 1), ("name.3", {}, 1)],
)
t, s = hist("histogram", ["123.5", "412.6", "592.7", "1524.8", "2693.9"], "2693.9")
case("testTextParse/12", t, s, types={"request_duration_microseconds": "histogram"})
t, s = hist("histogram", ["123", "412", "592", "1524"], "2693.9", le=HIST[:4])
case("testTextParse/13", t, s, types={"request_duration_microseconds": "histogram"})
t, s = hist("histogram", ["123", "412", "592", "1524.8", "2693"], "2693")
case("testTextParse/14", t, s, types={"request_duration_microseconds": "histogram"})
t, s = hist("gaugehistogram", ["123", "412", "592", "1524", "2693"], "2693")
case("testTextParse/15", t, s, types={"request_duration_microseconds": "gaugehistogram"})
t, s = hist("gauge_histogram", ["123", "412", "592", "1524", "2693"], "2693")
case("testTextParse/16", t, s, types={"request_duration_microseconds": "gauge_histogram"})
t, s = hist("gauge_histogram", ["123", "412", "592", "1524.8", "2693"], "2693")
case("testTextParse/17", t, s, types={"request_duration_microseconds": "gauge_histogram"})

# testTextParseError: expfmt stops at the first error; kvops reports the line and keeps the rest.
E = "testTextParseError/"
case(
    E + "0",
    "\nbla 3.14\nblubber 42",
    [("bla", {}, 3.14), ("blubber", {}, 42)],
    upstream_error="line 3: unexpected end of input stream",
    note="differs: expfmt wants a final newline; Prometheus's scraper (promparse) reads a last line without one (promparse_test.go's TestPromParse ends so), and kvops reads what the scraper stores",
)
case(
    E + "1",
    'metric{label="\\t"} 3.14',
    [("metric", {"label": "\\t"}, 3.14)],
    upstream_error="line 1: invalid escape sequence",
    note="differs: promparse keeps an unknown escape as written (its lexer accepts any \\x, its unescaper replaces only \\\\ \\\" \\n) and client_python's test_escaping expects the same; kvops follows them",
)
case(
    E + "2",
    '\nmetric{label="new\nline"} 3.14\n',
    [],
    [2, 3],
    wanted=["metric"],
    upstream_error='line 2: label value "new" contains unescaped new-line',
)
case(
    E + "3",
    'metric{@="bla"} 3.14',
    [],
    [1],
    wanted=["metric"],
    upstream_error="line 1: invalid label name for metric",
)
case(
    E + "4",
    'metric{__name__="bla"} 3.14',
    [],
    [1],
    wanted=["metric"],
    upstream_error='line 1: label name "__name__" is reserved',
)
case(
    E + "5",
    'metric{label+="bla"} 3.14',
    [],
    [1],
    wanted=["metric"],
    upstream_error="line 1: expected '=' after label name",
)
case(
    E + "6",
    "metric{label=bla} 3.14",
    [],
    [1],
    wanted=["metric"],
    upstream_error="line 1: expected '\"' at start of label value",
)
case(
    E + "7",
    '\n# TYPE metric summary\nmetric{quantile="bla"} 3.14\n',
    [],
    [3],
    wanted=["metric"],
    up=True,
    upstream_error="line 3: expected float as value for 'quantile' label",
)
case(
    E + "8",
    'metric{label="bla"+} 3.14',
    [],
    [1],
    wanted=["metric"],
    upstream_error="line 1: unexpected end of label value",
)
case(
    E + "9",
    'metric{label="bla"} 3.14 2.72\n',
    [],
    [1],
    wanted=["metric"],
    upstream_error="line 1: expected integer as timestamp",
)
case(
    E + "10",
    'metric{label="bla"} 3.14 2 3\n',
    [],
    [1],
    wanted=["metric"],
    upstream_error="line 1: spurious string after timestamp",
)
case(
    E + "11",
    'metric{label="bla"} blubb\n',
    [],
    [1],
    wanted=["metric"],
    upstream_error="line 1: expected float as value",
)
case(
    E + "12",
    "\n# HELP metric one\n# HELP metric two\n",
    upstream_error="line 3: second HELP line for metric name",
    note="differs: kvops does not read HELP text; promparse does not reject a second HELP line either",
)
case(
    E + "13",
    "\n# TYPE metric counter\n# TYPE metric untyped\n",
    types={"metric": "untyped"},
    wanted=["metric"],
    upstream_error='line 3: second TYPE line for metric name "metric", or TYPE reported after samples',
    note="differs: metadata order is not checked (promparse does not check it); the last TYPE line is the one kept",
)
case(
    E + "14",
    "\nmetric 4.12\n# TYPE metric counter\n",
    [("metric", {}, 4.12)],
    types={"metric": "counter"},
    upstream_error='line 3: second TYPE line for metric name "metric", or TYPE reported after samples',
    note="differs: metadata order is not checked (promparse does not check it)",
)
case(
    E + "15",
    "\n# TYPE metric bla\n",
    [],
    [2],
    wanted=["metric"],
    upstream_error="line 2: unknown metric type",
)
case(
    E + "16",
    "\n# TYPE met-ric\n",
    [],
    [2],
    fast_errors=[],
    upstream_error="line 2: invalid metric name in comment",
    note="the fast path reads TYPE lines of wanted families only; met-ric cannot be one",
)
case(
    E + "17",
    '@invalidmetric{label="bla"} 3.14 2',
    [],
    [1],
    wanted=["@invalidmetric"],
    upstream_error="line 1: invalid metric name",
)
case(E + "18", '{label="bla"} 3.14 2', [], [1], upstream_error="line 1: invalid metric name")
case(
    E + "19",
    '\n# TYPE metric histogram\nmetric_bucket{le="bla"} 3.14\n',
    [],
    [3],
    wanted=["metric_bucket"],
    up=True,
    upstream_error="line 3: expected float as value for 'le' label",
)
case(
    E + "20",
    None,
    input_bytes_hex="6d65747269637b6c3d22bd227d20332e31340a",
    upstream_error='line 1: invalid label value "\\xbd"',
    note="invalid UTF-8: kvops decodes a page as UTF-8 before parsing and a page that is not UTF-8 makes its target down (docs/DESIGN.md)",
)
for i, v in [
    (21, "1_2"),
    (22, "0x1p-3"),
    (23, "0x1P-3"),
    (24, "0B1"),
    (25, "0O1"),
    (26, "0X1"),
    (27, "0x1"),
    (28, "0b1"),
    (29, "0o1"),
    (30, "0x1"),
    (31, "0x1"),
]:
    case(E + str(i), f"foo {v}\n", [], [1], wanted=["foo"], upstream_error="line 1: expected float as value")
case(
    E + "32",
    '\n# TYPE metric histogram\nmetric_bucket{le="0x1p-3"} 3.14\n',
    [],
    [3],
    wanted=["metric_bucket"],
    up=True,
    upstream_error="line 3: expected float as value for 'le' label",
)
case(
    E + "33",
    '\n# TYPE metric summary\nmetric{quantile="0x1p-3"} 3.14\n',
    [],
    [3],
    wanted=["metric"],
    up=True,
    upstream_error="line 3: expected float as value for 'quantile' label",
)
case(
    E + "34",
    'metric{label="bla",label="bla"} 3.14',
    [],
    [1],
    wanted=["metric"],
    upstream_error="line 1: duplicate label names for metric",
)
case(E + "35", '{"one.name","another.name"} 3.14', [], [1], upstream_error="line 1: multiple metric names")
case(
    E + "36",
    '{"a\\xc5z",label="bla"} 3.14',
    [],
    [1],
    upstream_error="line 1: invalid escape sequence",
)
case(
    E + "37",
    '{"metric.name".label="bla"} 3.14',
    [],
    [1],
    upstream_error="line 1: unexpected end of metric name",
)
case(
    E + "38",
    '\n# TYPE "metric.name\\t" counter\n{"metric.name\\t",label="bla"} 3.14\n',
    [],
    [2, 3],
    fast_errors=[3],
    upstream_error="line 2: invalid escape sequence",
    note="the fast path reads TYPE lines of wanted families only; a name with a bad escape cannot be one",
)
case(
    E + "39",
    '\n# TYPE "metric\nname" counter\n{"metric\nname",label="bla"} 3.14\n',
    [],
    [2, 3, 4, 5],
    fast_errors=[4, 5],
    upstream_error='line 2: metric name "metric" contains unescaped new-line',
    note="lines 2 and 3 belong to no wanted family: the fast path does not read them (it reads lines that start with { and the last line)",
)
case(
    E + "40",
    '\n{"metric.name","new\nline"="bla"} 3.14\n',
    [],
    [2, 3],
    upstream_error='line 2: label name "new" contains unescaped new-line',
)
case(
    E + "41",
    '{"metric.name",foo="bla"} 3.14\n',
    [("metric.name", {"foo": "bla"}, 3.14)],
    note="valid under UTF-8 validation (Prometheus 3); an error only under legacy validation",
)
case(
    E + "42",
    'metric_name{"foo"="bar", "dotted.label"="bla"} 3.14\n',
    [("metric_name", {"foo": "bar", "dotted.label": "bla"}, 3.14)],
    note="valid under UTF-8 validation (Prometheus 3); an error only under legacy validation",
)
t, s = hist("histogram", ["123", "412", "592", "1524", "2693"], "-2693")
case(
    E + "43",
    t,
    s,
    types={"request_duration_microseconds": "histogram"},
    upstream_error='line 10: negative count for histogram "request_duration_microseconds"',
    note="differs: kvops reads sample lines, not histograms; a negative count is kept as written (promparse keeps it too)",
)
t, s = hist("histogram", ["123", "-412", "592", "1524", "2693"], "2693")
case(
    E + "44",
    t,
    s,
    types={"request_duration_microseconds": "histogram"},
    upstream_error='line 5: negative bucket population for histogram "request_duration_microseconds"',
    note="differs: as testTextParseError/43",
)
t, s = hist("histogram", ["123", "412", "592", "1524", "2693"], "-2693.123")
case(
    E + "45",
    t,
    s,
    types={"request_duration_microseconds": "histogram"},
    upstream_error='line 10: negative count for histogram "request_duration_microseconds"',
    note="differs: as testTextParseError/43",
)
t, s = hist("histogram", ["123", "-412.456", "592", "1524", "2693"], "2693")
case(
    E + "46",
    t,
    s,
    types={"request_duration_microseconds": "histogram"},
    upstream_error='line 5: negative bucket population for histogram "request_duration_microseconds"',
    note="differs: as testTextParseError/43",
)
case(E + "47", "{} 3.14", [], [1], upstream_error="line 1: invalid metric name")

# TestTextParseMissingMetricName: each prefix before each sample; the error on the sample line.
prefixes = [
    ("", []),
    ("#TYPE A000000 summArY\n", []),
    ("# TYPE metric histogram\n", []),
    ("# HELP metric Help text.\n", []),
    ("metric 1\n", [("metric", {}, 1)]),
    ('{"metric"} 1\n', [("metric", {}, 1)]),
]
for prefix, samples in prefixes:
    for sample in ["{}", "{} 2\n", '{label="value"} 2\n', '{label="value",} 2\n']:
        line = prefix.count("\n") + 1
        case(
            f"TestTextParseMissingMetricName/{prefix + sample}",
            prefix + sample,
            samples,
            [line],
            types={"A000000": "summary"}
            if prefix.startswith("#TYPE")
            else {"metric": "histogram"}
            if "TYPE metric" in prefix
            else {},
            upstream_error="invalid metric name",
        )

# Keep the upstream verdict of every case beside kvops's.
for c in cases:
    c.setdefault("upstream_error", None)
doc = {
    "suite": "prometheus/common expfmt TextParser",
    "source": src,
    "transcribed": "by hand from the Go test tables (inputs verbatim; expected samples from the dto.MetricFamily values, one per sample line)",
    "cases": cases,
}
json.dump(doc, open(Path(__file__).with_name("expfmt.json"), "w"), indent=1, ensure_ascii=False)
print(len(cases))
