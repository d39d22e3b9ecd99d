"""One poll of a cluster through confluent-kafka's AdminClient: brokers with their racks,
every topic's partitions, and the effective durability configs of every topic.

Three kinds of request per poll, whatever the cluster's size: one Metadata request for
all topics (leader, replicas, ISR), DescribeCluster (brokers, racks, controller), and
DescribeConfigs in batches of topics. Any failure raises, and so does a poll by a
principal that may see nothing (its cluster would look empty); the poller turns either
into state.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclOperation, ConfigResource, ConfigSource, ResourceType

from streaming.metadata.model import (
    SOURCE_BROKER,
    SOURCE_DEFAULT,
    SOURCE_TOPIC,
    BrokerInfo,
    ClusterSnapshot,
    PartitionInfo,
    TopicInfo,
)

MIN_ISR = "min.insync.replicas"
UNCLEAN = "unclean.leader.election.enable"
# A topic deleted between the listing and the describe: it is simply gone.
_GONE = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC}
# Kafka's own topics (__consumer_offsets, __transaction_state, ...): seeing only these says
# nothing of the rights on the cluster's other topics.
_INTERNAL_PREFIX = "__"
BLIND = ("sees no topics and may not describe the cluster: grant Describe on the topics "
         "and the cluster, and DescribeConfigs on topics")


def _source(entry: Any) -> str:
    """topic / broker / default: where a topic's effective value comes from. The client
    hands the source over as a plain int (ConfigSource's value), not the enum."""
    source = entry.source
    value = source.value if isinstance(source, ConfigSource) else int(source)
    if value == ConfigSource.DYNAMIC_TOPIC_CONFIG.value:
        return SOURCE_TOPIC
    if value == ConfigSource.DEFAULT_CONFIG.value:
        return SOURCE_DEFAULT
    return SOURCE_BROKER


def _int(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _bool(value: str | None) -> bool | None:
    return None if value is None else value.strip().lower() == "true"


def _gone(exc: BaseException) -> bool:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(error, KafkaError) and error.code() in _GONE


def within(timeout: float, deadline: float | None) -> float:
    """A request's timeout: `timeout`, cut to what is left before `deadline` (monotonic
    seconds), so that an attempt of several requests ends by its deadline. Raises
    _TIMED_OUT once the deadline has passed."""
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "the poll's deadline passed"))
    return min(timeout, left)


def topic_configs(admin: Any, names: Iterable[str], timeout: float,
                  batch: int = 500, deadline: float | None = None) -> dict[str, dict[str, Any]]:
    """name -> the durability configs' effective values and sources. A topic deleted
    meanwhile is left out; any other failure (an ACL denying DescribeConfigs) raises,
    so the poll fails as a whole instead of auditing half the cluster as clean."""
    names = list(names)
    out: dict[str, dict[str, Any]] = {}
    for start in range(0, len(names), batch):
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in names[start:start + batch]]
        request = within(timeout, deadline)
        futures = admin.describe_configs(resources, request_timeout=request)
        for resource, future in futures.items():
            try:
                entries = future.result(timeout=request + 5)
            except KafkaException as exc:
                if _gone(exc):
                    continue
                raise
            min_isr, unclean = entries.get(MIN_ISR), entries.get(UNCLEAN)
            out[resource.name] = {
                "min_insync_replicas": None if min_isr is None else _int(min_isr.value),
                "min_insync_replicas_source": None if min_isr is None else _source(min_isr),
                "unclean_leader_election_enable":
                    None if unclean is None else _bool(unclean.value),
                "unclean_leader_election_source": None if unclean is None else _source(unclean),
            }
    return out


def _partitions(name: str, partitions: Mapping[int, Any]) -> tuple[PartitionInfo, ...]:
    return tuple(
        PartitionInfo(topic=name, partition=p.id, leader=p.leader if p.leader >= 0 else None,
                      replicas=tuple(p.replicas), isr=tuple(p.isrs))
        for p in sorted(partitions.values(), key=lambda p: p.id))


def _check_not_blind(operations: list[Any] | None) -> None:
    """Raise CLUSTER_AUTHORIZATION_FAILED when a principal that sees no topic may not
    Describe the cluster either: the monitor must say it cannot see rather than report an
    empty cluster as healthy.

    The broker lists the cluster's authorized operations only to a principal allowed to
    Describe it (any grant implying Describe, ALL or Alter, lists Describe too); to any
    other it sends none, which the client hands over as None. The error code is the
    poller's conclusion, not an error in the response: DescribeCluster itself needs no
    right.

    What it cannot tell: a principal allowed to Describe the cluster but no topic sees an
    empty cluster, and one that may Describe some topics but not all sees a smaller one;
    both look like a cluster that is so, and neither is flagged. The documented rights
    (docs/metadata.md) are Describe on the cluster and Describe and DescribeConfigs on
    every topic.
    """
    if AclOperation.DESCRIBE not in (operations or ()):
        raise KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, BLIND))


def endpoint(host: str, port: int) -> str:
    """host:port as bootstrap.servers takes it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def fetch_snapshot(admin: Any, cluster: str, polled_at: datetime, timeout: float = 10.0,
                   batch: int = 500, deadline: float | None = None) -> ClusterSnapshot:
    """The cluster as its Admin API describes it now. Raises KafkaException on failure.
    Each request waits `timeout` at most, and none past `deadline` (monotonic seconds).

    confluent-kafka's descriptions carry leader, replicas and ISR but neither the
    eligible leader replicas (KIP-966) nor the leader recovery state (KIP-704): those
    fields stay None (unknown), see docs/metadata.md.
    """
    # The Metadata request first: its response also names the broker the client sends
    # controller-bound requests to (DescribeConfigs), which KRaft picks among the live
    # brokers, so a controller cached from before a broker stopped is replaced first.
    listing = admin.list_topics(timeout=within(timeout, deadline))
    listed = {name: meta for name, meta in listing.topics.items() if meta.partitions}
    # Kafka leaves every topic the principal may not Describe out of the listing, without
    # an error: a principal with no ACL at all sees what looks like an empty cluster, and
    # the poll would succeed on it with nothing to audit. Only then is DescribeCluster
    # asked for the principal's rights on the cluster (a flag on the request the poll makes
    # anyway, so a poll that lists topics costs nothing more).
    blind = all(name.startswith(_INTERNAL_PREFIX) for name in listing.topics)
    request = within(timeout, deadline)
    described = admin.describe_cluster(include_authorized_operations=blind,
                                       request_timeout=request).result(timeout=request + 5)
    if blind:
        _check_not_blind(described.authorized_operations)
    brokers = {n.id: BrokerInfo(n.id, n.rack or None, endpoint=endpoint(n.host, n.port))
               for n in described.nodes}
    controller = described.controller.id if described.controller is not None else None
    configs = topic_configs(admin, sorted(listed), timeout, batch, deadline)
    topics = {
        name: TopicInfo(name=name, partitions=_partitions(name, listed[name].partitions),
                        **configs[name])
        for name in sorted(listed) if name in configs
    }
    return ClusterSnapshot(cluster=cluster, polled_at=polled_at, brokers=brokers,
                           topics=topics, controller=controller)
