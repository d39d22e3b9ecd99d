"""Per (cluster, broker, event-time window) signals from canonical samples.

The function is pure over a table of samples: the caller hands it every sample of the
affected windows plus a look-back, so a late sample or a restart recomputes a window
exactly instead of patching it, and a replayed batch gives the same rows.

It runs on Arrow, on the driver, not as a Spark query. The slice it reads is already on
the driver (delta-rs reads bronze there) and holds thousands of series, not billions of
rows; as a Spark query the same aggregation cost 0.8 s of fixed planning per micro-batch
(the whole of a small batch, so paging waited for it) and about 8 s per 250k-row slice
(percentile_approx and max_by have no code generation). In Arrow it is tens of
milliseconds: see the README's performance section. Decoding, the per-record work,
stays on Spark's executors.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.config import SignalsConfig
from streaming.schemas import arrow_schema

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
# The bronze columns the signals read: the slice loads only these (it can hold a whole
# window of a busy fleet, so lineage and raw columns would multiply driver memory).
SAMPLE_COLUMNS = ["ts", "cluster", "broker", "metric", "attribute", "labels", "value", "kind",
                  "source_offset"]
SERIES = ("cluster", "broker", "metric", "attribute", "labels_key")
TS = pa.timestamp("us", "UTC")
SKIP_NULLS = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
P95 = 0.95


def labels_key(labels: pa.ChunkedArray) -> pa.ChunkedArray:
    """A comparable identity for each labels map ("k=v" entries joined), since Arrow cannot
    group on maps. Entries keep the decoder's order, which is stable per format."""
    chunks = []
    for chunk in labels.chunks:
        entries = pc.binary_join_element_wise(chunk.keys, chunk.items, "=",
                                              null_handling="replace")
        lists = pa.ListArray.from_arrays(chunk.offsets, entries)
        chunks.append(pc.binary_join(lists, "\x1f"))
    return pc.fill_null(pa.chunked_array(chunks, pa.string()), "")


def window_starts(ts: pa.ChunkedArray, window_seconds: int) -> pa.ChunkedArray:
    """Start of each timestamp's tumbling event-time window (epoch-aligned), in microseconds."""
    width = window_seconds * 1_000_000
    # integer division: the floor for timestamps after 1970
    return pc.multiply(pc.divide(pc.cast(ts, pa.int64()), width), width)


def with_window(samples: pa.Table, window_seconds: int) -> pa.Table:
    """Tumbling event-time window of each sample, aligned to the epoch."""
    start = window_starts(samples["ts"], window_seconds)
    return samples.append_column("window_start", pc.cast(start, TS)).append_column(
        "window_end", pc.cast(pc.add(start, window_seconds * 1_000_000), TS))


def with_counter_deltas(samples: pa.Table) -> pa.Table:
    """Increase since the previous sample of the same series, with counter resets handled.

    A Count that drops means the broker restarted and counted from zero again, so the
    increase is the new value itself (never negative, never the drop). The first sample
    of a series in the slice has no predecessor: its delta is null, not a guess. The
    per-second rate is null across a reset too: the time the new count accumulated over
    is unknown, so no rate rather than a wrong one. Rows come back ordered by series, then
    time (then source offset, so equal timestamps replay the same way).
    """
    series = pc.binary_join_element_wise(*[samples[c] for c in SERIES[:-1]],
                                         labels_key(samples["labels"]), "\x1e",
                                         null_handling="replace")
    ordered = samples.append_column("series", series).sort_by(
        [("series", "ascending"), ("ts", "ascending"), ("source_offset", "ascending")])
    n = ordered.num_rows
    value = ordered["value"].to_numpy()
    micros = pc.cast(ordered["ts"], pa.int64()).to_numpy()
    keys = ordered["series"]
    new_series = np.ones(n, dtype=bool)
    if n > 1:
        new_series[1:] = pc.not_equal(keys.slice(1), keys.slice(0, n - 1)).to_numpy(
            zero_copy_only=False)
    is_counter = pc.equal(ordered["kind"], "counter").to_numpy(zero_copy_only=False)
    previous = np.roll(value, 1)
    elapsed = (micros - np.roll(micros, 1)) / 1e6
    no_previous = new_series | ~is_counter
    grew = value >= previous
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.where(grew, value - previous, value)
        rate = (value - previous) / elapsed
    delta_col = pa.array(delta, mask=no_previous)
    rate_col = pa.array(rate, mask=no_previous | ~grew | ~(elapsed > 0))
    return ordered.drop_columns(["series"]).append_column("delta", delta_col).append_column(
        "rate_per_second", rate_col)


