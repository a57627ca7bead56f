"""Writes names_and_decoder.json: prometheus/common's name-validation and text-decoder tests as pages.

Kept to regenerate the JSON after a correction; nothing runs it at test time.
    python tests/sources/conformance/transcribe_names_and_decoder.py

The name tests (model/) check a name alone, under legacy and UTF-8 validation. A name reaches a
parser only inside a page, so each scenario becomes one page: line 1 holds the name quoted (the
UTF-8 form: a sample exactly when utf8Valid), line 2, only when legacyValid, the name bare (a
sample). The decoder tests (expfmt/) are pages already: their inputs verbatim.
"""

# ruff: noqa: E501, SIM115, UP031  (upstream's test text, verbatim)
import json
from pathlib import Path

src = {
    "repo": "prometheus/common",
    "path": "model/metric_test.go, model/labels_test.go, expfmt/decode_test.go, expfmt/text_parse_test.go",
    "commit": "d2417e2cbb82c4c81e4d28d55f354058169a9f08",
}
cases = []


def case(id, path, input, samples=(), errors=(), **kw):
    c = {
        "id": id,
        "path": path,
        "input": input,
        "samples": [list(s) for s in samples],
        "errors": list(errors),
    }
    c.update(kw)
    c.setdefault("upstream_error", None)
    cases.append(c)


# (name, legacyValid, utf8Valid), in upstream's order. "a\xc5z" is a Go string: the byte 0xC5 then "z",
# not UTF-8, so its page is kept as bytes (kvops refuses a page that is not UTF-8 before parsing).
METRIC_NAMES = [
    ("Avalid_23name", True, True),
    ("_Avalid_23name", True, True),
    ("1valid_23name", False, True),
    ("avalid_23name", True, True),
    ("Ava:lid_23name", True, True),
    ("a lid_23name", False, True),
    (":leading_colon", True, True),
    ("colon:in:the:middle", True, True),
    ("", False, False),
    (b"a\xc5z", False, False),
    ("dot.in.name", False, True),
]
LABEL_NAMES = [
    ("Avalid_23name", True, True),
    ("_Avalid_23name", True, True),
    ("1valid_23name", False, True),
    ("avalid_23name", True, True),
    ("Ava:lid_23name", False, True),
    ("a lid_23name", False, True),
    (":leading_colon", False, True),
    ("colon:in:the:middle", False, True),
    (b"a\xc5z", False, False),
    ("dot.in.name", False, True),
    ("", False, False),
]
NOT_UTF8 = "invalid UTF-8: kvops decodes a page as UTF-8 before parsing and a page that is not UTF-8 makes its target down (docs/DESIGN.md)"


def name_case(test, path, name, legacy, utf8, quoted, bare, sample):
    shown = name.decode("latin-1").replace("\xc5", "\\xc5") if isinstance(name, bytes) else name
    id = f"{test}/{shown},{str(legacy).lower()},{str(utf8).lower()}"  # upstream's subtest name
    if isinstance(name, bytes):
        case(
            id,
            path,
            None,
            [],
            [1],
            input_bytes_hex=quoted(name.decode("latin-1")).encode("latin-1").hex(),
            upstream_error="invalid name (utf8Valid false)",
            note=NOT_UTF8,
        )
        return
    text, samples, errors = quoted(name), [], []
    if utf8:
        samples.append(sample(name, 1))
    else:
        errors.append(1)
    if legacy:
        text += bare(name)
        samples.append(sample(name, 2))
    case(
        id,
        path,
        text,
        samples,
        errors,
        upstream_error=None if utf8 else "invalid name (utf8Valid false)",
        wanted=["m", name],
    )


for name, legacy, utf8 in METRIC_NAMES:
    name_case(
        "TestValidationScheme_IsMetricNameValid",
        "model/metric_test.go",
        name,
        legacy,
        utf8,
        lambda n: '{"%s"} 1\n' % n,
        lambda n: "%s 2\n" % n,
        lambda n, v: (n, {}, v),
    )
for name, legacy, utf8 in LABEL_NAMES:
    name_case(
        "TestValidationScheme_IsLabelNameValid",
        "model/labels_test.go",
        name,
        legacy,
        utf8,
        lambda n: 'm{"%s"="v"} 1\n' % n,
        lambda n: 'm{%s="v"} 2\n' % n,
        lambda n, v: ("m", {n: "v"}, v),
    )

# expfmt/decode_test.go TestTextDecoder: the text decoder gives every sample (mf1's first keeps its timestamp).
case(
    "TestTextDecoder",
    "expfmt/decode_test.go",
    "\n# Only a quite simple scenario with two metric families.\n"
    "# More complicated tests of the parser itself can be found in the text package.\n"
    "# TYPE mf2 counter\n"
    "mf2 3\n"
    'mf1{label="value1"} -3.14 123456\n'
    'mf1{label="value2"} 42\n'
    "mf2 4\n",
    [("mf1", {"label": "value1"}, -3.14), ("mf1", {"label": "value2"}, 42), ("mf2", {}, 3), ("mf2", {}, 4)],
    types={"mf2": "counter"},
)
# TestTextDecoderWithBufioReader: Go's raw string keeps the test's indentation (a tab before each line).
case(
    "TestTextDecoderWithBufioReader",
    "expfmt/decode_test.go",
    "\n\t# TYPE foo gauge\n\tfoo 0\n\t",
    [("foo", {}, 0)],
    types={"foo": "gauge"},
)
# expfmt/text_parse_test.go TestTextParserStartOfLine/EOF: an empty page is no error and no sample. (Its
# other subtest, OtherError, is a failing reader: a transport error, not a page.)
case("TestTextParserStartOfLine/EOF", "expfmt/text_parse_test.go", "", [], [], types={})

doc = {
    "suite": "prometheus/common name validation (model/) and text decoder (expfmt/)",
    "source": src,
    "transcribed": "by hand from the Go tests: each name scenario as a page (see the generator's docstring); decoder inputs verbatim, expected samples from the model.Vector values",
    "cases": cases,
}
json.dump(doc, open(Path(__file__).with_name("names_and_decoder.json"), "w"), indent=1, ensure_ascii=False)
print(len(cases))
