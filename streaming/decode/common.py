"""What every decoder shares: the observation a decoder yields, the error it raises and
the Arrow batch all decoding ends in.

Decoders stay small: they turn one parsed message into observations and say nothing
about identity, quarantine or Arrow; `streaming.decode.records` does that once for all.
"""

from __future__ import annotations

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


def header_groups(headers: list[Any] | None) -> dict[str, str]:
    """The identity headers of a record ({"cluster": ..., "broker": ...}, the first of each
    name, empty values left out), from Spark's {key, value} structs or (key, value) pairs."""
    if not headers:
        return {}
    groups: dict[str, str] = {}
    for header in headers:
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
