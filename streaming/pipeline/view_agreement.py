"""Under min ISR seen twice: the brokers' JMX and the Admin API must tell one story.

The metrics count, per window, the partitions each leader has under min ISR
(cluster_signals.under_min_isr_total); each Admin API poll counts the partitions under
min ISR it saw. While a fault starts or heals the two differ for a poll or two (the
window's max remembers the minute, the metrics arrive a shipper interval late), so only
a disagreement lasting `polls` polls in a row is reported: a warning, at most every
`warn_every_seconds` per cluster, that says which view looks stale, and one count per
episode on kafka_health_pipeline_view_disagreements_total{stale}. Either view going
stale unnoticed would page on a fault that is over, or miss one that is not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from streaming.metadata.board import CauseBoard, CauseView

if TYPE_CHECKING:
    from streaming.exporter import Exporter

LOG = logging.getLogger("kafka_health.views")
COUNTER = "kafka_health_pipeline_view_disagreements_total"
POLLS = 3
WARN_EVERY_SECONDS = 600.0
METRICS, METADATA, NEITHER = "metrics", "metadata", "neither"


@dataclass(frozen=True)
class MetricsView:
    """A cluster's newest metrics window: its under-min-ISR total and newest sample."""

    window_start: datetime
    under_min_isr: float
    newest_sample: datetime | None


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
    """Fed by the signals thread after each batch's cluster signals (`observe`); compares
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
        self.clock = clock
        self.metrics: dict[str, MetricsView] = {}
        self._compared: dict[str, datetime] = {}  # the poll last compared, per cluster
        self.streak: dict[str, int] = {}  # disagreeing polls in a row, per cluster
        self._warned_at: dict[str, float] = {}
        self.episodes = 0

    def observe(self, cluster_rows: Iterable[Mapping[str, Any]],
                newest_samples: Mapping[str, datetime]) -> None:
        """Take the batch's cluster windows (the newest per cluster wins, a late window
        never replaces a newer one) and compare each cluster with its newest poll."""
        for row in cluster_rows:
            cluster, value = row["cluster"], row.get("under_min_isr_total")
            held = self.metrics.get(cluster)
            if value is None or (held is not None and row["window_start"] < held.window_start):
                continue
            self.metrics[cluster] = MetricsView(row["window_start"], float(value),
                                                newest_samples.get(cluster))
        for cluster in list(self.metrics):
            self.compare(cluster)

    def compare(self, cluster: str) -> None:
        poll = self.board.view(cluster)
        metrics = self.metrics.get(cluster)
        if poll is None or metrics is None or self._compared.get(cluster) == poll.polled_at:
            return
        self._compared[cluster] = poll.polled_at
        if round(metrics.under_min_isr) == poll.under_min_isr:
            self.streak[cluster] = 0
            return
        self.streak[cluster] = self.streak.get(cluster, 0) + 1
        if self.streak[cluster] == self.polls:
            self._report(cluster, metrics, poll)

    def _report(self, cluster: str, metrics: MetricsView, poll: CauseView) -> None:
        stale = stale_view(metrics, poll, self.metrics_slack, self.poll_slack)
        self.episodes += 1
        if self.exporter is not None:
            self.exporter.count(COUNTER, stale=stale)
        now = self.clock()
        if now - self._warned_at.get(cluster, -self.warn_every_seconds) < self.warn_every_seconds:
            return
        self._warned_at[cluster] = now
        looks = {METRICS: "the metrics look stale (the poll is newer than their newest sample)",
                 METADATA: "the Admin API view looks stale (the metrics are newer than its "
                           "last poll)",
                 NEITHER: "both are fresh: check topics' min.insync.replicas overrides and "
                          "the brokers' JMX path"}[stale]
        LOG.warning("cluster %r: the broker metrics count %g partition(s) under min ISR in the "
                    "window of %s, the Admin API %d at %s, for %d polls in a row; %s",
                    cluster, metrics.under_min_isr, metrics.window_start.isoformat(),
                    poll.under_min_isr, poll.polled_at.isoformat(), self.polls, looks)
