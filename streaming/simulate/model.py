"""A model Kafka cluster whose broker metrics follow from its replica state.

The model is the ground truth for tests: UnderMinIsrPartitionCount of a broker is the
number of partitions it leads whose ISR is below min.insync.replicas, and so on, so a
signal computed by the pipeline can be compared with what the cluster really was.
It shares only the metric catalog names with the pipeline, nothing of its logic.

Semantics (Kafka's replication protocol): a broker that goes down leaves every ISR it was in (a shrink,
counted by the partition's leader); a partition whose leader dies elects the first
remaining ISR member; with no ISR member alive the partition is offline, until the last
ISR member returns (clean) or an unclean election picks an out-of-sync replica (data
loss, counted by the active controller). A broker that returns rejoins the ISR of its
partitions (an expand, counted by the leader) and restarts its meters from zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Partition:
    topic: str
    index: int
    replicas: list[int]
    isr: list[int]
    leader: int | None
    segments: int = 3
    last_isr: int | None = None  # the ISR member that left last, so its return is clean


@dataclass
class Broker:
    id: int
    up: bool = True
    reporting: bool = True
    # Meter Counts as the broker reports them (reset when the broker process restarts).
    shrinks: int = 0
    expands: int = 0
    unclean: int = 0
    handler_idle_ns: float = 0.0
    # True event totals that never reset: the ground truth for increases.
    true_shrinks: int = 0
    true_expands: int = 0
    true_unclean: int = 0
    request_queue: int = 0
    response_queue: int = 0
    handler_idle: float = 0.92
    network_idle: float = 0.95
    base_fds: int = 800
    max_fds: int = 100_000


@dataclass
class ClusterModel:
    name: str
    broker_ids: list[int]
    topics: dict[str, int]
    replication_factor: int = 3
    min_isr: int = 2
    segments_per_partition: int = 3
    brokers: dict[int, Broker] = field(default_factory=dict)
    partitions: list[Partition] = field(default_factory=list)
    controller: int | None = None

    def __post_init__(self) -> None:
        if self.replication_factor > len(self.broker_ids):
            raise ValueError("replication_factor cannot exceed the number of brokers")
        self.brokers = {b: Broker(b) for b in self.broker_ids}
        self.controller = self.broker_ids[0]
        for topic, count in self.topics.items():
            self._create(topic, count)

    def _create(self, topic: str, count: int) -> None:
        n = len(self.broker_ids)
        start = sum(1 for p in self.partitions if p.topic == topic)
        offset = len(self.partitions)
        for i in range(start, start + count):
            replicas = [self.broker_ids[(offset + i + k) % n] for k in range(self.replication_factor)]
            alive = [b for b in replicas if self.brokers[b].up]
            leader = alive[0] if alive else None
            self.partitions.append(
                Partition(topic, i, replicas, list(alive), leader, self.segments_per_partition)
            )

    # ---- faults and changes ----
    def add_partitions(self, topic: str, count: int) -> None:
        self._create(topic, count)

    def broker_down(self, broker: int) -> None:
        self.brokers[broker].up = False
        for p in self.partitions:
            if broker not in p.isr:
                continue
            p.isr.remove(broker)
            if not p.isr:
                p.last_isr = broker
            if p.leader == broker:
                p.leader = p.isr[0] if p.isr else None
            if p.leader is not None:
                self._count_shrink(p.leader)
        if self.controller == broker:
            alive = [b for b in self.broker_ids if self.brokers[b].up]
            self.controller = alive[0] if alive else None

    def broker_up(self, broker: int, caught_up: bool = True) -> None:
        """The broker process starts again (meters from zero); with caught_up=False it is a
        lagging follower: alive but not in any ISR until catch_up()."""
        state = self.brokers[broker]
        state.up = True
        self._reset_meters(state)
        if self.controller is None:
            self.controller = broker
        if caught_up:
            self.catch_up(broker)

    def catch_up(self, broker: int) -> None:
        """A follower reaches the leader's log end and rejoins the ISR (an expand)."""
        for p in self.partitions:
            if broker not in p.replicas or broker in p.isr:
                continue
            if p.leader is None:
                if not p.isr and p.last_isr == broker:
                    p.leader, p.isr, p.last_isr = broker, [broker], None
                continue
            p.isr.append(broker)
            self._count_expand(p.leader)

    def restart(self, broker: int) -> None:
        """A quick process restart: meters start again from zero, the topology is unchanged."""
        self._reset_meters(self.brokers[broker])

    def unclean_election(self) -> int:
        """Elect an out-of-sync live replica for every offline partition; returns how many."""
        elected = 0
        for p in self.partitions:
            if p.leader is not None:
                continue
            alive = [b for b in p.replicas if self.brokers[b].up]
            if not alive:
                continue
            p.leader, p.isr = alive[0], [alive[0]]
            elected += 1
            if self.controller is not None:
                ctrl = self.brokers[self.controller]
                ctrl.unclean += 1
                ctrl.true_unclean += 1
        return elected

    def isr_flap(self, follower: int, count: int = 1) -> None:
        """A slow follower drops out of ISR and catches up again, `count` times per partition."""
        for p in self.partitions:
            if follower in p.isr and p.leader not in (None, follower):
                for _ in range(count):
                    self._count_shrink(p.leader)
                    self._count_expand(p.leader)

    def saturate(self, broker: int, request_queue: int, handler_idle: float,
                 network_idle: float | None = None) -> None:
        state = self.brokers[broker]
        state.request_queue, state.handler_idle = request_queue, handler_idle
        if network_idle is not None:
            state.network_idle = network_idle

    def stop_reporting(self, broker: int) -> None:
        self.brokers[broker].reporting = False

    def resume_reporting(self, broker: int) -> None:
        self.brokers[broker].reporting = True

    # ---- bookkeeping ----
    def _count_shrink(self, leader: int) -> None:
        state = self.brokers[leader]
        state.shrinks += 1
        state.true_shrinks += 1

    def _count_expand(self, leader: int) -> None:
        state = self.brokers[leader]
        state.expands += 1
        state.true_expands += 1

    @staticmethod
    def _reset_meters(state: Broker) -> None:
        state.shrinks = state.expands = state.unclean = 0
        state.handler_idle_ns = 0.0

    # ---- what a broker reports ----
    def broker_values(self, broker: int) -> dict[str, float]:
        """Canonical metric values a broker's JMX shows now (broker-scoped, no labels)."""
        state = self.brokers[broker]
        led = [p for p in self.partitions if p.leader == broker]
        hosted = [p for p in self.partitions if broker in p.replicas]
        is_controller = self.controller == broker
        return {
            "UnderMinIsrPartitionCount": sum(1 for p in led if len(p.isr) < self.min_isr),
            "AtMinIsrPartitionCount": sum(1 for p in led if len(p.isr) == self.min_isr),
            "UnderReplicatedPartitions": sum(1 for p in led if len(p.isr) < len(p.replicas)),
            "PartitionCount": len(hosted),
            "LeaderCount": len(led),
            "ActiveControllerCount": 1 if is_controller else 0,
            "OfflinePartitionsCount": (
                sum(1 for p in self.partitions if p.leader is None) if is_controller else 0
            ),
            "RequestQueueSize": state.request_queue,
            "ResponseQueueSize": state.response_queue,
            "NetworkProcessorAvgIdlePercent": state.network_idle,
            "OpenFileDescriptorCount": state.base_fds + 3 * sum(p.segments for p in hosted),
            "MaxFileDescriptorCount": state.max_fds,
        }

    def meters(self, broker: int) -> dict[str, float]:
        state = self.brokers[broker]
        return {
            "IsrShrinksPerSec": state.shrinks,
            "IsrExpandsPerSec": state.expands,
            "UncleanLeaderElectionsPerSec": state.unclean,
        }

    def hosted_partitions(self, broker: int) -> list[Partition]:
        return [p for p in self.partitions if broker in p.replicas]
