"""The live state as Prometheus series, served from the driver.

Only the driver's Python process can export (executors cannot set driver metrics), so
the job hands this class the rows it just upserted. Series names and help text come
from metrics_schemas/exported_metrics.yaml; labels stay bounded (cluster, broker, ...).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from streaming.schemas import load_yaml

# exported gauge -> broker_signals column: the current state is the newest window's last value
BROKER_COLUMNS = {
    "kafka_health_under_min_isr_partitions": "under_min_isr_last",
    "kafka_health_at_min_isr_partitions": "at_min_isr_last",
    "kafka_health_under_replicated_partitions": "under_replicated_last",
    "kafka_health_isr_shrinks_window_increase": "isr_shrinks_increase",
    "kafka_health_isr_expands_window_increase": "isr_expands_increase",
    "kafka_health_request_queue_utilization_ratio": "request_queue_utilization_max",
    "kafka_health_response_queue_size": "response_queue_size_max",
    "kafka_health_request_handler_idle_ratio": "request_handler_idle_min",
    "kafka_health_network_processor_idle_ratio": "network_processor_idle_min",
    "kafka_health_partitions": "partition_count_last",
    "kafka_health_leaders": "leader_count_last",
    "kafka_health_open_file_descriptors": "open_fds_last",
    "kafka_health_max_file_descriptors": "max_fds_last",
}
# Data loss must survive the scrape: the newest window's increase alone can be > 0 for
# less than a scrape interval (an election in a window's last seconds, the next window's
# row arriving a moment later) or never be exported at all (both windows in one batch).
# So the unclean gauge holds the elections of every window in the last UNCLEAN_HOLD.
UNCLEAN_GAUGE = "kafka_health_unclean_leader_elections_window_increase"
UNCLEAN_HOLD = timedelta(minutes=5)
CLUSTER_COLUMNS = {
    "kafka_health_offline_partitions": "offline_partitions_max",
    "kafka_health_active_controllers": "active_controllers",
    "kafka_health_brokers_reporting": "brokers_reporting",
}
EXTRA_LABELS = {
    "kafka_health_partition_ceiling": ["bound"],
    "kafka_health_partition_headroom_ratio": ["binding_bound"],
    "kafka_health_pipeline_quarantined_records_total": ["reason"],
    "kafka_health_pipeline_identity_defaulted_samples_total": ["field"],
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


def window_rank(row: dict[str, Any], now: float) -> datetime:
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
    wall = datetime.fromtimestamp(now, UTC)
    current = wall - (wall - start) % width  # the wall clock's window, on start's grid
    return min(start, current)


class Exporter:
    def __init__(self, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.registry = registry or CollectorRegistry()
        self.clock = clock
        self.gauges: dict[str, Gauge] = {}
        self.counters: dict[str, Counter] = {}
        spec = load_yaml("exported_metrics.yaml")
        for group in spec.values():
            labels = list(group.get("labels", []))
            for name, help_text in (group.get("gauges") or {}).items():
                self.gauges[name] = Gauge(name, help_text, labels + EXTRA_LABELS.get(name, []),
                                          registry=self.registry)
            for name, help_text in (group.get("counters") or {}).items():
                self.counters[name] = Counter(name.removesuffix("_total"), help_text,
                                              labels + EXTRA_LABELS.get(name, []),
                                              registry=self.registry)
        self._lock = threading.Lock()
        self._broker_window: dict[tuple[str, str], datetime] = {}
        self._broker_last_ts: dict[tuple[str, str], datetime] = {}
        self._unclean: dict[tuple[str, str], dict[datetime, float]] = {}
        self._cluster_window: dict[str, datetime] = {}
        self._headroom_at: dict[tuple[str, str], datetime] = {}
        self._binding: dict[tuple[str, str], str] = {}
        self.server: Any = None

    def start(self, bind: str, port: int) -> None:
        self.server, _ = start_http_server(port, addr=bind, registry=self.registry)

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server = None

    def update_brokers(self, rows: list[dict[str, Any]]) -> None:
        """Export each broker's newest window; an older (late-corrected) window never wins,
        except in the unclean-election hold (UNCLEAN_HOLD), which takes every window."""
        writes = SeriesWrites()
        now = self.clock()
        ranked = sorted(((window_rank(r, now), r) for r in rows),
                        key=lambda p: (p[0], p[1]["window_start"]))
        with self._lock:
            for rank, row in ranked:
                key = (row["cluster"], row["broker"])
                if row.get("unclean_elections_increase") is not None:
                    self._unclean.setdefault(key, {})[row["window_start"]] = \
                        row["unclean_elections_increase"]
                if rank < self._broker_window.get(key, rank):
                    continue
                self._broker_window[key] = rank
                last = row.get("last_sample_ts")
                if last is not None and last > self._broker_last_ts.get(key, last):
                    self._broker_last_ts[key] = last
                self._broker_last_ts.setdefault(key, last)
                for gauge, column in BROKER_COLUMNS.items():
                    value = row.get(column)
                    if value is not None:
                        writes.set(gauge, key, value)
            writes.apply(self.gauges)
            for key, windows in self._unclean.items():
                newest = self._broker_window.get(key)
                for window in [w for w in windows if newest and w <= newest - UNCLEAN_HOLD]:
                    del windows[window]
                self.gauges[UNCLEAN_GAUGE].labels(*key).set(sum(windows.values()))

    def update_clusters(self, rows: list[dict[str, Any]]) -> None:
        now = self.clock()
        ranked = sorted(((window_rank(r, now), r) for r in rows),
                        key=lambda p: (p[0], p[1]["window_start"]))
        with self._lock:
            for rank, row in ranked:
                cluster = row["cluster"]
                if rank < self._cluster_window.get(cluster, rank):
                    continue
                self._cluster_window[cluster] = rank
                for gauge, column in CLUSTER_COLUMNS.items():
                    value = row.get(column)
                    if value is not None:
                        self.gauges[gauge].labels(cluster).set(value)

    def update_churn(self, unmatched: dict[tuple[str, str], float]) -> None:
        with self._lock:
            gauge = self.gauges["kafka_health_isr_churn_unmatched_shrinks"]
            for (cluster, broker), value in unmatched.items():
                gauge.labels(cluster, broker).set(value)

    def update_headroom(self, rows: list[dict[str, Any]]) -> None:
        """Newest evaluation per broker; a binding bound that changed drops its old series."""
        from streaming.headroom.model import BOUND_ORDER

        writes = SeriesWrites()
        with self._lock:
            for row in sorted(rows, key=lambda r: r["evaluated_at"]):
                key = (row["cluster"], row["broker"])
                if row["evaluated_at"] < self._headroom_at.get(key, row["evaluated_at"]):
                    continue
                self._headroom_at[key] = row["evaluated_at"]
                for bound in BOUND_ORDER:
                    value = row.get(f"ceiling_{bound}")
                    if value is None:
                        writes.remove("kafka_health_partition_ceiling", (*key, bound))
                    else:
                        writes.set("kafka_health_partition_ceiling", (*key, bound), value)
                ratio = "kafka_health_partition_headroom_ratio"
                previous = self._binding.get(key)
                if previous is not None and previous != row["binding_bound"]:
                    writes.remove(ratio, (*key, previous))
                self._binding[key] = row["binding_bound"]
                if row["binding_ceiling"]:
                    writes.set(ratio, (*key, row["binding_bound"]),
                               row["headroom"] / row["binding_ceiling"])
                writes.set("kafka_health_partition_headroom", key, row["headroom"])
                days = "kafka_health_days_to_partition_ceiling"
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
                self.gauges["kafka_health_cluster_last_sample_timestamp_seconds"].labels(
                    cluster).set(min(ts.timestamp(), now))
            for (cluster, broker), ts in self._broker_last_ts.items():
                if ts is None:
                    continue
                # A sample ahead of the wall clock counts as now, for the same reason: one
                # future-dated sample must not make its cluster's other brokers look stale.
                wall = datetime.fromtimestamp(now, UTC)
                age = (min(newest[cluster], wall) - min(ts, wall)).total_seconds()
                is_stale = age > stale_after_seconds
                self.gauges["kafka_health_broker_last_sample_age_seconds"].labels(
                    cluster, broker).set(age)
                self.gauges["kafka_health_broker_stale"].labels(cluster, broker).set(
                    1 if is_stale else 0)
                if is_stale:
                    stale.append((cluster, broker, age))
        return stale

    def update_open_incidents(self, clusters: list[str], open_rows: list[dict[str, Any]]) -> None:
        """Open incidents per (cluster, kind), with explicit zeros so "none open" is visible."""
        from streaming.signals.incidents import KINDS

        counts = {(c, k): 0 for c in clusters for k in KINDS}
        for row in open_rows:
            counts[(row["cluster"], row["kind"])] = counts.get((row["cluster"], row["kind"]), 0) + 1
        gauge = self.gauges["kafka_health_open_incidents"]
        for (cluster, kind), value in counts.items():
            gauge.labels(cluster, kind).set(value)

    def pipeline(self, name: str, value: float) -> None:
        self.gauges[name].set(value)

    def count(self, name: str, amount: float = 1.0, **labels: str) -> None:
        counter = self.counters[name]
        (counter.labels(**labels) if labels else counter).inc(amount)


def _remove(gauge: Gauge, *labels: str) -> None:
    """Drop a series: absent means "not computable", which a stale zero would hide."""
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)
