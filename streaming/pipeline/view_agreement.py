"""Under min ISR seen twice: the brokers' JMX and the Admin API must tell one story.

The metrics count the partitions each leader has under min ISR; summed over the leaders'
last values in the cluster's newest window (the last, not the window's max, which
remembers a fault the minute it heals) that is what each Admin API poll counts too.
While a fault starts or heals the two differ for a poll or two (the metrics arrive a
shipper interval late, a window's first samples are not all in), so only a
disagreement lasting `polls` polls in a row is reported: a warning, at most every
`warn_every_seconds` per cluster, that says which view looks stale, and one count per
episode on kafka_health_pipeline_view_disagreements_total{stale}. Either view going
stale unnoticed would page on a fault that is over, or miss one that is not.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from streaming import metric_names as metric
from streaming.common.repeated_warning import RepeatedWarnings
from streaming.metadata.board import CauseBoard, CauseView

if TYPE_CHECKING:
    from streaming.exporter import Exporter

LOG = logging.getLogger("kafka_health.views")
POLLS = 3
WARN_EVERY_SECONDS = 600.0
METRICS, METADATA, NEITHER = "metrics", "metadata", "neither"


@dataclass(frozen=True)
class MetricsView:
    """A cluster's newest metrics window: the leaders' last under-min-ISR counts summed,
    and the cluster's newest sample."""

    window_start: datetime
    under_min_isr: float
    newest_sample: datetime | None


def metrics_views(broker_rows: Iterable[Mapping[str, Any]]) -> dict[str, MetricsView]:
    """Per cluster, from broker_signals rows: the newest window's under_min_isr_last summed
    over the brokers that reported one in it (None-valued rows skipped; a cluster whose
    newest window has none is left out)."""
    newest: dict[str, datetime] = {}
    sample: dict[str, datetime] = {}
    rows = list(broker_rows)
    for row in rows:
        cluster = row["cluster"]
        if cluster not in newest or row["window_start"] > newest[cluster]:
            newest[cluster] = row["window_start"]
        last = row.get("last_sample_ts")
        if last is not None and (cluster not in sample or last > sample[cluster]):
            sample[cluster] = last
    totals: dict[str, float] = {}
    for row in rows:
        value = row.get("under_min_isr_last")
        if row["window_start"] == newest[row["cluster"]] and value is not None:
            totals[row["cluster"]] = totals.get(row["cluster"], 0.0) + float(value)
    return {c: MetricsView(newest[c], total, sample.get(c)) for c, total in totals.items()}


def stale_view(metrics: MetricsView, poll: CauseView, metrics_slack: timedelta,
               poll_slack: timedelta) -> str:
    """Which view looks stale: the metrics when the poll is newer than their newest sample
    by more than `metrics_slack` (a broker path is lagging or stuck), the poll when the
    metrics are newer than it by more than `poll_slack` (the poller is failing or slow),
    else neither (both fresh: they count differently)."""
    sample = metrics.newest_sample
    if sample is None or poll.polled_at - sample > metrics_slack:
        return METRICS
    if sample - poll.polled_at > poll_slack:
        return METADATA
    return NEITHER


class ViewAgreement:
    """Fed by the signals writer after each batch's cluster signals (`observe`); compares
    every new poll of a cluster with the newest metrics window seen for it."""

    def __init__(self, board: CauseBoard, exporter: Exporter | None, metrics_slack: timedelta,
                 poll_slack: timedelta, polls: int = POLLS,
                 warn_every_seconds: float = WARN_EVERY_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.board = board
        self.exporter = exporter
        self.metrics_slack = metrics_slack
        self.poll_slack = poll_slack
        self.polls = polls
        self.warn_every_seconds = warn_every_seconds
        self.metrics: dict[str, MetricsView] = {}
        self._compared: dict[str, datetime] = {}  # the poll last compared, per cluster
        self.streak: dict[str, int] = {}  # disagreeing polls in a row, per cluster
        self._warned = RepeatedWarnings(warn_every_seconds, clock)  # per cluster
        self.episodes = 0

    def observe(self, views: Mapping[str, MetricsView]) -> None:
        """Take the batch's newest metrics per cluster (a late, older window never
        replaces a newer one) and compare each cluster with its newest poll."""
        for cluster, view in views.items():
            held = self.metrics.get(cluster)
            if held is None or view.window_start >= held.window_start:
                self.metrics[cluster] = view
        for cluster in list(self.metrics):
            self.compare(cluster)

    def compare(self, cluster: str) -> None:
        poll = self.board.view(cluster)
        metrics = self.metrics.get(cluster)
        if poll is None or metrics is None or self._compared.get(cluster) == poll.polled_at:
            return
        self._compared[cluster] = poll.polled_at
        # a sum past float's range (producers' absurd counts) agrees with no poll
        if (math.isfinite(metrics.under_min_isr)
                and round(metrics.under_min_isr) == poll.under_min_isr):
            self.streak[cluster] = 0
            return
        self.streak[cluster] = self.streak.get(cluster, 0) + 1
        if self.streak[cluster] == self.polls:
            self._report(cluster, metrics, poll)

    def _report(self, cluster: str, metrics: MetricsView, poll: CauseView) -> None:
        stale = stale_view(metrics, poll, self.metrics_slack, self.poll_slack)
        self.episodes += 1
        if self.exporter is not None:
            self.exporter.count(metric.PIPELINE_VIEW_DISAGREEMENTS_TOTAL, stale=stale)
        if self._warned.due(cluster) is None:
            return
        looks = {METRICS: "the metrics look stale (the poll is newer than their newest sample)",
                 METADATA: "the Admin API view looks stale (the metrics are newer than its "
                           "last poll)",
                 NEITHER: "both are fresh: check topics' min.insync.replicas overrides and "
                          "the brokers' JMX path"}[stale]
        LOG.warning("cluster %r: the broker metrics count %g partition(s) under min ISR (the "
                    "leaders' last values in the window of %s), the Admin API %d at %s, for %d "
                    "polls in a row; %s",
                    cluster, metrics.under_min_isr, metrics.window_start.isoformat(),
                    poll.under_min_isr, poll.polled_at.isoformat(), self.polls, looks)
