"""At most `quality.max_clusters` clusters and `quality.max_brokers_per_cluster` distinct
brokers per cluster.

Every cluster and broker a sample names becomes state: held signal windows, exporter
series, incident rows, a page. A record that names 100k made-up brokers (or clusters) must
not create 100k brokers' state, so the job's driver remembers the clusters it has seen and
the brokers each has had since it started, and quarantines samples naming a new cluster
past its cap (`too_many_clusters`) or a new broker past its cluster's (`too_many_brokers`),
one row per record (its payload is not carried past decoding; its topic, partition and
offset find it in Kafka). Both are admitted in the order a batch names them; a replayed
batch finds the ones it admitted already known and the refused ones refused again. The
memory held is bounded by the two caps.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc

from streaming.schemas import decoded_arrow_schema

LOG = logging.getLogger("kafka_health.brokers")
RECORD = ["source_topic", "source_partition", "source_offset"]


class BrokerAdmission:
    def __init__(self, max_per_cluster: int, max_clusters: int = 1000) -> None:
        self.cap = max_per_cluster
        self.max_clusters = max_clusters
        self.known: dict[str, set[str]] = {}
        self.warned: set[str] = set()
        self.warned_clusters = False

    def admits(self, named: pa.Table) -> bool:
        """Whether every (cluster, broker) pair `named` holds would be admitted; nothing is
        remembered (the read tasks' summary asks before their files are committed)."""
        if not named.num_rows:
            return True
        pairs = named.select(["cluster", "broker"]).group_by(
            ["cluster", "broker"], use_threads=False).aggregate([])
        clusters = len(self.known)
        added: dict[str, int] = {}
        for cluster, broker in zip(pairs["cluster"].to_pylist(), pairs["broker"].to_pylist(),
                                   strict=True):
            brokers = self.known.get(cluster)
            if brokers is None and cluster not in added:
                if clusters >= self.max_clusters:
                    return False
                clusters += 1
            if brokers is not None and broker in brokers:
                continue
            added[cluster] = added.get(cluster, 0) + 1
            if len(brokers or ()) + added[cluster] > self.cap:
                return False
        return True

    def __call__(self, bronze: pa.Table) -> tuple[pa.Table, pa.Table]:
        """(the samples kept, one decoded-schema reject row per record that named a cluster
        or broker refused; a record naming both is refused as too_many_clusters)."""
        empty = decoded_arrow_schema().empty_table()
        if not bronze.num_rows:
            return bronze, empty
        pairs = bronze.select(["cluster", "broker"]).group_by(
            ["cluster", "broker"], use_threads=False).aggregate([])
        refused: list[tuple[str, str]] = []
        new_clusters: list[str] = []
        for cluster, broker in zip(pairs["cluster"].to_pylist(), pairs["broker"].to_pylist(),
                                   strict=True):
            if cluster not in self.known and len(self.known) >= self.max_clusters:
                if not self.warned_clusters:  # once: the counter shows the rest
                    self.warned_clusters = True
                    LOG.warning("%d clusters seen, the quality.max_clusters cap: samples "
                                "naming new ones are quarantined (too_many_clusters)",
                                self.max_clusters)
                new_clusters.append(cluster)
                continue
            brokers = self.known.setdefault(cluster, set())
            if broker in brokers:
                continue
            if len(brokers) < self.cap:
                brokers.add(broker)
                continue
            if cluster not in self.warned:  # once per cluster: the counter shows the rest
                self.warned.add(cluster)
                LOG.warning("cluster %r has %d brokers, the quality.max_brokers_per_cluster cap: "
                            "samples naming new ones are quarantined (too_many_brokers)",
                            cluster[:80], self.cap)
            refused.append((cluster, broker))
        if not refused and not new_clusters:
            return bronze, empty
        unknown = pc.is_in(bronze["cluster"], value_set=pa.array(new_clusters, pa.string()))
        keys = pc.binary_join_element_wise(bronze["cluster"], bronze["broker"], "\x00")
        over = pc.is_in(keys, value_set=pa.array([f"{c}\x00{b}" for c, b in refused],
                                                  pa.string()))
        cluster_rejects = self._rejects(bronze.filter(unknown), "too_many_clusters")
        # one row per record: a record refused for its cluster is not refused again
        broker_rejects = self._rejects(bronze.filter(over), "too_many_brokers",
                                       skip=cluster_rejects.select(RECORD))
        return (bronze.filter(pc.invert(pc.or_(unknown, over))),
                pa.concat_tables([cluster_rejects, broker_rejects]))

    def _rejects(self, over: pa.Table, kind: str, skip: pa.Table | None = None) -> pa.Table:
        per_record = over.group_by(RECORD, use_threads=False).aggregate([
            ("cluster", "min"), ("source_format", "min"), ("ingest_ts", "min"),
            ("broker", "count_distinct"), ("cluster", "count_distinct")])
        if skip is not None and skip.num_rows:
            per_record = per_record.join(skip, RECORD, join_type="left anti")
        if kind == "too_many_clusters":
            reasons = [f"too_many_clusters: {count} new cluster(s), {self.max_clusters} seen "
                       "(quality.max_clusters)"
                       for count in per_record["cluster_count_distinct"].to_pylist()]
        else:
            reasons = [f"too_many_brokers: {count} new broker(s) of cluster {cluster[:80]!r}, "
                       f"which has {self.cap} (quality.max_brokers_per_cluster)"
                       for cluster, count in zip(per_record["cluster_min"].to_pylist(),
                                                 per_record["broker_count_distinct"].to_pylist(),
                                                 strict=True)]
        return record_rejects(per_record, reasons)


def record_rejects(per_record: pa.Table, reasons: list[str]) -> pa.Table:
    """Decoded-schema reject rows, one per record of `per_record` (its RECORD columns and
    the `source_format_min` and `ingest_ts_min` of its rows), without the payload."""
    n = per_record.num_rows
    schema = decoded_arrow_schema()
    given = {name: per_record[name] for name in RECORD}
    given |= {"source_format": per_record["source_format_min"],
              "ingest_ts": per_record["ingest_ts_min"],
              "reject_reason": pa.array(reasons, pa.string())}
    return pa.table({f.name: given[f.name].cast(f.type) if f.name in given
                     else pa.nulls(n, f.type) for f in schema}, schema=schema)
