"""Real faults on a real KRaft cluster (3 combined nodes, 2 broker-only), checked window
by window against Kafka's own Admin API, from the Jolokia data and from the jmx_exporter
(Strimzi rules) data of the same brokers.

On every window in which the Admin API's view stayed the same throughout (and a little
around it), each reporting broker's under-min-ISR and under-replicated max and last equal
the truth; incidents open at the first window the truth shows the condition and resolve
at the first window it no longer does.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import pytest
from confluent_kafka import KafkaException, Producer

from streaming.testbed import faults
from streaming.testbed.truth import active_controller
from tests.conftest import wait_for
from tests.integration.helpers import table
from tests.real_kafka.conftest import FINDINGS, NAMES, ORDERS, WINDOW, Bed

FIELDS = {"under_min_isr": ("under_min_isr_max", "under_min_isr_last"),
          "under_replicated": ("under_replicated_max", "under_replicated_last")}


def epoch(ts: Any) -> float:
    return pd.Timestamp(ts).timestamp()


def caught_up(bed: Bed, until: float) -> bool:
    """The job has signals of every shipped name up to `until` (event time)."""
    rows = table(bed.delta, "broker_signals")
    if rows.empty:
        return False
    newest = rows.groupby("cluster")["last_sample_ts"].max()
    return all(name in newest and epoch(newest[name]) >= until for name in NAMES)


def wait_caught_up(bed: Bed, until: float) -> None:
    def check() -> bool:
        assert bed.job.query.isActive, f"query stopped: {bed.job.query.exception()}"
        return caught_up(bed, until)
    wait_for(check, 120, f"signals up to {until:.0f}")


def hold_until_stable(bed: Bed, since: float, condition, what: str) -> float:  # noqa: ANN001
    """Keep the fault until the truth has a stable window after `since` whose per-broker
    values satisfy condition(values); returns that window's end."""
    def found() -> float | None:
        for start, (_, values) in sorted(bed.truth.stable_windows(WINDOW).items()):
            if start >= since and condition(values):
                return start + WINDOW
        return None
    return wait_for(found, 150, what, every=1.0)


def mismatches(bed: Bed, since: float, until: float) -> list[str]:
    """Every (name, broker, window, field) where the pipeline differs from stable truth."""
    rows = table(bed.delta, "broker_signals")
    rows = rows.assign(start=rows["window_start"].map(epoch))
    out = []
    checked = 0
    for start, (brokers, values) in sorted(bed.truth.stable_windows(WINDOW).items()):
        if not since <= start < until - WINDOW + 1:
            continue
        for name in NAMES:
            for broker, truth in values.items():
                if broker not in brokers:
                    continue  # not registered throughout: no samples expected
                got = rows[(rows.cluster == name) & (rows.broker == str(broker))
                           & (rows.start == start)]
                if got.empty:
                    if shipped(bed, name, broker, start):
                        out.append(f"{name} b{broker} @{start:.0f}: samples but no signal row")
                    else:  # the shipper got nothing from that agent: a gap, not a mismatch
                        FINDINGS.append(f"{name} b{broker} @{start:.0f}: no sample shipped")
                    continue
                for field, columns in FIELDS.items():
                    for column in columns:
                        checked += 1
                        if got.iloc[0][column] != truth[field]:
                            out.append(f"{name} b{broker} @{start:.0f} {column}="
                                       f"{got.iloc[0][column]} truth {truth[field]}")
    assert checked, "no stable window to compare"
    return out


