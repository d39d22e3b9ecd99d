"""KRaft health on the real test bed, in both formats (conftest: `via-jolokia` and
`via-prometheus` are the same brokers).

A failed log directory: broker 4 gets a second log directory, a topic whose replicas
live only there, and then a "failed disk" (the directory replaced by a file: Kafka's
next write there fails and it takes the directory offline while the broker stays
registered). Kafka's truth is the Admin API: the topic's partitions lose their leader.
The pipeline must show the broker's OfflineLogDirectoryCount as
kafka_health_offline_log_directories 1 and open an offline_log_dir incident for broker 4
under both names; after the repair (the broker restarted with the directory back) the
gauge reads 0 again and the incidents resolve.

Healthy: every node reports the new series in every window under both names, the cluster
rows carry the active controller's view (nothing fenced, every broker active) and ELR on
(Kafka 4.4's default for a new cluster), and no KRaft incident opens.
"""

from __future__ import annotations

import time

import pandas as pd
from confluent_kafka.admin import AdminClient

from streaming import metric_names as metric
from streaming.testbed import faults
from streaming.testbed.kafka import create_topic
from tests.conftest import wait_for
from tests.integration.helpers import table
from tests.real_kafka.conftest import NAMES, WINDOW, Bed
from tests.real_kafka.truth_checks import epoch, exported

BROKER = 4
GAUGE = "kafka_health_offline_log_directories"


def _incidents(bed: Bed, since: float) -> list[dict]:
    rows = table(bed.delta, "incidents")
    if rows.empty:
        return []
    rows = rows[(rows.kind == "offline_log_dir") & (rows.broker == str(BROKER))
                & (rows["started_at"].map(epoch) >= since - 2 * WINDOW)]
    return rows.to_dict("records")


def test_a_failed_log_directory_is_an_offline_log_dir_incident_in_both_formats(
        healthy: Bed) -> None:
    bed = healthy
    directory = faults.add_log_dir(bed.watched, BROKER, "data-kraft")
    topic = f"kraft-disk-{int(time.time())}"
    create_topic(bed.watched.bootstrap, topic, assignment=[[BROKER], [BROKER]],
                 config={"min.insync.replicas": "1"})
    # a new replica goes to the log directory holding the fewest: the empty second one
    faults.wait_until(lambda: {f"{topic}-0", f"{topic}-1"} <= {p.name for p in
                                                               directory.iterdir()}, 30,
                      f"{topic}'s replicas in {directory}")
    wait_for(lambda: all(exported(bed, GAUGE).get((name, str(BROKER))) == 0.0 for name in NAMES),
             120, f"{GAUGE} 0 for broker {BROKER} in both formats before the fault")
    since = time.time()
    faults.fail_log_dir(directory)
    try:
        faults.wait_until(lambda: all(p.leader is None for p in faults.snapshot(bed.watched)
                                      .partitions if p.topic == topic), 60,
                          f"{topic} offline (Kafka's truth)")
        offline = time.time()
        assert BROKER in bed.watched.alive_brokers(), f"broker {BROKER} left the cluster"

        wait_for(lambda: all(exported(bed, GAUGE).get((name, str(BROKER))) == 1.0
                             for name in NAMES), 120,
                 f"{GAUGE} 1 for broker {BROKER} in both formats")
        gauged = time.time()
        # the bed's job is slow to write incidents on two shared cores (batches fall behind)
        wait_for(lambda: {r["cluster"] for r in _incidents(bed, since)} == set(NAMES), 180,
                 f"an offline_log_dir incident of broker {BROKER} in both formats")
        opened = time.time()
        for row in _incidents(bed, since):
            assert row["opened_by"] == "offline_log_dirs_max"
            assert row["peak_value"] == 1.0
        print(f"\nlog directory failed on broker {BROKER}: partitions offline after "
              f"{offline - since:.0f}s, {GAUGE} 1 after {gauged - since:.0f}s, "
              f"incidents after {opened - since:.0f}s")
    finally:
        faults.repair_log_dir(bed.watched, BROKER, directory)
        admin = AdminClient({"bootstrap.servers": bed.watched.bootstrap})
        for future in admin.delete_topics([topic]).values():
            future.result(timeout=30)
    wait_for(lambda: all(exported(bed, GAUGE).get((name, str(BROKER))) == 0.0 for name in NAMES),
             120, f"{GAUGE} back to 0 after the repair")
    wait_for(lambda: {r["cluster"] for r in _incidents(bed, since)
                      if pd.notna(r["resolved_at"]) and pd.isna(r["withdrawn_at"])}
             == set(NAMES), 180, "the offline_log_dir incidents resolved, not withdrawn")


KRAFT_KINDS = {"offline_log_dir", "fenced_broker", "metadata", "controller_churn",
               "elr_election"}


def test_healthy_nodes_report_the_kraft_series_and_open_no_kraft_incident(healthy: Bed) -> None:
    """Every node, in both formats, reports its log directories and metadata lag in every
    window; the controllers (1-3) report the controller's view, which the cluster row takes
    from the active one: nothing fenced, every broker active."""
    bed = healthy
    since = time.time()
    brokers = {str(n.node_id) for n in bed.watched.nodes}
    controllers = {str(n.node_id) for n in bed.watched.nodes if "controller" in n.roles}

    def settled() -> list[dict]:
        rows = table(bed.delta, "broker_signals")
        if rows.empty:
            return []
        rows = rows[rows["window_start"].map(epoch) >= since]
        # windows every node has reported in, under both names
        full = [w for w, group in rows.groupby("window_start")
                if {(r.cluster, r.broker) for r in group.itertuples()}
                >= {(name, b) for name in NAMES for b in brokers}]
        return rows[rows.window_start.isin(full)].to_dict("records") if len(full) >= 3 else []

    rows = wait_for(settled, 180, "three windows with every node under both names")
    for row in rows:
        where = (row["cluster"], row["broker"], row["window_start"])
        assert pd.notna(row["offline_log_dirs_max"]), where
        assert pd.notna(row["metadata_lag_ms_max"]), where
        assert row["offline_log_dirs_max"] == 0.0, where
        # Kafka 4.4 formats a new cluster with eligible.leader.replicas.version 1
        assert row["elr_version_last"] == 1.0, where
        if row["broker"] in controllers:
            assert pd.notna(row["fenced_brokers_last"]), where
        else:
            assert pd.isna(row["fenced_brokers_last"]), where
    windows = {r["window_start"] for r in rows}
    clusters = table(bed.delta, "cluster_signals")
    clusters = clusters[clusters.window_start.isin(windows)]
    assert set(clusters.cluster) == set(NAMES)
    truth = len(bed.watched.alive_brokers())
    # null only while the controller is unknown
    known = clusters[clusters.fenced_brokers.notna()]
    assert set(known.cluster) == set(NAMES), "no window with the active controller's view"
    for row in known.itertuples():
        assert row.fenced_brokers == 0.0, row
        assert row.active_brokers == truth, row
    assert (clusters.elr_enabled == 1.0).all(), clusters[["cluster", "window_start", "elr_enabled"]]
    for name in NAMES:
        assert exported(bed, metric.ELR_ENABLED).get((name,)) == 1.0, name
    incidents = table(bed.delta, "incidents")
    if not incidents.empty:
        recent = incidents[incidents["started_at"].map(epoch) >= since - 2 * WINDOW]
        assert not set(recent.kind) & KRAFT_KINDS, recent[["cluster", "broker", "kind"]]
