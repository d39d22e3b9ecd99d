"""The after-bronze stages of a batch: broker signals (held or recomputed from bronze),
paging, cluster signals, headroom and incidents of the windows the batch touched.

Bronze is the authority: the held windows (streaming.signals.incremental) only save the
recomputation, and whatever fails in them falls back to reading bronze.
"""

from __future__ import annotations

import copy
import functools
import logging
from datetime import datetime, timedelta
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from streaming import failpoints
from streaming import metric_names as metric
from streaming.broker_admission import BrokerAdmission
from streaming.config import Config
from streaming.exporter import BROKER_ROW_COLUMNS, Exporter
from streaming.headroom.stage import HeadroomTracker
from streaming.metadata.board import CauseBoard
from streaming.paging import AlertPusher, opened_in_signals
from streaming.paging.opened import FEATURE_LEVELS
from streaming.pipeline.incident_causes import stored_causes, with_causes
from streaming.pipeline.stats import stopwatch, summed
from streaming.pipeline.view_agreement import ViewAgreement, metrics_views
from streaming.signals.broker import (
    SAMPLE_COLUMNS,
    SIGNAL_METRICS,
    finalize,
    prepared,
    signal_partials,
)
from streaming.signals.churn import CHURN_COLUMNS, unmatched_shrinks
from streaming.signals.cluster import cluster_signals
from streaming.signals.incidents import (
    CLUSTER_EVENT_CONDITIONS,
    POSITIVE_BROKER_CONDITIONS,
    incident_conditions,
    incident_runs,
    reconcile_incidents,
)
from streaming.signals.incremental import OpenWindows
from streaming.signals.spans import Span, touched_spans
from streaming.sinks.base import DeltaSink
from streaming.sinks.predicates import any_of, field

LOG = logging.getLogger("kafka_health.signals")
TS = pa.timestamp("us", "UTC")
# The broker row columns persist() reads from its dicts (the views' check and headroom).
# The signals writer converts only these: a catch-up round's thousands of rows as dicts of
# every column, timestamps among them, cost three times as much.
PERSIST_ROW_COLUMNS = ["cluster", "broker", "window_start", "last_sample_ts",
                       "under_min_isr_last", "partition_count_last", "leader_count_last",
                       "log_segments_last", "open_fds_last", "max_fds_last"]

# The broker row columns page() reads from its dicts: the exporter's and the direct push's
# (paging.opened_in_signals). A catch-up batch answers for about a hundred windows a
# broker, and its rows as dicts of every column cost a tenth of the driver's Python.
PAGE_ROW_COLUMNS = list(dict.fromkeys([*BROKER_ROW_COLUMNS,
                                       *POSITIVE_BROKER_CONDITIONS.values(),
                                       *CLUSTER_EVENT_CONDITIONS.values(),
                                       *FEATURE_LEVELS]))


def newest_elr_enabled(cluster_rows: pa.Table) -> dict[str, float]:
    """Per cluster, elr_enabled of its newest window that says (kafka_health_elr_enabled's
    value); a cluster none of whose windows says is left out."""
    known = cluster_rows.filter(pc.is_valid(cluster_rows["elr_enabled"]))
    newest: dict[str, tuple[datetime, float]] = {}
    for cluster, start, value in zip(known["cluster"].to_pylist(),
                                     known["window_start"].to_pylist(),
                                     known["elr_enabled"].to_pylist(), strict=True):
        if cluster not in newest or start > newest[cluster][0]:
            newest[cluster] = (start, value)
    return {cluster: value for cluster, (_, value) in newest.items()}


class WindowRows(NamedTuple):
    """The broker signal rows the open windows answered for a batch (None: recompute the
    touched windows from bronze), and how long that took."""

    rows: pa.Table | None
    timings: dict[str, float]


