"""Hand-made cluster snapshots for the metadata tests: a topic in one line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streaming.metadata.model import BrokerInfo, ClusterSnapshot, PartitionInfo, TopicInfo

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def part(topic: str, partition: int, replicas: list[int], isr: list[int] | None = None,
         leader: int | None = -1, **extra: object) -> PartitionInfo:
    """leader -1 (the default) means the first ISR member; None means no leader."""
    isr = list(replicas) if isr is None else isr
    if leader == -1:
        leader = isr[0] if isr else None
    return PartitionInfo(topic, partition, leader, tuple(replicas), tuple(isr), **extra)


def topic(name: str, placement: list[list[int]], min_isr: int | None = 2,
          unclean: bool | None = False, isr: dict[int, list[int]] | None = None,
          leaders: dict[int, int | None] | None = None, **extra: object) -> TopicInfo:
    """A topic with one partition per replica list; `isr` and `leaders` override per
    partition id."""
    isr, leaders = isr or {}, leaders or {}
    parts = tuple(part(name, i, replicas, isr.get(i), leaders.get(i, -1))
                  for i, replicas in enumerate(placement))
    return TopicInfo(name, parts, min_insync_replicas=min_isr,
                     min_insync_replicas_source=None if min_isr is None else "broker",
                     unclean_leader_election_enable=unclean,
                     unclean_leader_election_source=None if unclean is None else "broker",
                     **extra)


def snapshot(*topics: TopicInfo, brokers: dict[int, str | None] | None = None,
             down: set[int] = frozenset(), cluster: str = "prod",
             polled_at: datetime = T0) -> ClusterSnapshot:
    """Brokers 1-3 without racks unless given; `down` brokers are members but not live."""
    racks = {1: None, 2: None, 3: None} if brokers is None else brokers
    return ClusterSnapshot(
        cluster=cluster, polled_at=polled_at,
        brokers={b: BrokerInfo(b, rack, live=b not in down) for b, rack in racks.items()},
        topics={t.name: t for t in topics}, controller=1)
