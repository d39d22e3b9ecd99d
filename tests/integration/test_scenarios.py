"""Fault scenarios on the real streaming job: signals and incidents equal the model's truth.

Every scenario runs the simulator in compressed event time (scrapes every 15 s, events
on minute boundaries), the job on the embedded broker and local Spark, and compares the
Delta tables with the ground truth window by window. Expected incidents come from the
truth rows through a small independent oracle (runs of consecutive windows).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest

from streaming.exporter import Exporter
from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Event, Simulator
from tests.integration.helpers import count, run_until, table, truth_mismatches

pytestmark = pytest.mark.integration
SCRAPE = 15


def aligned_start(minutes: float) -> float:
    """A start on a minute boundary, far enough back that the whole run is in the past."""
    return (int(time.time()) // 60 - int(minutes) - 2) * 60.0


def simulate(bootstrap: str, topic: str, model: ClusterModel, minutes: float,
             events: list[Event], hold=None) -> Simulator:
    sim = Simulator(model, bootstrap, topic, scrape_interval=SCRAPE, start=aligned_start(minutes))
    sim.hold = hold
    sim.run(minutes * 60, events=events)
    return sim


def oracle_runs(truth: list[dict[str, Any]], key: str, active) -> set[tuple]:
    """(key, started_at, resolved_at) runs over each series' windows, gaps splitting runs."""
    series: dict[str, list[tuple[datetime, Any]]] = {}
    for row in truth:
        series.setdefault(row[key], []).append((pd.Timestamp(row["window_start"]), row))
    runs = set()
    for name, rows in series.items():
        rows.sort(key=lambda r: r[0])
        start = None
        for i, (window, row) in enumerate(rows):
            is_active = active(row)
            if is_active and start is None:
                start = window
            nxt = rows[i + 1] if i + 1 < len(rows) else None
            adjacent = nxt is not None and nxt[0] == window + pd.Timedelta(seconds=60)
            if start is not None and (nxt is None or not adjacent or not active(nxt[1])):
                if nxt is None:
                    resolved = None
                elif not adjacent:
                    resolved = window + pd.Timedelta(seconds=60)
                else:
                    resolved = nxt[0]
                runs.add((name, start, resolved))
                start = None
    return runs


