"""The metadata view on the exporter's gauges: poller health, audit findings per rule,
and the brokers behind the partitions in trouble.

Cardinality stays bounded by construction: per watched cluster, one health series plus
one error series, one findings series per rule (explicit zeros), and at most
`top_cause_brokers` brokers per kind; never a topic or partition label. Each function
replaces the cluster's series of its gauge, so a broker that left the top N, or an
error class that no longer applies, disappears instead of lingering.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from streaming import metric_names as metric
from streaming.metadata.board import CauseView
from streaming.metadata.causes import top_brokers_by_kind
from streaming.metadata.health import PollerHealth
from streaming.metadata.model import ClusterSnapshot
from streaming.metadata.rules import RULES

if TYPE_CHECKING:  # the exporter imports the config, which may import this package
    from streaming.exporter import Exporter


def export_health(exporter: Exporter, health: PollerHealth) -> None:
    """up 1/0 after the latest attempt, the time of the latest success, and while failing
    the error class (kafka_health_metadata_error = 1 for that class only)."""
    if health.up is None:
        return
    cluster = health.cluster
    exporter.replace_series(metric.METADATA_UP, cluster, {(): 1.0 if health.up else 0.0})
    if health.last_success_at is not None:
        exporter.replace_series(metric.METADATA_LAST_SUCCESS_TIMESTAMP_SECONDS, cluster,
                 {(): health.last_success_at.timestamp()})
    exporter.replace_series(metric.METADATA_ERROR, cluster, {} if health.up or health.error is None
             else {(health.error,): 1.0})


def export_findings(exporter: Exporter, cluster: str, findings: Iterable[Mapping[str, Any]],
                    rules: Iterable[str] = RULES) -> None:
    """Findings per rule, 0 for every rule without one (so "none" is visible)."""
    counts: dict[tuple[str, ...], float] = {(rule,): 0.0 for rule in rules}
    for finding in findings:
        counts[(finding["rule"],)] = counts.get((finding["rule"],), 0.0) + 1.0
    exporter.replace_series(metric.DURABILITY_AUDIT_FINDINGS, cluster, counts)


def export_causes(exporter: Exporter, snapshot: ClusterSnapshot, top_n: int = 3) -> None:
    """Per kind (offline, under_min_isr, under_replicated): the top N brokers missing from
    the most affected partitions, valued by those partitions. A healthy cluster has none."""
    values: dict[tuple[str, ...], float] = {
        (kind, str(broker)): float(count)
        for kind, ranked in top_brokers_by_kind(snapshot, top_n).items()
        for broker, count in ranked}
    exporter.replace_series(metric.METADATA_CAUSE_BROKER_PARTITIONS, snapshot.cluster, values)


def export_cause_info(exporter: Exporter, view: CauseView) -> None:
    """One series per (kind, leader) with brokers to blame, the blame as its `cause` label
    (value 1), read by the alert rules' annotations; a cause that cleared, or whose text
    changed, loses its series. At most one series per leader and kind, never per partition."""
    exporter.replace_series(metric.METADATA_CAUSE_INFO, view.cluster,
             {(kind, leader, blame): 1.0 for (leader, kind), blame in view.blame.items()})


def export_poll(exporter: Exporter, health: PollerHealth, snapshot: ClusterSnapshot | None,
                findings: Iterable[Mapping[str, Any]] | None, top_n: int = 3) -> None:
    """Everything of one poll: health always; findings and causes when it succeeded (a
    failed poll keeps the last ones, which the alert rules gate on `up`)."""
    export_health(exporter, health)
    if snapshot is not None:
        if findings is not None:
            export_findings(exporter, snapshot.cluster, findings)
        export_causes(exporter, snapshot, top_n)
