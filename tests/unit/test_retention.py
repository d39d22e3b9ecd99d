"""Bronze, quarantine and dq_results keep delta.retention_days: older rows and their files
go, recent ones stay, at most once per delta.retention_every_seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from streaming.config import Config, DeltaConfig
from streaming.retention import Retention, predicate
from streaming.sinks.delta_rs import DeltaRsTable
from tests.unit.test_broker_admission import samples
from tests.unit.test_open_windows import as_bronze

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def bronze_rows(at: datetime, offset: int) -> pa.Table:
    rows = samples([("prod", "1")] * 3)
    return as_bronze([{**row, "ts": at} for row in rows], offset)


def quarantine_rows(at: datetime, offset: int) -> pa.Table:
    return pa.table({"ingest_ts": pa.array([at], pa.timestamp("us", "UTC")),
                     "source_topic": ["m"], "source_partition": pa.array([0], pa.int32()),
                     "source_offset": [offset], "source_format": ["jolokia"],
                     "reason": ["not_json"], "raw": [b"{"]})


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet")}


def test_old_rows_and_files_go_recent_ones_stay(tmp_path: Path) -> None:
    tables = {name: DeltaRsTable(str(tmp_path), name, "app") for name in ("bronze", "quarantine")}
    old, recent = NOW - timedelta(days=31), NOW - timedelta(days=29)
    tables["bronze"].append(bronze_rows(old, 0), 0)
    old_files = files(tmp_path / "bronze")
    tables["bronze"].append(bronze_rows(recent, 3), 1)
    tables["quarantine"].append(quarantine_rows(old, 0), 0)
    tables["quarantine"].append(quarantine_rows(recent, 1), 1)
    config = DeltaConfig(retention_days={"bronze": 30, "quarantine": 30, "dq_results": None},
                         vacuum_retain_hours=0, bronze_writers="driver")
    clock = [NOW.timestamp()]
    retention = Retention(config, clock=lambda: clock[0])
    assert not retention.due()  # not as the job starts
    clock[0] += 3600
    assert retention.due()
    assert retention.run(tables) == {"bronze": 3, "quarantine": 1}
    assert set(tables["bronze"].read(columns=["source_offset"])["source_offset"].to_pylist()) \
        == {3, 4, 5}
    assert tables["quarantine"].read(columns=["source_offset"])["source_offset"].to_pylist() \
        == [1]
    assert old_files and not old_files & files(tmp_path / "bronze")  # vacuumed off the disk
    assert not retention.due()
    clock[0] += 3600
    assert retention.due()


def test_predicates_come_from_the_cutoff_only() -> None:
    cutoff = datetime(2026, 1, 30, 12, 0, tzinfo=UTC)
    assert predicate("bronze", cutoff) == "`date` < '2026-01-30'"
    assert predicate("quarantine", cutoff) == "`ingest_ts` < '2026-01-30T12:00:00+00:00'"
    assert predicate("dq_results", cutoff) == "`evaluated_at` < '2026-01-30T12:00:00+00:00'"


def test_retention_runs_from_the_batch_processor(tmp_path: Path) -> None:
    from streaming.pipeline.batch import BatchProcessor
    from tests.unit.test_open_windows import PackedBatch

    config = Config()
    config.delta.path = str(tmp_path)
    processor = BatchProcessor(config, exporter=None)
    processor.housekeeping.retention.last_run = None  # as if started an hour ago
    processor.tables["bronze"].append(
        bronze_rows(datetime.now(UTC) - timedelta(days=40), 100), 0)
    processor(PackedBatch(bronze_rows(datetime.now(UTC), 0)), 1)
    assert processor.history.newest_finished.signal_timings.get("retention") is not None
    offsets = processor.tables["bronze"].read(columns=["source_offset"])["source_offset"]
    assert sorted(offsets.to_pylist()) == [0, 1, 2]


def test_retention_is_configured() -> None:
    assert Config().delta.retention_days == {"bronze": 30, "quarantine": 30, "dq_results": 30}
