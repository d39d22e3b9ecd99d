"""PollHandler: health always, rows when the poll succeeded, gauges even when a write fails."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from streaming.exporter import Exporter
from streaming.metadata.handler import PollHandler
from streaming.metadata.health import PollerHealth
from streaming.metadata.poller import PollResult
from streaming.metadata.rules import load_rules
from streaming.metadata.store import MetadataStore
from tests.unit.metadata_builders import at, snapshot, topic


def gauge(exporter: Exporter, name: str) -> dict[tuple, float]:
    return {tuple(s.labels.values()): s.value for family in exporter.gauges[name].collect()
            for s in family.samples}


def ok(snap) -> PollResult:  # noqa: ANN001
    return PollResult("prod", snap.polled_at, snap, None,
                      PollerHealth("prod", up=True, last_success_at=snap.polled_at))


def test_a_poll_writes_the_tables_and_the_gauges(tmp_path: Path) -> None:
    exporter = Exporter(CollectorRegistry())
    handler = PollHandler(MetadataStore(str(tmp_path), "app"), exporter, load_rules())
    handler(ok(snapshot(topic("t", [[1, 2, 3]], min_isr=1, isr={0: [1]}))))
    assert (tmp_path / "cluster_metadata").is_dir() and (tmp_path / "durability_audit").is_dir()
    assert gauge(exporter, "kafka_health_metadata_up") == {("prod",): 1.0}
    assert gauge(exporter, "kafka_health_durability_audit_findings")[
        ("prod", "min_isr_below_minimum")] == 1.0
    assert gauge(exporter, "kafka_health_metadata_cause_broker_partitions") == {
        ("prod", "under_replicated", "2"): 1.0, ("prod", "under_replicated", "3"): 1.0}


def test_a_failing_write_still_exports(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the tables should go")
    exporter = Exporter(CollectorRegistry())
    handler = PollHandler(MetadataStore(str(blocked), "app"), exporter, load_rules())
    handler(ok(snapshot(topic("t", [[1]], min_isr=1))))
    assert handler.write_failures == 1
    assert gauge(exporter, "kafka_health_durability_audit_findings")[
        ("prod", "replication_factor_below_minimum")] == 1.0


def test_a_failed_poll_sets_health_only() -> None:
    exporter = Exporter(CollectorRegistry())
    failed = PollResult("prod", at(0), None, None, PollerHealth("prod", up=False,
                                                                  error="timeout"))
    PollHandler(None, exporter, load_rules())(failed)
    assert gauge(exporter, "kafka_health_metadata_error") == {("prod", "timeout"): 1.0}
    assert gauge(exporter, "kafka_health_durability_audit_findings") == {}
