"""What one poll of a cluster's Admin API saw: brokers, topics with their durability
configs, partitions with leader, replicas and ISR.

Plain frozen dataclasses, built by `admin.fetch_snapshot` and read by the pure functions
(changes, causes, audit), so those can be tested with hand-made snapshots and never talk
to Kafka themselves.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

# Where a topic's effective config value comes from (ConfigEntry.source, reduced): set on
# the topic itself, a broker-level or cluster-level setting, or Kafka's built-in default.
SOURCE_TOPIC = "topic"
SOURCE_BROKER = "broker"
SOURCE_DEFAULT = "default"


@dataclass(frozen=True)
class BrokerInfo:
    """A broker of the cluster; `rack` is its broker.rack (None when not set or never
    seen). `live` is False for a broker the cluster's metadata no longer lists (stopped,
    fenced) while a partition still places a replica on it: it is still a member, down.
    `endpoint` is the host:port it advertises to the poller's listener (None when down)."""

    id: int
    rack: str | None = None
    live: bool = True
    endpoint: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    """One partition's replication state.

    `leader` is None when the partition has no leader (offline). `elr`, `last_known_elr`
    (KIP-966 eligible leader replicas) and `leader_recovery_state` (KIP-704: RECOVERED, or
    RECOVERING after an unclean election) are None when the client does not expose them,
    which confluent-kafka does not (docs/metadata.md): None means unknown, never empty.
    """

    topic: str
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None
    leader_recovery_state: str | None = None


@dataclass(frozen=True)
class TopicInfo:
    """A topic, its partitions (by id) and the effective values of the configs the audit
    reads. A config is None when it could not be read, so a rule needing it stays silent
    instead of guessing."""

    name: str
    partitions: tuple[PartitionInfo, ...]
    min_insync_replicas: int | None = None
    min_insync_replicas_source: str | None = None
    unclean_leader_election_enable: bool | None = None
    unclean_leader_election_source: str | None = None

    @property
    def replication_factor(self) -> int | None:
        """The smallest replica count of its partitions: the weakest partition is what a
        topic's durability is worth (they differ only mid-reassignment)."""
        counts = [len(p.replicas) for p in self.partitions]
        return min(counts) if counts else None

    @property
    def effective_min_isr(self) -> int | None:
        """min(min.insync.replicas, replication factor): the floor the leader enforces."""
        return effective_min_isr(self.min_insync_replicas, self.replication_factor)


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything one successful poll saw of one cluster, at `polled_at` (UTC)."""

    cluster: str
    polled_at: datetime
    brokers: Mapping[int, BrokerInfo] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    controller: int | None = None

    def partitions(self) -> Iterator[tuple[TopicInfo, PartitionInfo]]:
        """Every partition with its topic, in topic then partition order."""
        for name in sorted(self.topics):
            topic = self.topics[name]
            for partition in topic.partitions:
                yield topic, partition


def with_down_brokers(snapshot: ClusterSnapshot,
                      remembered: Mapping[int, BrokerInfo]) -> ClusterSnapshot:
    """`snapshot` plus, as not live, every broker a replica names that the cluster no
    longer lists, with the rack it had when last seen (`remembered`; None if never).

    Why: the cluster's metadata lists only live brokers, so without this a stopped broker
    would vanish from the rack counts and from its partitions' placement, and every rack
    finding would resolve and reopen with each broker restart.
    """
    named = {r for _, p in snapshot.partitions() for r in p.replicas}
    down = {b: BrokerInfo(b, remembered[b].rack if b in remembered else None, live=False)
            for b in sorted(named - set(snapshot.brokers))}
    if not down:
        return snapshot
    return replace(snapshot, brokers={**snapshot.brokers, **down})


def effective_min_isr(min_insync_replicas: int | None, replicas: int | None) -> int | None:
    """The ISR size below which an acks=all write is refused: the configured
    min.insync.replicas, silently capped at the replica count (Kafka's
    Partition.effectiveMinIsr). None when either is unknown."""
    if min_insync_replicas is None or replicas is None:
        return None
    return min(min_insync_replicas, replicas)
