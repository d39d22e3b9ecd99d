"""The report's charts span the data, the look-back only as their bound: minutes of demo
data in a 6 h report fill the chart instead of its last pixel columns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.image import imread

from streaming.report import charts

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
SINCE = NOW - timedelta(hours=6)


def columns_with(path: Path, colour: str) -> float:
    """The share of the image's pixel columns that hold `colour` (a series squeezed into
    the chart's last columns holds a few, with its legend's sample)."""
    image = imread(path)[..., :3]
    want = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    hit = np.abs(image - want).max(axis=2) < 0.02
    return float(hit.any(axis=0).mean())


def test_the_span_is_the_datas_within_the_look_back() -> None:
    starts = pd.Series(pd.to_datetime([NOW - timedelta(minutes=20), NOW - timedelta(minutes=5)]))
    low, high = charts.data_span(starts, starts + timedelta(minutes=1), SINCE, NOW)
    assert NOW - timedelta(minutes=22) < low < NOW - timedelta(minutes=20)
    assert NOW - timedelta(minutes=4) < high <= NOW
    # an open end runs to now; data older than the look-back is cut at its start
    old = pd.Series(pd.to_datetime([SINCE - timedelta(hours=1)], utc=True))
    assert charts.data_span(old, pd.Series([pd.NaT]), SINCE, NOW) == (SINCE, NOW)
    empty = pd.Series([], dtype="datetime64[ns, UTC]")
    assert charts.data_span(empty, empty, SINCE, NOW) == (SINCE, NOW)


def test_ten_minutes_of_signals_fill_a_six_hour_reports_chart(tmp_path: Path) -> None:
    starts = pd.date_range(NOW - timedelta(minutes=10), periods=10, freq="1min")
    rows = pd.DataFrame({"window_start": starts, "window_end": starts + timedelta(minutes=1),
                         "offline_partitions_max": np.arange(10.0),
                         "active_controllers": np.ones(10)})
    path = charts.signals_grid(rows, charts.CLUSTER_SIGNALS[:2], pd.Series(["c1"] * 10),
                               SINCE, NOW, tmp_path / "signals.png", "t", "cluster")
    # tab:blue, the one series, across the first panel (about 45 % of the width; the
    # second's line lies under its threshold line); squeezed to the right it holds ~1 %
    assert columns_with(path, "#1f77b4") > 0.2


def test_a_demos_incidents_fill_the_timeline(tmp_path: Path) -> None:
    incidents = pd.DataFrame({
        "kind": ["under_min_isr", "stale_broker"],
        "started_at": pd.to_datetime([NOW - timedelta(minutes=9), NOW - timedelta(minutes=6)],
                                     utc=True),
        "resolved_at": pd.to_datetime([NOW - timedelta(minutes=7), pd.NaT], utc=True)})
    path = charts.incidents_timeline(incidents, SINCE, NOW, tmp_path / "incidents.png",
                                     pd.Series(["broker 1", "broker 3"]))
    # two of the nine minutes drawn, across a chart of about 80 % of the width
    assert columns_with(path, charts.KIND_COLOURS["under_min_isr"]) > 0.1
