"""Warns about samples whose cluster was defaulted for want of one in their data."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from streaming import metric_names as metric
from streaming.common.repeated_warning import RepeatedWarnings
from streaming.exporter import Exporter

LOG = logging.getLogger("kafka_health.identity")


class DefaultedIdentity:
    """Samples whose cluster is identity.default_cluster for want of any in their data
    (the decoders' `cluster_defaulted`): counted on the exporter every batch, and a warning
    naming the topic at most once per `warn_every_seconds` per topic. Without it a
    shipper's labels the identity settings miss merge every cluster into one, silently."""

    def __init__(self, default_cluster: str = "default", warn_every_seconds: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.default_cluster = default_cluster
        self.warn_every_seconds = warn_every_seconds
        self._warned = RepeatedWarnings(warn_every_seconds, clock)  # per topic

    def __call__(self, bronze: pa.Table, exporter: Exporter | None) -> int:
        if "cluster_defaulted" not in bronze.column_names or not bronze.num_rows:
            return 0
        flags = pc.fill_null(bronze["cluster_defaulted"], False)
        if not pc.any(flags).as_py():  # one pass over a bit column
            return 0
        per_topic = (bronze.select(["source_topic"]).filter(flags)
                     .group_by("source_topic").aggregate([([], "count_all")]))
        return self.report(dict(zip(per_topic["source_topic"].to_pylist(),
                                    per_topic["count_all"].to_pylist(), strict=True)),
                           exporter)

    def report(self, per_topic: dict[str, int], exporter: Exporter | None) -> int:
        """Count and warn about a batch's defaulted samples, given per topic."""
        total = sum(per_topic.values())
        if not total:
            return 0
        if exporter is not None:
            exporter.count(metric.PIPELINE_IDENTITY_DEFAULTED_SAMPLES_TOTAL, total,
                           field="cluster")
        for topic, count in per_topic.items():
            if not count or self._warned.due(topic) is None:
                continue
            LOG.warning(
                "topic %r: %d samples in this batch name no cluster (field cluster defaulted "
                "to %r): no identity.cluster_labels label, no `cluster` record header or key "
                "group, no source.topics cluster; set one, or every such cluster merges into "
                "one (warned at most every %.0f s per topic; counted on "
                "kafka_health_pipeline_identity_defaulted_samples_total)",
                topic, count, self.default_cluster, self.warn_every_seconds)
        return total


def defaulted_per_topic(summary: pa.Table) -> dict[str, int]:
    """Defaulted samples per topic from the read tasks' summary rows
    (streaming.decode.packing.summarize)."""
    counts: dict[str, int] = {}
    for topic, count in zip(summary["source_topic"].to_pylist(),
                            summary["defaulted"].to_pylist(), strict=True):
        if count:
            counts[topic] = counts.get(topic, 0) + count
    return counts
