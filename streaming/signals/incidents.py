"""Incidents: runs of consecutive windows in which a paging-grade condition held.

Recomputed from the signal rows of a bounded horizon every batch, like the signals
themselves, so late data and replays converge instead of opening duplicates. An
incident's id is a hash of (cluster, broker, kind, started_at): stable across
recomputations, and the job anchors runs that reach back to the horizon's start to the
incident already stored, so a long incident keeps its id and start.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streaming.config import SignalsConfig

CLUSTER_WIDE = "*"
# Kinds whose condition is "this broker_signals column is above zero in the window" (and
# whose peak is that column): the direct alert push reads them from a batch's broker rows.
POSITIVE_BROKER_CONDITIONS = {
    "under_min_isr": "under_min_isr_max",
    "unclean_election": "unclean_elections_increase",
}
KINDS = ("under_min_isr", "offline_partitions", "unclean_election", "controller", "saturation",
         "stale_broker")


def _condition(rows: DataFrame, broker: Column, kind: str, active: Column, value: Column
               ) -> DataFrame:
    return rows.select(
        F.col("cluster"), broker.alias("broker"), F.lit(kind).alias("kind"),
        F.col("window_start"), F.col("window_end"),
        F.coalesce(active, F.lit(False)).alias("active"), value.cast("double").alias("value"),
    )


def stale_rows(broker_rows: DataFrame, stale_after_seconds: float) -> DataFrame:
    """One row per (cluster window, known broker): stale when it sent nothing recent enough.

    A broker is known once it reported in the horizon; its silence is measured against
    the newest sample of its cluster in that window (event time, so a replay is not stale).
    """
    per_window = broker_rows.groupBy(F.col("cluster"), F.col("window_start")).agg(
        F.max(F.col("window_end")).alias("window_end"),
        F.max(F.col("last_sample_ts")).alias("cluster_newest"),
    )
    known = broker_rows.groupBy(F.col("cluster"), F.col("broker")).agg(
        F.min(F.col("window_start")).alias("first_seen"))
    grid = per_window.join(known, on="cluster").where(F.col("window_start") >= F.col("first_seen"))
    seen = broker_rows.select(F.col("cluster"), F.col("broker"), F.col("window_start"),
                              F.col("last_sample_ts"))
    latest = Window.partitionBy(F.col("cluster"), F.col("broker")).orderBy(
        F.col("window_start")).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    joined = grid.join(seen, on=["cluster", "broker", "window_start"], how="left").select(
        F.col("*"), F.max(F.col("last_sample_ts")).over(latest).alias("broker_newest"))
    age = F.unix_timestamp(F.col("cluster_newest")) - F.unix_timestamp(F.col("broker_newest"))
    return joined.select(
        F.col("cluster"), F.col("broker"), F.col("window_start"), F.col("window_end"),
        (age > F.lit(stale_after_seconds)).alias("stale"), age.cast("double").alias("age"),
    )


def incident_conditions(broker_rows: DataFrame, cluster_rows: DataFrame,
                        config: SignalsConfig) -> DataFrame:
    """Per (cluster, broker, kind, window): did the condition hold, and how badly."""
    stale_after = config.stale_after_intervals * config.scrape_interval_seconds
    stale = stale_rows(broker_rows, stale_after)
    broker = F.col("broker")
    saturated = (F.col("request_queue_utilization_max") > F.lit(config.saturation_queue_ratio)) | (
        F.col("request_handler_idle_min") < F.lit(config.saturation_idle_ratio))
    parts = [
        *[_condition(broker_rows, broker, kind, F.col(column) > 0, F.col(column))
          for kind, column in POSITIVE_BROKER_CONDITIONS.items()],
        _condition(broker_rows, broker, "saturation", saturated,
                   F.col("request_queue_utilization_max")),
        _condition(cluster_rows, F.lit(CLUSTER_WIDE), "offline_partitions",
                   F.col("offline_partitions_max") > 0, F.col("offline_partitions_max")),
        _condition(cluster_rows, F.lit(CLUSTER_WIDE), "controller",
                   F.col("active_controllers") != 1, F.col("active_controllers")),
        _condition(stale, broker, "stale_broker", F.col("stale"), F.col("age")),
    ]
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def incident_runs(conditions: DataFrame) -> DataFrame:
    """Collapse consecutive active windows into incidents (schema `incidents`).

    A run ends at the first later window of the series in which the condition did not
    hold: resolved_at is that window's start. A run still active in the series' newest
    window is open (resolved_at null). A gap in windows splits runs.
    """
    series = Window.partitionBy(F.col("cluster"), F.col("broker"), F.col("kind")).orderBy(
        F.col("window_start"))
    previous_active = F.lag(F.col("active")).over(series)
    previous_end = F.lag(F.col("window_end")).over(series)
    starts = (
        F.col("active")
        & (previous_active.isNull() | ~previous_active | (previous_end != F.col("window_start")))
    ).cast("int")
    marked = conditions.select(
        F.col("*"), starts.alias("starts"),
        F.lead(F.col("window_start")).over(series).alias("next_start"),
        F.lead(F.col("active")).over(series).alias("next_active"),
    )
    with_run = marked.select(
        F.col("*"),
        F.sum(F.col("starts")).over(series.rowsBetween(Window.unboundedPreceding,
                                                       Window.currentRow)).alias("run"),
    ).where(F.col("active"))
    runs = with_run.groupBy(F.col("cluster"), F.col("broker"), F.col("kind"), F.col("run")).agg(
        F.min(F.col("window_start")).alias("started_at"),
        F.max(F.col("value")).alias("peak_value"),
        F.max_by(F.col("next_start"), F.col("window_start")).alias("next_start"),
        F.max_by(F.col("next_active"), F.col("window_start")).alias("next_active"),
        F.max(F.col("window_end")).alias("last_end"),
    )
    resolved = F.when(
        F.col("next_start").isNotNull() & (F.col("next_start") == F.col("last_end"))
        & ~F.col("next_active"),
        F.col("next_start"),
    ).when(F.col("next_start").isNotNull() & (F.col("next_start") != F.col("last_end")),
           F.col("last_end"))
    return runs.select(
        F.sha2(F.concat_ws("|", F.col("cluster"), F.col("broker"), F.col("kind"),
                           F.date_format(F.col("started_at"), "yyyy-MM-dd'T'HH:mm:ss")), 256)
        .substr(1, 16).alias("incident_id"),
        F.col("cluster"), F.col("broker"), F.col("kind"), F.col("started_at"),
        resolved.alias("resolved_at"), F.col("peak_value"),
        F.current_timestamp().alias("updated_at"),
    )