def _mask(table: pa.Table, metric: str, attribute: str = "Value") -> pa.ChunkedArray:
    return pc.and_(pc.equal(table["metric"], metric), pc.equal(table["attribute"], attribute))


def _only(table: pa.Table, column: str, mask: pa.ChunkedArray) -> pa.ChunkedArray:
    """`column` where `mask` holds, null elsewhere: conditional aggregation in one pass."""
    return pc.if_else(mask, table[column], pa.scalar(None, table[column].type))


def _group(table: pa.Table, keys: tuple[str, ...] | list[str],
           aggregations: list[tuple]) -> pa.Table:
    """group_by in input order (use_threads off), so "last" means latest in time order."""
    return table.group_by(list(keys), use_threads=False).aggregate(aggregations)


def _p95(windowed: pa.Table, ratio: pa.ChunkedArray) -> pa.Table:
    """Nearest-rank 95th percentile of the queue ratio per window: the smallest reported
    value with at least 95 % of the window's values at or below it (never interpolated,
    so it is always a value the broker actually had)."""
    present = windowed.select(list(BROKER_KEYS)).append_column("ratio", ratio).filter(
        pc.is_valid(ratio))
    if present.num_rows == 0:
        return present.select(list(BROKER_KEYS)).append_column(
            "request_queue_utilization_p95", pa.array([], pa.float64()))
    ordered = present.sort_by([(k, "ascending") for k in BROKER_KEYS] + [("ratio", "ascending")])
    groups = _group(ordered, BROKER_KEYS, [([], "count_all")])
    counts = groups["count_all"].to_numpy()
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    picks = starts + np.ceil(P95 * counts).astype(np.int64) - 1
    return groups.select(list(BROKER_KEYS)).append_column(
        "request_queue_utilization_p95", ordered["ratio"].take(pa.array(picks)))


def _log_segments(windowed: pa.Table) -> pa.Table:
    """Segments on the broker: last NumLogSegments of each partition replica, summed."""
    segments = windowed.filter(_mask(windowed, "NumLogSegments"))
    segments = segments.append_column("labels_key", labels_key(segments["labels"]))
    per_partition = _group(segments, [*BROKER_KEYS, "labels_key"], [("value", "last")])
    return _group(per_partition, BROKER_KEYS, [("value_last", "sum")]).rename_columns(
        [*BROKER_KEYS, "log_segments_last"])


