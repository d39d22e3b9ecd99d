"""Which brokers are behind the partitions in trouble, ranked.

The JMX signals say "leader 1 has 4 partitions under min ISR"; the culprit is another
broker, the one missing from their ISR. From a snapshot this names it: per (cluster,
leader, kind), the brokers missing from the most affected partitions first, and a
sentence an operator can act on ("4 partitions under min ISR on leader 1: brokers 2 and
3 out of ISR"; for partitions without a leader, the replicas that could lead them and
why they cannot: "broker 4 unavailable, log directory offline on broker 5"). Pure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from streaming.metadata.model import ClusterSnapshot, PartitionInfo, TopicInfo, effective_min_isr
from streaming.metadata.phrases import brokers, counted

OFFLINE, UNDER_MIN_ISR, UNDER_REPLICATED = "offline", "under_min_isr", "under_replicated"
# Worst first: a partition counts once, in the worst kind it is in (an under-min-ISR
# partition is under-replicated too, and one sentence about it is enough).
KINDS = (OFFLINE, UNDER_MIN_ISR, UNDER_REPLICATED)
_WORDS = {OFFLINE: "offline (no leader)", UNDER_MIN_ISR: "under min ISR",
          UNDER_REPLICATED: "under-replicated"}


@dataclass(frozen=True)
class Cause:
    """The affected partitions of one (cluster, leader, kind) and the brokers missing from
    them: (broker, partitions missing it), most first, at most the top N."""

    cluster: str
    leader: int | None  # None for offline partitions: they have none
    kind: str
    partitions: int
    brokers: tuple[tuple[int, int], ...]
    more_brokers: int  # missing brokers beyond the top N
    sentence: str
    # Of the named brokers of an offline cause, those the cluster lists: up, yet their
    # replica cannot lead, which Kafka does to a replica whose log directory failed.
    registered: tuple[int, ...] = ()

    @property
    def blame(self) -> str | None:
        """The brokers behind it, as a page says it ("brokers 4 and 5 out of ISR"), or None
        when no broker can be named."""
        return _blame(self.kind, [b for b, _ in self.brokers], self.more_brokers,
                      self.registered)


def partition_kind(topic: TopicInfo, p: PartitionInfo) -> str | None:
    """The worst trouble a partition is in, or None when healthy.

    Under min ISR is ISR size < min(min.insync.replicas, replicas), the floor the leader
    enforces; with min.insync.replicas unknown a short ISR counts as under-replicated.
    """
    if p.leader is None:
        return OFFLINE
    floor = effective_min_isr(topic.min_insync_replicas, len(p.replicas))
    if floor is not None and len(p.isr) < floor:
        return UNDER_MIN_ISR
    if len(p.isr) < len(p.replicas):
        return UNDER_REPLICATED
    return None


def _live(snapshot: ClusterSnapshot) -> set[int]:
    return {b.id for b in snapshot.brokers.values() if b.live}


def missing_brokers(snapshot: ClusterSnapshot, p: PartitionInfo) -> tuple[int, ...]:
    """The replicas that are why this partition is short: those out of its ISR; for an
    offline partition, the replicas that could lead it and cannot (`leader_candidates`)."""
    if p.leader is not None:
        return tuple(r for r in p.replicas if r not in p.isr)
    return leader_candidates(p, _live(snapshot))


def leader_candidates(p: PartitionInfo, live: set[int]) -> tuple[int, ...]:
    """The replicas of a leaderless partition that could lead it: its ISR members (the ISR
    keeps its last members when they die, and only they bring it back without losing
    data); with an empty ISR (KIP-966 moves the last members to the eligible leader
    replicas, which confluent-kafka does not show), the replicas whose broker is down,
    or with none down, every replica.

    A candidate is down when the cluster does not list its broker (not registered, or
    fenced: DescribeCluster lists neither). A candidate whose broker is listed (`live`)
    is up and still cannot lead: Kafka has taken its replica offline, which on a
    registered broker means its log directory failed. confluent-kafka shows neither the
    offline replicas nor the log directories (no DescribeLogDirs), so that is inferred,
    and such a partition is not left without a cause."""
    if p.isr:
        return p.isr
    down = tuple(r for r in p.replicas if r not in live)
    return down or p.replicas


def _blame(kind: str, named: list[int], more: int,
           registered: tuple[int, ...] = ()) -> str | None:
    if not named:
        return None
    tail = f" (and {more} more)" if more else ""
    if kind != OFFLINE:
        return f"{brokers(named)} out of ISR{tail}"
    down = [b for b in named if b not in registered]
    disks = [b for b in named if b in registered]
    said = [f"{brokers(down)} unavailable"] if down else []
    if disks:
        noun = "log directory" if len(disks) == 1 else "log directories"
        said.append(f"{noun} offline on {brokers(disks)}")
    return ", ".join(said) + tail


def _sentence(kind: str, leader: int | None, partitions: int,
              ranked: list[tuple[int, int]], more: int, registered: tuple[int, ...]) -> str:
    head = counted(partitions, "partition") + " " + _WORDS[kind]
    if leader is not None:
        head += f" on leader {leader}"
    blame = _blame(kind, [b for b, _ in ranked], more, registered)
    return head if blame is None else f"{head}: {blame}"


def _rank(missing: Counter[int], top_n: int) -> list[tuple[int, int]]:
    """Most affected partitions first, then the lower broker id (a stable order)."""
    return sorted(missing.items(), key=lambda item: (-item[1], item[0]))[:top_n]


def _affected(snapshot: ClusterSnapshot) -> Iterator[tuple[int | None, str, tuple[int, ...]]]:
    """(leader, kind, missing brokers) of every partition in trouble."""
    for topic, p in snapshot.partitions():
        kind = partition_kind(topic, p)
        if kind is not None:
            yield p.leader, kind, missing_brokers(snapshot, p)


def rank_causes(snapshot: ClusterSnapshot, top_n: int = 3) -> list[Cause]:
    """One Cause per (leader, kind) with affected partitions, worst kind first, then the
    most partitions, then the leader id."""
    partitions: Counter[tuple[int | None, str]] = Counter()
    missing: dict[tuple[int | None, str], Counter[int]] = defaultdict(Counter)
    for leader, kind, absent in _affected(snapshot):
        partitions[(leader, kind)] += 1
        missing[(leader, kind)].update(absent)
    live = _live(snapshot)
    causes = []
    for (leader, kind), count in partitions.items():
        ranked = _rank(missing[(leader, kind)], top_n)
        more = len(missing[(leader, kind)]) - len(ranked)
        registered = tuple(b for b, _ in ranked if kind == OFFLINE and b in live)
        causes.append(Cause(snapshot.cluster, leader, kind, count, tuple(ranked), more,
                            _sentence(kind, leader, count, ranked, more, registered),
                            registered))
    return sorted(causes, key=lambda c: (KINDS.index(c.kind), -c.partitions,
                                         -1 if c.leader is None else c.leader))


def top_brokers_by_kind(snapshot: ClusterSnapshot,
                        top_n: int = 3) -> dict[str, list[tuple[int, int]]]:
    """Per kind, over every leader: the brokers missing from the most affected partitions
    (broker, partitions), at most `top_n`, for a gauge whose cardinality stays
    kinds x N per cluster. Kinds without affected partitions are left out."""
    per_kind: dict[str, Counter[int]] = defaultdict(Counter)
    for _, kind, absent in _affected(snapshot):
        per_kind[kind].update(absent)
    return {kind: _rank(per_kind[kind], top_n) for kind in KINDS if per_kind[kind]}
