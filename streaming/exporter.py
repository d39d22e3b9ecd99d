"""The live state as Prometheus series, served from the driver.

Only the driver's Python process can export (executors cannot set driver metrics), so
the job hands this class the rows it just upserted. Series names and help text come
from metrics_schemas/exported_metrics.yaml; labels stay bounded (cluster, broker, ...).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from streaming import metric_names as metric
from streaming.config import ExporterConfig
from streaming.refusal import NotStarted
from streaming.schemas import load_yaml


class ListenFailed(NotStarted):
    """The /metrics endpoint could not listen on its configured address."""


LOG = logging.getLogger("kafka_health.exporter")

# exported gauge -> broker_signals column: the current state is the newest window's last value
BROKER_COLUMNS = {
    metric.UNDER_MIN_ISR_PARTITIONS: "under_min_isr_last",
    metric.AT_MIN_ISR_PARTITIONS: "at_min_isr_last",
    metric.UNDER_REPLICATED_PARTITIONS: "under_replicated_last",
    metric.ISR_SHRINKS_WINDOW_INCREASE: "isr_shrinks_increase",
    metric.ISR_EXPANDS_WINDOW_INCREASE: "isr_expands_increase",
    metric.REQUEST_QUEUE_UTILIZATION_RATIO: "request_queue_utilization_max",
    metric.RESPONSE_QUEUE_SIZE: "response_queue_size_max",
    metric.REQUEST_HANDLER_IDLE_RATIO: "request_handler_idle_min",
    metric.NETWORK_PROCESSOR_IDLE_RATIO: "network_processor_idle_min",
    metric.PARTITIONS: "partition_count_last",
    metric.LEADERS: "leader_count_last",
    metric.OPEN_FILE_DESCRIPTORS: "open_fds_last",
    metric.MAX_FILE_DESCRIPTORS: "max_fds_last",
    metric.OFFLINE_LOG_DIRECTORIES: "offline_log_dirs_max",
    metric.METADATA_LAG_MILLISECONDS: "metadata_lag_ms_max",
    metric.METADATA_ERRORS_WINDOW_INCREASE: "metadata_errors_increase",
}
# Every column of a broker_signals row that update_brokers reads (it reads rows as dicts).
BROKER_ROW_COLUMNS = ("cluster", "broker", "window_start", "window_end", "last_sample_ts",
                      "unclean_elections_increase", *BROKER_COLUMNS.values())
# Data loss must survive the scrape: the newest window's increase alone can be > 0 for
# less than a scrape interval (an election in a window's last seconds, the next window's
# row arriving a moment later) or never be exported at all (both windows in one batch).
# So the unclean gauge holds the elections of every window in the last UNCLEAN_HOLD, of
# event time and of wall-clock time both: a catch-up batch (a restart after downtime)
# brings many windows at once, and one older than the newest by UNCLEAN_HOLD must still
# be exported for UNCLEAN_HOLD of scrapes, not dropped in the update that brought it.
UNCLEAN_HOLD = timedelta(minutes=5)
# Windows that left the hold are remembered this long (event time) with their count: a
# window sent again (late samples recompute it) is news only if its count went up, not a
# second page for the same loss.
UNCLEAN_REMEMBERED = timedelta(hours=1)
CLUSTER_COLUMNS = {
    metric.OFFLINE_PARTITIONS: "offline_partitions_max",
    metric.ACTIVE_CONTROLLERS: "active_controllers",
    metric.BROKERS_REPORTING: "brokers_reporting",
    metric.FENCED_BROKERS: "fenced_brokers",
    metric.ACTIVE_BROKERS: "active_brokers",
    metric.PREFERRED_REPLICA_IMBALANCE: "preferred_imbalance",
    metric.CONTROLLER_ELECTIONS_5M: "controller_elections_5m",
    metric.ELR_ELECTIONS_WINDOW_INCREASE: "elr_elections_increase",
    metric.ELR_ENABLED: "elr_enabled",
}
EXTRA_LABELS = {
    metric.PARTITION_CEILING: ["bound"],
    metric.PARTITION_HEADROOM_RATIO: ["binding_bound"],
    metric.PIPELINE_QUARANTINED_RECORDS_TOTAL: ["reason"],
    metric.PIPELINE_IDENTITY_DEFAULTED_SAMPLES_TOTAL: ["field"],
    metric.PIPELINE_SERIES_DROPPED_TOTAL: ["reason"],
    metric.PIPELINE_VIEW_DISAGREEMENTS_TOTAL: ["stale"],
}


class SeriesWrites:
    """Gauge writes of one update, applied at its end: only the last write to each series
    reaches the registry.

    Why: a catch-up batch holds hundreds of windows per broker, and setting every gauge for
    each of them, each overwritten by the next, was ~10 % of the driver's signal work.
    The registry ends in the state the writes in order would have left it in.
    """

    def __init__(self) -> None:
        self.last: dict[tuple[str, tuple[str, ...]], float | None] = {}  # None: remove

    def set(self, gauge: str, labels: tuple[str, ...], value: float) -> None:
        self.last[(gauge, labels)] = value

    def remove(self, gauge: str, labels: tuple[str, ...]) -> None:
        self.last[(gauge, labels)] = None

    def apply(self, gauges: dict[str, Gauge]) -> None:
        for (gauge, labels), value in self.last.items():
            if value is None:
                _remove(gauges[gauge], *labels)
            else:
                gauges[gauge].labels(*labels).set(value)


def window_rank(row: dict[str, Any], wall: datetime) -> datetime:
    """Where a window stands in "newest window wins": its start, but no later than the
    start of the window the wall clock is in.

    Why: a window ahead of the wall clock (one sample from a broker whose clock is ahead,
    within the quarantine's allowance) would otherwise stay newest until real time caught
    up, and every real window after it, an under-min-ISR of 7 among them, would be hidden.
    Ranked at the wall clock's window, it ties with the current real window, and a tie goes
    to the row handed over later: data that arrives later is never masked by a future one.
    A broker whose clock always runs ahead thus still exports each new window.
    """
    start, width = row["window_start"], row["window_end"] - row["window_start"]
    if width <= timedelta(0):
        return start
    current = wall - (wall - start) % width  # the wall clock's window, on start's grid
    return min(start, current)


class Exporter:
    """The registry /metrics serves, fed by the job after each step of a batch.

    Series are bounded however hostile the input: a broker or cluster joins only while the
    batch's budget of new series lasts (`max_new_series_per_batch`), and leaves, with every
    series naming it, once no row has named it for `series_ttl_seconds` of wall-clock time
    (`begin_batch` does both). Without that, one record naming 100k brokers made 1.6 M
    series that no scrape could read and that were never removed.
    """

    def __init__(self, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time,
                 config: ExporterConfig | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.clock = clock
        self.config = config or ExporterConfig()
        self.gauges: dict[str, Gauge] = {}
        self.counters: dict[str, Counter] = {}
        self.labelnames: dict[str, list[str]] = {}
        spec = load_yaml("exported_metrics.yaml")
        for group in spec.values():
            labels = list(group.get("labels", []))
            for name, help_text in (group.get("gauges") or {}).items():
                self.labelnames[name] = labels + EXTRA_LABELS.get(name, [])
                self.gauges[name] = Gauge(name, help_text, self.labelnames[name],
                                          registry=self.registry)
            for name, help_text in (group.get("counters") or {}).items():
                self.counters[name] = Counter(name.removesuffix("_total"), help_text,
                                              labels + EXTRA_LABELS.get(name, []),
                                              registry=self.registry)
        self._lock = threading.Lock()
        self._broker_window: dict[tuple[str, str], datetime] = {}
        # Each broker's newest sample time as reported, and as seen: the reported one
        # capped at the wall clock when it first came (see update_brokers)
        self._broker_reported_ts: dict[tuple[str, str], datetime] = {}
        self._broker_last_ts: dict[tuple[str, str], datetime] = {}
        # per broker, per window: (unclean elections, wall-clock time first exported); and
        # the windows that left that hold, with their count (UNCLEAN_REMEMBERED)
        self._unclean: dict[tuple[str, str], dict[datetime, tuple[float, float]]] = {}
        self._unclean_exported: dict[tuple[str, str], dict[datetime, float]] = {}
        self._cluster_window: dict[str, datetime] = {}
        self._headroom_at: dict[tuple[str, str], datetime] = {}
        self._binding: dict[tuple[str, str], str] = {}
        # What a new broker or cluster costs of the batch's budget: one series per gauge
        # that names it (a gauge with a further label, like the bound, holds more).
        self._broker_cost = sum(1 for n in self.labelnames.values() if n[:2] == ["cluster", "broker"])
        self._cluster_cost = sum(1 for n in self.labelnames.values()
                                 if n[:1] == ["cluster"] and n[1:2] != ["broker"])
        self._seen_brokers: dict[tuple[str, str], float] = {}  # wall time a row named it
        self._seen_clusters: dict[str, float] = {}
        self._budget = self.config.max_new_series_per_batch
        self._refused: set[str | tuple[str, str]] = set()
        self._dropped = 0  # series refused since the counter was last raised
        self.gauges[metric.PIPELINE_EXPORTED_SERIES].set_function(self.series_count)
        self.server: Any = None

    def start(self, bind: str, port: int) -> None:
        try:
            self.server, _ = start_http_server(port, addr=bind, registry=self.registry)
        except OSError as err:  # before Spark starts: a clear refusal, not a traceback
            raise ListenFailed(
                f"/metrics cannot listen on {bind}:{port}: {err.strerror or err}. Another "
                f"process holds the port (another kafka-health?), or the address is not "
                f"this machine's: set exporter.port / exporter.bind (or "
                f"KAFKA_HEALTH__EXPORTER__PORT)") from err

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server = None

    def begin_batch(self) -> None:
        """A new batch: drop the brokers and clusters silent for longer than the TTL, and
        give the batch its budget of new series."""
        now = self.clock()
        ttl = self.config.series_ttl_seconds
        with self._lock:
            clusters = {c for c, at in self._seen_clusters.items() if now - at > ttl}
            brokers = {k for k, at in self._seen_brokers.items()
                       if now - at > ttl or k[0] in clusters}
            if clusters or brokers:
                self._forget(clusters, brokers)
            self._budget = self.config.max_new_series_per_batch
            self._refused = set()

    def _forget(self, clusters: set[str], brokers: set[tuple[str, str]]) -> None:
        """Remove every series of these clusters and brokers, and what was kept for them.
        One pass over each gauge, however many go (call under the lock)."""
        for name, gauge in self.gauges.items():
            labels = self.labelnames[name]
            if labels[:1] != ["cluster"]:
                continue
            per_broker = labels[1:2] == ["broker"]
            for family in gauge.collect():
                for sample in family.samples:
                    key = (sample.labels["cluster"], sample.labels.get("broker", ""))
                    if key[0] in clusters or (per_broker and key in brokers):
                        _remove(gauge, *(sample.labels[label] for label in labels))
        for store in (self._broker_window, self._broker_last_ts, self._broker_reported_ts,
                      self._unclean, self._unclean_exported,
                      self._headroom_at, self._binding, self._seen_brokers):
            for key in brokers & store.keys():
                del store[key]
        for cluster_store in (self._cluster_window, self._seen_clusters):
            for cluster in clusters & cluster_store.keys():
                del cluster_store[cluster]
        LOG.info("exporter: dropped the series of %d broker(s) and %d cluster(s) silent for "
                 "over %.0f s", len(brokers), len(clusters), self.config.series_ttl_seconds)

    def _admit(self, now: float, cluster: str, broker: str | None = None) -> bool:
        """Whether this cluster (and broker) may have series: known ones are refreshed, new
        ones take their series from the batch's budget while it lasts (call under the lock;
        `_count_dropped` after the update counts the refused)."""
        key = None if broker is None else (cluster, broker)
        if cluster in self._seen_clusters and (key is None or key in self._seen_brokers):
            self._seen_clusters[cluster] = now
            if key is not None:
                self._seen_brokers[key] = now
            return True
        cost = (0 if cluster in self._seen_clusters else self._cluster_cost) + (
            0 if key is None else self._broker_cost)
        if cost > self._budget:
            refused = key or cluster
            if refused not in self._refused:
                if not self._refused:
                    LOG.warning("exporter: over %d new series in this batch; further new "
                                "brokers and clusters are not exported this batch (counted on "
                                "%s)", self.config.max_new_series_per_batch,
                                metric.PIPELINE_SERIES_DROPPED_TOTAL)
                self._refused.add(refused)
                self._dropped += cost
            return False
        self._budget -= cost
        self._seen_clusters[cluster] = now
        if key is not None:
            self._seen_brokers[key] = now
        return True

    def _count_dropped(self) -> None:
        if self._dropped:
            self.counters[metric.PIPELINE_SERIES_DROPPED_TOTAL].labels("new_series_cap").inc(self._dropped)
            self._dropped = 0

    def holds(self, cluster: str) -> bool:
        """Whether this cluster's series are exported (admitted and not expired)."""
        return cluster in self._seen_clusters

    def series_count(self) -> float:
        """Series this registry serves, computed at scrape time (its own gauge aside)."""
        total = 0
        for collector in [*self.gauges.values(), *self.counters.values()]:
            if collector is self.gauges[metric.PIPELINE_EXPORTED_SERIES]:
                continue
            for family in collector.collect():
                total += sum(1 for s in family.samples if not s.name.endswith("_created"))
        return float(total + 1)

    @staticmethod
    def _ranked(rows: list[dict[str, Any]], now: float) -> list[tuple[datetime, dict[str, Any]]]:
        """(window_rank, row) pairs, oldest first: the order a batch's rows apply in."""
        wall = datetime.fromtimestamp(now, UTC)
        return sorted(((window_rank(r, wall), r) for r in rows),
                      key=lambda p: (p[0], p[1]["window_start"]))

    def update_brokers(self, rows: list[dict[str, Any]]) -> None:
        """Export each broker's newest window; an older (late-corrected) window never wins,
        except in the unclean-election hold (UNCLEAN_HOLD), which takes every window."""
        writes = SeriesWrites()
        now = self.clock()
        ranked = self._ranked(rows, now)
        with self._lock:
            for rank, row in ranked:
                key = (row["cluster"], row["broker"])
                if not self._admit(now, *key):
                    continue
                count = row.get("unclean_elections_increase")
                window = row["window_start"]
                if count is not None and count > self._unclean_exported.get(key, {}).get(
                        window, -math.inf):
                    held = self._unclean.setdefault(key, {})
                    first = held.get(window, (0.0, now))[1]
                    held[window] = (count, first)
                if rank < self._broker_window.get(key, rank):
                    continue
                self._broker_window[key] = rank
                last = row.get("last_sample_ts")
                reported = self._broker_reported_ts
                if key not in reported or (last is not None and last != reported[key]):
                    # A sample dated ahead of the wall clock (a broker whose clock runs
                    # ahead) counts as seen now, and stays so once its broker goes quiet:
                    # capped later, at each staleness check, it would read as fresh until
                    # the wall clock caught up with it, hiding a dark broker for as long as
                    # its clock is ahead. A row sent again (a recomputation) changes
                    # nothing; a newest window whose last sample is earlier than the one
                    # held (the broker's clock stepped back) is news.
                    reported[key] = last
                    self._broker_last_ts[key] = last if last is None else min(
                        last, datetime.fromtimestamp(now, UTC))
                for gauge, column in BROKER_COLUMNS.items():
                    value = row.get(column)
                    if value is not None:
                        writes.set(gauge, key, value)
            writes.apply(self.gauges)
            hold = UNCLEAN_HOLD.total_seconds()
            for key, windows in self._unclean.items():
                newest = self._broker_window.get(key)
                exported = self._unclean_exported.setdefault(key, {})
                for window in [w for w, (_, first) in windows.items()
                               if newest and w <= newest - UNCLEAN_HOLD
                               and now - first >= hold]:
                    exported[window] = windows.pop(window)[0]
                for window in [w for w in exported
                               if newest and w <= newest - UNCLEAN_REMEMBERED]:
                    del exported[window]
                self.gauges[metric.UNCLEAN_LEADER_ELECTIONS_WINDOW_INCREASE].labels(*key).set(
                    sum(count for count, _ in windows.values()))
            self._count_dropped()

    def update_clusters(self, rows: list[dict[str, Any]]) -> None:
        now = self.clock()
        ranked = self._ranked(rows, now)
        with self._lock:
            for rank, row in ranked:
                cluster = row["cluster"]
                if not self._admit(now, cluster) or rank < self._cluster_window.get(cluster, rank):
                    continue
                self._cluster_window[cluster] = rank
                for gauge, column in CLUSTER_COLUMNS.items():
                    value = row.get(column)
                    if value is not None:
                        self.gauges[gauge].labels(cluster).set(value)
                    elif gauge == metric.ACTIVE_CONTROLLERS:
                        # unknown (the last controller's numbers are missing), not 0 and
                        # not the window before's: absent, which the rule's `for:` rides out
                        _remove(self.gauges[gauge], cluster)
            self._count_dropped()

    def update_churn(self, unmatched: dict[tuple[str, str], float]) -> None:
        with self._lock:
            gauge = self.gauges[metric.ISR_CHURN_UNMATCHED_SHRINKS]
            for (cluster, broker), value in unmatched.items():
                if (cluster, broker) in self._seen_brokers:
                    gauge.labels(cluster, broker).set(value)

    def update_headroom(self, rows: list[dict[str, Any]]) -> None:
        """Newest evaluation per broker; a binding bound that changed drops its old series."""
        from streaming.headroom.model import BOUND_ORDER

        writes = SeriesWrites()
        with self._lock:
            for row in sorted(rows, key=lambda r: r["evaluated_at"]):
                key = (row["cluster"], row["broker"])
                if key not in self._seen_brokers:
                    continue
                if row["evaluated_at"] < self._headroom_at.get(key, row["evaluated_at"]):
                    continue
                self._headroom_at[key] = row["evaluated_at"]
                for bound in BOUND_ORDER:
                    value = row.get(f"ceiling_{bound}")
                    if value is None:
                        writes.remove(metric.PARTITION_CEILING, (*key, bound))
                    else:
                        writes.set(metric.PARTITION_CEILING, (*key, bound), value)
                ratio = metric.PARTITION_HEADROOM_RATIO
                previous = self._binding.get(key)
                if previous is not None and previous != row["binding_bound"]:
                    writes.remove(ratio, (*key, previous))
                self._binding[key] = row["binding_bound"]
                if row["binding_ceiling"]:
                    writes.set(ratio, (*key, row["binding_bound"]),
                               row["headroom"] / row["binding_ceiling"])
                writes.set(metric.PARTITION_HEADROOM, key, row["headroom"])
                days = metric.DAYS_TO_PARTITION_CEILING
                if row["days_to_ceiling"] is None:
                    writes.remove(days, key)
                else:
                    writes.set(days, key, row["days_to_ceiling"])
            writes.apply(self.gauges)

    def update_staleness(self, stale_after_seconds: float) -> list[tuple[str, str, float]]:
        """Flag brokers whose newest sample lags their cluster's newest by too much.

        Event time, not wall time: a compressed replay or a lagging pipeline must not
        make every broker look stale (the pipeline watchdog covers a stopped stream).
        Returns (cluster, broker, age) of the stale ones.
        """
        stale = []
        with self._lock:
            newest: dict[str, datetime] = {}
            for (cluster, _), ts in self._broker_last_ts.items():
                if ts is not None and (cluster not in newest or ts > newest[cluster]):
                    newest[cluster] = ts
            # Capped at the wall clock: a broker whose clock runs ahead would otherwise hide
            # its cluster going dark (time() - this) for as long as its clock is ahead.
            now = self.clock()
            for cluster, ts in newest.items():
                self.gauges[metric.CLUSTER_LAST_SAMPLE_TIMESTAMP_SECONDS].labels(
                    cluster).set(min(ts.timestamp(), now))
            for (cluster, broker), ts in self._broker_last_ts.items():
                if ts is None:
                    continue
                # A sample ahead of the wall clock counts as now, for the same reason: one
                # future-dated sample must not make its cluster's other brokers look stale.
                wall = datetime.fromtimestamp(now, UTC)
                age = (min(newest[cluster], wall) - min(ts, wall)).total_seconds()
                is_stale = age > stale_after_seconds
                self.gauges[metric.BROKER_LAST_SAMPLE_AGE_SECONDS].labels(
                    cluster, broker).set(age)
                self.gauges[metric.BROKER_STALE].labels(cluster, broker).set(
                    1 if is_stale else 0)
                if is_stale:
                    stale.append((cluster, broker, age))
        return stale

    def update_open_incidents(self, clusters: list[str], open_rows: list[dict[str, Any]]) -> None:
        """Open incidents per (cluster, kind), with explicit zeros so "none open" is visible."""
        from streaming.signals.incidents import KINDS

        held = [c for c in clusters if c in self._seen_clusters]
        counts = {(c, k): 0 for c in held for k in KINDS}
        for row in open_rows:
            if row["cluster"] in self._seen_clusters:
                counts[(row["cluster"], row["kind"])] = counts.get((row["cluster"], row["kind"]),
                                                                  0) + 1
        gauge = self.gauges[metric.OPEN_INCIDENTS]
        for (cluster, kind), value in counts.items():
            gauge.labels(cluster, kind).set(value)

    def replace_series(self, name: str, cluster: str,
                       values: Mapping[tuple[str, ...], float]) -> None:
        """Make `values` (labels after `cluster` -> value) the cluster's only series of the
        gauge: set them, remove the cluster's others (a broker, group or error class that no
        longer applies disappears instead of lingering)."""
        gauge = self.gauges[name]
        labelnames = self.labelnames[name]
        held = set()
        for family in gauge.collect():
            for sample in family.samples:
                if sample.labels.get("cluster") == cluster:
                    held.add(tuple(sample.labels[n] for n in labelnames[1:]))
        for rest in held - set(values):
            _remove(gauge, cluster, *rest)  # the TTL may have dropped it already
        for rest, value in values.items():
            gauge.labels(cluster, *rest).set(value)

    def pipeline(self, name: str, value: float) -> None:
        self.gauges[name].set(value)

    def count(self, name: str, amount: float = 1.0, **labels: str) -> None:
        counter = self.counters[name]
        (counter.labels(**labels) if labels else counter).inc(amount)


def _remove(gauge: Gauge, *labels: str) -> None:
    """Drop a series: absent means "not computable", which a stale zero would hide."""
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)