def stale_truth(truth: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A known broker is stale in a cluster window where it has no samples."""
    windows = sorted({pd.Timestamp(r["window_start"]) for r in truth})
    seen = {(r["broker"], pd.Timestamp(r["window_start"])) for r in truth}
    first = {}
    for broker, window in sorted(seen, key=lambda x: x[1]):
        first.setdefault(broker, window)
    return [{"broker": b, "window_start": w, "stale": (b, w) not in seen}
            for b in first for w in windows if w >= first[b]]


def incidents_of(root: str, kind: str) -> set[tuple]:
    frame = table(root, "incidents")
    if frame.empty:
        return set()
    rows = frame[frame["kind"] == kind]
    return {
        (r["broker"], pd.Timestamp(r["started_at"]),
         None if pd.isna(r["resolved_at"]) else pd.Timestamp(r["resolved_at"]))
        for r in rows.to_dict("records")
    }


def run_job(spark, job_env, sim: Simulator, expected: int | None = None,
            exporter: Exporter | None = None) -> str:
    root = job_env["KAFKA_HEALTH__DELTA__PATH"]
    expected = sim.truth.samples_total if expected is None else expected
    run_until(spark, job_env, lambda: count(root, "bronze") >= expected, 240,
              f"{expected} bronze rows", exporter=exporter)
    assert count(root, "bronze") == expected
    return root


def assert_matches_truth(root: str, sim: Simulator) -> list[dict[str, Any]]:
    truth = sim.truth.rows()
    assert truth_mismatches(table(root, "broker_signals"), truth) == []
    return truth


def assert_stale_incidents(root: str, truth: list[dict[str, Any]]) -> None:
    expected = oracle_runs(stale_truth(truth), "broker", lambda r: r["stale"])
    assert incidents_of(root, "stale_broker") == expected


def utc(sim: Simulator, seconds: float) -> pd.Timestamp:
    return pd.Timestamp(datetime.fromtimestamp(sim.start + seconds, UTC))


def test_broker_down_then_second_down_then_back(broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 6, "payments": 3})
    sim = simulate(broker.bootstrap, topic, model, 8, [
        Event(120, lambda m: m.broker_down(3)), Event(240, lambda m: m.broker_down(2)),
        Event(360, lambda m: m.broker_up(2)), Event(420, lambda m: m.broker_up(3)),
    ])
    root = run_job(spark, job_env, sim)
    truth = assert_matches_truth(root, sim)
    shrinks = sum(r["isr_shrinks_increase"] for r in truth)
    expands = sum(r["isr_expands_increase"] for r in truth)
    assert shrinks > 0 and expands == shrinks, "every shrink is matched once both are back"
    under_min = oracle_runs(truth, "broker", lambda r: r["under_min_isr_max"] > 0)
    assert under_min == {("1", utc(sim, 240), utc(sim, 360))}
    assert incidents_of(root, "under_min_isr") == under_min
    assert_stale_incidents(root, truth)
    assert incidents_of(root, "unclean_election") == set()
    assert incidents_of(root, "offline_partitions") == set()


def test_unclean_leader_election_is_a_data_loss_incident(broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 3})
    sim = simulate(broker.bootstrap, topic, model, 8, [
        Event(60, lambda m: m.broker_down(3)), Event(120, lambda m: m.broker_down(2)),
        Event(180, lambda m: m.broker_up(3, caught_up=False)),
        Event(240, lambda m: m.broker_down(1)),
        Event(300, lambda m: m.unclean_election()),
        Event(360, lambda m: (m.broker_up(1), m.broker_up(2), m.catch_up(3))),
    ])
    root = run_job(spark, job_env, sim)
    truth = assert_matches_truth(root, sim)
    assert sum(r["unclean_elections_increase"] for r in truth) == 3
    # one incident for the cluster (broker "*"), whichever broker counted the election
    assert incidents_of(root, "unclean_election") == {("*", utc(sim, 300), utc(sim, 360))}
    assert incidents_of(root, "offline_partitions") == {("*", utc(sim, 240), utc(sim, 300))}
    assert incidents_of(root, "under_min_isr") == oracle_runs(
        truth, "broker", lambda r: r["under_min_isr_max"] > 0)
    cluster = table(root, "cluster_signals")
    assert set(cluster["active_controllers"]) == {1.0}, "failover kept one active controller"


def test_isr_flapping_follower_counts_every_shrink_and_expand(broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 6})
    flaps = [Event(t, lambda m: m.isr_flap(3, count=2)) for t in range(60, 300, 15)]
    sim = simulate(broker.bootstrap, topic, model, 6, flaps)
    exporter = Exporter()
    root = run_job(spark, job_env, sim, exporter=exporter)
    truth = assert_matches_truth(root, sim)
    assert sum(r["isr_shrinks_increase"] for r in truth) == 16 * 2 * 4
    assert table(root, "incidents").empty
    # every shrink was followed by its expand: no churn imbalance on any broker
    assert {b: churn(exporter, b) for b in ("1", "2", "3")} == {"1": 0.0, "2": 0.0, "3": 0.0}


def churn(exporter: Exporter, broker_id: str) -> float | None:
    return exporter.registry.get_sample_value(
        "kafka_health_isr_churn_unmatched_shrinks", {"cluster": "c1", "broker": broker_id})


def test_shrinks_never_matched_by_expands_are_churn_imbalance(broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 6})
    sim = simulate(broker.bootstrap, topic, model, 6, [Event(60, lambda m: m.broker_down(3))])
    exporter = Exporter()
    env = {**job_env, "KAFKA_HEALTH__SIGNALS__ISR_CHURN_MATCH_SECONDS": "120"}
    root = run_job(spark, env, sim, exporter=exporter)
    truth = assert_matches_truth(root, sim)
    # broker 3 never comes back: every shrink its followers' leaders reported stays unmatched
    expected = {b: sum(r["isr_shrinks_increase"] for r in truth if r["broker"] == b)
                for b in ("1", "2")}
    assert all(expected.values()), expected
    assert {b: churn(exporter, b) for b in ("1", "2")} == expected


def test_request_queue_saturation_opens_and_resolves(broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 6})
    sim = simulate(broker.bootstrap, topic, model, 6, [
        Event(120, lambda m: m.saturate(2, request_queue=450, handler_idle=0.1)),
        Event(240, lambda m: m.saturate(2, request_queue=0, handler_idle=0.92)),
    ])
    root = run_job(spark, job_env, sim)
    assert_matches_truth(root, sim)
    signals = table(root, "broker_signals")
    assert signals["request_queue_utilization_max"].max() == pytest.approx(450 / 500)
    assert incidents_of(root, "saturation") == {("2", utc(sim, 120), utc(sim, 240))}


def test_broker_restart_mid_window_resets_counters_without_negatives(
        broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 6})
    sim = simulate(broker.bootstrap, topic, model, 5, [
        Event(60, lambda m: m.isr_flap(3, count=3)),
        Event(90, lambda m: m.restart(1)),
        Event(105, lambda m: m.isr_flap(3, count=1)),
        Event(180, lambda m: m.restart(2)),
    ])
    root = run_job(spark, job_env, sim)
    truth = assert_matches_truth(root, sim)
    signals = table(root, "broker_signals")
    assert (signals["isr_shrinks_increase"] >= 0).all()
    restart_window = [r for r in truth if r["broker"] == "1"
                      and pd.Timestamp(r["window_start"]) == utc(sim, 60)]
    assert restart_window[0]["isr_shrinks_increase"] == 4 * 2  # 3 before + 1 after, 2 partitions


def test_broker_that_stops_reporting_is_flagged_stale(broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 6})
    sim = simulate(broker.bootstrap, topic, model, 6, [
        Event(120, lambda m: m.stop_reporting(3)), Event(300, lambda m: m.resume_reporting(3)),
    ])
    root = run_job(spark, job_env, sim)
    truth = assert_matches_truth(root, sim)
    assert incidents_of(root, "stale_broker") == {("3", utc(sim, 120), utc(sim, 300))}
    assert_stale_incidents(root, truth)


def test_late_out_of_order_samples_correct_windows_and_incidents(
        broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 6})
    events = [Event(150, lambda m: m.isr_flap(3, count=2))]
    sim = simulate(broker.bootstrap, topic, model, 6, events,
                   hold=lambda b, t: b == 1 and 120 <= t < 240)
    root = job_env["KAFKA_HEALTH__DELTA__PATH"]
    early = sim.truth.samples_total - sim.held_samples
    run_job(spark, job_env, sim, expected=early)
    assert incidents_of(root, "stale_broker"), "before the late data broker 1 looks silent"
    sim.release_held()
    run_job(spark, job_env, sim)
    assert_matches_truth(root, sim)
    after = table(root, "incidents")
    # shown before, so kept: closed, and marked withdrawn by the late data that disproved it
    assert len(after) and after["resolved_at"].notna().all() \
        and after["withdrawn_at"].notna().all(), after


def test_healthy_thirty_minutes_has_no_incidents(broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3, 4], {"orders": 12, "payments": 6, "audit": 3})
    sim = simulate(broker.bootstrap, topic, model, 30, [])
    root = run_job(spark, job_env, sim)
    assert_matches_truth(root, sim)
    assert len(table(root, "broker_signals")) == 4 * 30
    assert table(root, "incidents").empty
    assert table(root, "quarantine").empty
