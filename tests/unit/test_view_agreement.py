"""The two views of under min ISR: a lasting disagreement is warned about once (naming the
view that looks stale) and counted; a short one while a fault starts or heals is not."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from streaming.exporter import Exporter
from streaming.metadata.board import CauseBoard, CauseView
from streaming.metric_names import PIPELINE_VIEW_DISAGREEMENTS_TOTAL
from streaming.pipeline.view_agreement import (
    METADATA,
    METRICS,
    NEITHER,
    MetricsView,
    ViewAgreement,
    metrics_views,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
POLL = timedelta(seconds=30)
MINUTE = timedelta(minutes=1)


class Bed:
    def __init__(self) -> None:
        self.board = CauseBoard(90)
        self.exporter = Exporter(CollectorRegistry())
        self.now = [0.0]
        self.views = ViewAgreement(self.board, self.exporter, metrics_slack=timedelta(seconds=45),
                                   poll_slack=timedelta(seconds=40), clock=lambda: self.now[0])
        self.poll_at = T0

    def step(self, jmx: float, admin: int, sample: datetime | None = None,
             cluster: str = "prod") -> None:
        """One poll and one batch: the poll of `admin` partitions, the newest window with
        `jmx` (its newest sample at `sample`, by default the poll's time)."""
        self.poll_at += POLL
        self.board.publish(CauseView(cluster, self.poll_at, {}, admin))
        window = self.poll_at.replace(second=0)
        self.views.observe({cluster: MetricsView(window, jmx, sample or self.poll_at)})

    def counted(self, stale: str) -> float:
        registry = self.exporter.registry
        return registry.get_sample_value(PIPELINE_VIEW_DISAGREEMENTS_TOTAL, {"stale": stale}) or 0.0


def test_agreement_and_a_short_disagreement_are_quiet(caplog: pytest.LogCaptureFixture) -> None:
    bed = Bed()
    for jmx, admin in [(0, 0), (6, 0), (6, 6), (6, 6), (6, 0), (0, 0)]:
        bed.step(jmx, admin)
    assert bed.views.episodes == 0 and "disagree" not in caplog.text
    assert bed.counted(NEITHER) == 0


def test_three_polls_in_a_row_warn_once_and_count_once(caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    caplog.set_level(logging.WARNING, "kafka_health.views")
    bed = Bed()
    for _ in range(6):
        bed.step(6, 0)
    assert bed.views.episodes == 1 and bed.counted(NEITHER) == 1
    [record] = caplog.records
    assert "'prod'" in record.getMessage() and "6 partition(s)" in record.getMessage()
    assert "both are fresh" in record.getMessage()


def test_a_batch_without_a_new_poll_is_not_a_second_vote() -> None:
    bed = Bed()
    bed.step(6, 0)
    for _ in range(5):  # batches every second, one poll
        bed.views.observe({"prod": MetricsView(T0, 6, T0)})
    assert bed.views.streak["prod"] == 1


@pytest.mark.parametrize("lag, stale", [(timedelta(seconds=-120), METRICS),
                                        (timedelta(seconds=120), METADATA),
                                        (timedelta(seconds=5), NEITHER)])
def test_the_stale_view_is_the_one_behind(lag: timedelta, stale: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "kafka_health.views")
    bed = Bed()
    for _ in range(3):
        bed.step(0, 4, sample=bed.poll_at + POLL + lag)
    assert bed.counted(stale) == 1
    assert {METRICS: "the metrics look stale", METADATA: "the Admin API view looks stale",
            NEITHER: "both are fresh"}[stale] in caplog.text


def test_warnings_are_rate_limited_per_cluster_the_count_is_not(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "kafka_health.views")
    bed = Bed()
    for episode in range(3):
        for _ in range(3):
            bed.step(6, 0)
        bed.step(0, 0)  # agree once: the episode ends
        bed.now[0] += 60 * episode
    assert bed.views.episodes == 3 and bed.counted(NEITHER) == 3
    assert len(caplog.records) == 1
    bed.now[0] += 600
    for _ in range(3):
        bed.step(6, 0)
    assert len(caplog.records) == 2


def test_an_older_window_never_replaces_the_newest() -> None:
    bed = Bed()
    bed.step(6, 6)
    bed.views.observe({"prod": MetricsView(T0 - timedelta(hours=1), 0, None)})
    assert bed.views.metrics["prod"].under_min_isr == 6


def test_the_metrics_view_sums_the_leaders_last_values_of_the_newest_window() -> None:
    def row(broker: str, minute: int, last: float | None, maximum: float) -> dict:
        return {"cluster": "prod", "broker": broker, "window_start": T0 + minute * MINUTE,
                "last_sample_ts": T0 + minute * MINUTE + timedelta(seconds=50),
                "under_min_isr_last": last, "under_min_isr_max": maximum}

    # healed in the newest window: its max still says 6, its last says 0
    views = metrics_views([row("1", 0, 6, 6), row("1", 1, 0, 6), row("2", 1, 2, 2),
                           row("3", 1, None, 0), row("4", 0, 5, 5)])
    assert views == {"prod": MetricsView(T0 + MINUTE, 2.0, T0 + MINUTE + timedelta(seconds=50))}
    assert metrics_views([row("1", 0, None, 0)]) == {}


def test_a_sum_past_floats_range_disagrees_and_never_raises(caplog: pytest.LogCaptureFixture
                                                            ) -> None:
    """Two brokers' absurd under-min-ISR counts (1.7e308 each, whatever a producer sent)
    sum to infinity: a disagreement like any other, never an error in the batch."""
    caplog.set_level(logging.WARNING, "kafka_health.views")
    rows = [{"cluster": "prod", "broker": b, "window_start": T0, "last_sample_ts": T0,
             "under_min_isr_last": 1.7e308} for b in ("1", "2")]
    bed = Bed()
    for _ in range(3):
        bed.step(metrics_views(rows)["prod"].under_min_isr, 0)
    assert bed.views.episodes == 1 and bed.counted(NEITHER) == 1
