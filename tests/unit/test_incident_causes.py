"""Incidents carry the Admin API's cause: filled while open, kept once resolved, and an
incidents table written before the column existed still works."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from streaming.config import Config
from streaming.metadata.board import CauseBoard, CauseView
from streaming.pipeline.batch import BatchProcessor
from streaming.pipeline.incident_causes import stored_causes, with_causes
from streaming.pipeline.tables import add_missing_columns
from streaming.schemas import arrow_schema
from streaming.sinks.delta_rs import DeltaRsTable

WINDOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
BATCH_IDS = itertools.count()


def incident(**values: object) -> dict[str, object]:
    row = {"incident_id": "i1", "cluster": "prod", "broker": "1", "kind": "under_min_isr",
           "started_at": WINDOW, "resolved_at": None, "peak_value": 6.0,
           "updated_at": WINDOW, "cause": None}
    row.update(values)
    return row


def table(*rows: dict[str, object]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=arrow_schema("incidents"))


def blame(cluster: str, kind: str, broker: str) -> str | None:
    return "brokers 4 and 5 out of ISR" if (cluster, kind, broker) == (
        "prod", "under_min_isr", "1") else None


def test_an_open_incident_takes_the_fresh_cause_a_resolved_one_keeps_its_own() -> None:
    rows = table(incident(), incident(incident_id="i2", resolved_at=WINDOW + MINUTE,
                                      cause="broker 3 out of ISR"),
                 incident(incident_id="i3", broker="2"))
    got = with_causes(rows, {"i3": "broker 9 out of ISR"}, blame)["cause"].to_pylist()
    assert got == ["brokers 4 and 5 out of ISR", "broker 3 out of ISR", "broker 9 out of ISR"]


def test_without_a_poll_incidents_keep_what_was_stored() -> None:
    rows = table(incident(), incident(incident_id="i2"))
    stored = stored_causes(table(incident(cause="broker 5 out of ISR")))
    assert with_causes(rows, stored, None)["cause"].to_pylist() == ["broker 5 out of ISR", None]


# --- through the incidents stage, on real Delta tables ------------------------------------


@pytest.fixture
def proc(tmp_path: Path) -> tuple[BatchProcessor, CauseBoard]:
    config = Config()
    config.delta.path = str(tmp_path)
    board = CauseBoard(90, clock=lambda: WINDOW.timestamp())
    processor = BatchProcessor(config, exporter=None, causes=board)
    return processor, board


def window(proc: BatchProcessor, at: datetime, value: float) -> None:
    signals = proc.tables["broker_signals"]
    row = {f.name: None for f in signals.schema}
    row.update(cluster="prod", broker="1", window_start=at, window_end=at + MINUTE, samples=1,
               last_sample_ts=at, under_min_isr_max=value, under_min_isr_last=value,
               updated_at=at)
    signals.upsert(pa.Table.from_pylist([row], schema=signals.schema), next(BATCH_IDS))
    proc.stages.update_incidents(["prod"], at, at, next(BATCH_IDS))


def causes(proc: BatchProcessor) -> list[tuple[object, object]]:
    rows = proc.tables["incidents"].read(columns=["resolved_at", "cause"]).to_pylist()
    return [(r["resolved_at"] is None, r["cause"]) for r in rows]


def test_the_incidents_stage_fills_the_cause_and_keeps_it_after_the_fault(proc) -> None:
    processor, board = proc
    window(processor, WINDOW, 6.0)
    assert causes(processor) == [(True, None)]  # no poll yet: no cause, nothing made up
    board.publish(CauseView("prod", WINDOW, {("1", "under_min_isr"):
                                             "brokers 4 and 5 out of ISR"}, 6))
    window(processor, WINDOW + MINUTE, 6.0)
    assert causes(processor) == [(True, "brokers 4 and 5 out of ISR")]
    board.publish(CauseView("prod", WINDOW + MINUTE, {}, 0))  # healed in the Admin API view
    window(processor, WINDOW + 2 * MINUTE, 0.0)
    assert causes(processor) == [(False, "brokers 4 and 5 out of ISR")]


def test_an_incidents_table_without_the_cause_column_gains_it(tmp_path: Path) -> None:
    schema = arrow_schema("incidents")
    old = pa.schema([f for f in schema if f.name != "cause"])
    DeltaTable.create(str(tmp_path / "incidents"), old)
    table = DeltaRsTable(str(tmp_path), "incidents", "app")
    assert add_missing_columns(table) == ["cause"]
    assert add_missing_columns(table) == []
    table.upsert(pa.Table.from_pylist([incident(cause="broker 5 out of ISR")], schema=schema), 0)
    assert table.read(columns=["cause"]).to_pylist() == [{"cause": "broker 5 out of ISR"}]


def test_the_job_opens_an_old_incidents_table_and_writes_causes(tmp_path: Path) -> None:
    old = pa.schema([f for f in arrow_schema("incidents") if f.name != "cause"])
    DeltaTable.create(str(tmp_path / "incidents"), old)
    config = Config()
    config.delta.path = str(tmp_path)
    processor = BatchProcessor(config, exporter=None, causes=CauseBoard(
        90, clock=lambda: WINDOW.timestamp()))
    processor.causes.publish(CauseView("prod", WINDOW, {("1", "under_min_isr"): "broker 4 out "
                                                                               "of ISR"}, 1))
    window(processor, WINDOW, 1.0)
    assert causes(processor) == [(True, "broker 4 out of ISR")]


def test_the_pollers_tables_are_compacted_once_they_exist_never_created(tmp_path: Path) -> None:
    from streaming.metadata.store import MetadataStore
    from streaming.pipeline.tables import compact, open_tables
    from tests.unit.metadata_builders import snapshot, topic

    tables = open_tables(str(tmp_path), "app")
    compact(tables)
    assert not (tmp_path / "durability_audit").exists(), "a job that does not poll has none"
    MetadataStore(str(tmp_path), "app").record(snapshot(topic("t", [[1]], min_isr=1)))
    compact(tables)
    assert DeltaTable(str(tmp_path / "durability_audit")).history(1)[0]["operation"] in (
        "OPTIMIZE", "CHECKPOINT", "MERGE")
