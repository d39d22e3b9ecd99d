"""headroom_table / format_headroom_table / write_headroom_chart on the fixture tables."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from streaming.headroom.chart import ceilings_frame_from_rows, history_frame_from_rows
from streaming.report import format_headroom_table, headroom_table, write_headroom_chart
from streaming.schemas import arrow_schema
from tests.report import fixtures
from tests.report.pagecheck import assert_valid_png


def test_headroom_table_is_latest_row_per_broker(delta_root: Path) -> None:
    df = headroom_table(str(delta_root))
    assert list(df.columns) == arrow_schema("partition_headroom").names
    assert list(df["broker"]) == ["1", "2"]
    last = fixtures.NOW - timedelta(minutes=1)
    assert (df["evaluated_at"] == pd.Timestamp(last)).all()
    assert list(df["partitions"]) == [fixtures.partitions_at("1", last), fixtures.partitions_at("2", last)]
    assert list(df["binding_bound"]) == ["recovery", "file_descriptors"]


def test_headroom_table_cluster_and_as_of(delta_root: Path) -> None:
    assert len(headroom_table(str(delta_root), cluster=fixtures.CLUSTER)) == 2
    assert headroom_table(str(delta_root), cluster="nope").empty
    earlier = fixtures.START + timedelta(minutes=30)
    df = headroom_table(str(delta_root), as_of=earlier)
    assert (df["evaluated_at"] == pd.Timestamp(earlier)).all()


def test_format_headroom_table(delta_root: Path) -> None:
    text = format_headroom_table(headroom_table(str(delta_root)))
    lines = text.splitlines()
    header = lines[0].split()
    assert header[:3] == ["broker", "partitions", "leaders"]
    for name in ("max.broker", "mmap", "fds", "recovery", "baseline", "binding", "headroom", "growth/day"):
        assert name in header
    assert "headroom %" in lines[0] and "days to ceil" in lines[0]
    assert set(lines[1]) <= {"-", " "}
    b1, b2 = lines[2].split(), lines[3].split()
    # broker, partitions, leaders, max.broker, mmap, fds, recovery, baseline, binding, headroom, %,
    # growth, days
    assert b1 == ["1", "1,823", "607", "-", "21,843", "310,000", "3,000*", "4,000", "recovery", "+1,177",
                  "39.2%", "+144.0", "8.2"]
    assert b2[0] == "2" and b2[5] == "2,950*" and b2[8] == "file_descriptors" and b2[10] == "17.1%"
    # Columns line up: every right-aligned column ends where its header ends.
    end = lines[0].index("partitions") + len("partitions")
    assert lines[2][end - 5:end] == "1,823" and lines[3][end - 5:end] == "2,447"
    assert "evaluated at 2026-03-02 11:59 UTC" in text


def test_format_headroom_table_nulls_are_dashes() -> None:
    row = {name: None for name in arrow_schema("partition_headroom").names}
    row.update(cluster="c", broker="7", evaluated_at=pd.Timestamp(fixtures.NOW), partitions=10.0,
               ceiling_baseline=4000.0, binding_bound="baseline", binding_ceiling=4000.0,
               headroom=3990.0, headroom_pct=99.75)
    text = format_headroom_table(pd.DataFrame([row]))
    cells = text.splitlines()[2].split()
    assert cells == ["7", "10", "-", "-", "-", "-", "-", "4,000*", "baseline", "+3,990", "99.8%", "-", "-"]


def test_format_headroom_table_several_clusters_and_stale(delta_root: Path) -> None:
    df = headroom_table(str(delta_root))
    other = df.iloc[[0]].assign(cluster="prod-west",
                                evaluated_at=df["evaluated_at"].iloc[0] - timedelta(hours=2))
    text = format_headroom_table(pd.concat([df, other], ignore_index=True))
    assert text.splitlines()[0].split()[:2] == ["cluster", "broker"]
    assert "broker prod-west/1: newest headroom row is from 2026-03-02 09:59 UTC (120 min older" in text


def test_empty_and_missing(tmp_path: Path) -> None:
    df = headroom_table(str(tmp_path / "none"))
    assert df.empty and list(df.columns) == arrow_schema("partition_headroom").names
    assert "does not exist" in format_headroom_table(df)
    root = fixtures.build_empty(tmp_path / "delta")
    assert "has no rows" in format_headroom_table(headroom_table(str(root)))
    with pytest.raises(LookupError, match="does not exist"):
        write_headroom_chart(str(tmp_path / "none"), tmp_path / "x.png")


def test_write_headroom_chart(delta_root: Path, tmp_path: Path) -> None:
    out = write_headroom_chart(str(delta_root), tmp_path / "charts" / "headroom.png")
    assert out == tmp_path / "charts" / "headroom.png"
    width, height = assert_valid_png(out, min_size=(600, 300))
    assert width > height  # two broker panels side by side


def test_chart_frames_from_table_rows(delta_root: Path) -> None:
    latest = headroom_table(str(delta_root))
    ceilings = ceilings_frame_from_rows(latest)
    assert set(ceilings["bound"]) == {"mmap", "file_descriptors", "recovery", "baseline"}  # guard rail unset
    binding = ceilings[ceilings["binding"]]
    assert dict(zip(binding["broker"], binding["bound"], strict=True)) == {"1": "recovery",
                                                                          "2": "file_descriptors"}
    history = history_frame_from_rows(latest)
    assert list(history.columns) == ["broker", "timestamp", "partitions"]
    assert len(history) == 2