class SignalStages:
    """The stages that compute from bronze, over the tables of one job (`tables`).

    `causes` is the Admin API pollers' board (streaming.metadata), read only: the stages
    take the newest causes published on it and never wait for a poll. `pusher` is the job's
    direct push to Alertmanager (streaming.paging), which outlives the stages.

    Owner: the micro-batch thread. Others may call: the absorber open_window_rows() and
    open_window_rows_from_parts() (the open windows are the micro-batch thread's again once
    it has joined the absorber); the signals writer persist(); the main thread
    signals_for() before the query starts. Every stage returns its own timings.
    """

    def __init__(self, config: Config, exporter: Exporter | None,
                 tables: dict[str, DeltaSink], pusher: AlertPusher,
                 causes: CauseBoard | None = None) -> None:
        self.config = config
        self.pusher = pusher
        self.exporter = exporter
        self.tables = tables
        self.causes = causes
        cfg = config.signals
        self.views = None if causes is None else ViewAgreement(
            causes, exporter,
            metrics_slack=timedelta(seconds=cfg.stale_after_intervals * cfg.scrape_interval_seconds),
            poll_slack=timedelta(seconds=config.metadata.interval_seconds
                                 + config.metadata.timeout_seconds))
        self.push_failures_seen = pusher.stats.failures
        self.headroom = HeadroomTracker(config.clusters, tables["partition_headroom"].read)
        self.open_windows = OpenWindows(config.signals,
                                        config.quality.max_timestamp_skew_seconds)

    def touched(self, bronze: pa.Table) -> tuple[list[str], list[Span]]:
        """The clusters and window spans a batch's samples touched."""
        cfg = self.config.signals
        return (pc.unique(bronze["cluster"]).to_pylist(),
                touched_spans(bronze["ts"], cfg.window_seconds, cfg.counter_lookback_seconds))

    def touched_windows(self, summary: pa.Table) -> tuple[list[str], list[Span]]:
        """touched() from the read tasks' summary rows: a window start stands for every
        sample of its window (the spans depend only on the windows)."""
        cfg = self.config.signals
        return (pc.unique(summary["cluster"]).to_pylist(),
                touched_spans(pc.cast(summary["window_start"], TS), cfg.window_seconds,
                              cfg.counter_lookback_seconds))

    def signal_windows(self, samples: pa.Table) -> tuple[pa.Table, pa.Table, pa.Table]:
        """(partials, segments, broker signal rows) of signal samples."""
        partials, segments = signal_partials(prepared(samples, self.config.signals),
                                             self.config.signals)
        return partials, segments, finalize(partials, segments)

    def open_window_rows(self, bronze: pa.Table) -> WindowRows:
        """A batch's samples into the open windows: the rows of the windows it touched."""
        timings: dict[str, float] = {}
        if not (self.config.signals.incremental and bronze.num_rows):
            return WindowRows(None, timings)
        with stopwatch(timings, "broker_signals"):
            try:
                own = bronze.filter(pc.is_in(bronze["metric"], pa.array(SIGNAL_METRICS)))
                rows = self.open_windows.update(own.select(SAMPLE_COLUMNS))
            except Exception:  # held windows only save work: bronze stays the authority
                LOG.exception("held signal windows failed; recomputing from bronze")
                self.open_windows.clear()
                rows = None
        return WindowRows(rows, timings)

    def open_window_rows_from_parts(self, samples: pa.Table, partials: list[pa.Table],
                                    segments: list[pa.Table]) -> WindowRows:
        """open_window_rows() from what the read tasks sent: their chunks' partials and
        segments, and the signal samples not in them (streaming.signals.incremental)."""
        timings: dict[str, float] = {}
        if not self.config.signals.incremental:
            return WindowRows(None, timings)
        with stopwatch(timings, "broker_signals"):
            try:
                rows = self.open_windows.update_parts(
                    samples.select(SAMPLE_COLUMNS), partials, segments)
            except Exception:  # held windows only save work: bronze stays the authority
                LOG.exception("held signal windows failed; recomputing from bronze")
                self.open_windows.clear()
                rows = None
        return WindowRows(rows, timings)

    def update_signals(self, bronze: pa.Table, batch_id: int) -> dict[str, float]:
        """A batch's signals from its samples; returns how long each step took."""
        rows, timings = self.open_window_rows(bronze)
        return summed(timings, self.signals_for(*self.touched(bronze), batch_id, rows))

    def signals_for(self, clusters: list[str], spans: list[Span], batch_id: int,
                    window_rows: pa.Table | None = None) -> dict[str, float]:
        """Signals, headroom and incidents of the touched windows: `window_rows` (the rows
        the open windows answered for the batch) or, without them, recomputed from bronze.
        Returns how long each step took."""
        timings: dict[str, float] = {}
        recomputed = None
        if window_rows is None:
            recomputed = self.recompute(clusters, spans, timings)
            if recomputed is None:
                return timings
            window_rows = recomputed[-1]
        rows = window_rows.to_pylist()  # paging, the views' check and headroom read dicts
        return summed(timings, self.page(rows),
                      self.persist(clusters, spans, batch_id, window_rows, rows, recomputed))

    def page(self, rows: list[dict]) -> dict[str, float]:
        """Gauges and the direct push from a batch's broker signal rows, before any MERGE:
        they must not wait for the Delta work. A crash before the batch's commit replays
        it, which pushes the same alert again (same labels: Alertmanager deduplicates it).
        The gauges go first: they decide which clusters are held, so may page. Returns how
        long it took."""
        cfg = self.config.signals
        exporter = self.exporter
        push = self.config.alert_push
        timings: dict[str, float] = {}
        if exporter is not None:
            exporter.begin_batch()
        if exporter is None and not push.urls():
            return timings
        with stopwatch(timings, "page"):
            if exporter is not None:
                exporter.update_brokers(rows)
                exporter.update_staleness(cfg.stale_after_intervals * cfg.scrape_interval_seconds)
            if push.urls():
                opened = opened_in_signals(rows, cfg.window_seconds + cfg.watermark_seconds)
                for incident in opened:
                    incident["cause"] = self.cause_of(
                        incident["cluster"], incident["kind"], incident["broker"])
                self.pusher.push(opened, self.may_page)
        return timings

    def persist(self, clusters: list[str], spans: list[Span], batch_id: int,
                broker_rows: pa.Table, rows: list[dict],
                recomputed: tuple[pa.Table, pa.Table, pa.Table, pa.Table] | None = None
                ) -> dict[str, float]:
        """The Delta side of paged broker rows (`rows` = `broker_rows` as dicts, at least
        PERSIST_ROW_COLUMNS of them): their MERGE, then cluster signals, headroom and
        incidents of the touched windows, and the gauges that come from those. `batch_id` is
        the transaction id of every write. Returns how long each step took."""
        cfg = self.config.signals
        exporter = self.exporter
        timings: dict[str, float] = {}
        # One window past the spans (which end a window past the touched ones): a window's
        # unclean elections read the broker rows of the windows before it
        # (cluster.unclean_elections), so late data may change the next ones too.
        first = spans[0][0]
        last = spans[-1][1] + timedelta(seconds=cfg.window_seconds)
        with stopwatch(timings, "broker_signals_merge"):
            self.tables["broker_signals"].upsert(broker_rows, batch_id)
        failpoints.hit("broker_signals_committed")
        if cfg.incremental and recomputed is not None:
            with stopwatch(timings, "seed"):
                self.seed_open_windows(recomputed, spans, clusters)
        with stopwatch(timings, "cluster_signals"):
            stored = self.horizon_broker_rows(clusters, first, last)
            cluster_rows = self.update_cluster_signals(clusters, first, last, batch_id, stored)
        if exporter is not None:
            exporter.update_clusters(cluster_rows.to_pylist())
        if self.views is not None:
            self.views.observe(metrics_views(rows))
        with stopwatch(timings, "headroom"):
            headroom_rows = self.headroom.evaluate(rows)
            if headroom_rows:
                self.tables["partition_headroom"].upsert(pa.Table.from_pylist(headroom_rows),
                                                         batch_id)
        if exporter is not None:
            exporter.update_headroom(headroom_rows)
        with stopwatch(timings, "incidents"):
            self.update_incidents(clusters, first, last, batch_id, stored)
        failpoints.hit("incidents_committed")
        if exporter is not None:
            failures = self.pusher.stats.failures
            if failures > self.push_failures_seen:
                exporter.count(metric.PIPELINE_ALERT_PUSH_FAILURES_TOTAL,
                               failures - self.push_failures_seen)
            self.push_failures_seen = failures
            open_now = self.tables["incidents"].read(
                field("resolved_at").is_null(), field("cluster").isin(clusters),
                columns=["cluster", "kind"])
            exporter.update_open_incidents(clusters, open_now.to_pylist())
        return timings

    def horizon_broker_rows(self, clusters: list[str], first: datetime, last: datetime
                            ) -> pa.Table:
        """The stored broker_signals rows of `clusters` from the incident horizon before
        `first` through `last`: what the cluster signals and the incidents both read (one
        read a batch, after the broker_signals MERGE)."""
        horizon = first - timedelta(seconds=self.config.signals.incident_horizon_seconds)
        return self.tables["broker_signals"].read(
            (field("window_start") >= pa.scalar(horizon, TS))
            & (field("window_start") <= pa.scalar(last, TS)),
            field("cluster").isin(clusters))

    def update_cluster_signals(self, clusters: list[str], first: datetime, last: datetime,
                               batch_id: int, stored: pa.Table | None = None) -> pa.Table:
        """cluster_signals of the windows first..last, upserted. The stored broker rows of
        the incident horizon before them are read too (`stored`, when the caller has them):
        they tell which broker was the controller, whose missing numbers make a window's
        controller count unknown."""
        if stored is None:
            stored = self.horizon_broker_rows(clusters, first, last)
        cluster_rows = cluster_signals(stored, since=first)
        self.tables["cluster_signals"].upsert(cluster_rows, batch_id)
        return cluster_rows

    def recompute(self, clusters: list[str], spans: list[tuple[datetime, datetime]],
                  timings: dict[str, float]
                  ) -> tuple[pa.Table, pa.Table, pa.Table, pa.Table] | None:
        """The touched windows from bronze, the authority: (slice, partials, segments, rows),
        or None when the slice holds no signal samples. Its steps are timed into `timings`."""
        cfg = self.config.signals
        width = timedelta(seconds=cfg.window_seconds)
        lookback = timedelta(seconds=cfg.counter_lookback_seconds)
        read_from, read_to = spans[0][0] - lookback, spans[-1][1] + width
        dates = sorted({(read_from + timedelta(days=d)).strftime("%Y-%m-%d")
                        for d in range((read_to - read_from).days + 2)})
        in_spans = field("date").isin(dates) & any_of(
            (field("ts") >= pa.scalar(lo - lookback, TS))
            & (field("ts") < pa.scalar(hi + width, TS)) for lo, hi in spans)
        # Before the first touched window of a span only counters matter (the previous Count
        # of each series, for the first increase): the look-back is most of the slice otherwise.
        needed = any_of((field("ts") >= pa.scalar(lo, TS))
                        & (field("ts") < pa.scalar(hi + width, TS)) for lo, hi in spans) | (
            field("kind") == "counter")
        signal_rows = (field("cluster").isin(clusters) & field("metric").isin(SIGNAL_METRICS)
                       & needed)
        with stopwatch(timings, "slice"):
            samples = self.tables["bronze"].read(in_spans, signal_rows, columns=SAMPLE_COLUMNS)
        if samples.num_rows == 0:
            return None
        with stopwatch(timings, "broker_signals"):
            partials, segments, signals = self.signal_windows(samples)
            rows = signals.filter(functools.reduce(pc.or_, (
                pc.and_(pc.greater_equal(signals["window_start"], pa.scalar(lo, TS)),
                        pc.less_equal(signals["window_start"], pa.scalar(hi, TS)))
                for lo, hi in spans)))
        return samples, partials, segments, rows

    def seed_open_windows(self, recomputed: tuple[pa.Table, pa.Table, pa.Table, pa.Table],
                          spans: list[tuple[datetime, datetime]], clusters: list[str]) -> None:
        """Hold what was just recomputed, for the clusters whose newest window it reached."""
        samples, partials, segments, _ = recomputed
        later = self.tables["broker_signals"].read(
            field("window_start") > pa.scalar(spans[-1][1], TS),
            field("cluster").isin(clusters), columns=["cluster"])
        try:
            self.open_windows.seed(samples, partials, segments, spans, clusters,
                                   set(later["cluster"].to_pylist()))
        except Exception:  # the next batch recomputes instead
            LOG.exception("holding the recomputed signal windows failed")
            self.open_windows.clear()

    def update_incidents(self, clusters: list[str], first: datetime, last: datetime,
                         batch_id: int, broker_rows: pa.Table | None = None) -> None:
        """Recompute incidents over a bounded horizon and reconcile them with the table;
        `broker_rows`: horizon_broker_rows(), when the caller has them."""
        cfg = self.config.signals
        horizon = first - timedelta(seconds=cfg.incident_horizon_seconds)
        in_horizon = ((field("window_start") >= pa.scalar(horizon, TS))
                      & (field("window_start") <= pa.scalar(last, TS)))
        of_clusters = field("cluster").isin(clusters)
        if broker_rows is None:
            broker_rows = self.horizon_broker_rows(clusters, first, last)
        cluster_rows = self.tables["cluster_signals"].read(in_horizon, of_clusters)
        if broker_rows.num_rows == 0:
            return
        if self.exporter is not None:
            self.exporter.update_churn(
                unmatched_shrinks(broker_rows.select(CHURN_COLUMNS).to_pylist(),
                                  cfg.isr_churn_match_seconds))
        computed = incident_runs(incident_conditions(broker_rows, cluster_rows, cfg))
        # Every stored incident the recomputation can touch: open, or resolved inside the
        # horizon. Each continues in its run, or stays closed (withdrawn): no incident
        # anyone was shown is deleted. All of them keep their cause.
        stored = self.tables["incidents"].read(
            field("resolved_at").is_null()
            | (field("resolved_at") >= pa.scalar(horizon, TS)), of_clusters)
        incidents = with_causes(reconcile_incidents(computed, stored, horizon),
                                stored_causes(stored),
                                self.cause_of if self.causes is not None else None)
        self.tables["incidents"].upsert(incidents, batch_id)
        if self.config.alert_push.urls():
            pushed = incidents.to_pylist()
            elr = newest_elr_enabled(cluster_rows)
            for incident in pushed:  # the unclean-election page says whether ELR was on
                incident["elr_enabled"] = elr.get(incident["cluster"])
            self.pusher.push(pushed, self.may_page)

    def cause_of(self, cluster: str, kind: str, broker: str) -> str | None:
        """The brokers the Admin API blames for an incident, from the newest fresh poll of
        its cluster (None without one)."""
        return None if self.causes is None else self.causes.cause(cluster, kind, broker)

    def may_page(self, cluster: str) -> bool:
        """Whether the direct push may page for this cluster: one named under `clusters:`
        or whose series the exporter holds (its admission bounds how many a bad record can
        make up). Without an exporter, any: the push's own cap bounds those."""
        return (cluster in self.config.clusters or self.exporter is None
                or self.exporter.holds(cluster))

    def trial(self, rows: pa.Table, admission: BrokerAdmission) -> None:
        """The driver stages that compute from a batch's samples, on `rows` alone and on
        copies (admission, headroom, an exporter of its own): nothing is written and nothing
        the job holds changes. Raises what they raise."""
        failpoints.poisoned(rows)
        kept, _ = copy.deepcopy(admission)(rows)
        own = kept.filter(pc.is_in(kept["metric"], pa.array(SIGNAL_METRICS)))
        spans = self.touched(own)[1] if own.num_rows else []
        if not spans:
            return
        cfg = self.config.signals
        signals = self.signal_windows(own.select(SAMPLE_COLUMNS))[2]
        scratch = Exporter(config=self.exporter.config if self.exporter is not None else None)
        scratch.update_brokers(signals.to_pylist())
        cluster_rows = cluster_signals(signals, since=spans[0][0])
        scratch.update_clusters(cluster_rows.to_pylist())
        scratch.update_headroom(HeadroomTracker(
            self.config.clusters, self.tables["partition_headroom"].read).evaluate(
                signals.to_pylist()))
        scratch.update_churn(unmatched_shrinks(signals.select(CHURN_COLUMNS).to_pylist(),
                                               cfg.isr_churn_match_seconds))
        incident_runs(incident_conditions(signals, cluster_rows, cfg))
