"""A batch whose samples make a driver stage raise is not replayed forever: on the attempt
after the failure its poison records are found, quarantined once as poison_record, and
the rest of the batch (and later batches) flow. The processor is driven as the job's
foreachBatch and a restarted job would drive it, without Spark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from streaming import poison
from streaming.config import Config
from streaming.exporter import Exporter
from streaming.failpoints import InjectedPoison
from streaming.pipeline.batch import BatchProcessor
from streaming.pipeline.recovery import PendingMarker
from tests.unit.test_open_windows import PackedBatch, as_bronze

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
POISON = 666.0


@pytest.fixture(autouse=True)
def armed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_HEALTH_POISON_VALUE", str(POISON))


def batch(offset: int, values: list[float]) -> pa.Table:
    """One sample per record, a broker per record, at offsets offset.. of topic m."""
    return as_bronze([{"ts": START + timedelta(seconds=offset + i), "cluster": "prod",
                       "broker": str(i % 3), "metric": "UnderMinIsrPartitionCount",
                       "attribute": "Value", "labels": [], "value": value, "kind": "gauge"}
                      for i, value in enumerate(values)], offset)


def processor(tmp_path: Path, deferred: bool, exporter: Exporter | None = None
              ) -> BatchProcessor:
    config = Config()
    config.delta.path = str(tmp_path / "delta")
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir(exist_ok=True)
    return BatchProcessor(config, exporter, app_id="app",
                          pending=PendingMarker(checkpoint / "pending.json") if deferred else None,
                          failed_batch=checkpoint / poison.FAILED_BATCH)


def offsets(p: BatchProcessor, table: str) -> list[int]:
    return sorted(p.tables[table].read(columns=["source_offset"])["source_offset"].to_pylist())


def test_a_replayed_poison_batch_quarantines_its_poison_record_once_and_goes_on(
        tmp_path: Path) -> None:
    exporter = Exporter(registry=CollectorRegistry())
    p = processor(tmp_path, deferred=False, exporter=exporter)
    p(PackedBatch(batch(0, [1.0, 2.0])), 0)
    poisoned = PackedBatch(batch(10, [1.0, 2.0, 3.0, POISON, 4.0, 5.0, 6.0]))
    with pytest.raises(InjectedPoison):
        p(poisoned, 1)
    note = p.failures.read()
    assert note is not None and (note.batch_id, note.error, note.count) == (
        1, "InjectedPoison", 1)
    assert note.ranges == [("m", 0, 10, 16)]
    p(poisoned, 1)  # Spark's replay: the poison record is found, the batch goes on
    assert offsets(p, "bronze") == [0, 1, 10, 11, 12, 14, 15, 16]
    quarantine = p.tables["quarantine"].read()
    assert quarantine["source_offset"].to_pylist() == [13]
    assert quarantine["reason"].to_pylist() == ["poison_record: InjectedPoison"]
    p(poisoned, 1)  # replayed again (a crash before Spark's commit): nothing twice
    p(PackedBatch(batch(20, [7.0])), 2)  # later batches flow
    assert p.failures.read() is None
    assert offsets(p, "bronze") == [0, 1, 10, 11, 12, 14, 15, 16, 20]
    assert offsets(p, "quarantine") == [13]
    assert exporter.registry.get_sample_value(
        "kafka_health_pipeline_quarantined_records_total", {"reason": "poison_record"}) == 1
    signals = p.tables["broker_signals"].read(columns=["window_start"])
    assert signals.num_rows > 0


def test_deferred_signals_that_fail_on_a_poison_record_are_recovered_without_it(
        tmp_path: Path) -> None:
    """With deferred signals Spark has committed the batch when its signals fail: the next
    batch fails, the job stops, and the restarted job's recovery culls the batch."""
    first = processor(tmp_path, deferred=True)
    first(PackedBatch(batch(0, [1.0, 2.0])), 0)
    first(PackedBatch(batch(10, [1.0, POISON, 3.0])), 1)  # bronze in; signals fail later
    first.wait_for_writer()
    assert isinstance(first.control.signals_error, InjectedPoison)
    following = PackedBatch(batch(20, [4.0]))
    with pytest.raises(RuntimeError, match="previous batch's signals failed"):
        first(following, 2)
    note = first.failures.read()
    assert note is not None and note.batch_id == 1  # not the batch that failed for it

    restarted = processor(tmp_path, deferred=True)
    assert restarted.recover() == 1
    assert offsets(restarted, "quarantine") == [11]
    assert offsets(restarted, "bronze") == [0, 1, 10, 12]
    restarted(following, 2)  # Spark replays the batch that failed for it
    restarted.wait_for_writer()
    assert restarted.control.signals_error is None and restarted.failures.read() is None
    assert offsets(restarted, "bronze") == [0, 1, 10, 12, 20]
    assert restarted.tables["quarantine"].read()["reason"].to_pylist() == [
        "poison_record: InjectedPoison"]


def test_a_failure_the_trial_does_not_reproduce_quarantines_nothing(tmp_path: Path) -> None:
    p = processor(tmp_path, deferred=False)
    rows = batch(0, [1.0, 2.0])
    p.failures.record("app", 0, poison.offset_ranges(rows), OSError("disk full"))
    p(PackedBatch(rows), 0)
    p(PackedBatch(batch(5, [3.0])), 1)
    assert offsets(p, "bronze") == [0, 1, 5] and offsets(p, "quarantine") == []
    assert p.failures.read() is None


def test_isolate_finds_each_poison_record_and_a_group_that_fails_only_together() -> None:
    rows = batch(0, [float(v) for v in range(40)])

    def holds(*values: float):  # noqa: ANN202
        return lambda subset: set(values) <= set(subset["value"].to_pylist())

    found = poison.isolate(rows, lambda s: bool({3.0, 29.0} & set(s["value"].to_pylist())))
    assert sorted(found["source_offset"].to_pylist()) == [3, 29]
    together = poison.isolate(rows, holds(19.0, 20.0))  # split by the first halving
    assert 19 in together["source_offset"].to_pylist()
    assert 20 in together["source_offset"].to_pylist()
