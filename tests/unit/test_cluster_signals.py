"""Cluster rows from broker rows: how each controller-scoped column combines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from streaming.config import SignalsConfig
from streaming.schemas import arrow_schema
from streaming.signals.broker import SAMPLE_COLUMNS, broker_signals, finalize
from streaming.signals.cluster import cluster_signals
from streaming.signals.incremental import chunk_parts, merge_partials

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


def elections(per_window: list[dict[str, float | None]]) -> list[float | None]:
    """The cluster's unclean elections per window, from each broker's increase there
    (None: the broker has no row in that window)."""
    rows = []
    for i, increases in enumerate(per_window):
        start = START + timedelta(minutes=i)
        rows += [{"broker": broker, "window_start": start,
                  "window_end": start + timedelta(minutes=1),
                  "unclean_elections_increase": value}
                 for broker, value in increases.items() if value is not None]
    got = cluster_signals(broker_rows(rows)).to_pylist()
    return [r["unclean_elections_increase"] for r in sorted(got, key=lambda r: r["window_start"])]


def test_one_election_counted_by_controllers_on_either_side_of_a_window_boundary_counts_once(
        ) -> None:
    # seen on Kafka 4.4 through jmx_exporter: nodes 1 and 3 counted it in one scrape, node 2
    # in the next, which fell into the next window
    assert elections([{"1": 1, "2": 0, "3": 1}, {"1": 0, "2": 1, "3": 0},
                      {"1": 0, "2": 0, "3": 0}]) == [1.0, 0.0, 0.0]


def test_the_same_late_controller_twice_is_two_elections() -> None:
    # scrape phases are fixed, so the same node is late every time
    straddled = [{"1": 1, "2": 0, "3": 1}, {"1": 0, "2": 1, "3": 0}]
    assert elections(straddled * 2) == [1.0, 0.0, 1.0, 0.0]
    # the late node is the one that goes away next (a killed controller)
    assert elections([*straddled, {"1": 1, "2": None, "3": 1}]) == [1.0, 0.0, 1.0]


def test_elections_in_consecutive_windows_each_count() -> None:
    assert elections([{"1": 1, "2": 1}, {"1": 1, "2": 1}]) == [1.0, 1.0]
    # broker 2 lagged one election behind and then counts it with a new one
    assert elections([{"1": 2, "2": 1}, {"1": 1, "2": 2}]) == [2.0, 1.0]


def test_a_broker_without_a_previous_window_is_in_step() -> None:
    # broker 1 went dark after the first election; broker 2, new, sees the second
    assert elections([{"1": 1}, {"1": None, "2": 1}]) == [1.0, 1.0]
    assert elections([{"1": 1, "2": None}, {"1": 0, "2": 1}]) == [1.0, 1.0]


def test_a_nan_increase_is_no_data() -> None:
    nan = float("nan")
    assert elections([{"1": nan, "2": 0}, {"1": 1, "2": 0}]) == [0.0, 1.0]
    assert elections([{"1": nan}]) == [None]


def test_a_broker_behind_for_good_is_back_in_step_after_quiet_windows() -> None:
    # broker 2 was down for the first election and never counts it; once broker 1 is
    # gone, the election broker 2 alone reports is still one
    quiet = {"1": 0, "2": 0}
    assert elections([{"1": 1, "2": 0}, quiet, quiet, {"1": None, "2": 1}]) == [
        1.0, 0.0, 0.0, 1.0]
    # broker 2 missed the first election and counts the second: a window in which nobody
    # counts puts it back in step before the third, which it alone reports
    assert elections([{"1": 1, "2": 0}, {"1": 1, "2": 1}, quiet, {"1": None, "2": 1}]) == [
        1.0, 1.0, 0.0, 1.0]
    # and where the walk starts does not matter past such a window
    storm = [{"1": 1, "2": 0}] + [{"1": 1, "2": 1}, quiet] * 7 + [{"1": None, "2": 1}]
    assert elections(storm)[-1] == elections(storm[1:])[-1] == 1.0
    # a restarted controller that counts old elections again (its counter from zero):
    # those page at once; the others' counts in the window after are taken as catching up,
    # and a real election a window later still counts
    replayed = [{"1": 0, "2": 0, "3": 0}, {"1": 5, "2": 0, "3": 0}, {"1": 0, "2": 1, "3": 1}]
    assert elections(replayed) == [0.0, 5.0, 0.0]
    assert elections([*replayed, {"1": 0, "2": 0, "3": 0}, {"1": 1, "2": 1, "3": 1}]) == [
        0.0, 5.0, 0.0, 0.0, 1.0]


def test_a_controller_quiet_before_the_election_still_has_a_window_to_count_it() -> None:
    # seen on Kafka 4.4 through jmx_exporter: after a quiet window, nodes 1 and 2 counted an
    # election in the scrape at :49, node 3 in the one at :50, which fell into the next
    # window; node 3 had counted nothing for two windows by then, and that is no reason to
    # take its count for a second election
    quiet = {"1": 0, "2": 0, "3": 0}
    assert elections([quiet, quiet, {"1": 1, "2": 1, "3": 0}, {"1": 0, "2": 0, "3": 1},
                      quiet]) == [0.0, 0.0, 1.0, 0.0, 0.0]
    # one window of grace, not two: quiet in the election's window and the next, node 3
    # missed it, and the next election it alone reports counts
    assert elections([quiet, {"1": 1, "2": 1, "3": 0}, quiet, {"1": None, "2": None, "3": 1}]
                     ) == [0.0, 1.0, 0.0, 1.0]


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


def test_a_table_holding_a_null_cluster_beside_named_ones_is_answered_per_cluster() -> None:
    """No decoder emits a null cluster, but a table read back may hold one: it is a cluster
    of its own, walked in window order like the others, not a comparison that raises."""
    rows = [{"cluster": cluster} | row for cluster in ("c", None) for row in (
        window(0, {"1": 1, "2": 0}) + window(1, {"2": 0}))]
    got = {(r["cluster"], r["window_start"]): r["active_controllers"]
           for r in cluster_signals(broker_rows(rows)).to_pylist()}
    assert got == {(cluster, START + timedelta(minutes=i)): value for cluster in ("c", None)
                   for i, value in enumerate([1.0, None])}


def controller_bronze(claims: dict[str, list[tuple[int, float]]]) -> pa.Table:
    """ActiveControllerCount samples: broker -> [(seconds after START, value)]."""
    schema = arrow_schema("bronze")
    rows = [{name: None for name in schema.names} | {
        "cluster": "c", "broker": broker, "ts": START + timedelta(seconds=at),
        "metric": "ActiveControllerCount", "attribute": "Value", "labels": [],
        "value": value, "kind": "gauge", "source_offset": at}
        for broker, series in claims.items() for at, value in series]
    return pa.Table.from_pylist(rows, schema=schema)


def controller_signals(claims: dict[str, list[tuple[int, float]]]) -> pa.Table:
    return broker_signals(controller_bronze(claims), SignalsConfig())


def window_controllers(claims: dict[str, list[tuple[int, float]]]) -> list[float | None]:
    return [r["active_controllers"] for r in cluster_signals(controller_signals(claims))
            .to_pylist()]


def test_a_failover_inside_a_window_is_one_controller_not_two() -> None:
    """Broker 1 claims until it dies at 25 s; broker 2 claims from 35 s. Each one's last
    sample in the window says 1, but the old claim ended before the new one began."""
    claims = {"1": [(0, 1.0), (10, 1.0), (20, 1.0)],
              "2": [(0, 0.0), (10, 0.0), (20, 0.0), (35, 1.0), (45, 1.0), (55, 1.0)],
              "3": [(5, 0.0), (25, 0.0), (50, 0.0)]}
    assert window_controllers(claims) == [1.0]


def test_a_handover_back_and_forth_inside_a_window_is_one_controller() -> None:
    claims = {"1": [(0, 1.0), (10, 0.0), (20, 0.0), (30, 1.0), (40, 1.0)],  # 1, then 2, then 1
              "2": [(5, 0.0), (15, 1.0), (25, 0.0), (35, 0.0), (45, 0.0)]}
    assert window_controllers(claims) == [1.0]


def test_two_nodes_claiming_at_once_are_two_controllers() -> None:
    split = {"1": [(0, 1.0), (20, 1.0), (40, 1.0)],
             "2": [(10, 0.0), (25, 1.0), (45, 1.0)]}  # 1 still claims after 2's first claim
    assert window_controllers(split) == [2.0]
    # broker 1's last sample in the window (1) comes after broker 2's first claim
    split_late = {"1": [(0, 1.0), (50, 1.0)], "2": [(30, 1.0)]}
    assert window_controllers(split_late) == [2.0]


def test_the_claim_times_survive_partials_merged_from_chunks() -> None:
    """The read tasks reduce each chunk to partials; the merged first claim and newest
    sample must be the same as from all the samples at once."""
    claims = {"1": [(0, 1.0), (10, 1.0), (20, 1.0)],
              "2": [(0, 0.0), (30, 1.0), (50, 1.0)]}
    whole = controller_signals(claims)
    table = controller_bronze(claims).select(SAMPLE_COLUMNS)
    config = SignalsConfig()
    parts = [chunk_parts(table.slice(i, 2), config) for i in range(0, table.num_rows, 2)]
    merged = merge_partials([p[1] for p in parts], parts[0][1].schema)
    pieces = finalize(merged, pa.concat_tables([p[2] for p in parts]))
    columns = ["broker", "active_controller_last", "active_controller_last_at",
               "active_controller_claimed_at"]
    assert pieces.select(columns).to_pylist() == whole.select(columns).to_pylist()
    assert whole.to_pylist()[0]["active_controller_claimed_at"] == START
    assert whole.to_pylist()[1]["active_controller_claimed_at"] == START + timedelta(seconds=30)
    assert [r["active_controllers"] for r in cluster_signals(pieces).to_pylist()] == [1.0]
