"""Which windows a batch recomputes: a late scrape from long ago must not pull in every
sample between it and now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from streaming.signals.spans import touched_spans

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def spans(*seconds: float) -> list[tuple[datetime, datetime]]:
    ts = pa.chunked_array([pa.array([T0 + timedelta(seconds=s) for s in seconds],
                                    pa.timestamp("us", "UTC"))])
    return touched_spans(ts, window_seconds=60, lookback_seconds=300)


def minute(m: int) -> datetime:
    return T0 + timedelta(minutes=m)


def test_one_window_also_recomputes_the_next():
    assert spans(5, 30) == [(minute(0), minute(1))]


def test_nearby_windows_share_a_span():
    assert spans(10, 130, 400) == [(minute(0), minute(7))]


def test_a_late_scrape_hours_old_gets_its_own_span():
    assert spans(3 * 3600 + 10, 20) == [(minute(0), minute(1)), (minute(180), minute(181))]
