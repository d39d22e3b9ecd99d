"""The metadata gauges on the real Exporter: bounded, replaced per cluster, zeros visible."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry

from streaming.exporter import Exporter
from streaming.metadata.audit import audit
from streaming.metadata.export import export_causes, export_findings, export_health, export_poll
from streaming.metadata.health import PollerHealth
from streaming.metadata.rules import RULES, load_rules
from tests.unit.metadata_builders import at, snapshot, topic


def series(exporter: Exporter, name: str) -> dict[tuple, float]:
    out = {}
    for family in exporter.gauges[name].collect():
        for s in family.samples:
            out[tuple(s.labels[n] for n in exporter.labelnames[name])] = s.value
    return out


def exporter() -> Exporter:
    return Exporter(CollectorRegistry())


def test_health_up_down_and_error_class() -> None:
    e = exporter()
    export_health(e, PollerHealth("prod"))  # before the first attempt: nothing
    assert series(e, "kafka_health_metadata_up") == {}
    up = PollerHealth("prod", up=True, last_attempt_at=at(0), last_success_at=at(0), polls=1)
    export_health(e, up)
    assert series(e, "kafka_health_metadata_up") == {("prod",): 1.0}
    assert series(e, "kafka_health_metadata_last_success_timestamp_seconds") == {
        ("prod",): at(0).timestamp()}
    down = replace(up, up=False, error="unauthorized", last_attempt_at=at(30))
    export_health(e, down)
    assert series(e, "kafka_health_metadata_up") == {("prod",): 0.0}
    assert series(e, "kafka_health_metadata_error") == {("prod", "unauthorized"): 1.0}
    export_health(e, replace(down, error="unreachable"))
    assert series(e, "kafka_health_metadata_error") == {("prod", "unreachable"): 1.0}
    export_health(e, replace(up, last_success_at=at(60)))
    assert series(e, "kafka_health_metadata_error") == {}
    assert series(e, "kafka_health_metadata_last_success_timestamp_seconds") == {
        ("prod",): at(60).timestamp()}


def test_findings_per_rule_with_zeros() -> None:
    e = exporter()
    snap = snapshot(topic("a", [[1]], min_isr=2), topic("b", [[1]], min_isr=1))
    export_findings(e, "prod", audit(snap, load_rules()))
    got = series(e, "kafka_health_durability_audit_findings")
    assert len(got) == len(RULES)
    assert got[("prod", "replication_factor_below_minimum")] == 2.0
    assert got[("prod", "min_isr_above_replication_factor")] == 1.0
    assert got[("prod", "unclean_leader_election_enabled")] == 0.0


def test_cause_brokers_are_the_top_n_and_replaced() -> None:
    e = exporter()
    troubled = snapshot(topic("t", [[1, 2, 3]] * 4, isr={i: [1] for i in range(4)}),
                        topic("u", [[1, 2, 3]], isr={0: [1, 2]}))
    export_causes(e, troubled, top_n=1)
    assert series(e, "kafka_health_metadata_cause_broker_partitions") == {
        ("prod", "under_min_isr", "2"): 4.0, ("prod", "under_replicated", "3"): 1.0}
    export_causes(e, snapshot(topic("t", [[1, 2, 3]] * 4), cluster="other"))
    export_causes(e, snapshot(topic("t", [[1, 2, 3]] * 4)))  # healed: its series go
    assert series(e, "kafka_health_metadata_cause_broker_partitions") == {}


def test_a_failed_poll_keeps_findings_and_causes() -> None:
    e = exporter()
    snap = snapshot(topic("a", [[1, 2]], min_isr=2, isr={0: [1]}))
    up = PollerHealth("prod", up=True, last_success_at=at(0))
    export_poll(e, up, snap, audit(snap, load_rules()))
    before = (series(e, "kafka_health_durability_audit_findings"),
              series(e, "kafka_health_metadata_cause_broker_partitions"))
    assert before[1] == {("prod", "under_min_isr", "2"): 1.0}
    export_poll(e, replace(up, up=False, error="timeout"), None, None)
    assert (series(e, "kafka_health_durability_audit_findings"),
            series(e, "kafka_health_metadata_cause_broker_partitions")) == before
    assert series(e, "kafka_health_metadata_up") == {("prod",): 0.0}


def test_clusters_do_not_touch_each_other() -> None:
    e = exporter()
    export_findings(e, "east", [])
    export_findings(e, "west", [{"rule": "rack_sizes_unequal"}])
    export_findings(e, "east", [])
    got = series(e, "kafka_health_durability_audit_findings")
    assert got[("west", "rack_sizes_unequal")] == 1.0 and len(got) == 2 * len(RULES)
