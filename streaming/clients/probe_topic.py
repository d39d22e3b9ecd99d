"""The durability probe's topic: created if missing, with a partition led by every broker.

Why these settings: peers' probes default their topic to replication factor 1, which never
exercises the ISR or `min.insync.replicas`, so their writes succeed where a producer's
acks=all writes fail. The probe's partitions have min(3, brokers) replicas, `min.insync.
replicas` 2 (1 on a one-broker cluster, where 2 could never be met) and unclean leader
election off: an acks=all write through them fails exactly when a durable one would.

Why a partition per broker, by explicit assignment: the probe reports per leader broker,
so every broker must lead one. Partition i's replicas are brokers i, i+1, ... in id order
(ring), its preferred leader the first. A broker that joins gets a new partition it leads;
a leader that moved away (after a restart) is moved back by a preferred-leader election.
A broker that leaves keeps its partitions: while it is away is when the probe's failing
writes through them are the news.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic

LOG = logging.getLogger("kafka_health.clients")
DEFAULT_TOPIC = "kafka-health-probe"


@dataclass(frozen=True)
class ProbeTopic:
    """The probe topic as found: partition -> preferred leader, and current leader."""

    name: str
    preferred: dict[int, int]
    leaders: dict[int, int]
    replication_factor: int


def ring_assignment(brokers: Sequence[int], replication_factor: int,
                    leaders: Sequence[int]) -> list[list[int]]:
    """One partition per broker of `leaders`, led by it, its followers the brokers after
    it in id order."""
    ring = sorted(brokers)
    copies = min(replication_factor, len(ring))
    return [[ring[(ring.index(leader) + k) % len(ring)] for k in range(copies)]
            for leader in leaders]


def topic_config(brokers: int, retention_ms: int) -> dict[str, str]:
    return {"min.insync.replicas": str(min(2, brokers)),
            "unclean.leader.election.enable": "false",
            "retention.ms": str(retention_ms),
            # small segments: retention deletes old probe records within the hour
            "segment.ms": str(max(60_000, retention_ms // 4))}


def describe(admin: Any, topic: str, timeout: float) -> tuple[list[int], ProbeTopic | None]:
    """The cluster's registered brokers and the probe topic (None when missing)."""
    listing = admin.list_topics(topic=topic, timeout=timeout)
    brokers = sorted(listing.brokers)
    meta = listing.topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        return brokers, None
    preferred = {p: part.replicas[0] for p, part in meta.partitions.items() if part.replicas}
    leaders = {p: part.leader for p, part in meta.partitions.items()}
    copies = max((len(part.replicas) for part in meta.partitions.values()), default=1)
    return brokers, ProbeTopic(topic, preferred, leaders, copies)


def ensure_probe_topic(admin: Any, topic: str, replication_factor: int, retention_ms: int,
                       timeout: float) -> ProbeTopic:
    """The probe topic with a partition led by every broker the cluster lists: created,
    extended, and its leaders moved back to the preferred ones, as needed. Raises
    KafkaException when the cluster refuses (ACLs: the probe's principal needs Create,
    Alter, Write, Read and Describe on the topic)."""
    brokers, found = describe(admin, topic, timeout)
    if not brokers:
        raise KafkaException(f"the cluster lists no broker for the probe topic {topic}")
    if found is None:
        assignment = ring_assignment(brokers, replication_factor, brokers)
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment,
                      config=topic_config(len(brokers), retention_ms))],
            request_timeout=timeout)
        try:
            futures[topic].result(timeout=timeout + 5)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":  # another instance made it
                raise
        LOG.info("probe: created topic %s with %d partitions (replicas %s)", topic,
                 len(assignment), assignment)
        return _settled(admin, topic, timeout)
    missing = [b for b in brokers if b not in set(found.preferred.values())]
    if missing:
        total = len(found.preferred) + len(missing)
        # as many replicas as the topic has (Kafka refuses a partition with another count)
        futures = admin.create_partitions(
            [NewPartitions(topic, total, replica_assignment=ring_assignment(
                brokers, found.replication_factor, missing))], request_timeout=timeout)
        futures[topic].result(timeout=timeout + 5)
        LOG.info("probe: topic %s gets a partition led by each new broker %s", topic, missing)
        return _settled(admin, topic, timeout)
    moved = [p for p, leader in found.leaders.items()
             if leader != found.preferred.get(p) and found.preferred.get(p) in brokers]
    if moved:
        _elect_preferred(admin, topic, moved, timeout)
    return found


def _settled(admin: Any, topic: str, timeout: float) -> ProbeTopic:
    _, found = describe(admin, topic, timeout)
    if found is None:
        raise KafkaException(f"the probe topic {topic} is not listed after it was made")
    return found


def _elect_preferred(admin: Any, topic: str, partitions: list[int], timeout: float) -> None:
    """Ask for preferred-leader elections; a partition whose preferred leader is not in its
    ISR yet stays as it is, and is asked again at the next check."""
    try:
        # no request_timeout: confluent-kafka 2.16's elect_leaders refuses its own keyword
        # arguments (SystemError); the result's own timeout bounds the wait
        future = admin.elect_leaders(ElectionType.PREFERRED,
                                     [TopicPartition(topic, p) for p in partitions])
        result = future.result(timeout=timeout + 5)
    except Exception as exc:  # noqa: BLE001 - a failed election fails no check: asked again
        LOG.debug("probe: preferred-leader election on %s failed: %s", topic, exc)
        return
    moved = [tp.partition for tp, err in result.items() if err is None]
    if moved:
        LOG.info("probe: leaders of %s partitions %s moved back to their preferred brokers",
                 topic, moved)
