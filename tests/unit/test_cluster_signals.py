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
