"""snapshot_changes: the cluster_metadata rows between two polls."""

from __future__ import annotations

from dataclasses import replace

import pytest

from streaming.metadata.changes import schema, snapshot_changes
from streaming.metadata.model import with_down_brokers
from tests.unit.metadata_builders import at, snapshot, topic


def _rows(table) -> list[tuple]:
    return [(r["entity"], r["entity_id"], r["change"], r["changed_fields"])
            for r in table.to_pylist()]


def test_first_poll_is_a_baseline_of_every_entity() -> None:
    snap = snapshot(topic("orders", [[1, 2, 3], [2, 3, 1]]), brokers={1: "a", 2: "b", 3: "c"})
    table = snapshot_changes(None, snap, at(0))
    assert table.schema == schema()
    assert _rows(table) == [
        ("broker", "1", "baseline", None), ("broker", "2", "baseline", None),
        ("broker", "3", "baseline", None), ("topic", "orders", "baseline", None),
        ("partition", "orders/0", "baseline", None), ("partition", "orders/1", "baseline", None)]
    rows = table.to_pylist()
    assert rows[0]["rack"] == "a" and rows[0]["live"] is True
    assert {k: rows[3][k] for k in ("replication_factor", "partition_count",
                                    "min_insync_replicas", "effective_min_isr",
                                    "unclean_leader_election_enable")} == {
        "replication_factor": 3, "partition_count": 2, "min_insync_replicas": 2,
        "effective_min_isr": 2, "unclean_leader_election_enable": False}
    assert rows[5]["leader"] == 2 and rows[5]["replicas"] == [2, 3, 1]
    assert rows[5]["isr"] == [2, 3, 1] and rows[5]["elr"] is None
    assert {r["cluster"] for r in rows} == {"prod"} and {r["polled_at"] for r in rows} == {at(0)}


def test_nothing_changed_writes_nothing() -> None:
    snap = snapshot(topic("orders", [[1, 2, 3]]))
    assert snapshot_changes(snap, snap, at(30)).num_rows == 0


def test_isr_shrink_and_leader_move_are_one_changed_row() -> None:
    before = snapshot(topic("orders", [[1, 2, 3]]))
    after = snapshot(topic("orders", [[1, 2, 3]], isr={0: [2, 3]}, leaders={0: 2}))
    [row] = snapshot_changes(before, after, at(30)).to_pylist()
    assert (row["entity_id"], row["change"], row["changed_fields"]) == ("orders/0", "changed",
                                                                         "leader,isr")
    assert (row["leader"], row["isr"], row["replicas"]) == (2, [2, 3], [1, 2, 3])


def test_offline_partition_has_no_leader() -> None:
    after = snapshot(topic("orders", [[3]], isr={0: [3]}, leaders={0: None}))
    [row] = snapshot_changes(snapshot(topic("orders", [[3]])), after, at(30)).to_pylist()
    assert row["changed_fields"] == "leader" and row["leader"] is None


def test_topic_config_change() -> None:
    before = snapshot(topic("orders", [[1, 2, 3]], min_isr=1))
    after = snapshot(replace(topic("orders", [[1, 2, 3]], min_isr=2),
                             min_insync_replicas_source="topic"))
    [row] = snapshot_changes(before, after, at(30)).to_pylist()
    assert row["entity"] == "topic"
    assert row["changed_fields"] == "min_insync_replicas,min_insync_replicas_source,effective_min_isr"


def test_added_and_removed_topics_and_partitions() -> None:
    before = snapshot(topic("old", [[1]]), topic("orders", [[1, 2, 3]]))
    after = snapshot(topic("orders", [[1, 2, 3], [2, 3, 1]]), topic("new", [[2]]))
    assert _rows(snapshot_changes(before, after, at(30))) == [
        ("topic", "new", "added", None), ("topic", "old", "removed", None),
        ("topic", "orders", "changed", "partition_count"),
        ("partition", "new/0", "added", None), ("partition", "old/0", "removed", None),
        ("partition", "orders/1", "added", None)]
    removed = [r for r in snapshot_changes(before, after, at(30)).to_pylist()
               if r["change"] == "removed"]
    assert [(r["topic"], r["partition"], r["leader"], r["replicas"]) for r in removed] == [
        ("old", None, None, None), ("old", 0, None, None)]


def test_a_stopped_broker_stays_a_member_marked_down() -> None:
    racks = {1: "a", 2: "b", 3: "c"}
    before = snapshot(topic("orders", [[1, 2, 3]]), brokers=racks)
    listed = snapshot(topic("orders", [[1, 2, 3]], isr={0: [1, 2]}), brokers={1: "a", 2: "b"})
    after = with_down_brokers(listed, before.brokers)
    rows = snapshot_changes(before, after, at(30)).to_pylist()
    assert [(r["entity_id"], r["changed_fields"], r["rack"], r["live"]) for r in rows] == [
        ("3", "live", "c", False), ("orders/0", "isr", None, None)]


def test_snapshots_of_two_clusters_are_refused() -> None:
    with pytest.raises(ValueError, match="two clusters"):
        snapshot_changes(snapshot(cluster="a"), snapshot(cluster="b"), at(0))
