"""Consumer groups' committed offsets against their partitions' log start and end, read
through the Admin API of one watched cluster (the judging is streaming/clients/
group_status.py).

Bounded: groups are chosen by `include` and `exclude` patterns (full matches), and at most
`max_partitions` group-partitions are read per poll, the groups in name order; the ones
left out are counted and said, never silently dropped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec, ResourceType

from streaming.clients.group_status import PartitionOffsets

LOG = logging.getLogger("kafka_health.clients")


@dataclass(frozen=True)
class GroupSettings:
    """Which groups to read (the keys of the job's `consumer_groups` section)."""

    include: Sequence[str] = (".*",)
    # The project's own clients commit nothing worth judging.
    exclude: Sequence[str] = ("kafka-health-.*",)
    max_partitions: int = 10_000
    window_polls: int = 10

    def chosen(self, groups: Iterable[str]) -> list[str]:
        keep = [re.compile(p) for p in self.include]
        drop = [re.compile(p) for p in self.exclude]
        return sorted(g for g in groups if any(p.fullmatch(g) for p in keep)
                      and not any(p.fullmatch(g) for p in drop))


@dataclass
class GroupPoll:
    """What one poll read: the offsets, each group's state, the topics that are only
    compacted, and the group-partitions left out by the cap."""

    offsets: list[PartitionOffsets] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)
    compacted: set[str] = field(default_factory=set)
    left_out: int = 0


def _result(future: Future[Any], timeout: float) -> Any:
    return future.result(timeout=timeout + 5)


def read_groups(admin: Any, settings: GroupSettings, timeout: float,
                cleanup_policies: dict[str, str]) -> GroupPoll:
    """One poll of every chosen group. `cleanup_policies` caches each topic's
    cleanup.policy across polls (read for topics not in it yet). Raises KafkaException
    when the cluster refuses or does not answer."""
    listing = _result(admin.list_consumer_groups(request_timeout=timeout), timeout)
    if listing.errors:
        # a broker that did not answer the listing: its coordinators' groups are missing
        # from this poll, so the read fails rather than judge a part as the whole
        raise KafkaException(listing.errors[0])
    states = {g.group_id: (g.state.name if g.state is not None else "UNKNOWN")
              for g in listing.valid}
    poll = GroupPoll(states={g: states[g] for g in settings.chosen(states)})
    # one group per request (the Admin API's ListConsumerGroupOffsets as the client
    # offers it), all in flight at once
    futures = {group: admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=timeout)[group]
        for group in poll.states}
    committed: list[tuple[str, TopicPartition]] = []
    for group, future in futures.items():
        for tp in _result(future, timeout).topic_partitions or []:
            if tp.error is None:
                committed.append((group, tp))
    committed.sort(key=lambda gt: (gt[0], gt[1].topic, gt[1].partition))
    poll.left_out = max(0, len(committed) - settings.max_partitions)
    committed = committed[:settings.max_partitions]
    partitions = sorted({(tp.topic, tp.partition) for _, tp in committed})
    starts = _offsets(admin, partitions, OffsetSpec.earliest(), timeout)
    ends = _offsets(admin, partitions, OffsetSpec.latest(), timeout)
    _learn_policies(admin, {t for t, _ in partitions} - set(cleanup_policies), timeout,
                    cleanup_policies)
    # a topic whose policy is not known yet is not judged for loss until it is
    poll.compacted = {t for t, _ in partitions if "delete" not in cleanup_policies.get(t, "")}
    for group, tp in committed:
        key = (tp.topic, tp.partition)
        if key in starts and key in ends:
            poll.offsets.append(PartitionOffsets(
                group, tp.topic, tp.partition, tp.offset if tp.offset >= 0 else None,
                starts[key], ends[key]))
    return poll


def _offsets(admin: Any, partitions: list[tuple[str, int]], spec: OffsetSpec,
             timeout: float) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions},
                                 request_timeout=timeout)
    found: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = _result(future, timeout).offset
        except Exception as exc:  # a partition without a leader now: judged next poll
            LOG.debug("groups: no offset for %s[%d]: %s", tp.topic, tp.partition, exc)
    return found


def _learn_policies(admin: Any, topics: set[str], timeout: float,
                    policies: dict[str, str]) -> None:
    if not topics:
        return
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                     request_timeout=timeout)
    for resource, future in futures.items():
        try:
            entries = _result(future, timeout)
            policies[resource.name] = entries["cleanup.policy"].value or "delete"
        except Exception as exc:  # not known yet: asked again next poll
            LOG.debug("groups: no cleanup.policy for %s: %s", resource.name, exc)
