"""Ground truth from Kafka itself: the Admin API, sampled every second, turned into what the
pipeline must report per broker and window.

Per partition the Admin API gives the leader, the replicas and the ISR; per topic its
min.insync.replicas. From those, the broker-level numbers Kafka's own gauges mean:
- under min ISR on broker b: partitions b leads whose ISR is smaller than the effective
  floor min(min.insync.replicas, replication factor) (Kafka caps the setting at the replica
  count: Partition.effectiveMinIsr);
- under-replicated on b: partitions b leads whose ISR is smaller than their replica set;
- offline (cluster): partitions without a leader;
- the active controller (asked on demand by the fault injector, not sampled): the KRaft
  quorum's leader, from Kafka's own MetadataQuorumCommand (the Admin API's
  describeMetadataQuorum; librdkafka has no such call, and its describe_cluster names a
  random broker as "controller" under KRaft);
- the controller's own view (the brokers it fenced, its elections by kind: unclean, from
  the eligible leader replicas, of new active controllers), read from the controllers'
  beans over Jolokia on demand, where the Admin API has no call for it, as are a node's
  finalized feature levels; and a topic's partitions as Kafka's TopicCommand describes
  them (with the eligible leader replicas, which librdkafka does not show).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.runtime.jvm import classpath, java

BROKER_FIELDS = ("under_min_isr", "under_replicated", "leader_count")


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int

    @property
    def effective_min_isr(self) -> int:
        return min(self.min_isr, len(self.replicas))


@dataclass
class Snapshot:
    """One Admin API sample of the whole cluster."""

    ts: float
    partitions: list[PartitionState]
    brokers: frozenset[int]

    def per_broker(self, broker_ids: list[int]) -> dict[int, dict[str, int]]:
        out = {b: dict.fromkeys(BROKER_FIELDS, 0) for b in broker_ids}
        for p in self.partitions:
            if p.leader is None or p.leader not in out:
                continue
            row = out[p.leader]
            row["leader_count"] += 1
            row["under_min_isr"] += len(p.isr) < p.effective_min_isr
            row["under_replicated"] += len(p.isr) < len(p.replicas)
        return out

    @property
    def offline(self) -> int:
        return sum(p.leader is None for p in self.partitions)


def admin_client(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    # log_level 0: a stopped broker is the point of the test bed, not news
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000,
                        "log_level": 0})


def admin_snapshot(bootstrap: str, internal: bool = False, admin: Any = None) -> Snapshot:
    """Leader, replicas and ISR of every partition and each topic's min.insync.replicas."""
    from confluent_kafka.admin import ConfigResource

    admin = admin or admin_client(bootstrap)
    metadata = admin.list_topics(timeout=5)
    names = [t for t in metadata.topics if internal or not t.startswith("__")]
    min_isr: dict[str, int] = {}
    if names:
        futures = admin.describe_configs([ConfigResource("topic", t) for t in names])
        for resource, future in futures.items():
            config = future.result(timeout=5)
            min_isr[resource.name] = int(config["min.insync.replicas"].value)
    partitions = [
        PartitionState(topic=name, partition=pid,
                       leader=p.leader if p.leader >= 0 else None,
                       replicas=tuple(p.replicas), isr=tuple(p.isrs),
                       min_isr=min_isr.get(name, 1))
        for name in names for pid, p in metadata.topics[name].partitions.items()
    ]
    return Snapshot(time.time(), partitions, frozenset(metadata.brokers))


