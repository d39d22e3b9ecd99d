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

import pytest
from confluent_kafka import KafkaException, Producer

from streaming.testbed import faults
from streaming.testbed.truth import active_controller
from tests.integration.helpers import table
from tests.real_kafka.conftest import FINDINGS, NAMES, ORDERS, WINDOW, Bed
from tests.real_kafka.truth_checks import (
    counter_deltas,
    epoch,
    hold_until_stable,
    increases,
    mismatches,
    wait_caught_up,
)


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


def test_active_controller_failover_keeps_one_controller(healthy: Bed) -> None:
    bed = healthy
    # Kill early in a window, so that the old controller's last claim and the new one's
    # first (an election takes a few seconds) usually share it: the case a sum counts twice.
    # The leader is looked up first: the lookup's JVM could otherwise push the kill past
    # the window the checks below call the handover's.
    controller = active_controller(faults.live_bootstrap(bed.watched))
    time.sleep(WINDOW - time.time() % WINDOW + 1)
    since = time.time()
    killed = faults.kill_active_controller(bed.watched, controller)
    leader = active_controller(faults.live_bootstrap(bed.watched))
    assert leader not in (None, killed)
    end = hold_until_stable(bed, since + WINDOW, lambda v: True, "a stable window after failover")
    wait_caught_up(bed, end + 1)
    rows = table(bed.delta, "cluster_signals")
    starts = rows["window_start"].map(epoch)
    # the windows of the handover itself: the killed controller's last claim and the new
    # one's first may share a window, which is still one controller at a time (or, before
    # anyone claims again, unknown), never two
    during = rows[starts.between(since - WINDOW, since + WINDOW - 1)]
    after = rows[starts.between(since + WINDOW, end - WINDOW)]
    for name in NAMES:
        counts = during[during.cluster == name]["active_controllers"]
        assert len(counts) and counts.map(lambda c: c != c or c == 1).all(), (
            name, "during", counts.tolist())
        counts = after[after.cluster == name]["active_controllers"]
        assert len(counts) and (counts == 1).all(), (name, counts.tolist())
    brokers = table(bed.delta, "broker_signals")
    claims = brokers[(brokers["window_start"].map(epoch).between(since - WINDOW, since + WINDOW - 1))
                     & (brokers["active_controller_last"] > 0)]
    for (name, start), claimed in claims.groupby(["cluster", "window_start"]):
        if len(claimed) > 1:  # the old controller's last word and the new one's first
            FINDINGS.append(f"controller failover, {name} @{epoch(start):.0f}: the last sample "
                            f"of {len(claimed)} nodes claimed the controller; counted 1")
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
    # every controller counts the election: still one incident per cluster, not per node
    assert sorted(got.cluster) == sorted(NAMES), got[["cluster", "broker", "started_at"]]
    assert (got.broker == "*").all(), got[["cluster", "broker", "started_at"]]
