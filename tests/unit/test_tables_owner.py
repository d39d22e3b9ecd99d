"""A new checkpoint meeting Delta tables another checkpoint wrote: refused when it would
read the topics into them again, let through when it starts at the topics' ends or is
told to."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from streaming.pipeline.recovery import checkpoint_app_id
from streaming.pipeline.tables_owner import (
    TABLES_OWNER,
    CheckpointReplaced,
    TablesBehind,
    claim_tables,
    renew_if_logs_lost,
    rewind_to_tables,
    tables_owner,
)
from streaming.sinks.engines import open_table


def claim(root: Path, app_id: str, new: bool, starting: str = "earliest",
          accept: bool = False) -> None:
    claim_tables(str(root), str(root.parent / f"checkpoint-{app_id}"), app_id, new, starting,
                 accept)


def test_the_first_start_owns_the_tables_and_restarts_keep_them(tmp_path: Path) -> None:
    claim(tmp_path, "first", new=True)
    assert tables_owner(str(tmp_path)) == {"app_id": "first",
                                           "checkpoint": str(tmp_path.parent / "checkpoint-first")}
    claim(tmp_path, "first", new=True)  # stopped before its first batch: still its own
    claim(tmp_path, "first", new=False)


def test_a_new_checkpoint_on_anothers_tables_is_refused_until_told(tmp_path: Path) -> None:
    claim(tmp_path, "first", new=False)
    with pytest.raises(CheckpointReplaced, match=(
            r"written under checkpoint .*checkpoint-first \(app id first\).*is new.*"
            r"from source.starting_offsets \(earliest\).*spark.accept_new_checkpoint: true")):
        claim(tmp_path, "second", new=True)
    assert tables_owner(str(tmp_path))["app_id"] == "first"  # refused: nothing changed
    with pytest.raises(CheckpointReplaced):
        claim(tmp_path, "second", new=True, starting='{"kafka-metrics": {"0": 0}}')
    claim(tmp_path, "second", new=True, accept=True)
    assert tables_owner(str(tmp_path))["app_id"] == "second"


def test_a_new_checkpoint_that_starts_at_the_ends_only_warns(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    claim(tmp_path, "first", new=False)
    caplog.set_level(logging.WARNING, "kafka_health.recovery")
    claim(tmp_path, "second", new=True, starting="latest")
    assert "is not read" in caplog.text
    assert tables_owner(str(tmp_path))["app_id"] == "second"


def test_another_jobs_checkpoint_on_these_tables_is_refused_until_told(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Offsets of its own, from another job (spark.checkpoint of one job, delta.path of
    another): its batches would write records the tables' own job wrote already."""
    claim(tmp_path, "first", new=False)
    with pytest.raises(CheckpointReplaced, match=(
            r"written under checkpoint .*checkpoint-first \(app id first\).*checkpoint "
            r".*checkpoint-other \(app id other\) holds another job's offsets.*twice.*"
            r"spark.accept_new_checkpoint: true")):
        claim(tmp_path, "other", new=False)
    assert tables_owner(str(tmp_path))["app_id"] == "first"
    caplog.set_level(logging.WARNING, "kafka_health.recovery")
    claim(tmp_path, "other", new=False, accept=True)
    assert tables_owner(str(tmp_path))["app_id"] == "other"
    assert "another job's offsets" in caplog.text


def test_an_unreadable_owner_file_is_no_owner(tmp_path: Path) -> None:
    (tmp_path / TABLES_OWNER).write_text("{torn")
    claim(tmp_path, "second", new=True)
    assert json.loads((tmp_path / TABLES_OWNER).read_text())["app_id"] == "second"


