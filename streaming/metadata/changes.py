"""Rows for the `cluster_metadata` table: what changed between two polls, not a copy of
every poll.

A cluster of 50k partitions polled every 30 s would write 144 M mostly identical rows a
day; its changes are a few rows an hour. The first poll after a start has nothing to
compare with and writes each entity once (`baseline`), so the table alone rebuilds the
state at any time: the newest baseline before it, then the changes after it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import pyarrow as pa

from streaming.metadata.model import BrokerInfo, ClusterSnapshot, PartitionInfo, TopicInfo
from streaming.schemas import arrow_schema

TABLE = "cluster_metadata"
BASELINE, ADDED, CHANGED, REMOVED = "baseline", "added", "changed", "removed"

# The value columns of each entity, in the order `changed_fields` lists them.
BROKER_FIELDS = ("rack", "live")
TOPIC_FIELDS = ("replication_factor", "partition_count", "min_insync_replicas",
                "min_insync_replicas_source", "effective_min_isr",
                "unclean_leader_election_enable", "unclean_leader_election_source")
PARTITION_FIELDS = ("leader", "replicas", "isr", "elr", "last_known_elr",
                    "leader_recovery_state")


def schema() -> pa.Schema:
    """The table's Arrow schema (metrics_schemas/tables.yaml)."""
    return arrow_schema(TABLE)


def _broker(broker: BrokerInfo) -> tuple[tuple[str, str], dict[str, Any]]:
    return ("broker", str(broker.id)), {"broker": broker.id, "rack": broker.rack,
                                         "live": broker.live}


def _topic(topic: TopicInfo) -> tuple[tuple[str, str], dict[str, Any]]:
    return ("topic", topic.name), {
        "topic": topic.name,
        "replication_factor": topic.replication_factor,
        "partition_count": len(topic.partitions),
        "min_insync_replicas": topic.min_insync_replicas,
        "min_insync_replicas_source": topic.min_insync_replicas_source,
        "effective_min_isr": topic.effective_min_isr,
        "unclean_leader_election_enable": topic.unclean_leader_election_enable,
        "unclean_leader_election_source": topic.unclean_leader_election_source,
    }


def _list(values: tuple[int, ...] | None) -> list[int] | None:
    return None if values is None else list(values)


def _partition(p: PartitionInfo) -> tuple[tuple[str, str], dict[str, Any]]:
    return ("partition", f"{p.topic}/{p.partition}"), {
        "topic": p.topic, "partition": p.partition, "leader": p.leader,
        "replicas": list(p.replicas), "isr": list(p.isr), "elr": _list(p.elr),
        "last_known_elr": _list(p.last_known_elr),
        "leader_recovery_state": p.leader_recovery_state,
    }


def entities(snapshot: ClusterSnapshot) -> dict[tuple[str, str], dict[str, Any]]:
    """(entity, entity_id) -> the entity's identity and value columns."""
    out = dict(_broker(b) for b in snapshot.brokers.values())
    out.update(_topic(t) for t in snapshot.topics.values())
    out.update(_partition(p) for _, p in snapshot.partitions())
    return out


FIELDS = {"broker": BROKER_FIELDS, "topic": TOPIC_FIELDS, "partition": PARTITION_FIELDS}
IDENTITY = {"broker": ("broker",), "topic": ("topic",), "partition": ("topic", "partition")}


def _rows(previous: Mapping[tuple[str, str], dict[str, Any]] | None,
          current: Mapping[tuple[str, str], dict[str, Any]]) -> Iterator[dict[str, Any]]:
    if previous is None:
        for key, values in current.items():
            yield {"entity": key[0], "entity_id": key[1], "change": BASELINE, **values}
        return
    for key, values in current.items():
        before = previous.get(key)
        if before is None:
            yield {"entity": key[0], "entity_id": key[1], "change": ADDED, **values}
            continue
        changed = [f for f in FIELDS[key[0]] if before.get(f) != values.get(f)]
        if changed:
            yield {"entity": key[0], "entity_id": key[1], "change": CHANGED,
                   "changed_fields": ",".join(changed), **values}
    for key, before in previous.items():
        if key not in current:
            identity = {name: before[name] for name in IDENTITY[key[0]]}
            yield {"entity": key[0], "entity_id": key[1], "change": REMOVED, **identity}


_ORDER = {"broker": 0, "topic": 1, "partition": 2}


def snapshot_changes(previous: ClusterSnapshot | None, current: ClusterSnapshot,
                     polled_at: datetime) -> pa.Table:
    """The `cluster_metadata` rows from `previous` to `current` (every entity as
    `baseline` when there is no previous), stamped `polled_at`: brokers, then topics,
    then partitions, each by id. Unchanged entities write nothing.

    `previous` must be of the same cluster: the rows carry `current.cluster`, and a
    snapshot of another cluster would read as every entity removed and added.
    """
    if previous is not None and previous.cluster != current.cluster:
        raise ValueError(f"snapshots of two clusters: {previous.cluster!r} and "
                         f"{current.cluster!r}")
    rows = sorted(_rows(None if previous is None else entities(previous), entities(current)),
                  key=lambda r: (_ORDER[r["entity"]], r.get("topic") or "",
                                 r.get("partition") or 0, r.get("broker") or 0))
    target = schema()
    for row in rows:
        row["cluster"] = current.cluster
        row["polled_at"] = polled_at
    return pa.Table.from_pylist(rows, schema=target)
