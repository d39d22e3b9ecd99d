"""At most quality.max_brokers_per_cluster brokers per cluster: a record naming 100k
made-up brokers must not create 100k brokers' state (held windows, series, incidents)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from prometheus_client import CollectorRegistry

from streaming.broker_admission import BrokerAdmission
from streaming.config import Config
from streaming.exporter import Exporter
from streaming.job import BatchProcessor
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
    processor.wait_deferred()
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
