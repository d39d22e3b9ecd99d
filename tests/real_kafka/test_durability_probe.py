"""The durability probe against the real cluster, with an independent acks=all producer as
the truth: two of a partition's three replicas down make the probe's writes through its
leader fail with NOT_ENOUGH_REPLICAS, window by window as the truth's do.

The probe topic's partitions are laid on the ring of brokers 1-5 (replication 3), so with
brokers 4 and 5 stopped: partition 2 (replicas 3, 4, 5) keeps leader 3 alone in its ISR,
partition 3 (4, 5, 1) is led by 1 alone; partitions 0 (1, 2, 3), 1 (2, 3, 4) and
4 (5, 1, 2) keep two in-sync replicas. Broker 3's writes all fail, broker 1's one in three,
broker 2's none.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.clients.probe import DurabilityProbe, ProbeSettings
from streaming.clients.probe_ledger import Loss, ProbeWindow, error_class
from streaming.testbed import faults
from streaming.testbed.kafka import KafkaCluster, create_topic
from tests.conftest import wait_for
from tests.real_kafka.conftest import restore

WINDOW = 5.0
INTERVAL = 0.5
TIMEOUT = 3.0
TOPIC = "probe-fault"


class TruthProducer:
    """An acks=all producer of the test's own (not idempotent, no shared code with the
    probe's): a record per partition every INTERVAL, each outcome by the leader its own
    metadata named at the send, in WINDOW-second windows."""

    def __init__(self, bootstrap: str, partitions: list[int]) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "linger.ms": 0, "delivery.timeout.ms": int(TIMEOUT * 1000),
                                  "request.timeout.ms": int(TIMEOUT * 500),
                                  "retries": 2})
        self.partitions = partitions
        # (broker, window) -> [acked, ended], and the error classes seen
        self.outcomes: dict[tuple[str, float], list[int]] = defaultdict(lambda: [0, 0])
        self.errors: dict[tuple[str, float], set[str]] = defaultdict(set)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _leaders(self) -> dict[int, int]:
        try:
            meta = self.producer.list_topics(TOPIC, timeout=1)
            return {p: m.leader for p, m in meta.topics[TOPIC].partitions.items()}
        except Exception:
            return {}

    def _run(self) -> None:
        leaders: dict[int, int] = {}
        while not self._stop.is_set():
            leaders = self._leaders() or leaders
            now = time.time()
            window = now // WINDOW * WINDOW
            for p in self.partitions:
                key = (str(leaders.get(p, -1)), window)

                def done(err, _msg, key=key) -> None:
                    self.outcomes[key][1] += 1
                    if err is None:
                        self.outcomes[key][0] += 1
                    else:
                        self.errors[key].add(error_class(err.name()))
                self.producer.produce(TOPIC, b"truth", partition=p, on_delivery=done)
            deadline = now + INTERVAL
            while time.time() < deadline:
                self.producer.poll(0.05)
        self.producer.flush(TIMEOUT + 2)

    def __enter__(self) -> TruthProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.fixture
def cluster(watched: KafkaCluster) -> Iterator[KafkaCluster]:
    """The package's watched cluster, whole before and after; the probe topics a test made
    are deleted after it (one made lossy would take part in the later tests' faults)."""
    restore(watched)
    yield watched
    restore(watched)
    admin = AdminClient({"bootstrap.servers": watched.bootstrap})
    made = [t for t in (TOPIC, LOSSY) if t in admin.list_topics(timeout=10).topics]
    for future in (admin.delete_topics(made, request_timeout=30).values() if made else []):
        future.result(timeout=60)
    wait_for(lambda: not set(made) & set(admin.list_topics(timeout=10).topics), 60,
             "the probe topics deleted")


def test_two_replicas_down_fail_the_probes_writes_through_that_leader_as_the_truths(
        cluster: KafkaCluster) -> None:
    windows: list[ProbeWindow] = []
    losses: list[Loss] = []

    def on_close(rows: list[ProbeWindow], lost: list[Loss]) -> None:
        windows.extend(rows)
        losses.extend(lost)
    probe = DurabilityProbe("watched", {"bootstrap.servers": cluster.bootstrap},
                            ProbeSettings(topic=TOPIC, interval_seconds=INTERVAL,
                                          window_seconds=WINDOW, timeout_seconds=TIMEOUT),
                            on_close=on_close).start()
    try:
        wait_for(lambda: {w.broker for w in windows if w.acked} >= {"1", "2", "3", "4", "5"},
                 90, "a window with acked writes through every broker")
        assert probe._topic is not None
        preferred = probe._topic.preferred
        assert sorted(preferred.values()) == [1, 2, 3, 4, 5], preferred
        with TruthProducer(cluster.bootstrap, sorted(preferred)) as truth:
            time.sleep(3 * WINDOW)  # healthy windows on both sides first
            stopped_at = time.time()
            for broker in (4, 5):
                faults.stop_broker(cluster, broker, "kill")
            for broker in (4, 5):
                faults.wait_isr_without(cluster, broker, TOPIC)
            shrunk_at = time.time()
            wait_for(lambda: any(w.broker == "3" and w.failed_by_class.get(
                "not_enough_replicas") for w in windows), 60,
                "the probe's writes through broker 3 failing with NOT_ENOUGH_REPLICAS")
            first_failure = min(w.window_start.timestamp() for w in windows
                                if w.broker == "3" and w.failed)
            time.sleep(4 * WINDOW)
            fault_end = time.time()
            for broker in (4, 5):
                faults.start_broker(cluster, broker)
            faults.wait_fully_replicated(cluster)
            replicated_at = time.time()
            time.sleep(3 * WINDOW)
        wait_for(lambda: max(w.window_start.timestamp() for w in windows) >= fault_end
                 + WINDOW, 60, "the probe's windows after the fault")
    finally:
        probe.stop()

    # the probe saw it within seconds of the replicas going
    assert first_failure - stopped_at < 30, (first_failure, stopped_at)
    probe_by_key = {(w.broker, w.window_start.timestamp()): w for w in windows}
    compared = failing = 0
    for key, (acked, ended) in sorted(truth.outcomes.items()):
        window = probe_by_key.get(key)
        if window is None or not ended or not window.acked + window.failed:
            continue
        # the windows in which the fault began (until the ISRs shrank) or ended (until
        # every replica was back), with a write's timeout either side, are timing's
        if any(key[1] < until + TIMEOUT and key[1] + WINDOW > since - TIMEOUT
               for since, until in ((stopped_at, shrunk_at), (fault_end, replicated_at))):
            continue
        compared += 1
        truth_availability = acked / ended
        assert window.availability == pytest.approx(truth_availability, abs=0.2), (
            key, window, acked, ended)
        if truth_availability < 1:
            failing += 1
            assert "not_enough_replicas" in window.failed_by_class, window
            assert truth.errors[key] == set(window.failed_by_class), (key, window)
    assert failing >= 3 and compared >= 15, (failing, compared)
    print(f"\nprobe: first failing window {first_failure - stopped_at:+.1f}s from the stop; "
          f"{compared} broker-windows compared with the truth producer, {failing} failing")
    stable_3 = [w for w in windows if w.broker == "3" and first_failure + WINDOW <=
                w.window_start.timestamp() < fault_end - WINDOW]
    assert stable_3 and all(w.acked == 0 for w in stable_3), stable_3
    assert not losses and sum(w.lost for w in windows) == 0, losses


LOSSY = "probe-lossy"


class AckWatchingProbe(DurabilityProbe):
    """The probe, with the delivery reports Kafka sent it kept aside by the test: which
    sequence numbers Kafka acked, the truth the probe's loss count must equal."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.acked_by_kafka: dict[int, set[int]] = defaultdict(set)

    def delivered(self, partition: int, sequence: int, error: str | None,
                  offset: int | None) -> None:
        if error is None:
            self.acked_by_kafka[partition].add(sequence)
        super().delivered(partition, sequence, error, offset)


def _readable(bootstrap: str, run: str, partition: int) -> set[int]:
    """The sequence numbers of `run` in the partition's log now, read from its start by a
    consumer of the test's own."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"truth-{run}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(LOSSY, partition, OFFSET_BEGINNING)])
    found: set[int] = set()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return found
                continue
            body = json.loads(message.value())
            if body.get("run") == run:
                found.add(body["seq"])
        raise AssertionError("the truth consumer did not reach the partition's end")
    finally:
        consumer.close()


def test_acked_records_an_unclean_election_truncates_are_the_probes_losses_exactly(
        cluster: KafkaCluster) -> None:
    # the lossy topic, as the test makes it: leader 4, follower 5, min ISR 1, unclean on;
    # the probe adds a partition for every other broker and writes to all of them
    create_topic(cluster.bootstrap, LOSSY, config={
        "min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
        assignment=[[4, 5]])
    losses: list[Loss] = []
    probe = AckWatchingProbe("watched", {"bootstrap.servers": cluster.bootstrap},
                             ProbeSettings(topic=LOSSY, interval_seconds=INTERVAL,
                                           window_seconds=WINDOW, timeout_seconds=TIMEOUT),
                             on_close=lambda rows, lost: losses.extend(lost)).start()
    try:
        wait_for(lambda: len(probe.acked_by_kafka[0]) >= 5, 90, "acked writes to partition 0")

        def acked_by_the_leader_alone() -> None:
            alone = len(probe.acked_by_kafka[0])
            wait_for(lambda: len(probe.acked_by_kafka[0]) >= alone + 8, 60,
                     "writes acked by broker 4 alone")
        faults.unclean_election(cluster, LOSSY, leader=4, follower=5,
                                produce=acked_by_the_leader_alone)
        before = max(probe.acked_by_kafka[0])
        readable = wait_for(lambda: (found := _readable(cluster.bootstrap, probe.run_id, 0))
                            and max(found) > before and found, 60,
                            "a record written through the new leader read back")
        expected = {s for s in probe.acked_by_kafka[0] if s <= before} - readable
        assert expected, "the unclean election must truncate acked records"
        wait_for(lambda: {x.sequence for x in losses if x.partition == 0} >= expected, 60,
                 "the probe finding every loss")
        time.sleep(2 * INTERVAL)
    finally:
        probe.stop()
    found = {x.sequence for x in losses if x.partition == 0}
    assert found == expected, (sorted(found), sorted(expected))
    assert {x.broker for x in losses if x.partition == 0} == {"4"}, losses
    assert not [x for x in losses if x.partition != 0], losses
    print(f"\nprobe: {len(found)} acked records lost to the unclean election, the same "
          f"sequence numbers the test could not read back")
