"""Text exposition (format 0.0.4) of metric families, byte-equal to prometheus_client's.

prometheus_client's generate_latest validates and escapes every label name of every
sample: with 16 targets and 8 GPUs it took ~20 ms of a ~57 ms scrape (cProfile, see
benchmarks/exporter_scrape.py). kvops's own names are fixed and valid (kvops/names.py), so
only label values need escaping; tests/exporter/test_encode.py pins byte equality.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString


def _escape_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def encode(metrics: Iterable[Metric]) -> bytes:
    out: list[str] = []
    append = out.append
    for metric in metrics:
        name = metric.name + "_total" if metric.type == "counter" else metric.name
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        append(f"# HELP {name} {doc}\n# TYPE {name} {metric.type}\n")
        for sample in metric.samples:
            if sample.labels:
                labels = ",".join(f'{k}="{_escape_value(v)}"' for k, v in sorted(sample.labels.items()))
                append(f"{sample.name}{{{labels}}} {floatToGoString(sample.value)}\n")
            else:
                append(f"{sample.name} {floatToGoString(sample.value)}\n")
    return "".join(out).encode("utf-8")