def shipped(bed: Bed, name: str, broker: int, start: float) -> bool:
    """Whether bronze holds samples of that broker in that window."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    lo = pd.Timestamp(start, unit="s", tz="UTC")
    data = DeltaTable(str(bed.delta / "bronze")).to_pyarrow_dataset()
    match = ((ds.field("cluster") == name) & (ds.field("broker") == str(broker))
             & (ds.field("ts") >= lo) & (ds.field("ts") < lo + pd.Timedelta(seconds=WINDOW)))
    return data.count_rows(filter=match) > 0


def counter_deltas(bed: Bed, metric: str, since: float, until: float) -> dict[str, float]:
    """Per shipped name, what the brokers' own `metric` Count rose by in bronze over the
    windows starting in [since, until]: the sum of rises between consecutive samples of
    each broker (a fall is a restart: the new value counts from zero). Independent of the
    pipeline's counter code, which must come to the same."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    lo = pd.Timestamp(since // WINDOW * WINDOW, unit="s", tz="UTC")
    hi = pd.Timestamp(until // WINDOW * WINDOW + WINDOW, unit="s", tz="UTC")
    data = DeltaTable(str(bed.delta / "bronze")).to_pyarrow_dataset()
    rows = data.to_table(
        filter=(ds.field("metric") == metric) & (ds.field("attribute") == "Count")
        & (ds.field("ts") >= lo - pd.Timedelta(minutes=2)) & (ds.field("ts") < hi),
        columns=["cluster", "broker", "ts", "value"]).to_pandas().sort_values("ts")
    out: dict[str, float] = dict.fromkeys(NAMES, 0.0)
    for (name, _broker), series in rows.groupby(["cluster", "broker"]):
        values, stamps = series["value"].tolist(), series["ts"].tolist()
        for before, after, ts in zip(values, values[1:], stamps[1:], strict=False):
            if ts >= lo:
                out[name] += after - before if after >= before else after
    return out


def increases(bed: Bed, column: str, since: float, until: float) -> dict[str, float]:
    rows = table(bed.delta, "broker_signals")
    rows = rows[rows["window_start"].map(epoch).between(since // WINDOW * WINDOW, until)]
    return {name: float(rows[rows.cluster == name][column].fillna(0).sum()) for name in NAMES}


@pytest.mark.parametrize("how", ["clean", "kill", "freeze"])
def test_a_stopped_follower_shows_as_under_replicated_and_isr_churn(healthy: Bed, how: str
                                                                    ) -> None:
    bed = healthy
    since = time.time()
    faults.stop_broker(bed.watched, 5, how)
    faults.wait_isr_without(bed.watched, 5, ORDERS)
    end = hold_until_stable(
        bed, since, lambda v: v[1]["under_replicated"] + v[4]["under_replicated"] > 0,
        "a stable window with under-replicated partitions")
    wait_caught_up(bed, end + 1)
    assert mismatches(bed, since, end) == []
    shrinks = increases(bed, "isr_shrinks_increase", since - WINDOW, end)
    assert shrinks == counter_deltas(bed, "IsrShrinksPerSec", since - WINDOW, end)
    lost, _ = bed.truth.isr_changes(since, end)
    assert lost > 0, "the Admin API never saw the ISR shrink"
    FINDINGS.append(f"follower {how}: Admin API saw {lost} ISR removals; IsrShrinksPerSec "
                    f"increase {shrinks}")

    back = time.time()
    faults.start_broker(bed.watched, 5)
    faults.wait_fully_replicated(bed.watched)
    end = hold_until_stable(bed, back, lambda v: all(b["under_replicated"] == 0 for b in
                                                     v.values()), "a healthy stable window")
    wait_caught_up(bed, end + 1)
    assert mismatches(bed, back, end) == []
    expands = increases(bed, "isr_expands_increase", back - WINDOW, end)
    assert expands == counter_deltas(bed, "IsrExpandsPerSec", back - WINDOW, end)
    _, gained = bed.truth.isr_changes(back - 1, end)
    assert gained > 0, "the Admin API never saw the ISR expand"
    FINDINGS.append(f"follower {how} back: Admin API saw {gained} ISR additions; "
                    f"IsrExpandsPerSec increase {expands}")


def test_two_brokers_down_is_under_min_isr_on_the_leader_left(healthy: Bed) -> None:
    bed = healthy
    since = time.time()
    producer = Producer({"bootstrap.servers": bed.watched.bootstrap, "acks": "all",
                         "message.timeout.ms": 4000, "retries": 0})
    faults.stop_broker(bed.watched, 5, "kill")
    faults.stop_broker(bed.watched, 4, "clean")
    faults.wait_isr_without(bed.watched, 4, ORDERS)
    end = hold_until_stable(bed, since, lambda v: v[1]["under_min_isr"] >= 6,
                            "a stable window with broker 1 under min ISR")
    # acks=all is refused while the ISR is below min.insync.replicas (NOT_ENOUGH_REPLICAS)
    errors: list[str] = []
    producer.produce(ORDERS, b"x", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err.name() if err else "ok"))
    producer.flush(10)
    assert errors and errors[0] == "NOT_ENOUGH_REPLICAS", errors
    wait_caught_up(bed, end + 1)
    assert mismatches(bed, since, end) == []

    back = time.time()
    faults.start_broker(bed.watched, 4)
    faults.start_broker(bed.watched, 5)
    faults.wait_fully_replicated(bed.watched)
    end = hold_until_stable(bed, back, lambda v: v[1]["under_min_isr"] == 0,
                            "a stable window with no partition under min ISR")
    wait_caught_up(bed, end + WINDOW)
    assert mismatches(bed, back, end) == []

    truth_windows = bed.truth.windows_with(
        lambda s: s.per_broker([1])[1]["under_min_isr"] > 0, WINDOW)
    first, last = min(truth_windows), max(truth_windows)
    incidents = table(bed.delta, "incidents")
    for name in NAMES:
        got = incidents[(incidents.cluster == name) & (incidents.kind == "under_min_isr")
                        & (incidents.broker == "1")]
        got = got[got["started_at"].map(epoch) >= since - WINDOW]
        assert len(got) == 1, got
        started, resolved = epoch(got.iloc[0]["started_at"]), got.iloc[0]["resolved_at"]
        assert abs(started - first) <= WINDOW, (name, started, first)
        assert resolved is not None and not pd.isna(resolved), got
        assert abs(epoch(resolved) - (last + WINDOW)) <= WINDOW, (name, resolved, last)


def test_active_controller_failover_keeps_one_controller(healthy: Bed) -> None:
    bed = healthy
    since = time.time()
    killed = faults.kill_active_controller(bed.watched)
    leader = active_controller(faults.live_bootstrap(bed.watched))
    assert leader not in (None, killed)
    end = hold_until_stable(bed, since + WINDOW, lambda v: True, "a stable window after failover")
    wait_caught_up(bed, end + 1)
    rows = table(bed.delta, "cluster_signals")
    rows = rows[rows["window_start"].map(epoch).between(since + WINDOW, end - WINDOW)]
    for name in NAMES:
        counts = rows[rows.cluster == name]["active_controllers"]
        assert len(counts) and (counts == 1).all(), (name, counts.tolist())
    assert mismatches(bed, since + WINDOW, end) == []


def test_unclean_election_is_counted_once_and_never_latches(healthy: Bed) -> None:
    bed = healthy
    topic = "unclean-" + str(int(time.time()))
    from streaming.testbed.kafka import create_topic

    # on the broker-only nodes: stopping both keeps the controller quorum
    create_topic(bed.watched.bootstrap, topic, assignment=[[4, 5]],
                 config={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
    leader, follower = 4, 5

    def produce() -> None:
        producer = Producer({"bootstrap.servers": faults.live_bootstrap(bed.watched), "acks": "1"})
        for _ in range(50):
            producer.produce(topic, b"written to the leader alone")
        if producer.flush(30):
            raise KafkaException("records not delivered")

    since = time.time()
    faults.unclean_election(bed.watched, topic, leader, follower, produce)
    faults.start_broker(bed.watched, leader)
    faults.wait_fully_replicated(bed.watched)
    end = hold_until_stable(bed, time.time(), lambda v: True, "a stable window afterwards")
    # two more windows: an unclean count that latched would show in them
    wait_caught_up(bed, end + 2 * WINDOW)
    rows = table(bed.delta, "cluster_signals")
    rows = rows[rows["window_start"].map(epoch) >= since - WINDOW]
    for name in NAMES:
        mine = rows[rows.cluster == name].sort_values("window_start")
        counted = mine["unclean_elections_increase"].fillna(0)
        assert counted.sum() == 1, (name, mine[["window_start", "unclean_elections_increase"]])
        assert (counted.iloc[-2:] == 0).all(), "the unclean count latched"
    incidents = table(bed.delta, "incidents")
    got = incidents[(incidents.kind == "unclean_election")
                    & (incidents["started_at"].map(epoch) >= since - WINDOW)]
    assert sorted(got.cluster.unique()) == sorted(NAMES), got
