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

import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from streaming.clients.probe import DurabilityProbe, ProbeSettings
from streaming.clients.probe_ledger import Loss, ProbeWindow, error_class
from streaming.testbed import faults
from streaming.testbed.kafka import KafkaCluster
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
    restore(watched)
    yield watched
    restore(watched)


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