def test_a_checkpoint_that_lost_its_logs_takes_a_new_app_id(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Its offsets and commits deleted, its app id kept: batch ids from 0 again would be
    skipped by bronze as written. A new id makes them new batches (and the checkpoint a
    new one for claim_tables)."""
    checkpoint, delta = tmp_path / "checkpoint", str(tmp_path / "delta")
    old = checkpoint_app_id(str(checkpoint))
    bronze = open_table("delta-rs", delta, "bronze", old)
    assert renew_if_logs_lost(str(checkpoint), old, bronze) is None  # no table yet
    bronze.add_files([], 4)
    checkpoint_logs(checkpoint, range(3), range(0))  # offsets gone, commits left
    caplog.set_level(logging.WARNING, "kafka_health.recovery")
    renewed = renew_if_logs_lost(str(checkpoint), old, bronze)
    assert listed(checkpoint / "commits") == []  # Spark would refuse to commit batch 0
    assert renewed is not None and renewed != old
    assert checkpoint_app_id(str(checkpoint)) == renewed  # kept for the next start
    assert "batches 0-4" in caplog.text and "offsets and commits logs were deleted" in caplog.text
    assert not open_table("delta-rs", delta, "bronze", renewed).committed(0)
    claim(tmp_path / "delta", old, new=False)  # the tables were written under the old id
    with pytest.raises(CheckpointReplaced):
        claim_tables(delta, str(checkpoint), renewed, True, "earliest", False)
    # a checkpoint whose batches were never committed keeps its id
    fresh = tmp_path / "fresh"
    assert renew_if_logs_lost(str(fresh), checkpoint_app_id(str(fresh)), open_table(
        "delta-rs", delta, "bronze", checkpoint_app_id(str(fresh)))) is None


def checkpoint_logs(checkpoint: Path, commits: range, offsets: range) -> None:
    for log, batches in (("commits", commits), ("offsets", offsets)):
        (checkpoint / log).mkdir(parents=True, exist_ok=True)
        for batch in batches:
            (checkpoint / log / str(batch)).write_text("v1\n{}\n")
            (checkpoint / log / f".{batch}.crc").write_text("crc")


def listed(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_tables_behind_their_checkpoint_cut_its_logs_back_so_spark_replays(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Bronze lost its newest commits (batches 4 and 5): Spark would go on after batch 5
    and never write them. The logs are cut back to batch 4's offsets, uncommitted."""
    checkpoint, delta = tmp_path / "checkpoint", str(tmp_path / "delta")
    checkpoint_logs(checkpoint, range(6), range(7))
    bronze = open_table("delta-rs", delta, "bronze", "app")
    bronze.add_files([], 3)
    caplog.set_level(logging.WARNING, "kafka_health.recovery")
    assert rewind_to_tables(str(checkpoint), bronze) == 4
    assert listed(checkpoint / "commits") == [
        ".0.crc", ".1.crc", ".2.crc", ".3.crc", "0", "1", "2", "3"]
    assert listed(checkpoint / "offsets") == [
        ".0.crc", ".1.crc", ".2.crc", ".3.crc", ".4.crc", "0", "1", "2", "3", "4"]
    assert "batches up to 3" in caplog.text and "committed batches up to 5" in caplog.text
    assert rewind_to_tables(str(checkpoint), bronze) is None  # now in step
    # a cut stopped after the offsets: the commits still run ahead, and the next start
    # finishes it
    checkpoint_logs(checkpoint, range(6), range(5))
    assert rewind_to_tables(str(checkpoint), bronze) == 4
    assert listed(checkpoint / "commits")[-1] == "3"
    bronze.add_files([], 4)  # the replay written: bronze ahead of the commits is a replay
    assert rewind_to_tables(str(checkpoint), bronze) is None


def test_tables_behind_past_the_checkpoints_offsets_refuse_to_start(tmp_path: Path) -> None:
    checkpoint, delta = tmp_path / "checkpoint", str(tmp_path / "delta")
    checkpoint_logs(checkpoint, range(5, 9), range(5, 10))  # Spark purged the older ones
    bronze = open_table("delta-rs", delta, "bronze", "app")
    bronze.add_files([], 2)
    with pytest.raises(TablesBehind, match=r"batches 3-8 are not in the tables"):
        rewind_to_tables(str(checkpoint), bronze)
    assert listed(checkpoint / "commits")[-1] == "8"  # refused: nothing cut
    bronze.add_files([], 5)  # batch 6 replays from batch 5's offsets and its own: both kept
    assert rewind_to_tables(str(checkpoint), bronze) == 6
    bronze.add_files([], 6)
    for batch in range(5, 7):
        (checkpoint / "offsets" / str(batch)).unlink()  # Spark purged them since
    (checkpoint / "commits" / "9").write_text("v1\n{}\n")
    (checkpoint / "offsets" / "7").write_text("v1\n{}\n")
    with pytest.raises(TablesBehind, match=r"batches 7-9 are not in the tables"):
        rewind_to_tables(str(checkpoint), bronze)  # batch 7's start (batch 6's end) is gone
    # tables with no batch of this checkpoint (another's, or new ones) are not behind it
    assert rewind_to_tables(str(checkpoint), open_table("delta-rs", delta, "bronze",
                                                        "other")) is None
