"""Per (cluster, window) signals from the broker rows of that window.

Arrow on the driver, like broker_signals: a few rows per window, where a Spark query
would cost its fixed planning time in every micro-batch.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from streaming.schemas import arrow_schema

KEYS = ["cluster", "window_start"]


def cluster_signals(broker_rows: pa.Table) -> pa.Table:
    """Controller-scoped signals need every broker of the window, so this reads broker_signals.

    ActiveControllerCount is 1 only on the active controller (KRaft): the healthy sum is 1.
    UnderMinIsrPartitionCount counts led partitions only, so the sum does not double count.
    A sum over brokers none of which reported the metric stays null ("no data"), not 0.
    Unclean elections take the max over brokers, not the sum: under KRaft every controller
    replays the metadata log and counts each unclean election it applies, so one election
    raises UncleanLeaderElectionsPerSec on several nodes (seen on Kafka 4.4: +1 on two of
    three combined nodes for a single election).
    """
    schema = arrow_schema("cluster_signals")
    if broker_rows.num_rows == 0:
        return schema.empty_table()
    skip_nulls = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
    grouped = broker_rows.group_by(KEYS, use_threads=False).aggregate([
        ("window_end", "max"), ([], "count_all"),
        ("offline_partitions_max", "max", skip_nulls),
        ("active_controller_last", "sum", skip_nulls),
        ("under_min_isr_max", "sum", skip_nulls),
        ("under_replicated_max", "sum", skip_nulls),
        ("unclean_elections_increase", "max", skip_nulls),
    ])
    now = datetime.now(UTC)
    return pa.table({
        "cluster": grouped["cluster"], "window_start": grouped["window_start"],
        "window_end": grouped["window_end_max"], "brokers_reporting": grouped["count_all"],
        "offline_partitions_max": grouped["offline_partitions_max_max"],
        "active_controllers": grouped["active_controller_last_sum"],
        "under_min_isr_total": grouped["under_min_isr_max_sum"],
        "under_replicated_total": grouped["under_replicated_max_sum"],
        "unclean_elections_increase": grouped["unclean_elections_increase_max"],
        "updated_at": pa.array([now] * grouped.num_rows, pa.timestamp("us", "UTC")),
    }).cast(schema)
