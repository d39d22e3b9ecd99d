"""Per (cluster, broker, event-time window) signals from canonical samples.

The function is pure over a DataFrame of samples: the caller hands it every sample of
the affected windows plus a look-back, so a late sample or a restart recomputes a
window exactly instead of patching it, and a replayed batch gives the same rows.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streaming.config import SignalsConfig

# Metrics the signals read; the bronze slice is filtered to these before it is loaded.
LEVEL_METRICS = {
    "under_min_isr": "UnderMinIsrPartitionCount",
    "at_min_isr": "AtMinIsrPartitionCount",
    "under_replicated": "UnderReplicatedPartitions",
}
INCREASE_METRICS = {
    "isr_shrinks_increase": "IsrShrinksPerSec",
    "isr_expands_increase": "IsrExpandsPerSec",
    "unclean_elections_increase": "UncleanLeaderElectionsPerSec",
}
SIGNAL_METRICS = sorted({
    *LEVEL_METRICS.values(), *INCREASE_METRICS.values(), "OfflinePartitionsCount",
    "ActiveControllerCount", "RequestQueueSize", "ResponseQueueSize",
    "RequestHandlerAvgIdlePercent", "NetworkProcessorAvgIdlePercent", "PartitionCount",
    "LeaderCount", "NumLogSegments", "OpenFileDescriptorCount", "MaxFileDescriptorCount",
})
BROKER_KEYS = ("cluster", "broker", "window_start")


def with_window(samples: DataFrame, window_seconds: int) -> DataFrame:
    """Tumbling event-time window of each sample, aligned to the epoch like Spark's window()."""
    epoch = F.unix_timestamp(F.col("ts"))
    start = F.timestamp_seconds(epoch - F.pmod(epoch, F.lit(window_seconds)))
    return samples.select(
        F.col("*"),
        start.alias("window_start"),
        (start + F.make_interval(secs=F.lit(window_seconds))).alias("window_end"),
    )


def with_counter_deltas(samples: DataFrame) -> DataFrame:
    """Increase since the previous sample of the same series, with counter resets handled.

    A Count that drops means the broker restarted and counted from zero again, so the
    increase is the new value itself (never negative, never the drop). The first sample
    of a series in the slice has no predecessor: its delta is null, not a guess.
    """
    series = Window.partitionBy(
        F.col("cluster"), F.col("broker"), F.col("metric"), F.col("attribute"),
        F.col("labels_key"),
    ).orderBy(F.col("ts"), F.col("source_offset"))
    previous = F.lag(F.col("value")).over(series)
    elapsed = F.unix_micros(F.col("ts")) - F.unix_micros(F.lag(F.col("ts")).over(series))
    delta = (
        F.when(F.col("kind") != F.lit("counter"), F.lit(None).cast("double"))
        .when(previous.isNull(), F.lit(None).cast("double"))
        .when(F.col("value") >= previous, F.col("value") - previous)
        .otherwise(F.col("value"))
    )
    # Per-second rate between two samples of one counter life; after a reset the time the
    # new count accumulated over is unknown, so no rate rather than a wrong one.
    rate = F.when(
        (F.col("kind") == F.lit("counter")) & (F.col("value") >= previous) & (elapsed > 0),
        (F.col("value") - previous) / (elapsed / F.lit(1e6)),
    )
    return samples.select(F.col("*"), delta.alias("delta"), rate.alias("rate_per_second"))


def _handler_idle_from_count() -> Column:
    """Idle fraction of the request handler threads from the Meter's cumulative Count.

    RequestHandlerAvgIdlePercent is a Meter: OneMinuteRate is the fraction itself, Count is
    idle nanoseconds per thread, so rate(Count) / 1e9 is the fraction (DESIGN.md "Traps").
    Schemes that export only Count (Strimzi, upstream jmx_exporter, Confluent's bare name)
    need this; MeanRate, a lifetime average, is never used. Where both exist the
    OneMinuteRate wins (see broker_signals), being the broker's own figure.
    """
    return F.when(_is("RequestHandlerAvgIdlePercent", "Count"),
                  F.col("rate_per_second") / F.lit(1e9))


def _is(metric: str, attribute: str = "Value") -> Column:
    return (F.col("metric") == F.lit(metric)) & (F.col("attribute") == F.lit(attribute))


def _max(metric: str, attribute: str = "Value") -> Column:
    return F.max(F.when(_is(metric, attribute), F.col("value")))


def _min(metric: str, attribute: str = "Value") -> Column:
    return F.min(F.when(_is(metric, attribute), F.col("value")))


def _mean(metric: str, attribute: str = "Value") -> Column:
    return F.avg(F.when(_is(metric, attribute), F.col("value")))


