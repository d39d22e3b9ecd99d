"""At most quality.max_brokers_per_cluster brokers per cluster: a record naming 100k
made-up brokers must not create 100k brokers' state (held windows, series, incidents)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from streaming.broker_admission import BrokerAdmission
from streaming.config import Config
from streaming.exporter import Exporter
from streaming.pipeline.batch import BatchProcessor
from streaming.schemas import decoded_arrow_schema
from tests.unit.test_open_windows import PackedBatch, as_bronze

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def samples(named: list[tuple[str, str]]) -> list[dict]:
    return [{"ts": START + timedelta(seconds=i), "cluster": cluster, "broker": broker,
             "metric": "UnderMinIsrPartitionCount", "attribute": "Value", "labels": [],
             "value": 0.0, "kind": "gauge"} for i, (cluster, broker) in enumerate(named)]


def decoded(named: list[tuple[str, str]], offset: int = 0) -> pa.Table:
    return pa.Table.from_pylist(as_bronze(samples(named), offset).to_pylist(),
                                schema=decoded_arrow_schema())


def test_new_brokers_past_the_cap_are_refused_per_cluster_and_replays_agree() -> None:
    admission = BrokerAdmission(3)
    first = decoded([("a", str(b)) for b in range(1, 6)] + [("b", "9"), ("a", "1")])
    kept, refused = admission(first)
    assert sorted(set(zip(kept["cluster"].to_pylist(), kept["broker"].to_pylist(),
                          strict=True))) == [("a", "1"), ("a", "2"), ("a", "3"), ("b", "9")]
    assert refused.schema == decoded_arrow_schema()
    assert refused["source_offset"].to_pylist() == [3, 4]  # one row per record
    assert all(r.startswith("too_many_brokers: 1 new broker(s) of cluster 'a'")
               for r in refused["reject_reason"].to_pylist())
    again_kept, again_refused = admission(first)  # Spark's replay of the batch
    assert again_kept.equals(kept) and again_refused.equals(refused)
    kept, refused = admission(decoded([("a", "2"), ("a", "6")], offset=10))
    assert kept["broker"].to_pylist() == ["2"] and refused["source_offset"].to_pylist() == [11]
    assert max(len(brokers) for brokers in admission.known.values()) == 3


def test_a_record_naming_100k_brokers_holds_only_the_cap(tmp_path: Path) -> None:
    config = Config()
    config.delta.path = str(tmp_path / "delta")
    config.quality.max_brokers_per_cluster = 2000
    exporter = Exporter(registry=CollectorRegistry())
    processor = BatchProcessor(config, exporter=exporter)
    flood = as_bronze(samples([("prod", f"b{i}") for i in range(100_000)]), 0)
    # one Kafka record: every sample carries the same offset
    flood = flood.set_column(flood.schema.get_field_index("source_offset"), "source_offset",
                             pa.array([7] * flood.num_rows, pa.int64()))
    processor(PackedBatch(flood), 0)
    processor.wait_for_writer()
    bronze = processor.tables["bronze"].read(columns=["broker"])
    assert len(set(bronze["broker"].to_pylist())) == 2000
    quarantine = processor.tables["quarantine"].read()
    assert quarantine["source_offset"].to_pylist() == [7]
    assert quarantine["reason"][0].as_py().startswith("too_many_brokers: 98000 new broker(s)")
    assert len(processor.admission.known["prod"]) == 2000
    assert exporter.registry.get_sample_value(
        "kafka_health_pipeline_quarantined_records_total", {"reason": "too_many_brokers"}) == 1


def test_cap_is_configured() -> None:
    assert Config().quality.max_brokers_per_cluster == 2000


def test_new_clusters_past_the_cap_are_refused_counted_and_warned_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = Config()
    config.delta.path = str(tmp_path / "delta")
    config.quality.max_clusters = 2
    exporter = Exporter(registry=CollectorRegistry())
    processor = BatchProcessor(config, exporter=exporter)
    # offsets 0-3: a, b admitted; c refused; offset 3 names c and a new broker of a
    processor(PackedBatch(decoded([("a", "1"), ("b", "1"), ("c", "1"), ("c", "2")])), 0)
    processor(PackedBatch(decoded([("a", "2"), ("d", "1"), ("b", "1")], offset=10)), 1)
    processor.wait_for_writer()
    bronze = processor.tables["bronze"].read(columns=["cluster", "source_offset"])
    assert sorted(zip(bronze["cluster"].to_pylist(), bronze["source_offset"].to_pylist(),
                      strict=True)) == [("a", 0), ("a", 10), ("b", 1), ("b", 12)]
    quarantine = processor.tables["quarantine"].read()
    assert sorted(quarantine["source_offset"].to_pylist()) == [2, 3, 11]
    assert all(r.startswith("too_many_clusters: 1 new cluster(s), 2 seen")
               for r in quarantine["reason"].to_pylist())
    assert exporter.registry.get_sample_value(
        "kafka_health_pipeline_quarantined_records_total", {"reason": "too_many_clusters"}) == 3
    assert set(processor.admission.known) == {"a", "b"}
    warnings = [r for r in caplog.records if "quality.max_clusters" in r.getMessage()]
    assert len(warnings) == 1


def test_a_record_refused_for_its_cluster_and_a_broker_is_one_quarantine_row() -> None:
    admission = BrokerAdmission(1, max_clusters=1)
    one_record = decoded([("a", "1"), ("a", "2"), ("b", "1")])
    one_record = one_record.set_column(
        one_record.schema.get_field_index("source_offset"), "source_offset",
        pa.array([5] * 3, pa.int64()))
    kept, refused = admission(one_record)
    assert kept["broker"].to_pylist() == ["1"] and kept["cluster"].to_pylist() == ["a"]
    assert refused.schema == decoded_arrow_schema()
    assert refused["source_offset"].to_pylist() == [5]
    assert refused["reject_reason"][0].as_py().startswith("too_many_clusters")
    again_kept, again_refused = admission(one_record)  # Spark's replay of the batch
    assert again_kept.equals(kept) and again_refused.equals(refused)


def test_cluster_cap_is_configured() -> None:
    assert Config().quality.max_clusters == 1000
