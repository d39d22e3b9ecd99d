"""Cluster rows from broker rows: how each controller-scoped column combines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from streaming.schemas import arrow_schema
from streaming.signals.cluster import cluster_signals

START = datetime(2026, 1, 1, tzinfo=UTC)


def broker_rows(rows: list[dict]) -> pa.Table:
    schema = arrow_schema("broker_signals")
    full = [{name: None for name in schema.names} | {
        "cluster": "c", "window_start": START, "window_end": START + timedelta(minutes=1),
        "samples": 1} | row for row in rows]
    return pa.Table.from_pylist(full, schema=schema)


def test_one_unclean_election_seen_by_several_kraft_controllers_counts_once() -> None:
    # Kafka 4.4, combined nodes: two of the three controllers raised
    # UncleanLeaderElectionsPerSec by one for a single election.
    rows = broker_rows([
        {"broker": "1", "unclean_elections_increase": 1.0, "active_controller_last": 1.0},
        {"broker": "2", "unclean_elections_increase": 0.0, "active_controller_last": 0.0},
        {"broker": "3", "unclean_elections_increase": 1.0, "active_controller_last": 0.0},
    ])
    got = cluster_signals(rows).to_pylist()
    assert len(got) == 1
    assert got[0]["unclean_elections_increase"] == 1.0
    assert got[0]["active_controllers"] == 1.0


def test_no_broker_reporting_unclean_elections_is_no_data_not_zero() -> None:
    rows = broker_rows([{"broker": "1"}, {"broker": "2"}])
    assert cluster_signals(rows).to_pylist()[0]["unclean_elections_increase"] is None


def window(i: int, controllers: dict[str, float]) -> list[dict]:
    start = START + timedelta(minutes=i)
    return [{"broker": broker, "window_start": start, "window_end": start + timedelta(minutes=1),
             "active_controller_last": value} for broker, value in controllers.items()]


def controllers(rows: list[dict]) -> list[float | None]:
    return [r["active_controllers"] for r in cluster_signals(broker_rows(rows)).to_pylist()]


def test_a_window_without_the_last_controller_has_an_unknown_controller_count() -> None:
    """Broker 1 was the controller; a window without it (it went silent, or its rows are
    still in flight) is not "0 active controllers" but unknown."""
    rows = window(0, {"1": 1, "2": 0, "3": 0}) + window(1, {"2": 0, "3": 0})
    assert controllers(rows) == [1.0, None]
    rows += window(2, {"1": 1, "2": 0, "3": 0})  # back: known again
    assert controllers(rows) == [1.0, None, 1.0]


def test_a_controller_that_moved_or_was_lost_while_its_broker_reports_is_known() -> None:
    moved = window(0, {"1": 1, "2": 0}) + window(1, {"1": 0, "2": 1})
    assert controllers(moved) == [1.0, 1.0]
    failover = window(0, {"1": 1, "2": 0}) + window(1, {"2": 1})  # broker 1 went down
    assert controllers(failover) == [1.0, 1.0]
    lost = window(0, {"1": 1, "2": 0}) + window(1, {"1": 0, "2": 0})
    assert controllers(lost) == [1.0, 0.0], "the old controller reports 0: a real zero"
    never = window(0, {"1": 0, "2": 0})
    assert controllers(never) == [0.0], "no controller seen in the look-back: the sum"
