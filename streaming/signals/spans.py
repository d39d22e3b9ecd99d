"""Which windows a batch's samples touched, and its newest sample time."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.signals.broker import window_starts

LOG = logging.getLogger("kafka_health.signals")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_MICROS = (datetime.min.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
MAX_MICROS = (datetime.max.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
Span = tuple[datetime, datetime]  # first and last window start of touched windows


def micros_to_datetime(micros: int) -> datetime | None:
    """A UTC datetime, or None for a time Python's datetime cannot hold."""
    try:
        return EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        return None


def newest_event(bronze: pa.Table) -> datetime | None:
    """The newest sample time of a batch (None without one Python can represent): progress
    reporting must not fail a batch whose bronze is already committed."""
    if not bronze.num_rows:
        return None
    newest = pc.max(bronze["ts"].cast(pa.int64())).as_py()
    return None if newest is None else micros_to_datetime(newest)


def touched_spans(ts: pa.ChunkedArray, window_seconds: int, lookback_seconds: int
                  ) -> list[Span]:
    """The windows a batch touched, as [first, last] window-start spans to recompute.

    Each span also covers the window after its last one (its first counter delta depends
    on the previous sample). Windows closer than the counter look-back share a span;
    farther ones get their own, so one late scrape from hours ago re-reads its own
    windows, not every sample in between. Windows whose span would leave Python's datetime
    range are left out (decoding quarantines such times; this keeps a bronze table written
    before that from failing every batch).
    """
    width = window_seconds * 1_000_000
    starts = np.unique(window_starts(ts, window_seconds).to_numpy())
    representable = (starts >= MIN_MICROS) & (starts <= MAX_MICROS - 2 * width)
    if not representable.all():
        LOG.warning("%d windows outside the datetime range skipped", int((~representable).sum()))
        starts = starts[representable]
    join_gap = lookback_seconds * 1_000_000 + 2 * width
    spans: list[list[int]] = []
    for start in starts.tolist():
        if spans and start - spans[-1][1] <= join_gap:
            spans[-1][1] = start
        else:
            spans.append([start, start])

    def moment(micros: int) -> datetime:
        return EPOCH + timedelta(microseconds=micros)

    return [(moment(lo), moment(hi + width)) for lo, hi in spans]
