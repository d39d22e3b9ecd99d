"""What every decoder shares: the observation a decoder yields, the error it raises and
the Arrow batch all decoding ends in.

Decoders stay small: they turn one parsed message into observations and say nothing
about identity, quarantine or Arrow; `streaming.decode.records` does that once for all.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streaming.schemas import decoded_arrow_schema

# Record headers that name a sample's identity (after labels, before the record key).
IDENTITY_HEADERS = ("cluster", "broker")


class DecodeError(Exception):
    """The whole record is unusable; `reason` is a short machine-readable category."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(slots=True)
class Observation:
    """One value read from a message, before identity is resolved.

    `labels` holds everything the message said about the series, identity hints
    included (instance, cluster, ...); identity resolution takes those out.
    `ts` is epoch seconds or None when the message carried no time of its own.
    """

    ts: float | None
    metric: str | None
    attribute: str
    value: float
    kind: str
    labels: dict[str, str] = field(default_factory=dict)
    raw_name: str | None = None


@dataclass(slots=True)
class Rejected:
    """A single observation that broke a hard rule; the record gets one quarantine row."""

    reason: str
    detail: str


@dataclass(frozen=True)
class Limits:
    """What one record may hold (QualityConfig's max_samples_per_record, ...)."""

    samples_per_record: int = 100_000
    labels_per_sample: int = 64
    label_chars: int = 1024


# The limits of the batch being decoded. A context variable rather than a decode()
# argument: decoders (registered ones too) keep their (doc, catalog) signature, and every
# `Observations` list they build enforces the same limits.
DEFAULT_LIMITS = Limits()  # frozen
LIMITS: ContextVar[Limits] = ContextVar("kafka_health_decode_limits", default=DEFAULT_LIMITS)


def bounded(what: str, value: str, limit: int, reason: str) -> None:
    """DecodeError `reason` for a string over `limit` characters, showing only its head."""
    if len(value) > limit:
        raise DecodeError(reason, f"{what} of {len(value)} characters (at most {limit}): "
                                  f"{value[:60]!r}...")


def check_labels(labels: dict[str, str], limits: Limits) -> None:
    """DecodeError (too_many_labels, label_too_long) for a label set over the limits."""
    if len(labels) > limits.labels_per_sample:
        raise DecodeError("too_many_labels", f"{len(labels)} labels (at most "
                                             f"{limits.labels_per_sample})")
    for key, value in labels.items():
        bounded("label key", key, limits.label_chars, "label_too_long")
        bounded(f"label {key[:60]!r}", value, limits.label_chars, "label_too_long")


class Observations(list):
    """A decoder's output list, bounded as it grows: one hostile record (a 10 MB Telegraf
    message expands to 850k samples, +1 GB) must stop decoding the moment it passes the
    cap, not after every sample exists. Passing it raises DecodeError too_many_samples (the
    record is quarantined whole); an observation whose labels or hints break the label
    limits is stored as a Rejected in its place (that sample is quarantined, the record's
    others are kept)."""

    __slots__ = ("limits", "labels_ok", "hints_ok")

    def __init__(self) -> None:
        super().__init__()
        self.limits = LIMITS.get()
        # Decoders share label dicts between samples (Jolokia's per-MBean labels, an OTLP
        # resource's hints): the last one that passed is not checked again.
        self.labels_ok: object = None
        self.hints_ok: object = None

    def _room(self, more: int) -> None:
        cap = self.limits.samples_per_record
        if len(self) + more > cap:
            raise DecodeError("too_many_samples", f"more than {cap} samples in one record")

    def append(self, item: Any) -> None:
        self._room(1)
        if item.__class__ is not Rejected:
            try:
                if item.labels is not self.labels_ok:
                    check_labels(item.labels, self.limits)
                    self.labels_ok = item.labels
                hints = getattr(item, "hints", None)
                if hints is not None and hints is not self.hints_ok:
                    check_labels(hints, self.limits)
                    self.hints_ok = hints
            except DecodeError as err:
                item = Rejected(err.reason, err.detail)
        super().append(item)

    def extend(self, items: Any) -> None:
        if isinstance(items, Observations):  # checked item by item as it was built
            self._room(len(items))
            super().extend(items)
            return
        for item in items:
            self.append(item)


# The longest item path and detail a Rejected keeps: the quarantine row keeps the first 500
# characters of one record's first reject, and a record may hold thousands of broken items.
MAX_ITEM_DETAIL = 300


def each_item(items: list[Any], decode_one: Callable[[Any], Any], where: str = "",
              out: Observations | None = None) -> Observations:
    """The observations of a record's list of items (a Telegraf batch, a list of adapter
    samples, an OTLP message's resources, scopes, metrics and data points), each decoded by
    `decode_one` (an observation or a list of them, or None once it has added its own to
    `out`): a broken item is quarantined in its place, named by `where` and its index, and
    the others are kept, as a broken entry of a Jolokia bulk read is. Nested lists share
    one `out`, so the samples cap still refuses the record whole the moment it is passed:
    that bound is the record's, not an item's."""
    out = Observations() if out is None else out
    for index, item in enumerate(items):
        try:
            part = decode_one(item)
        except DecodeError as err:
            if err.reason == "too_many_samples":
                raise
            part = Rejected(err.reason, f"{where[:MAX_ITEM_DETAIL]}[{index}]: "
                                        f"{err.detail[:MAX_ITEM_DETAIL]}")
        if part is None:
            continue
        if isinstance(part, list):
            out.extend(part)
        else:
            out.append(part)
    return out


def header_groups(headers: list[Any] | None) -> dict[str, str]:
    """The identity headers of a record ({"cluster": ..., "broker": ...}, the first of each
    name, empty values left out), from Spark's {key, value} structs or (key, value) pairs."""
    if not headers:
        return {}
    groups: dict[str, str] = {}
    for header in headers:
        if header is None:  # no source writes one; a hand-built batch may
            continue
        name, value = (header["key"], header["value"]) if isinstance(header, dict) else header
        if name in IDENTITY_HEADERS and value and name not in groups:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            groups[name] = text
    return groups


def _dates(ts: pa.Array) -> pa.Array:
    """yyyy-mm-dd of each UTC timestamp. Arrow's strftime costs ~0.9 µs a row, as much as
    parsing the JSON; a batch spans a few days, so only its distinct days are formatted."""
    days = pc.dictionary_encode(pc.cast(ts, pa.date32()))
    text = pc.strftime(pc.cast(days.dictionary, pa.timestamp("s", tz="UTC")), format="%Y-%m-%d")
    return text.take(days.indices)


def decoded_batch(columns: dict[str, pa.Array]) -> pa.RecordBatch:
    """The decode output in `decoded_arrow_schema` order, with the `date` partition column
    derived from `ts` for the whole batch."""
    schema = decoded_arrow_schema()
    arrays = {**columns, "date": _dates(columns["ts"])}
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)