def broker_signals(samples: pa.Table, config: SignalsConfig) -> pa.Table:
    """One row per (cluster, broker, window) with every broker signal (schema broker_signals)."""
    known = samples.filter(pc.is_valid(samples["metric"]))
    schema = arrow_schema("broker_signals")
    if known.num_rows == 0:
        return schema.empty_table()
    # Only counters need the per-series sort for their deltas; most rows are gauges.
    is_counter = pc.fill_null(pc.equal(known["kind"], "counter"), False)
    gauges = known.filter(pc.invert(is_counter))
    no_delta = pa.nulls(gauges.num_rows, pa.float64())
    deltas = pa.concat_tables([
        with_counter_deltas(known.filter(is_counter)),
        gauges.append_column("delta", no_delta).append_column("rate_per_second", no_delta),
    ])
    windowed = with_window(deltas, config.window_seconds).sort_by(
        [("ts", "ascending"), ("source_offset", "ascending")])
    ratio = pc.divide(_only(windowed, "value", _mask(windowed, "RequestQueueSize")),
                      float(config.queued_max_requests))
    idle_from_count = pc.divide(  # RequestHandlerAvgIdlePercent Count: idle ns per thread
        _only(windowed, "rate_per_second", _mask(windowed, "RequestHandlerAvgIdlePercent",
                                                 "Count")), 1e9)
    columns: dict[str, pa.ChunkedArray] = {"ratio": ratio, "idle_from_count": idle_from_count}
    aggregations: list[tuple] = [
        ("window_end", "max"), ([], "count_all"), ("ts", "max"),
        ("ratio", "max", SKIP_NULLS), ("idle_from_count", "min", SKIP_NULLS),
        ("idle_from_count", "mean", SKIP_NULLS),
    ]

    def conditional(name: str, how: str, metric: str, attribute: str = "Value",
                    source: str = "value") -> None:
        columns[name] = _only(windowed, source, _mask(windowed, metric, attribute))
        aggregations.append((name, how, SKIP_NULLS))

    for name, metric in LEVEL_METRICS.items():
        conditional(f"{name}_max", "max", metric)
        conditional(f"{name}_last", "last", metric)
    conditional("offline_partitions_max", "max", "OfflinePartitionsCount")
    conditional("active_controller_last", "last", "ActiveControllerCount")
    for name, metric in INCREASE_METRICS.items():
        conditional(name, "sum", metric, "Count", source="delta")
        columns[f"{name}_reported"] = pc.cast(_mask(windowed, metric, "Count"), pa.int64())
        aggregations.append((f"{name}_reported", "sum"))
    conditional("request_queue_size_max", "max", "RequestQueueSize")
    conditional("response_queue_size_max", "max", "ResponseQueueSize")
    conditional("rate_idle_min", "min", "RequestHandlerAvgIdlePercent", "OneMinuteRate")
    conditional("rate_idle_mean", "mean", "RequestHandlerAvgIdlePercent", "OneMinuteRate")
    conditional("network_processor_idle_min", "min", "NetworkProcessorAvgIdlePercent")
    conditional("network_processor_idle_mean", "mean", "NetworkProcessorAvgIdlePercent")
    conditional("partition_count_last", "last", "PartitionCount")
    conditional("leader_count_last", "last", "LeaderCount")
    conditional("open_fds_last", "last", "OpenFileDescriptorCount")
    conditional("max_fds_last", "last", "MaxFileDescriptorCount")

    wide = windowed.select(list(BROKER_KEYS) + ["window_end", "ts"])
    for name, column in columns.items():
        wide = wide.append_column(name, column)
    grouped = _group(wide, BROKER_KEYS, aggregations)
    grouped = grouped.join(_p95(windowed, ratio), list(BROKER_KEYS), join_type="left outer")
    grouped = grouped.join(_log_segments(windowed), list(BROKER_KEYS), join_type="left outer")

    def agg(name: str, how: str) -> pa.ChunkedArray:
        return grouped[f"{name}_{how}"]

    out: dict[str, pa.ChunkedArray] = {
        "cluster": grouped["cluster"], "broker": grouped["broker"],
        "window_start": grouped["window_start"], "window_end": agg("window_end", "max"),
        "samples": grouped["count_all"], "last_sample_ts": agg("ts", "max"),
    }
    for name in LEVEL_METRICS:
        out[f"{name}_max"] = agg(f"{name}_max", "max")
        out[f"{name}_last"] = agg(f"{name}_last", "last")
    out["offline_partitions_max"] = agg("offline_partitions_max", "max")
    out["active_controller_last"] = agg("active_controller_last", "last")
    for name in INCREASE_METRICS:
        # 0 when the series reported but had nothing to compare; null when it never reported
        reported = pc.greater(agg(f"{name}_reported", "sum"), 0)
        out[name] = pc.if_else(reported, pc.fill_null(agg(name, "sum"), 0.0),
                               pa.scalar(None, pa.float64()))
    out["request_queue_size_max"] = agg("request_queue_size_max", "max")
    out["request_queue_utilization_max"] = agg("ratio", "max")
    out["request_queue_utilization_p95"] = grouped["request_queue_utilization_p95"]
    out["response_queue_size_max"] = agg("response_queue_size_max", "max")
    # OneMinuteRate, the broker's own figure, wins; rate(Count) for schemes with Count only.
    # MeanRate, a lifetime average, is never used (DESIGN.md "Traps").
    out["request_handler_idle_min"] = pc.coalesce(agg("rate_idle_min", "min"),
                                                  agg("idle_from_count", "min"))
    out["request_handler_idle_mean"] = pc.coalesce(agg("rate_idle_mean", "mean"),
                                                   agg("idle_from_count", "mean"))
    out["network_processor_idle_min"] = agg("network_processor_idle_min", "min")
    out["network_processor_idle_mean"] = agg("network_processor_idle_mean", "mean")
    out["partition_count_last"] = agg("partition_count_last", "last")
    out["leader_count_last"] = agg("leader_count_last", "last")
    out["log_segments_last"] = grouped["log_segments_last"]
    out["open_fds_last"] = agg("open_fds_last", "last")
    out["max_fds_last"] = agg("max_fds_last", "last")
    now = datetime.now(UTC)
    out["updated_at"] = pa.array([now] * grouped.num_rows, TS)
    table = pa.table(out).sort_by([(k, "ascending") for k in BROKER_KEYS])
    return table.cast(schema)
