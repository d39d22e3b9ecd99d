"""Request-handler idle from the Meter: OneMinuteRate when it is exported, rate(Count) / 1e9
when only the cumulative Count is (Strimzi / upstream jmx_exporter)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from streaming.config import SignalsConfig
from streaming.schemas import arrow_schema
from streaming.signals.broker import broker_signals

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SCRAPE = 15


def meter_samples(idle_by_scrape: list[float], reset_at: int | None = None,
                  one_minute_rate: bool = False) -> pa.Table:
    """The Meter a broker with this idle fraction per scrape interval reports.

    Count accumulates idle nanoseconds per thread; a reset (broker restart) starts it from
    the idle of the first interval after the restart.
    """
    schema = arrow_schema("bronze")
    rows, count = [], 0.0
    for i, idle in enumerate(idle_by_scrape):
        if i == reset_at:
            count = 0.0
        count += idle * SCRAPE * 1e9
        ts = START + timedelta(seconds=i * SCRAPE)
        attrs = [("Count", count, "counter")]
        if one_minute_rate:
            attrs.append(("OneMinuteRate", min(1.0, idle + 0.05), "gauge"))
        for attribute, value, kind in attrs:
            rows.append({name: None for name in schema.names} | {
                "cluster": "c1", "broker": "1", "ts": ts, "metric": "RequestHandlerAvgIdlePercent",
                "attribute": attribute, "labels": [], "value": value, "kind": kind,
                "source_offset": len(rows), "date": ts.strftime("%Y-%m-%d")})
    return pa.Table.from_pylist(rows, schema=schema)


def idle_by_window(samples: pa.Table) -> dict[int, tuple[float, float]]:
    rows = broker_signals(samples, SignalsConfig()).to_pylist()
    # minutes since START (whole-hour time zones keep the minute)
    return {r["window_start"].minute - START.minute:
            (r["request_handler_idle_min"], r["request_handler_idle_mean"]) for r in rows}


def test_idle_from_count_alone_is_the_idle_fraction():
    # minute 0 healthy (0.9), minute 1 saturated (0.1 for two scrapes, then 0.3)
    idle = [0.9, 0.9, 0.9, 0.9, 0.1, 0.1, 0.3, 0.3]
    windows = idle_by_window(meter_samples(idle))
    # the first sample of the series has no predecessor: minute 0 averages three intervals
    assert windows[0] == pytest.approx((0.9, 0.9))
    assert windows[1] == pytest.approx((0.1, 0.2))


def test_a_counter_reset_yields_no_rate_instead_of_a_wrong_one():
    idle = [0.9, 0.9, 0.9, 0.9, 0.5, 0.5, 0.5, 0.5]
    windows = idle_by_window(meter_samples(idle, reset_at=5))
    assert windows[1] == pytest.approx((0.5, 0.5))


def count_samples(reads: list[tuple[float, float]]) -> pa.Table:
    """Count samples of a broker always 73 % idle (Kafka's meter counts a freeze as idle
    time: its threads were waiting), each (stamped at, read at) in seconds from START."""
    schema = arrow_schema("bronze")
    rows = []
    for stamped, read in reads:
        ts = START + timedelta(seconds=stamped)
        rows.append({name: None for name in schema.names} | {
            "cluster": "c1", "broker": "1", "ts": ts, "metric": "RequestHandlerAvgIdlePercent",
            "attribute": "Count", "labels": [], "value": 0.73 * read * 1e9, "kind": "counter",
            "source_offset": len(rows), "date": ts.strftime("%Y-%m-%d")})
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.mark.parametrize("next_stamp", [95, 88], ids=["on-schedule", "a-round-later"])
def test_a_scrape_that_ends_a_gap_gives_no_rate_from_its_stamp(next_stamp: int) -> None:
    """The broker froze from 50 s to 93 s: the scrapes stamped 50 and 65 timed out, the one
    stamped 80 was read at the thaw (93 s). The next one, stamped on schedule (95 s, as
    Prometheus stamps) or a shipper's round later (88 s), saw 2 s or less of idle time
    accrue since: over its stamps' interval the rate read 0.1-0.2, a false saturation.
    Neither the gap's interval nor the one after it gives a rate."""
    reads = [(t, t) for t in (0, 15, 30, 45)] + [(80, 93), (next_stamp, next_stamp + 0.5)]
    reads += [(t, t) for t in range(next_stamp + 15, 200, 15)]
    windows = idle_by_window(count_samples(reads))
    low = {w: idle for w, (idle, _) in windows.items() if idle is not None and idle < 0.5}
    assert low == {}, f"a false low idle fraction from the gap's stamps: {low}"
    assert windows[0][0] == pytest.approx(0.73) and windows[2][0] == pytest.approx(0.73)


def test_one_minute_rate_wins_when_both_are_exported():
    idle = [0.9, 0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1]
    windows = idle_by_window(meter_samples(idle, one_minute_rate=True))
    assert windows[1] == pytest.approx((0.15, 0.15))



def test_a_meter_that_has_not_ticked_yet_is_not_zero_idle():
    """Right after a broker starts, RequestHandlerAvgIdlePercent's OneMinuteRate is exactly
    0.0 until the meter's first tick: no data, not a saturated pool; a real low idle stays."""
    schema = arrow_schema("bronze")

    def window(value: float) -> float | None:
        row = {name: None for name in schema.names} | {
            "cluster": "c1", "broker": "1", "ts": START,
            "metric": "RequestHandlerAvgIdlePercent", "attribute": "OneMinuteRate",
            "labels": [], "value": value, "kind": "gauge", "source_offset": 0,
            "date": START.strftime("%Y-%m-%d")}
        samples = pa.Table.from_pylist([row], schema=schema)
        return broker_signals(samples, SignalsConfig()).to_pylist()[0]["request_handler_idle_min"]

    assert window(0.0) is None
    assert window(0.03) == pytest.approx(0.03)
