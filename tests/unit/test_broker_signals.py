"""Broker signals on small hand-made slices: the edge cases the scenarios rarely hit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from streaming.config import SignalsConfig
from streaming.schemas import arrow_schema
from streaming.signals.broker import broker_signals, labels_key

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def slice_of(samples: list[tuple]) -> pa.Table:
    """Rows of (seconds after START, metric, attribute, value, labels, broker)."""
    schema = arrow_schema("bronze")
    rows = []
    for i, (at, metric, attribute, value, labels, broker) in enumerate(samples):
        ts = START + timedelta(seconds=at)
        rows.append({name: None for name in schema.names} | {
            "cluster": "c1", "broker": broker, "ts": ts, "metric": metric,
            "attribute": attribute, "labels": labels, "value": value,
            "kind": "counter" if attribute == "Count" else "gauge",
            "source_offset": i, "date": ts.strftime("%Y-%m-%d")})
    return pa.Table.from_pylist(rows, schema=schema)


def by_window(samples: list[tuple], **config) -> dict[tuple[str, int], dict]:
    rows = broker_signals(slice_of(samples), SignalsConfig(**config)).to_pylist()
    return {(r["broker"], int((r["window_start"] - START).total_seconds() // 60)): r for r in rows}


def test_increase_spans_windows_and_survives_a_counter_reset():
    shrinks = [(0, 10.0), (30, 12.0), (60, 15.0), (90, 2.0), (120, 4.0)]  # reset at 90 s
    rows = by_window([(t, "IsrShrinksPerSec", "Count", v, [], "1") for t, v in shrinks])
    # minute 0: 10 has no predecessor, then +2; minute 1: +3, then the reset counts 2
    assert rows[("1", 0)]["isr_shrinks_increase"] == 2.0
    assert rows[("1", 1)]["isr_shrinks_increase"] == 5.0
    assert rows[("1", 2)]["isr_shrinks_increase"] == 2.0


def test_series_are_kept_apart_by_broker_and_labels():
    samples = [(0, "IsrShrinksPerSec", "Count", 100.0, [], "1"),
               (15, "IsrShrinksPerSec", "Count", 5.0, [], "2"),  # another broker: no reset
               (30, "IsrShrinksPerSec", "Count", 101.0, [], "1"),
               (45, "IsrShrinksPerSec", "Count", 7.0, [], "2")]
    rows = by_window(samples)
    assert rows[("1", 0)]["isr_shrinks_increase"] == 1.0
    assert rows[("2", 0)]["isr_shrinks_increase"] == 2.0


def test_a_signal_never_reported_is_null_not_zero():
    rows = by_window([(0, "UnderMinIsrPartitionCount", "Value", 3.0, [], "1")])
    row = rows[("1", 0)]
    assert row["under_min_isr_max"] == 3.0
    assert row["unclean_elections_increase"] is None  # no data, not "no elections"
    assert row["request_queue_utilization_p95"] is None
    assert row["log_segments_last"] is None


def test_one_count_sample_is_zero_increase_not_null():
    rows = by_window([(0, "UncleanLeaderElectionsPerSec", "Count", 4.0, [], "1")])
    assert rows[("1", 0)]["unclean_elections_increase"] == 0.0


def test_queue_p95_is_nearest_rank_over_the_window():
    values = [float(v) for v in range(1, 21)]  # 20 values: rank ceil(0.95 * 20) = 19
    rows = by_window([(i * 2, "RequestQueueSize", "Value", v, [], "1")
                      for i, v in enumerate(values)], queued_max_requests=100)
    row = rows[("1", 0)]
    assert row["request_queue_utilization_p95"] == pytest.approx(0.19)
    assert row["request_queue_utilization_max"] == pytest.approx(0.20)


def test_last_is_latest_in_event_time_not_arrival_order():
    samples = [(40, "PartitionCount", "Value", 12.0, [], "1"),
               (10, "PartitionCount", "Value", 99.0, [], "1")]  # arrives late, is older
    assert by_window(samples)[("1", 0)]["partition_count_last"] == 12.0


def test_log_segments_sum_the_newest_of_each_partition():
    p0, p1 = [("topic", "orders"), ("partition", "0")], [("topic", "orders"), ("partition", "1")]
    samples = [(0, "NumLogSegments", "Value", 3.0, p0, "1"),
               (30, "NumLogSegments", "Value", 4.0, p0, "1"),
               (15, "NumLogSegments", "Value", 10.0, p1, "1")]
    assert by_window(samples)[("1", 0)]["log_segments_last"] == 14.0


def test_every_sample_counts_and_a_window_of_log_segments_alone_has_a_row():
    # NumLogSegments is aggregated apart from the other signals: its rows must still count
    # towards the window's samples and newest time, and a window with nothing else in it
    # must still get a row, its other signals null.
    p0 = [("topic", "orders"), ("partition", "0")]
    rows = by_window([(0, "UnderMinIsrPartitionCount", "Value", 0.0, [], "1"),
                      (50, "NumLogSegments", "Value", 3.0, p0, "1"),
                      (70, "NumLogSegments", "Value", 4.0, p0, "1")])
    first, alone = rows[("1", 0)], rows[("1", 1)]
    assert (first["samples"], first["last_sample_ts"]) == (2, START + timedelta(seconds=50))
    assert (alone["samples"], alone["log_segments_last"]) == (1, 4.0)
    assert alone["under_min_isr_max"] is None
    assert alone["isr_shrinks_increase"] is None
    assert alone["request_handler_idle_mean"] is None


def test_counter_increases_stay_with_their_own_samples_among_gauges():
    # counters are taken apart for their per-series order and put back by row
    rows = by_window([(0, "IsrShrinksPerSec", "Count", 10.0, [], "1"),
                      (5, "PartitionCount", "Value", 7.0, [], "1"),
                      (30, "RequestHandlerAvgIdlePercent", "Count", 0.0, [], "1"),
                      (20, "IsrShrinksPerSec", "Count", 13.0, [], "1"),
                      (40, "PartitionCount", "Value", 8.0, [], "1"),
                      (45, "RequestHandlerAvgIdlePercent", "Count", 15e9, [], "1")])
    row = rows[("1", 0)]
    assert row["isr_shrinks_increase"] == 3.0
    assert row["request_handler_idle_mean"] == pytest.approx(1.0)  # 1e9 idle ns a second
    assert row["partition_count_last"] == 8.0


def test_labels_key_tells_maps_apart_and_handles_empty_ones():
    labels = pa.chunked_array([pa.array([[("a", "1")], [("a", "2")], [], None],
                                        pa.map_(pa.string(), pa.string()))])
    keys = labels_key(labels).to_pylist()
    assert keys[0] != keys[1]
    assert keys[2] == keys[3] == ""


def test_labels_key_of_a_sliced_column_matches_the_whole():
    labels = pa.chunked_array([pa.array([[("a", "1")], [("b", "2"), ("c", "3")], [("d", "4")]],
                                        pa.map_(pa.string(), pa.string()))])
    assert labels_key(labels.slice(1)).to_pylist() == labels_key(labels).to_pylist()[1:]
