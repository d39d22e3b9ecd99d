"""Per (cluster, window) signals from the broker rows of that window."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def cluster_signals(broker_rows: DataFrame) -> DataFrame:
    """Controller-scoped signals need every broker of the window, so this reads broker_signals.

    ActiveControllerCount is 1 only on the active controller (KRaft): the healthy sum is 1.
    UnderMinIsrPartitionCount counts led partitions only, so the sum does not double count.
    """
    return broker_rows.groupBy(F.col("cluster"), F.col("window_start")).agg(
        F.max(F.col("window_end")).alias("window_end"),
        F.count(F.lit(1)).alias("brokers_reporting"),
        F.max(F.col("offline_partitions_max")).alias("offline_partitions_max"),
        F.sum(F.col("active_controller_last")).alias("active_controllers"),
        F.sum(F.col("under_min_isr_max")).alias("under_min_isr_total"),
        F.sum(F.col("under_replicated_max")).alias("under_replicated_total"),
        F.sum(F.col("unclean_elections_increase")).alias("unclean_elections_increase"),
        F.current_timestamp().alias("updated_at"),
    )
