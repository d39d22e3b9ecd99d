"""Names from the data (clusters, brokers) drawn by the report's charts: as plain text,
whatever they hold."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from streaming.headroom.chart import write_headroom_png
from streaming.report import charts
from streaming.text import drawn

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
# mathtext that does not parse, a private-use character no font has, an escaped dollar,
# a name longer than any legend
NAMES = ["c$\\frac{$/1", "c\U0010f5a1/2", "c\\$/3", "c" * 300 + "/4"]


@pytest.fixture(autouse=True)
def warnings_fail() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph is only a warning
        yield


def test_a_name_is_drawn_as_written() -> None:
    from matplotlib.text import Text

    for name in NAMES[:3]:
        text = Text(text=drawn(name))
        shown_as, math = text._preprocess_math(text.get_text())
        assert math is False and shown_as == drawn(name).replace("\\$", "$")
    assert len(drawn(NAMES[3])) == 80


def test_headroom_chart(tmp_path: Path) -> None:
    history = pd.DataFrame({"broker": NAMES, "timestamp": [NOW] * 4, "partitions": [10] * 4})
    ceilings = pd.DataFrame({"broker": NAMES, "bound": ["mmap"] * 4,
                             "ceiling": [100.0] * 4, "binding": [True] * 4})
    assert write_headroom_png(history, ceilings, tmp_path / "headroom.png").stat().st_size


def test_signal_legends_and_incident_scopes(tmp_path: Path) -> None:
    since = NOW - timedelta(hours=1)
    starts = [since + timedelta(minutes=5 * i) for i in range(4)]
    rows = pd.DataFrame({"window_start": starts, "under_min_isr_max": [1, 2, 3, 4],
                         "unclean_elections_increase": [0, 1, 0, 1]})
    labels = pd.Series(NAMES)
    assert charts.signals_grid(rows, charts.BROKER_SIGNALS, labels, since, NOW,
                               tmp_path / "signals.png", "brokers", "broker").stat().st_size
    incidents = pd.DataFrame({"kind": ["under_min_isr"] * 4, "started_at": starts,
                              "resolved_at": [pd.NaT] * 4})
    assert charts.incidents_timeline(incidents, since, NOW, tmp_path / "incidents.png",
                                     labels.map(lambda n: f"broker {n}")).stat().st_size


def test_values_near_the_largest_double_draw_without_overflow(tmp_path: Path) -> None:
    """A hostile or broken gauge (1.7e308, -inf) draws at the charts' cap, a ceiling that is
    not a number is left out: an axis that reaches the largest double overflows matplotlib's
    tick locator, and one without finite limits raises."""
    since = NOW - timedelta(hours=1)
    starts = [since + timedelta(minutes=5 * i) for i in range(4)]
    rows = pd.DataFrame({"window_start": starts,
                         "under_min_isr_max": [1.0, 1.7976931348623157e308, 3.0, float("-inf")],
                         "request_handler_idle_min": [0.5, 1e300, 0.2, 0.1]})
    labels = pd.Series(["a/1", "a/1", "a/2", "a/2"])
    assert charts.signals_grid(rows, charts.BROKER_SIGNALS, labels, since, NOW,
                               tmp_path / "signals.png", "brokers", "broker").stat().st_size
    history = pd.DataFrame({"broker": ["a/1", "a/1", "a/2"], "timestamp": [since, NOW, NOW],
                            "partitions": [10.0, 1.7976931348623157e308, float("inf")]})
    ceilings = pd.DataFrame({"broker": ["a/1", "a/2"], "bound": ["mmap"] * 2,
                             "ceiling": [1e308, float("nan")], "binding": [True] * 2})
    assert write_headroom_png(history, ceilings, tmp_path / "headroom.png").stat().st_size