def _last(metric: str, attribute: str = "Value") -> Column:
    cond = _is(metric, attribute)
    return F.max_by(F.when(cond, F.col("value")), F.when(cond, F.col("ts")))


def _increase(metric: str) -> Column:
    """Sum of deltas of the Count; 0 when the series reported but had nothing to compare."""
    cond = _is(metric, "Count")
    return F.when(
        F.count(F.when(cond, F.lit(1))) > 0,
        F.coalesce(F.sum(F.when(cond, F.col("delta"))), F.lit(0.0)),
    )


def _log_segments(windowed: DataFrame) -> DataFrame:
    """Segments on the broker: last NumLogSegments of each partition replica, summed."""
    per_partition = windowed.where(_is("NumLogSegments")).groupBy(
        *[F.col(k) for k in BROKER_KEYS], F.col("labels_key")
    ).agg(F.max_by(F.col("value"), F.col("ts")).alias("segments"))
    return per_partition.groupBy(*[F.col(k) for k in BROKER_KEYS]).agg(
        F.sum(F.col("segments")).alias("log_segments_last")
    )


def broker_signals(samples: DataFrame, config: SignalsConfig) -> DataFrame:
    """One row per (cluster, broker, window) with every broker signal (schema broker_signals)."""
    keyed = samples.where(F.col("metric").isNotNull()).select(
        F.col("*"),
        F.to_json(F.map_entries(F.col("labels"))).alias("labels_key"),
    )
    windowed = with_window(with_counter_deltas(keyed), config.window_seconds)
    queue_ratio = F.when(_is("RequestQueueSize"), F.col("value") / F.lit(
        float(config.queued_max_requests)))
    aggregated = windowed.groupBy(*[F.col(k) for k in BROKER_KEYS]).agg(
        F.max(F.col("window_end")).alias("window_end"),
        F.count(F.lit(1)).alias("samples"),
        F.max(F.col("ts")).alias("last_sample_ts"),
        *[_max(m).alias(f"{name}_max") for name, m in LEVEL_METRICS.items()],
        *[_last(m).alias(f"{name}_last") for name, m in LEVEL_METRICS.items()],
        _max("OfflinePartitionsCount").alias("offline_partitions_max"),
        _last("ActiveControllerCount").alias("active_controller_last"),
        *[_increase(m).alias(name) for name, m in INCREASE_METRICS.items()],
        _max("RequestQueueSize").alias("request_queue_size_max"),
        F.max(queue_ratio).alias("request_queue_utilization_max"),
        F.percentile_approx(queue_ratio, F.lit(0.95), F.lit(10000)).alias(
            "request_queue_utilization_p95"),
        _max("ResponseQueueSize").alias("response_queue_size_max"),
        F.coalesce(_min("RequestHandlerAvgIdlePercent", "OneMinuteRate"),
                   F.min(_handler_idle_from_count())).alias("request_handler_idle_min"),
        F.coalesce(_mean("RequestHandlerAvgIdlePercent", "OneMinuteRate"),
                   F.avg(_handler_idle_from_count())).alias("request_handler_idle_mean"),
        _min("NetworkProcessorAvgIdlePercent").alias("network_processor_idle_min"),
        _mean("NetworkProcessorAvgIdlePercent").alias("network_processor_idle_mean"),
        _last("PartitionCount").alias("partition_count_last"),
        _last("LeaderCount").alias("leader_count_last"),
        _last("OpenFileDescriptorCount").alias("open_fds_last"),
        _last("MaxFileDescriptorCount").alias("max_fds_last"),
    )
    joined = aggregated.join(_log_segments(windowed), on=list(BROKER_KEYS), how="left")
    return joined.select(
        F.col("cluster"), F.col("broker"), F.col("window_start"), F.col("window_end"),
        F.col("samples"), F.col("last_sample_ts"),
        *[F.col(f"{n}_{s}").cast("double") for n in LEVEL_METRICS for s in ("max", "last")],
        F.col("offline_partitions_max").cast("double"),
        F.col("active_controller_last").cast("double"),
        *[F.col(name).cast("double") for name in INCREASE_METRICS],
        F.col("request_queue_size_max").cast("double"),
        F.col("request_queue_utilization_max").cast("double"),
        F.col("request_queue_utilization_p95").cast("double"),
        F.col("response_queue_size_max").cast("double"),
        F.col("request_handler_idle_min").cast("double"),
        F.col("request_handler_idle_mean").cast("double"),
        F.col("network_processor_idle_min").cast("double"),
        F.col("network_processor_idle_mean").cast("double"),
        F.col("partition_count_last").cast("double"),
        F.col("leader_count_last").cast("double"),
        F.col("log_segments_last").cast("double"),
        F.col("open_fds_last").cast("double"),
        F.col("max_fds_last").cast("double"),
        F.current_timestamp().alias("updated_at"),
    )
