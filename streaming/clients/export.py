"""The probe's and the consumer groups' findings on the exporter's gauges.

Bounded by construction: per cluster, one series per broker (and per error class of
probe_ledger.ERROR_CLASSES) for the probe; per group and topic for the groups, at most
`max_partitions` group-partitions of them (clients.consumer_groups), and each call
replaces the cluster's series of its gauge, so a broker, group or class that is gone
disappears instead of lingering.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from streaming import metric_names as metric
from streaming.clients.group_status import RetentionLoss
from streaming.clients.probe_ledger import Loss, ProbeWindow

if TYPE_CHECKING:  # the exporter imports the config
    from streaming.exporter import Exporter


def export_probe_up(exporter: Exporter, cluster: str, up: bool, pending: int) -> None:
    exporter.replace_series(metric.PROBE_UP, cluster, {(): 1.0 if up else 0.0})
    exporter.replace_series(metric.PROBE_PENDING_WRITES, cluster, {(): float(pending)})


def export_probe_windows(exporter: Exporter, cluster: str, windows: list[ProbeWindow],
                         losses: Iterable[Loss]) -> None:
    """The newest closed window of each broker that had one; a broker whose newest window
    holds no write loses its series."""
    newest: dict[str, ProbeWindow] = {}
    for window in windows:
        held = newest.get(window.broker)
        if held is None or window.window_start > held.window_start:
            newest[window.broker] = window
    for loss in losses:
        exporter.count(metric.PROBE_LOST_RECORDS_TOTAL, cluster=cluster, broker=loss.broker)
    for window in windows:
        if window.duplicates:
            exporter.count(metric.PROBE_DUPLICATE_RECORDS_TOTAL, window.duplicates,
                           cluster=cluster, broker=window.broker)
    if not newest:
        return
    seconds = 1e-3
    gauges: dict[str, dict[tuple[str, ...], float]] = {
        name: {} for name in (metric.PROBE_WRITES_ATTEMPTED, metric.PROBE_WRITES_ACKED,
                              metric.PROBE_AVAILABILITY_RATIO, metric.PROBE_ACK_LATENCY_P99_SECONDS,
                              metric.PROBE_READ_LATENCY_P99_SECONDS, metric.PROBE_WRITES_FAILED)}
    for broker, w in newest.items():
        gauges[metric.PROBE_WRITES_ATTEMPTED][(broker,)] = w.attempted
        gauges[metric.PROBE_WRITES_ACKED][(broker,)] = w.acked
        if w.availability is not None:
            gauges[metric.PROBE_AVAILABILITY_RATIO][(broker,)] = w.availability
        if w.ack_p99_ms is not None:
            gauges[metric.PROBE_ACK_LATENCY_P99_SECONDS][(broker,)] = w.ack_p99_ms * seconds
        if w.read_p99_ms is not None:
            gauges[metric.PROBE_READ_LATENCY_P99_SECONDS][(broker,)] = w.read_p99_ms * seconds
        for error, count in w.failed_by_class.items():
            if count:
                gauges[metric.PROBE_WRITES_FAILED][(broker, error)] = count
    for name, values in gauges.items():
        exporter.replace_series(name, cluster, values)


def export_groups(exporter: Exporter, cluster: str, up: bool, left_out: int,
                  topics: list[dict[str, object]], grown: Iterable[RetentionLoss],
                  counted: dict[tuple[str, str, int, int], int]) -> None:
    """The groups' gauges from one poll's per-topic rows (clients.store.topic_rows); the
    loss counter grows by what each episode grew since it was last counted (`counted`:
    the poller's record of it, keyed by group, topic, partition and committed offset)."""
    exporter.replace_series(metric.CONSUMER_GROUPS_UP, cluster, {(): 1.0 if up else 0.0})
    if not up:
        return
    exporter.replace_series(metric.CONSUMER_GROUP_PARTITIONS_LEFT_OUT, cluster,
                            {(): float(left_out)})
    lag: dict[tuple[str, ...], float] = {}
    lag_seconds: dict[tuple[str, ...], float] = {}
    status: dict[tuple[str, ...], float] = {}
    for row in topics:
        key = (str(row["group"]), str(row["topic"]))
        lag[key] = float(row["lag_records"])  # type: ignore[arg-type]
        if row["lag_seconds"] is not None:
            lag_seconds[key] = float(row["lag_seconds"])  # type: ignore[arg-type]
        status[(*key, str(row["status"]))] = 1.0
    exporter.replace_series(metric.CONSUMER_GROUP_LAG_RECORDS, cluster, lag)
    exporter.replace_series(metric.CONSUMER_GROUP_LAG_SECONDS, cluster, lag_seconds)
    exporter.replace_series(metric.CONSUMER_GROUP_STATUS, cluster, status)
    for loss in grown:
        key = (loss.group, loss.topic, loss.partition, loss.committed)
        more = loss.lost - counted.get(key, 0)
        if more > 0:
            exporter.count(metric.CONSUMER_GROUP_LOST_TO_RETENTION_RECORDS_TOTAL, more,
                           cluster=cluster, group=loss.group, topic=loss.topic)
        counted[key] = max(counted.get(key, 0), loss.lost)