def active_controller(bootstrap: str, timeout: float = 30.0) -> int | None:
    """The KRaft quorum leader's id, from Kafka's MetadataQuorumCommand (None if unknown)."""
    result = subprocess.run(
        [java(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
         "-Dlog4j2.level=ERROR", "-cp", classpath("kafka"),
         "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", bootstrap,
         "describe", "--status"],
        capture_output=True, text=True, timeout=timeout,
    )
    found = re.search(r"^LeaderId:\s+(\d+)", result.stdout, re.MULTILINE)
    return int(found.group(1)) if found else None


@dataclass
class TruthSampler:
    """Samples the Admin API every `interval` seconds on a thread; a failed sample is
    skipped, never fatal. Nothing slower runs on that thread: a stable window needs samples
    at both of its edges, so a gap of a few seconds can leave no window covered."""

    bootstrap: str
    broker_ids: list[int]
    interval: float = 1.0
    snapshots: list[Snapshot] = field(default_factory=list)
    errors: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._admin: Any = None

    def sample(self) -> Snapshot | None:
        try:
            if self._admin is None:
                self._admin = admin_client(self.bootstrap)
            snap = admin_snapshot(self.bootstrap, internal=True, admin=self._admin)
        except Exception:
            self.errors += 1
            return None
        self.snapshots.append(snap)
        return snap

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def start(self) -> TruthSampler:
        self._thread = threading.Thread(target=self._run, name="truth", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=60)

    def stable_windows(self, window_seconds: int, margin: float = 2.0,
                       reading_lag: Mapping[float, float] | None = None
                       ) -> dict[float, tuple[frozenset[int], dict[int, dict[str, int]]]]:
        """Per window start, (brokers registered, per-broker truth) of the windows in which
        every sample from `margin` s before the window to `margin` s after it agreed, and
        whose samples reach both ends of that span: there the pipeline's max and last must
        both equal it. The margin absorbs the gap between a broker's gauge changing and its
        metadata showing it, and Jolokia's whole-second timestamps. `reading_lag` (window
        start -> seconds) widens the span after a window by how long the agents took to
        read the samples stamped in it: a Prometheus sample carries its scrape's start
        time, and a loaded broker's exporter reads its gauges seconds after that."""
        out = {}
        if not self.snapshots:
            return out
        first = self.snapshots[0].ts // window_seconds * window_seconds
        last = self.snapshots[-1].ts
        start = first
        while start + window_seconds + margin <= last:
            end = start + window_seconds
            after = margin + (reading_lag or {}).get(start, 0.0)
            snaps = [s for s in self.snapshots if start - margin <= s.ts < end + after]
            covered = (snaps and snaps[0].ts <= start and end + after <= last
                       and snaps[-1].ts >= end + after - 1.5 * self.interval)
            if covered:
                views = [(s.brokers, s.per_broker(self.broker_ids)) for s in snaps]
                if all(v == views[0] for v in views):
                    out[start] = views[0]
            start += window_seconds
        return out

    def isr_changes(self, since: float, until: float) -> tuple[int, int]:
        """(ISR members lost, ISR members gained) between consecutive samples in the span:
        what IsrShrinksPerSec and IsrExpandsPerSec count when the leader makes the change.
        The last sample before `since` is the baseline."""
        before_since = [s for s in self.snapshots if s.ts < since][-1:]
        snaps = before_since + [s for s in self.snapshots if since <= s.ts <= until]
        lost = gained = 0
        for before, after in zip(snaps, snaps[1:], strict=False):
            old = {(p.topic, p.partition): set(p.isr) for p in before.partitions}
            for p in after.partitions:
                prior = old.get((p.topic, p.partition))
                if prior is not None:
                    lost += len(prior - set(p.isr))
                    gained += len(set(p.isr) - prior)
        return lost, gained

    def windows_with(self, predicate, window_seconds: int) -> set[float]:  # noqa: ANN001
        """Window starts in which any sample satisfied predicate(snapshot)."""
        return {s.ts // window_seconds * window_seconds for s in self.snapshots if predicate(s)}


# The controller's own view and counters, as each KRaft controller exposes them over JMX
# (null on broker-only nodes): what the test bed's faults are judged against where the
# Admin API has no call (which brokers the controller fenced; its elections by kind).
CONTROLLER_BEANS = {
    "active": ("kafka.controller:type=KafkaController,name=ActiveControllerCount", "Value"),
    "fenced": ("kafka.controller:type=KafkaController,name=FencedBrokerCount", "Value"),
    "active_brokers": ("kafka.controller:type=KafkaController,name=ActiveBrokerCount", "Value"),
    "new_active_controllers": (
        "kafka.controller:type=KafkaController,name=NewActiveControllersCount", "Value"),
    "heartbeat_timeouts": (
        "kafka.controller:type=KafkaController,name=TimedOutBrokerHeartbeatCount", "Value"),
    "elr_elections": (
        "kafka.controller:type=ControllerStats,name=ElectionFromEligibleLeaderReplicasPerSec",
        "Count"),
    "unclean_elections": (
        "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec", "Count"),
}


def controller_view(jolokia_urls: Mapping[int, str], timeout: float = 2.0
                    ) -> dict[int, dict[str, float]]:
    """Per controller node that answers within `timeout`: CONTROLLER_BEANS' values, read
    in one Jolokia bulk request. A node that does not answer (down, frozen) is left out."""
    body = json.dumps([{"type": "read", "mbean": mbean, "attribute": attribute}
                       for mbean, attribute in CONTROLLER_BEANS.values()]).encode()
    out: dict[int, dict[str, float]] = {}
    for node, url in jolokia_urls.items():
        request = urllib.request.Request(url, data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                replies = json.loads(response.read())
        except (OSError, ValueError):
            continue
        values = {name: reply.get("value") for name, reply in zip(CONTROLLER_BEANS, replies,
                                                                  strict=True)}
        if all(isinstance(v, (int, float)) for v in values.values()):
            out[node] = {name: float(v) for name, v in values.items()}
    return out


def active_view(view: Mapping[int, Mapping[str, float]]) -> tuple[int, Mapping[str, float]] | None:
    """The active controller's entry of a `controller_view` (ActiveControllerCount 1), or
    None while no node claims it."""
    return next(((node, values) for node, values in view.items() if values["active"] == 1),
                None)


def topic_description(bootstrap: str, topic: str, timeout: float = 30.0) -> str:
    """`kafka-topics.sh --describe` of `topic`: per partition its leader, replicas, ISR and,
    under KIP-966, its eligible leader replicas (Elr) and last known ones."""
    result = subprocess.run(
        [java(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
         "-Dlog4j2.level=ERROR", "-cp", classpath("kafka"),
         "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
         "--describe", "--topic", topic],
        capture_output=True, text=True, timeout=timeout,
    )
    return result.stdout.strip()


def feature_levels(jolokia_url: str, timeout: float = 2.0) -> dict[str, float]:
    """The finalized feature levels a node publishes (its MetadataLoader FinalizedLevel
    beans, by featureName), read over Jolokia; {} when the node does not answer."""
    body = json.dumps({"type": "read",
                       "mbean": "kafka.server:type=MetadataLoader,name=FinalizedLevel,*"}).encode()
    request = urllib.request.Request(jolokia_url, data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            beans = json.loads(response.read()).get("value") or {}
    except (OSError, ValueError):
        return {}
    levels = {}
    for bean, values in beans.items():
        found = re.search(r"featureName=([^,]+)", bean)
        if found:
            levels[found.group(1)] = float(values["Value"])
    return levels
