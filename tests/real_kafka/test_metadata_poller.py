"""The Admin API poller against a real KRaft cluster of its own (node 1 broker+controller,
brokers 2 and 3 broker-only, so stopping both keeps the controller quorum and ISRs can
shrink), with racks az-a (1, 2) and az-b (3).

Topics planted with durability faults give exactly the expected audit findings in the
`durability_audit` table; fixing their configs with incrementalAlterConfigs (and deleting
the topics whose replication factor cannot be fixed by config) resolves those rows;
stopping brokers 2 and 3 puts every partition under min ISR on leader 1 and takes a
broker-3-only partition offline, and the cause ranking names them; an unreachable
bootstrap is reported, never raised. Every wait has a deadline.

This module's cluster is not the session's watched cluster: it runs no agents and no
Spark, and is stopped at the end of the module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from deltalake import DeltaTable
from prometheus_client import CollectorRegistry

from streaming.exporter import Exporter
from streaming.metadata import (
    MetadataPoller,
    MetadataStore,
    PollerSettings,
    PollResult,
    Recorded,
    export_poll,
    rank_causes,
)
from streaming.metadata.health import UNREACHABLE
from streaming.testbed.kafka import KafkaCluster, create_topic, free_port
from tests.conftest import wait_for

CLUSTER = "metadata-it"
RACKS = {1: "az-a", 2: "az-a", 3: "az-b"}
SETTINGS = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
# topic -> (replica assignment, topic configs); each fault alone where it can be
PLANTED = {
    "healthy": ([[1, 2, 3], [2, 3, 1], [3, 1, 2]], {}),
    "capped": ([[1, 3]], {"min.insync.replicas": "3"}),         # min ISR 3 on RF 2
    "single": ([[3]], {}),                                       # RF 1, cluster min ISR 2
    "unclean": ([[1, 2, 3]], {"unclean.leader.election.enable": "true"}),
    "lax": ([[2, 3, 1]], {"min.insync.replicas": "1"}),          # min ISR 1 on RF 3
    "samerack": ([[1, 2]], {}),                                  # RF 2 on brokers of az-a
}
EXPECTED = {
    ("rack_sizes_unequal", None, None),
    ("min_isr_above_replication_factor", "capped", None),
    ("replication_factor_below_minimum", "capped", None),
    ("min_isr_above_replication_factor", "single", None),
    ("replication_factor_below_minimum", "single", None),
    ("unclean_leader_election_enabled", "unclean", None),
    ("min_isr_below_minimum", "lax", None),
    ("replicas_share_rack", "samerack", 0),
    ("replication_factor_below_minimum", "samerack", None),
}
# incrementalAlterConfigs that fix what config can fix
FIXES = {
    "capped": [("min.insync.replicas", "2", AlterConfigOpType.SET)],
    "single": [("min.insync.replicas", "1", AlterConfigOpType.SET)],
    "unclean": [("unclean.leader.election.enable", None, AlterConfigOpType.DELETE)],
    "lax": [("min.insync.replicas", "2", AlterConfigOpType.SET)],
}
FIXED = {("min_isr_above_replication_factor", "capped", None),
         ("min_isr_above_replication_factor", "single", None),
         ("unclean_leader_election_enabled", "unclean", None),
         ("min_isr_below_minimum", "lax", None)}
DELETED = ("capped", "single", "samerack")  # their replication factor is the fault


def _with_rack(node: Any, rack: str) -> None:
    """The test bed gives every node the same settings; broker.rack is per node."""
    write = node.write_config
    node.write_config = lambda voters, settings: write(voters, {**settings, "broker.rack": rack})


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    bed = KafkaCluster(size=1, broker_only=2, agents=False, name="metadata", settings=SETTINGS)
    for node in bed.nodes:
        _with_rack(node, RACKS[node.node_id])
    with bed:
        for name, (assignment, config) in PLANTED.items():
            create_topic(bed.bootstrap, name, config=config, assignment=assignment)
        yield bed


class Watch:
    """The poller and the store of the test, polled synchronously: each `poll()` is one
    poll of the Admin API and one write of its rows."""

    def __init__(self, bootstrap: str, root: Path) -> None:
        self.poller = MetadataPoller(CLUSTER, {"bootstrap.servers": bootstrap},
                                     PollerSettings(interval_seconds=1, timeout_seconds=5))
        self.store = MetadataStore(str(root), "it")
        self.root = root
        self.result: PollResult | None = None
        self.recorded: Recorded | None = None

    def poll(self) -> PollResult:
        self.result = self.poller.poll_once()
        assert self.result.snapshot is not None, f"poll failed: {self.result.health}"
        self.recorded = self.store.record(self.result.snapshot)
        return self.result

    def until(self, condition: Callable[[], Any], what: str, timeout: float = 60) -> Any:
        def attempt() -> Any:
            self.poll()
            return condition()
        return wait_for(attempt, timeout, what, every=0.5)

    def rows(self, table: str) -> list[dict[str, Any]]:
        return DeltaTable(str(self.root / table)).to_pyarrow_table().to_pylist()

    def open_keys(self) -> set[tuple]:
        return {(r["rule"], r["topic"], r["partition"]) for r in self.rows("durability_audit")
                if r["resolved_at"] is None}


def _alter(admin: AdminClient, fixes: dict[str, list[tuple]]) -> None:
    resources = [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in changes])
        for topic, changes in fixes.items()]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(timeout=30)


def test_audit_finds_exactly_the_planted_faults_and_clears_them(cluster: KafkaCluster,
                                                                tmp_path: Path) -> None:
    watch = Watch(cluster.bootstrap, tmp_path)
    watch.until(lambda: watch.open_keys() == EXPECTED, "exactly the planted findings")
    first = {(r["rule"], r["topic"], r["partition"]): r for r in watch.rows("durability_audit")}
    assert set(first) == EXPECTED  # one row per finding, none resolved

    snap = watch.result.snapshot
    assert {b.id: (b.rack, b.live) for b in snap.brokers.values()} == {
        b: (rack, True) for b, rack in RACKS.items()}
    assert set(snap.topics) == set(PLANTED)
    capped, single = snap.topics["capped"], snap.topics["single"]
    assert (capped.replication_factor, capped.min_insync_replicas,
            capped.min_insync_replicas_source, capped.effective_min_isr) == (2, 3, "topic", 2)
    assert (single.min_insync_replicas, single.min_insync_replicas_source,
            single.effective_min_isr) == (2, "broker", 1)
    assert snap.topics["unclean"].unclean_leader_election_source == "topic"
    assert snap.topics["healthy"].unclean_leader_election_enable is False
    # confluent-kafka exposes neither ELR nor the leader recovery state: unknown, not empty
    assert all((p.elr, p.last_known_elr, p.leader_recovery_state) == (None, None, None)
               for _, p in snap.partitions())
    cap = first[("min_isr_above_replication_factor", "single", None)]
    assert (cap["min_insync_replicas"], cap["effective_min_isr"]) == (2, 1)
    assert "the effective floor is 1" in cap["detail"]
    assert "(set on the topic)" in first[("unclean_leader_election_enabled", "unclean",
                                          None)]["detail"]
    assert dict(first[("replicas_share_rack", "samerack", 0)]["evidence"]) == {
        "1": "az-a", "2": "az-a"}
    assert dict(first[("rack_sizes_unequal", None, None)]["evidence"]) == {
        "az-a": "2", "az-b": "1"}
    baseline = watch.rows("cluster_metadata")
    assert {r["change"] for r in baseline} == {"baseline"}
    assert len(baseline) == 3 + len(PLANTED) + sum(len(a) for a, _ in PLANTED.values())

    # fix what config can fix: those rows resolve, in place
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    _alter(admin, FIXES)
    watch.until(lambda: watch.open_keys() == EXPECTED - FIXED, "the fixed findings resolved")
    after = {(r["rule"], r["topic"], r["partition"]): r for r in watch.rows("durability_audit")}
    assert set(after) == EXPECTED
    for key in FIXED:
        assert after[key]["resolved_at"] is not None, key
        assert after[key]["finding_id"] == first[key]["finding_id"], key
    changed = [r for r in watch.rows("cluster_metadata") if r["change"] == "changed"]
    assert {r["entity_id"] for r in changed} >= set(FIXES)

    # replication factor is not a config: deleting the topics resolves theirs
    for future in admin.delete_topics(list(DELETED)).values():
        future.result(timeout=30)
    watch.until(lambda: watch.open_keys() == {("rack_sizes_unequal", None, None)},
                "the deleted topics' findings resolved")
    removed = {r["entity_id"] for r in watch.rows("cluster_metadata") if r["change"] == "removed"}
    assert removed >= set(DELETED) | {f"{t}/0" for t in DELETED}


def test_stopped_brokers_are_named_as_the_cause(cluster: KafkaCluster, tmp_path: Path) -> None:
    create_topic(cluster.bootstrap, "lonely", config={"min.insync.replicas": "1"},
                 assignment=[[3]])
    watch = Watch(cluster.bootstrap, tmp_path)
    watch.until(lambda: "lonely" in watch.result.snapshot.topics, "the topic on broker 3")
    assert rank_causes(watch.result.snapshot) == []
    rf3 = sum(len(t.partitions) for t in watch.result.snapshot.topics.values()
              if t.replication_factor == 3)
    started = time.monotonic()
    for node_id in (3, 2):
        cluster.node(node_id).stop()

    def named() -> Any:
        causes = {(c.kind, c.leader): c for c in rank_causes(watch.result.snapshot)}
        return causes if set(causes) == {("offline", None), ("under_min_isr", 1)} else None

    causes = watch.until(named, "brokers 2 and 3 named as the cause", timeout=90)
    under = causes[("under_min_isr", 1)]
    assert (under.partitions, under.brokers) == (rf3, ((2, rf3), (3, rf3)))
    assert under.sentence == (f"{rf3} partitions under min ISR on leader 1: brokers 2 and 3 "
                              "out of ISR")
    offline = causes[("offline", None)]
    assert offline.brokers == ((3, 1),)
    assert offline.sentence == "1 partition offline (no leader): broker 3 unavailable"
    print(f"causes named {time.monotonic() - started:.1f}s after the stops: "
          f"{under.sentence}; {offline.sentence}")

    # the stopped brokers stay members with their racks: the rack findings hold
    snap = watch.result.snapshot
    assert {b.id: (b.rack, b.live) for b in snap.brokers.values()} == {
        1: ("az-a", True), 2: ("az-a", False), 3: ("az-b", False)}
    assert ("rack_sizes_unequal", None, None) in watch.open_keys()

    exporter = Exporter(CollectorRegistry())
    export_poll(exporter, watch.result.health, snap, watch.recorded.findings)
    assert _series(exporter, "kafka_health_metadata_cause_broker_partitions") == {
        (CLUSTER, "under_min_isr", "2"): rf3, (CLUSTER, "under_min_isr", "3"): rf3,
        (CLUSTER, "offline", "3"): 1.0}


def test_an_unreachable_bootstrap_is_reported_not_raised() -> None:
    results: list[PollResult] = []
    poller = MetadataPoller("nowhere", {"bootstrap.servers": f"127.0.0.1:{free_port()}"},
                            PollerSettings(interval_seconds=0.5, timeout_seconds=2),
                            on_poll=results.append)
    first = poller.poll_once()
    assert (first.snapshot, first.health.up, first.health.error) == (None, False, UNREACHABLE)
    poller.start()
    try:
        wait_for(lambda: len(results) >= 3, 30, "the thread polling on")
    finally:
        poller.stop()
    assert all(r.health.up is False and r.health.error == UNREACHABLE for r in results)
    assert poller.health.consecutive_failures == len(results)
    exporter = Exporter(CollectorRegistry())
    export_poll(exporter, poller.health, None, None)
    assert _series(exporter, "kafka_health_metadata_up") == {("nowhere",): 0.0}
    assert _series(exporter, "kafka_health_metadata_error") == {("nowhere", UNREACHABLE): 1.0}


def _series(exporter: Exporter, name: str) -> dict[tuple, float]:
    return {tuple(s.labels[n] for n in exporter.labelnames[name]): s.value
            for family in exporter.gauges[name].collect() for s in family.samples}
