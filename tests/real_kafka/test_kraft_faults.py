"""KRaft faults on the real test bed, judged by the controller's own view, in both formats
(conftest: `via-jolokia` and `via-prometheus` are the same brokers).

Fencing: a broker frozen (SIGSTOP) past broker.session.timeout.ms is fenced by the active
controller (its FencedBrokerCount, and DescribeCluster no longer lists it); frozen for
less, it is not. The pipeline must export the controller's count and open a
fenced_broker incident only for the first, resolved after the thaw. The long freeze stays
shorter than the bed's stale limit: a broker that is fenced and stale alike pages as
stale, and KafkaBrokerFenced is for the broker the controller fenced while its metrics
still come in.

Controller churn: the active controller killed three times within five minutes (each time
restarted before the next kill, so the quorum of three keeps a majority) opens a
controller_churn incident.

Eligible leader replicas (KIP-966, on by default since Kafka 4.1: the bed's nodes report
eligibleLeaderReplicasVersion 1): a partition on brokers 4 and 5 with min.insync.replicas 2
and unclean elections off; 5 stopped (it leaves an ISR now under min ISR: it becomes an
eligible leader replica), then 4 (the ISR is empty, the partition leaderless), then 5
started alone. The controller elects it from the ELR, counts it in
ElectionFromEligibleLeaderReplicasPerSec and not as unclean, and every acknowledged
record is still there. The pipeline must count one ELR election, no unclean one, and open
an elr_election incident, not an unclean_election one.

ELR off (eligible.leader.replicas.version downgraded to 0 with kafka-features.sh, as a
cluster created before Kafka 4.1 has it): the nodes stop publishing the feature's level,
kafka_health_elr_enabled reads 0, and an unclean election still counts and opens an
unclean_election incident as before; the feature is upgraded back afterwards.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
from confluent_kafka import Consumer, KafkaException, Producer

from streaming import metric_names as metric
from streaming.signals.cluster import CHURN_SPAN
from streaming.testbed import faults
from streaming.testbed.kafka import FAST_FAULTS, create_topic
from streaming.testbed.truth import (
    active_controller,
    active_view,
    controller_view,
    feature_levels,
    topic_description,
)
from tests.conftest import wait_for
from tests.integration.helpers import table
from tests.real_kafka.conftest import FINDINGS, NAMES, WINDOW, Bed
from tests.real_kafka.truth_checks import epoch, exported, wait_caught_up

SESSION = float(FAST_FAULTS["broker.session.timeout.ms"]) / 1000
FROZEN = 5


class ControllerWatch:
    """Samples, every quarter second on a thread of its own, the active controller's view
    (Kafka's truth) and the job's exported fenced-broker gauge per cluster name."""

    def __init__(self, bed: Bed) -> None:
        self.urls = {n.node_id: n.jolokia_url for n in bed.watched.nodes
                     if "controller" in n.roles and n.jolokia_url}
        self.bed = bed
        self.truth: list[tuple[float, float]] = []  # (time, FencedBrokerCount)
        self.gauge: list[tuple[float, str, float]] = []  # (time, name, exported value)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True, name="controller-watch")

    def run(self) -> None:
        while not self.stop.wait(0.25):
            now = time.time()
            active = active_view(controller_view(self.urls, timeout=1.0))
            if active is not None:
                self.truth.append((now, active[1]["fenced"]))
            for (name,), value in exported(self.bed, metric.FENCED_BROKERS).items():
                self.gauge.append((now, name, value))

    def fenced(self, since: float, until: float = float("inf")) -> list[tuple[float, float]]:
        return [(t, v) for t, v in self.truth if since <= t <= until and v > 0]

    def gauged(self, name: str, since: float, until: float = float("inf")) -> list[float]:
        return [t for t, n, v in self.gauge if n == name and since <= t <= until and v > 0]

    def __enter__(self) -> ControllerWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def _incidents(bed: Bed, kind: str, since: float) -> pd.DataFrame:
    rows = table(bed.delta, "incidents")
    if rows.empty:
        return rows
    return rows[(rows.kind == kind) & (rows["started_at"].map(epoch) >= since)]


def _per_name(rows: pd.DataFrame) -> set[str]:
    return set(rows.cluster) if not rows.empty else set()


@contextmanager
def _frozen(bed: Bed, broker: int) -> Iterator[None]:
    faults.stop_broker(bed.watched, broker, "freeze")
    try:
        yield
    finally:
        faults.start_broker(bed.watched, broker)


def test_a_broker_frozen_past_the_session_timeout_is_fenced_and_only_then(healthy: Bed) -> None:
    bed = healthy
    signals = bed.job.config.signals
    stale_after = signals.stale_after_intervals * signals.scrape_interval_seconds
    # room for the controller to fence (SESSION) and for a window to hold it, while the
    # broker's silence stays under the stale limit
    assert stale_after > SESSION + WINDOW + 2, (SESSION, stale_after)
    wait_for(lambda: all(exported(bed, metric.FENCED_BROKERS).get((n,)) == 0.0 for n in NAMES),
             120, f"{metric.FENCED_BROKERS} 0 in both formats before the faults")
    with ControllerWatch(bed) as watch:
        short = time.time()
        with _frozen(bed, FROZEN):
            time.sleep(SESSION / 2)  # the fault itself: frozen for half the session timeout
        short_end = time.time()
        # the controller fences within a heartbeat check of the deadline: give it one
        time.sleep(1)
        assert watch.truth and not watch.fenced(short, time.time()), \
            "the controller fenced a broker frozen for less than its session timeout"

        long = time.time()
        with _frozen(bed, FROZEN):
            fenced_at = wait_for(lambda: (watch.fenced(long) or [(None,)])[0][0],
                                 SESSION + 10, f"the controller fencing broker {FROZEN}",
                                 every=0.25)
            listed = bed.watched.alive_brokers()
            # hold while no batch has exported it yet, short of the stale limit
            hold_until = min(fenced_at + 2 * WINDOW, long + stale_after - 2.5)
            while time.time() < hold_until and not all(watch.gauged(n, long) for n in NAMES):
                time.sleep(0.25)
        thawed = time.time()
        unfenced_at = wait_for(lambda: watch.truth[-1][0] > thawed and watch.truth[-1][1] == 0
                               and watch.truth[-1][0], 30, "the controller unfencing it")
        assert FROZEN not in listed, f"DescribeCluster listed fenced broker {FROZEN}: {listed}"
        wait_for(lambda: all(exported(bed, metric.FENCED_BROKERS).get((n,)) == 0.0
                             for n in NAMES), 60, f"{metric.FENCED_BROKERS} back to 0")
    for name in NAMES:
        assert watch.gauged(name, long), (name, "the fenced broker never showed on /metrics")
        assert not watch.gauged(name, short, long), (name, "a fenced broker on /metrics "
                                                     "for the short freeze")

    opened = wait_for(lambda: _per_name(_incidents(bed, "fenced_broker", long - WINDOW))
                      >= set(NAMES) and time.time(), 180,
                      "a fenced_broker incident in both formats")
    wait_for(lambda: (lambda rows: _per_name(rows[rows.resolved_at.notna()
                                                  & rows.withdrawn_at.isna()]) >= set(NAMES))(
        _incidents(bed, "fenced_broker", long - WINDOW)), 120,
        "the fenced_broker incidents resolved, not withdrawn")
    rows = _incidents(bed, "fenced_broker", short - WINDOW)
    early = rows[rows["started_at"].map(epoch) < long - WINDOW]
    assert early.empty, early[["cluster", "started_at", "resolved_at"]]
    rows = rows.sort_values("started_at")
    for row in rows.itertuples():
        assert row.broker == "*" and row.opened_by == "fenced_brokers" and row.peak_value == 1.0, row
        FINDINGS.append(
            f"broker {FROZEN} frozen {thawed - long:.0f}s (session {SESSION:.0f}s), "
            f"{row.cluster}: controller fenced it {fenced_at - long:.1f}s..{unfenced_at - long:.1f}s "
            f"after the freeze; /metrics showed 1 at "
            f"+{watch.gauged(row.cluster, long)[0] - long:.1f}s; incident "
            f"{epoch(row.started_at) - long:+.0f}s..{epoch(row.resolved_at) - long:+.0f}s "
            f"(written by +{opened - long:.0f}s)")
    FINDINGS.append(f"broker {FROZEN} frozen {short_end - short:.1f}s: never fenced, "
                    f"no fenced_broker incident, {metric.FENCED_BROKERS} stayed 0")


def test_three_controller_failovers_within_five_minutes_are_churn(healthy: Bed) -> None:
    bed = healthy
    since = time.time()
    leaders = [active_controller(faults.live_bootstrap(bed.watched))]
    for _ in range(3):
        killed = faults.kill_active_controller(bed.watched, leaders[-1])
        # back before the next kill: two of the three controllers must stay up
        faults.start_broker(bed.watched, killed)
        leaders.append(active_controller(faults.live_bootstrap(bed.watched)))
    done = time.time()
    assert None not in leaders and all(a != b for a, b in zip(leaders, leaders[1:], strict=False)), leaders
    assert done - since < CHURN_SPAN.total_seconds(), "the failovers took longer than the span"

    opened = wait_for(lambda: _per_name(_incidents(bed, "controller_churn", since - WINDOW))
                      >= set(NAMES) and time.time(), 180,
                      "a controller_churn incident in both formats")
    wait_caught_up(bed, done + 3 * WINDOW)  # the restarted nodes' counts are in
    clusters = table(bed.delta, "cluster_signals")
    clusters = clusters[clusters["window_start"].map(epoch) >= since - WINDOW]
    for row in _incidents(bed, "controller_churn", since - WINDOW).itertuples():
        mine = clusters[clusters.cluster == row.cluster]
        assert row.broker == "*" and row.peak_value >= 3, row
        FINDINGS.append(
            f"controller killed 3 times in {done - since:.0f}s (leaders {leaders}), "
            f"{row.cluster}: elections counted {mine.controller_elections_increase.sum():.0f} "
            f"(each restarted node counts the leader it finds), 5-minute count up to "
            f"{mine.controller_elections_5m.max():.0f}; churn incident "
            f"from {epoch(row.started_at) - since:+.0f}s (in the table by "
            f"+{opened - since:.0f}s, when the test first looked)")


def test_an_election_from_the_eligible_leader_replicas_is_elr_not_unclean(healthy: Bed) -> None:
    bed = healthy
    topic = f"elr-{int(time.time())}"
    leader, follower = 4, 5
    create_topic(bed.watched.bootstrap, topic, assignment=[[leader, follower]],
                 config={"min.insync.replicas": "2", "unclean.leader.election.enable": "false"})
    producer = Producer({"bootstrap.servers": bed.watched.bootstrap, "acks": "all"})
    written = 50
    for i in range(written):
        producer.produce(topic, f"acknowledged by both replicas {i}".encode())
    if producer.flush(30):
        raise KafkaException("records not acknowledged")
    controllers = {n.node_id: n.jolokia_url for n in bed.watched.nodes
                   if "controller" in n.roles and n.jolokia_url}
    before = active_view(controller_view(controllers))
    assert before is not None, "no active controller answered"

    since = time.time()
    faults.stop_broker(bed.watched, follower, "clean")
    faults.wait_isr_without(bed.watched, follower, topic)
    faults.stop_broker(bed.watched, leader, "clean")
    faults.wait_until(lambda: all(p.leader is None for p in faults.snapshot(bed.watched).partitions
                                  if p.topic == topic), 60, f"{topic} leaderless")
    leaderless = topic_description(faults.live_bootstrap(bed.watched), topic)
    faults.start_broker(bed.watched, follower)
    faults.wait_until(lambda: any(p.topic == topic and p.leader == follower
                                  for p in faults.snapshot(bed.watched).partitions), 120,
                      f"broker {follower} elected leader of {topic}")
    elected = time.time()
    after = active_view(controller_view(controllers))
    assert after is not None, "no active controller answered"
    consumer = Consumer({"bootstrap.servers": faults.live_bootstrap(bed.watched),
                         "group.id": f"elr-check-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    read = 0
    deadline = time.monotonic() + 60
    while read < written and time.monotonic() < deadline:
        read += len(consumer.consume(written, timeout=1))
    consumer.close()
    faults.start_broker(bed.watched, leader)
    faults.wait_fully_replicated(bed.watched)
    # Kafka's truth: the controller elected the eligible replica, not uncleanly, and lost
    # nothing acknowledged (the counters of a controller that stayed active throughout)
    fields = dict(re.findall(r"(\w+): (\S*)", leaderless.splitlines()[-1]))
    assert str(follower) in fields.get("Elr", "").split(","), leaderless
    # other partitions on brokers 4 and 5 (the probe's) may be elected from their ELR too:
    # the controller's own count is the truth the pipeline must equal
    truth = unclean_truth = None
    if after[0] == before[0]:
        truth = after[1]["elr_elections"] - before[1]["elr_elections"]
        unclean_truth = after[1]["unclean_elections"] - before[1]["unclean_elections"]
        assert truth >= 1, (before, after)
    assert read == written, f"read {read} of {written} acknowledged records"

    opened = wait_for(lambda: _per_name(_incidents(bed, "elr_election", since - WINDOW))
                      >= set(NAMES) and time.time(), 180,
                      "an elr_election incident in both formats")
    # two windows more: a second count of the election would show in them
    wait_caught_up(bed, elected + 3 * WINDOW)
    clusters = table(bed.delta, "cluster_signals")
    clusters = clusters[clusters["window_start"].map(epoch) >= since - WINDOW]
    for name in NAMES:
        mine = clusters[clusters.cluster == name]
        counted = mine.elr_elections_increase.fillna(0).sum()
        assert counted == truth if truth is not None else counted >= 1, (
            name, truth, mine[["window_start", "elr_elections_increase"]])
        # an unclean election elsewhere in the cluster meanwhile is counted as the
        # controller counted it, never this ELR election
        assert mine.unclean_elections_increase.fillna(0).sum() == (unclean_truth or 0), (
            name, unclean_truth, mine[["window_start", "unclean_elections_increase"]])
    unclean = _incidents(bed, "unclean_election", since - WINDOW)
    assert unclean.empty or unclean_truth, unclean[["cluster", "started_at"]]
    for row in _incidents(bed, "elr_election", since - WINDOW).itertuples():
        assert row.broker == "*" and row.peak_value >= 1.0, row
        FINDINGS.append(
            f"ELR election on {topic} (leaderless: ISR {fields.get('Isr')}, ELR "
            f"{fields.get('Elr')}), {row.cluster}: "
            f"controller {after[0]} counted ELR "
            f"{after[1]['elr_elections'] - before[1]['elr_elections']:.0f}, unclean "
            f"{after[1]['unclean_elections'] - before[1]['unclean_elections']:.0f}; "
            f"{read}/{written} records read back; elr_election incident from "
            f"{epoch(row.started_at) - elected:+.0f}s of the election (written by "
            f"+{opened - elected:.0f}s), no unclean_election")


ELR_FEATURE = "eligible.leader.replicas.version"


def test_with_elr_off_an_unclean_election_still_pages_and_elr_reads_off(healthy: Bed) -> None:
    bed = healthy
    urls = [n.jolokia_url for n in bed.watched.nodes if n.jolokia_url]
    topic = f"unclean-no-elr-{int(time.time())}"
    create_topic(bed.watched.bootstrap, topic, assignment=[[4, 5]],
                 config={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
    faults.set_feature(bed.watched, ELR_FEATURE, 0)
    try:
        # Kafka's truth: no node publishes the feature's level any more (a level 0 is not
        # finalized), while metadata.version's stays
        levels = wait_for(lambda: (lambda found: found if found and all(
            "eligibleLeaderReplicasVersion" not in f and "metadataVersion" in f
            for f in found) else None)([feature_levels(u) for u in urls]), 30,
            "every node without the ELR feature level")
        off = time.time()
        wait_for(lambda: all(exported(bed, metric.ELR_ENABLED).get((n,)) == 0.0 for n in NAMES),
                 60, f"{metric.ELR_ENABLED} 0 in both formats")
        gauged = time.time()

        def produce() -> None:
            producer = Producer({"bootstrap.servers": faults.live_bootstrap(bed.watched),
                                 "acks": "1"})
            for _ in range(50):
                producer.produce(topic, b"written to the leader alone")
            if producer.flush(30):
                raise KafkaException("records not delivered")

        before = active_view(controller_view(
            {n.node_id: n.jolokia_url for n in bed.watched.nodes
             if "controller" in n.roles and n.jolokia_url}))
        since = time.time()
        faults.unclean_election(bed.watched, topic, 4, 5, produce)
        elected = time.time()
        after = active_view(controller_view(
            {n.node_id: n.jolokia_url for n in bed.watched.nodes
             if "controller" in n.roles and n.jolokia_url}))
        opened = wait_for(lambda: _per_name(_incidents(bed, "unclean_election", since - WINDOW))
                          >= set(NAMES) and time.time(), 180,
                          "an unclean_election incident in both formats")
        clusters = table(bed.delta, "cluster_signals")
        clusters = clusters[clusters["window_start"].map(epoch) >= since]
        for name in NAMES:
            mine = clusters[clusters.cluster == name]
            assert (mine.elr_enabled == 0.0).all(), mine[["window_start", "elr_enabled"]]
            assert mine.elr_elections_increase.fillna(0).sum() == 0, name
        counted = (None if before is None or after is None or before[0] != after[0]
                   else after[1]["unclean_elections"] - before[1]["unclean_elections"])
        FINDINGS.append(
            f"ELR off ({ELR_FEATURE}=0): nodes publish levels {sorted(levels[0])}; "
            f"{metric.ELR_ENABLED} 0 in both formats {gauged - off:.0f}s later; unclean "
            f"election on {topic} (controller counted {counted}): unclean_election incident "
            f"in both formats by +{opened - elected:.0f}s of the election")
    finally:
        faults.set_feature(bed.watched, ELR_FEATURE, 1)
    wait_for(lambda: all(exported(bed, metric.ELR_ENABLED).get((n,)) == 1.0 for n in NAMES),
             60, f"{metric.ELR_ENABLED} back to 1")
