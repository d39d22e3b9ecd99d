"""delta-rs sink: once per batch id, MERGE by key, and reads over files holding several clusters."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from streaming.sinks.base import TableUnreadable
from streaming.sinks.delta_rs import DeltaRsTable
from streaming.sinks.engines import open_table

TS = pa.timestamp("us", "UTC")


def rows(table: DeltaRsTable, clusters: list[str], at: datetime, samples: int) -> pa.Table:
    out = []
    for cluster in clusters:
        row = {f.name: None for f in table.schema}
        row.update(cluster=cluster, broker="1", window_start=at, samples=samples)
        out.append(row)
    return pa.Table.from_pylist(out, schema=table.schema)


def test_merge_is_once_per_batch_and_reads_filter_several_clusters(tmp_path):
    table = DeltaRsTable(str(tmp_path), "broker_signals", "app")
    at = datetime.now(UTC).replace(microsecond=0)
    assert table.upsert(rows(table, ["a", "b"], at, 1), batch_id=0)
    assert table.upsert(rows(table, ["a", "b"], at, 2), batch_id=1)
    assert not table.upsert(rows(table, ["a", "b"], at, 99), batch_id=1), "replayed batch"
    # a second handle (a restarted job) sees the committed transaction too
    assert DeltaRsTable(str(tmp_path), "broker_signals", "app").committed(1)
    got = table.read(ds.field("window_start") >= pa.scalar(at, TS), ds.field("cluster") == "b")
    assert got.column("cluster").to_pylist() == ["b"]
    assert got.column("samples").to_pylist() == [2]
    assert table.read().num_rows == 2
    table.compact()
    assert sorted(table.read(columns=["cluster"]).column("cluster").to_pylist()) == ["a", "b"]


def test_merge_reads_only_the_files_its_key_range_can_match(tmp_path):
    """A table with days of history: the upsert of a new window must prune the old files
    by their statistics, or every batch's MERGE costs more as the history grows."""
    table = DeltaRsTable(str(tmp_path), "broker_signals", "app")
    day = datetime(2026, 1, 1, tzinfo=UTC)
    for batch in range(6):  # six files of history, one window each, each its own file
        table.append(rows(table, ["a"], day + timedelta(hours=batch), 1), batch_id=batch)
    now = day + timedelta(days=1)
    assert table.upsert(rows(table, ["a"], now, 1), batch_id=6)
    assert table.last_merge["num_target_files_scanned"] == 0
    assert table.last_merge["num_target_rows_inserted"] == 1
    # a late correction of one old window reads (and rewrites) that window's file only
    assert table.upsert(rows(table, ["a"], day + timedelta(hours=2), 5), batch_id=7)
    assert table.last_merge["num_target_files_scanned"] == 1
    assert table.last_merge["num_target_rows_updated"] == 1
    got = table.read(columns=["window_start", "samples"]).sort_by("window_start")
    assert got.column("samples").to_pylist() == [1, 1, 5, 1, 1, 1, 1]


def test_an_upsert_with_nothing_to_write_commits_no_version(tmp_path):
    """A healthy fleet's incidents are empty batch after batch: no MERGE and no log entry
    for them; and an upsert never deletes a stored row its data lacks."""
    table = DeltaRsTable(str(tmp_path), "broker_signals", "app")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert table.upsert(rows(table, ["a"], at, 1), batch_id=0)
    version = table.version()
    assert not table.upsert(rows(table, [], at, 1), batch_id=1)
    assert table.version() == version and not table.committed(1)
    assert table.upsert(rows(table, ["b"], at, 1), batch_id=2)
    assert sorted(table.read(columns=["cluster"])["cluster"].to_pylist()) == ["a", "b"]


def test_log_retention_keeps_the_log_short_and_the_batches_transactions(tmp_path):
    """With delta.log_retention_minutes the log's cleanup at each checkpoint removes the
    expired commits, so the `_delta_log` folder stops growing with every batch, while the
    app transactions (the checkpoints carry them) still mark old batches as written."""
    plain = DeltaRsTable(str(tmp_path), "broker_signals", "app")
    at = datetime.now(UTC).replace(microsecond=0)
    assert plain.upsert(rows(plain, ["a"], at, 0), batch_id=0)
    assert "delta.logRetentionDuration" not in plain.ensure().metadata().configuration

    table = DeltaRsTable(str(tmp_path), "broker_signals", "app", log_retention_minutes=1)
    assert table.ensure().metadata().configuration["delta.logRetentionDuration"] == \
        "interval 60 seconds", "an existing table is held to the retention when opened"
    log = tmp_path / "broker_signals" / "_delta_log"
    an_hour_ago = datetime.now(UTC).timestamp() - 3600
    batches = 250  # past two of delta-rs' checkpoints (every 100 commits)
    for commit in log.glob("*.json"):
        os.utime(commit, (an_hour_ago, an_hour_ago))
    for batch in range(1, batches + 1):
        assert table.upsert(rows(table, ["a"], at, batch), batch_id=batch)
        # as if the commit were an hour old: past the retention when the next checkpoint's
        # cleanup looks
        os.utime(log / f"{table.version():020d}.json", (an_hour_ago, an_hour_ago))
    commits = sorted(int(p.stem) for p in log.glob("*.json"))
    assert commits[0] >= 99, f"expired commits were kept: the log starts at {commits[0]}"
    assert len(list(log.iterdir())) < batches
    reopened = DeltaRsTable(str(tmp_path), "broker_signals", "app")
    assert reopened.committed(1) and reopened.committed(batches)
    assert not reopened.upsert(rows(table, ["a"], at, 999), batch_id=5), "replayed batch"
    assert reopened.read().column("samples").to_pylist() == [batches]


def test_a_torn_log_names_its_table(tmp_path: Path) -> None:
    """A commit file cut short (a write the store did not finish): the error says which
    table, where delta-rs' own names neither table nor file."""
    open_table("delta-rs", str(tmp_path), "bronze", "app").add_files([], 0)
    newest = sorted((tmp_path / "bronze" / "_delta_log").glob("*.json"))[-1]
    newest.write_bytes(newest.read_bytes()[:40])
    with pytest.raises(TableUnreadable, match=r"Delta table .*bronze cannot be read"):
        open_table("delta-rs", str(tmp_path), "bronze", "app").ensure()
