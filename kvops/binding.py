"""Reading and writing the snapshot fields a MetricSpec is bound to (kvops/names.py).

The exporter (encoding), frames/kvops_exposition.py (decoding) and rates all go through
these two functions, so which field feeds which kvops_* series is written once, in names.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvops.names import MetricSpec, Owner
from kvops.snapshot import EngineSample, GpuSample, HostSample, LMCacheSample, tier_kind

OwnerSample = EngineSample | LMCacheSample | GpuSample | HostSample


def owner_label_values(owner: Owner, sample: Any) -> list[str]:
    """The values of a spec's owner_labels for one snapshot object."""
    if owner == "engine":
        return [sample.target, sample.model_name, sample.engine, sample.engine_kind]
    if owner == "lmcache":
        return [sample.target, sample.model_name, sample.worker_id, sample.engine_kind]
    if owner == "gpu":
        return [sample.index, sample.uuid, sample.vendor]
    return []


def plain_field(spec: MetricSpec) -> str | None:
    """The field values() reads for `spec` when it is one plain field (most specs): the
    exporter then reads it with getattr, without a generator per sample."""
    if spec.split or spec.info or spec.open_split:
        return None
    return spec.field


def fixed_fields(spec: MetricSpec) -> tuple[tuple[str | None, str], ...] | None:
    """(split label value or None, field) for each field values() reads for `spec`, where
    that is a fixed list (a plain field, a closed split): the exporter reads them in one call
    per family (kvops.exporter.walk). None for an open split or an info spec."""
    if spec.split:
        return spec.split
    field = plain_field(spec)
    return None if field is None else ((None, field),)


def values(spec: MetricSpec, sample: Any) -> Iterator[tuple[str | tuple[str, str] | None, Any]]:
    """(split label value or None, value) for every present value of `spec` in `sample`.
    None values (absent) and empty dicts yield nothing: absent stays absent. A tier_name spec's
    split value is the pair (tier kind, tier name)."""
    if spec.split:
        for label_value, field in spec.split:
            value = getattr(sample, field)
            if value is not None:
                yield label_value, value
    elif spec.info:
        text = getattr(sample, spec.field)  # type: ignore[arg-type]
        if text is not None:
            yield str(text), 1.0
    elif spec.open_split:
        by_label: dict[Any, Any] = getattr(sample, spec.field)  # type: ignore[arg-type]
        for key, split_value in keyed_labels(spec, by_label):
            value = by_label[key]
            if value is not None:
                yield split_value, value
    elif spec.field is not None:
        value = getattr(sample, spec.field)
        if value is not None:
            yield None, value


def keyed_labels(spec: MetricSpec, by_label: dict[Any, Any]) -> list[tuple[Any, str | tuple[str, str]]]:
    """An open split's dict's keys in exposition order, each with its split value: its text, or
    for a tier_name spec the pair (tier kind, tier name)."""
    return [
        (key, (tier_kind(key), key) if spec.tier_name else str(key))
        for key in sorted(by_label, key=_ORDERS.__getitem__)
    ]


def assign(spec: MetricSpec, sample: Any, split_value: str | None, value: Any) -> bool:
    """Store one decoded series value into `sample`; False when the split value is not bound."""
    if spec.split:
        for label_value, field in spec.split:
            if label_value == split_value:
                setattr(sample, field, value)
                return True
        return False
    if spec.info:
        if split_value is None or spec.field is None:
            return False
        setattr(sample, spec.field, split_value)
        return True
    if spec.open_split:
        if split_value is None:
            return False
        getattr(sample, spec.field).__setitem__(split_value, value)  # type: ignore[arg-type]
        return True
    if spec.field is None:
        return False
    setattr(sample, spec.field, value)
    return True


class _Orders(dict[Any, tuple[int, str]]):
    """Label value -> its sort key, made on first use: the exporter sorts the same few values
    (sources, reasons, links) on every scrape. Bounded like the exporter's other caches."""

    def __missing__(self, label_value: Any) -> tuple[int, str]:
        if len(self) >= 4096:
            self.clear()
        order = self[label_value] = _order(str(label_value))
        return order


_ORDERS = _Orders()


def _order(label_value: str) -> tuple[int, str]:
    # NVLink links and pids sort as numbers, vLLM's source values as text.
    return (
        (int(label_value), "") if label_value.isascii() and label_value.isdigit() else (1 << 30, label_value)
    )
