"""Per (cluster, broker, event-time window) signals from canonical samples.

The function is pure over a table of samples: the caller hands it every sample of the
affected windows plus a look-back, so a late sample or a restart recomputes a window
exactly instead of patching it, and a replayed batch gives the same rows.

It runs on Arrow, on the driver, not as a Spark query. The slice it reads is already on
the driver (delta-rs reads bronze there) and holds thousands of series, not billions of
rows; as a Spark query the same aggregation cost 0.8 s of fixed planning per micro-batch
(the whole of a small batch, so paging waited for it) and about 8 s per 250k-row slice
(percentile_approx and max_by have no code generation). In Arrow it is tens of
milliseconds: see docs/performance.md. Decoding, the per-record work,
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
# column -> (metric, attribute): a meter's cumulative Count, or the Value of a catalog
# `counter` (a gauge that counts, as the KRaft controller's *Count gauges do)
INCREASE_METRICS = {
    "isr_shrinks_increase": ("IsrShrinksPerSec", "Count"),
    "isr_expands_increase": ("IsrExpandsPerSec", "Count"),
    "unclean_elections_increase": ("UncleanLeaderElectionsPerSec", "Count"),
    "elr_elections_increase": ("ElectionFromEligibleLeaderReplicasPerSec", "Count"),
    "controller_elections_increase": ("NewActiveControllersCount", "Value"),
    "heartbeat_timeouts_increase": ("TimedOutBrokerHeartbeatCount", "Value"),
    "metadata_load_errors_increase": ("BrokerMetadataLoadErrorCount", "Value"),
    "metadata_apply_errors_increase": ("BrokerMetadataApplyErrorCount", "Value"),
    "controller_metadata_errors_increase": ("MetadataErrorCount", "Value"),
}
# Increases summed into broker_signals.metadata_errors_increase: a node's errors reading or
# applying the metadata log, as a broker or as a controller (the partials keep each).
METADATA_ERROR_INCREASES = ("metadata_load_errors_increase", "metadata_apply_errors_increase",
                            "controller_metadata_errors_increase")
SIGNAL_METRICS = sorted({
    *LEVEL_METRICS.values(), *(metric for metric, _ in INCREASE_METRICS.values()),
    "OfflinePartitionsCount", "ActiveControllerCount", "RequestQueueSize", "ResponseQueueSize",
    "RequestHandlerAvgIdlePercent", "NetworkProcessorAvgIdlePercent", "PartitionCount",
    "LeaderCount", "NumLogSegments", "OpenFileDescriptorCount", "MaxFileDescriptorCount",
    "FencedBrokerCount", "ActiveBrokerCount", "PreferredReplicaImbalanceCount",
    "OfflineLogDirectoryCount", "BrokerMetadataLastAppliedRecordLagMs",
    "EligibleLeaderReplicasVersion", "FinalizedMetadataVersion",
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


def series_keys(samples: pa.Table) -> pa.ChunkedArray:
    """One string per row naming its series (cluster, broker, metric, attribute, labels)."""
    return pc.binary_join_element_wise(*[samples[c] for c in SERIES[:-1]],
                                       labels_key(samples["labels"]), "\x1e",
                                       null_handling="replace")


def rate_interval_limit(config: SignalsConfig) -> float:
    """The longest interval between two samples of a Count that a rate is taken over:
    one and a half scrape intervals, plus a second for stamps cut to the second
    (prometheus-kafka-adapter). Longer means scrapes were missed, and the stamp of the one
    that ended the gap says when it began, not when the broker's values were read."""
    return 1.5 * config.scrape_interval_seconds + 1.0


def with_counter_deltas(samples: pa.Table, config: SignalsConfig) -> pa.Table:
    """Increase since the previous sample of the same series, with counter resets handled.

    A Count that drops means the broker restarted and counted from zero again, so the
    increase is the new value itself (never negative, never the drop). The first sample
    of a series has no predecessor: its delta is null, not a guess. Nor does a sample whose
    previous one is older than the counter look-back before its own window: a function of
    the sample alone, so the answer never depends on how samples were cut into batches or
    how far back a recompute happened to read (a broker silent for longer than the
    look-back, back with a reset counter, must page the same either way). The
    per-second rate is null across a reset too: the time the new count accumulated over
    is unknown, so no rate rather than a wrong one. Nor is there a rate over an interval
    longer than the scrape schedule allows (`rate_interval_limit`), or over the interval
    after one: the sample that ends a gap (scrapes that timed out, a frozen broker) is
    stamped when its scrape began, as Prometheus and the shipper stamp, but its values may
    have been read seconds later, at the thaw. The Count then moved over less time than
    the stamps say, and the rate read low (a handler idle fraction of 0.19 for a broker
    73 % idle, a false saturation). A rate needs the broker's own interval; the stamps
    are trusted for it only on schedule. Rows come back ordered by series, then time (then
    source offset, so equal timestamps replay the same way). Each series needs its two
    samples before the first (`priors`) for this.
    """
    ordered = samples.append_column("series", series_keys(samples)).sort_by(
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
    previous, previous_at = np.roll(value, 1), np.roll(micros, 1)
    elapsed = (micros - previous_at) / 1e6
    width = config.window_seconds * 1_000_000
    too_old = previous_at < micros // width * width - config.counter_lookback_seconds * 1_000_000
    no_previous = new_series | ~is_counter | too_old
    grew = value >= previous
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.where(grew, value - previous, value)
        rate = (value - previous) / elapsed
    delta_col = pa.array(delta, mask=no_previous)
    limit = rate_interval_limit(config)
    # the previous sample ended a gap itself: the rate would start from a late read
    two_back_same = ~new_series & np.roll(~new_series, 1)
    previous_elapsed = (previous_at - np.roll(micros, 2)) / 1e6
    off_schedule = (elapsed > limit) | (two_back_same & (previous_elapsed > limit))
    rate_col = pa.array(rate, mask=no_previous | ~grew | ~(elapsed > 0) | off_schedule)
    return ordered.drop_columns(["series"]).append_column("delta", delta_col).append_column(
        "rate_per_second", rate_col)


class MetricMasks:
    """Per-row masks "is this sample (metric, attribute)" over one table.

    Why: the partials take ~25 such masks of the same rows. Comparing strings for each
    was a third of `signal_partials`; here each string column is dictionary-encoded once
    and a mask compares one integer code per row. Nulls as the string comparison: a row
    with a null metric or attribute gets a null, one with another pair False.
    """

    def __init__(self, table: pa.Table) -> None:
        metric = pc.dictionary_encode(table["metric"].combine_chunks())
        attribute = pc.dictionary_encode(table["attribute"].combine_chunks())
        self.metrics = {name: i for i, name in enumerate(metric.dictionary.to_pylist())}
        self.attributes = {name: i for i, name in enumerate(attribute.dictionary.to_pylist())}
        width = max(len(self.attributes), 1)
        self.codes = pc.add(pc.multiply(pc.cast(metric.indices, pa.int64()), width),
                            pc.cast(attribute.indices, pa.int64()))
        self.width = width

    def __call__(self, metric: str, attribute: str = "Value") -> pa.Array:
        m, a = self.metrics.get(metric), self.attributes.get(attribute)
        return pc.equal(self.codes, -1 if m is None or a is None else m * self.width + a)


def _only(table: pa.Table, column: str, mask: pa.ChunkedArray) -> pa.ChunkedArray:
    """`column` where `mask` holds, null elsewhere: conditional aggregation in one pass."""
    return pc.if_else(mask, table[column], pa.scalar(None, table[column].type))


def _group(table: pa.Table, keys: tuple[str, ...] | list[str],
           aggregations: list[tuple]) -> pa.Table:
    """group_by in input order (use_threads off), so "last" means latest in time order."""
    return table.group_by(list(keys), use_threads=False).aggregate(aggregations)


# What each signal keeps per (cluster, broker, window) until the window is final. Every
# piece combines exactly with the same piece of other rows of the window (max, min, sum,
# count, the value with the newest (ts, offset), the list of queue ratios), so a window
# can be built from the partials of batches as well as from all its samples at once.
LAST_SIGNALS = {  # column -> (metric, attribute): the value of the newest sample
    **{f"{name}_last": (metric, "Value") for name, metric in LEVEL_METRICS.items()},
    "active_controller_last": ("ActiveControllerCount", "Value"),
    "partition_count_last": ("PartitionCount", "Value"),
    "leader_count_last": ("LeaderCount", "Value"),
    "open_fds_last": ("OpenFileDescriptorCount", "Value"),
    "max_fds_last": ("MaxFileDescriptorCount", "Value"),
    "active_brokers_last": ("ActiveBrokerCount", "Value"),
    # the state now: a broker restarting is fenced for a moment until it catches up with
    # the metadata log, which a window's max would hold for the whole window
    "fenced_brokers_last": ("FencedBrokerCount", "Value"),
    # the ELR feature's finalized level as this node's metadata has it (>= 1: ELR is on;
    # unpublished at 0), and metadata.version's, which says the node publishes the levels
    "elr_version_last": ("EligibleLeaderReplicasVersion", "Value"),
    "metadata_version_last": ("FinalizedMetadataVersion", "Value"),
}
MAX_SIGNALS = {  # column -> (metric, attribute)
    **{f"{name}_max": (metric, "Value") for name, metric in LEVEL_METRICS.items()},
    "offline_partitions_max": ("OfflinePartitionsCount", "Value"),
    "request_queue_size_max": ("RequestQueueSize", "Value"),
    "response_queue_size_max": ("ResponseQueueSize", "Value"),
    "preferred_imbalance_max": ("PreferredReplicaImbalanceCount", "Value"),
    "offline_log_dirs_max": ("OfflineLogDirectoryCount", "Value"),
    "metadata_lag_ms_max": ("BrokerMetadataLastAppliedRecordLagMs", "Value"),
}
MIN_MEAN_SIGNALS = {  # partial -> (metric, attribute, source column, scale)
    "rate_idle": ("RequestHandlerAvgIdlePercent", "OneMinuteRate", "value", 1.0),
    # RequestHandlerAvgIdlePercent Count: idle nanoseconds per thread, as a rate
    "idle_from_count": ("RequestHandlerAvgIdlePercent", "Count", "rate_per_second", 1e-9),
    "network_processor_idle": ("NetworkProcessorAvgIdlePercent", "Value", "value", 1.0),
}
# A Yammer meter's OneMinuteRate reads exactly 0.0 from the broker's start until its first
# 5-second tick: a restarted broker looked 0 % idle, saturated (seen on Kafka 4.4 after every
# restart in the real-Kafka demo). A busy pool's decaying average is small, never exactly 0,
# so an exact 0 is no data yet and the Count-derived idle (or nothing) stands in.
UNTICKED_ZERO = {"rate_idle"}
PARTIAL_KEYS = ("cluster", "broker", "window_start")
# Every partial row's first three: the window's end, its sample count, its newest sample.
WINDOW_AGGREGATIONS = (("window_end", "max"), ([], "count_all"), ("ts", "max"))
SEGMENT_KEYS = (*PARTIAL_KEYS, "labels_key")


def known_metrics(samples: pa.Table) -> pa.Table:
    """The samples whose metric the catalog knows. A filter copies every column it keeps,
    so none is made when all are known (what signal_rows sends)."""
    if samples["metric"].null_count == 0:
        return samples
    return samples.filter(pc.is_valid(samples["metric"]))


def prepared(samples: pa.Table, config: SignalsConfig, priors: pa.Table | None = None
             ) -> pa.Table:
    """Known samples with counter deltas and their window, in the order given.

    `priors` are earlier samples of the counter series (the newest of each, held between
    batches): they give the first sample of each series its predecessor, then are dropped.
    Only counters (a few % of rows) are taken apart for their per-series sort; their deltas
    go back to their rows by index, so the whole table (its labels maps the costliest
    column) is never copied: signal_partials sorts only the columns each of its
    aggregations reads, after it has filtered their rows.
    """
    known = known_metrics(samples)
    is_counter = pc.fill_null(pc.equal(known["kind"], "counter"), False)
    counters = known.filter(is_counter)
    rows = np.flatnonzero(is_counter.to_numpy(zero_copy_only=False))
    held = [] if priors is None else [priors.select(counters.column_names).cast(counters.schema)]
    flagged = pa.concat_tables([*held, counters]).append_column("row", pa.array(  # prior: -1
        np.concatenate([np.full(sum(t.num_rows for t in held), -1), rows]), pa.int64()))
    with_deltas = with_counter_deltas(flagged, config)
    with_deltas = with_deltas.filter(pc.greater_equal(with_deltas["row"], 0))
    at = with_deltas["row"].to_numpy()
    table = known
    for name in ("delta", "rate_per_second"):
        values, missing = np.zeros(known.num_rows), np.ones(known.num_rows, dtype=bool)
        values[at] = pc.fill_null(with_deltas[name], 0.0).to_numpy()
        missing[at] = pc.is_null(with_deltas[name]).to_numpy(zero_copy_only=False)
        table = table.append_column(name, pa.array(values, mask=missing))
    return with_window(table, config.window_seconds)


def in_time_order(table: pa.Table, ts: str = "ts") -> pa.Table:
    """Rows by (`ts`, source_offset), ties in their given order (Arrow's sort is stable):
    the order in which group_by's "last" means the newest sample."""
    return table.sort_by([(ts, "ascending"), ("source_offset", "ascending")])


def _key_codes(table: pa.Table, keys: tuple[str, ...] | list[str]) -> np.ndarray:
    """One int64 per row, equal exactly for rows equal in every key column (null a value of
    its own). Dictionary codes, combined column by column and made dense again whenever
    the next product could overflow."""
    combined = np.zeros(table.num_rows, np.int64)
    distinct = 1
    for name in keys:
        encoded = pc.dictionary_encode(table[name].combine_chunks())
        codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False) + 1
        width = len(encoded.dictionary) + 1
        if distinct * width >= 2 ** 62:
            _, inverse = np.unique(combined, return_inverse=True)
            combined, distinct = inverse.astype(np.int64), int(inverse.max()) + 1
        combined = combined * width + codes
        distinct *= width
    return combined


def newest_of_each(table: pa.Table, keys: tuple[str, ...] | list[str], ts: str,
                   count: int = 1) -> pa.Table:
    """The row with the newest (`ts`, source_offset) of each distinct key, a tie to the
    later row (with `count` 2, the two newest); rows in their given order. What
    in_time_order and group_by's "last" give, in NumPy: Arrow's hash group_by on string
    keys plus the sort cost several times more, and the driver runs this on every
    replica's segment rows of a catch-up batch."""
    if table.num_rows == 0:
        return table
    key = _key_codes(table, keys)
    # nulls last, as Arrow's sort puts them, and int64 throughout (a column with nulls
    # would come out as float64, which cannot tell apart values past 2**53)
    last = np.iinfo(np.int64).max
    when = pc.fill_null(pc.cast(table[ts], pa.int64()), last).to_numpy()
    offset = pc.fill_null(pc.cast(table["source_offset"], pa.int64()), last).to_numpy()
    order = np.lexsort((offset, when, key))  # stable: equal rows keep their order
    ordered = key[order]
    last = np.append(ordered[1:] != ordered[:-1], True)
    if count == 2:
        last |= np.append((ordered[1:] == ordered[:-1]) & last[1:], False)
    elif count != 1:
        raise ValueError("count must be 1 or 2")
    return table.take(np.sort(order[last]))


# The columns of `prepared` rows the wide partials read.
WIDE_COLUMNS = [*PARTIAL_KEYS, "window_end", "ts", "metric", "attribute", "value",
                "source_offset", "delta", "rate_per_second"]


def signal_partials(windowed: pa.Table, config: SignalsConfig, rows: pa.Array | None = None
                    ) -> tuple[pa.Table, pa.Table]:
    """Partials per (cluster, broker, window), and the newest NumLogSegments per partition
    replica, from `prepared` samples (one row per key in each); with `rows`, a mask, from
    those rows alone (a read task's gauges: filtering them out first would copy every
    column, the labels maps among them).

    NumLogSegments, one series per partition replica, is most of a fleet's samples (84 % of
    the benchmark's) and feeds none of the wide partials, only its window's sample count
    and newest time: the wide aggregation runs over the other rows and those two are
    added from a narrow one.
    """
    micros = pc.cast(windowed["ts"], pa.int64())
    is_segments = MetricMasks(windowed)("NumLogSegments")
    others = pc.invert(pc.fill_null(is_segments, False))
    if rows is not None:
        is_segments, others = pc.and_(is_segments, rows), pc.and_(others, rows)
    segments = _segment_partials(windowed, micros, is_segments)
    counted = _group(windowed.select([*PARTIAL_KEYS, "window_end", "ts"]).filter(is_segments),
                     PARTIAL_KEYS, list(WINDOW_AGGREGATIONS))
    wide = in_time_order(windowed.select(WIDE_COLUMNS).filter(others))
    return _with_counted(_wide_partials(wide, config), counted), segments


def _wide_partials(windowed: pa.Table, config: SignalsConfig) -> pa.Table:
    """The partials of every signal but NumLogSegments, one row per (cluster, broker,
    window), from WIDE_COLUMNS in_time_order."""
    micros = pc.cast(windowed["ts"], pa.int64())
    masks = MetricMasks(windowed)
    columns: dict[str, pa.ChunkedArray] = {}
    aggregations: list[tuple] = list(WINDOW_AGGREGATIONS)

    def add(name: str, column: pa.ChunkedArray, *hows: str) -> None:
        columns[name] = column
        aggregations.extend((name, how, SKIP_NULLS) for how in hows)

    for name, (metric, attribute) in LAST_SIGNALS.items():
        mask = pc.and_(masks(metric, attribute), pc.is_valid(windowed["value"]))
        add(name, _only(windowed, "value", mask), "last")
        add(f"{name}__ts", pc.if_else(mask, micros, pa.scalar(None, pa.int64())), "last")
        add(f"{name}__offset", _only(windowed, "source_offset", mask), "last")
    # The broker's first claim of the controller in the window: beside the time of its
    # newest ActiveControllerCount, it tells a handover from two nodes claiming at once
    # (streaming.signals.cluster.controller_claims).
    claims = pc.and_(masks("ActiveControllerCount", "Value"), pc.greater(windowed["value"], 0))
    add("controller_claim", pc.if_else(claims, micros, pa.scalar(None, pa.int64())), "min")
    for name, (metric, attribute) in MAX_SIGNALS.items():
        add(name, _only(windowed, "value", masks(metric, attribute)), "max")
    for name, (metric, attribute, source, scale) in MIN_MEAN_SIGNALS.items():
        column = pc.multiply(_only(windowed, source, masks(metric, attribute)), scale)
        if name in UNTICKED_ZERO:
            column = pc.if_else(pc.equal(column, 0.0), pa.scalar(None, pa.float64()), column)
        add(name, column, "min", "sum")
        aggregations.append((name, "count"))
    ratio = pc.divide(_only(windowed, "value", masks("RequestQueueSize")),
                      float(config.queued_max_requests))
    add("ratio", ratio, "max")
    aggregations.append(("ratio", "list"))
    for name, (metric, attribute) in INCREASE_METRICS.items():
        reported = masks(metric, attribute)
        add(name, _only(windowed, "delta", reported), "sum")
        columns[f"{name}_reported"] = pc.cast(reported, pa.int64())
        aggregations.append((f"{name}_reported", "sum"))

    wide = windowed.select([*PARTIAL_KEYS, "window_end", "ts"])
    for name, column in columns.items():
        wide = wide.append_column(name, column)
    grouped = _group(wide, PARTIAL_KEYS, aggregations)
    names = [*PARTIAL_KEYS, "window_end", "samples", "last_sample_ts"]
    for spec in aggregations[len(WINDOW_AGGREGATIONS):]:
        name, how = spec[0], spec[1]
        names.append({"list": "ratio_values"}.get(how, name if how in ("last", "max")
                                                  else f"{name}_{how}"))
    partials = grouped.rename_columns(names)
    values = partials.column_names.index("ratio_values")
    return partials.set_column(values, "ratio_values",
                               _without_nulls(partials["ratio_values"].combine_chunks()))


def _with_counted(partials: pa.Table, counted: pa.Table) -> pa.Table:
    """`partials` with the rows counted apart (window_end, count_all, ts per key) added in,
    as if they had been aggregated with the rest: a key only they have gets a row whose
    signals are null, its counts and reported sums 0 and its queue ratios empty."""
    if counted.num_rows == 0:
        return partials
    keys = list(PARTIAL_KEYS)
    rows = partials.select(keys).append_column("row", pa.array(np.arange(partials.num_rows)))
    joined = rows.join(counted.rename_columns([*keys, "c_end", "c_samples", "c_ts"]), keys,
                       join_type="full outer").sort_by("row")  # null rows (new keys) last
    new = joined.filter(pc.is_null(joined["row"]))
    n = new.num_rows
    extra: dict[str, pa.Array | pa.ChunkedArray] = {}
    for field in partials.schema:
        if field.name in keys:
            extra[field.name] = new[field.name]
        elif field.name.endswith(("_count", "_reported_sum")) or field.name == "samples":
            extra[field.name] = pa.array(np.zeros(n, np.int64), field.type)
        elif field.name == "ratio_values":
            extra[field.name] = pa.array([[]] * n, field.type)
        else:
            extra[field.name] = pa.nulls(n, field.type)
    table = pa.concat_tables([partials, pa.table(extra, schema=partials.schema)])
    at = table.column_names.index
    total = pc.add(table["samples"], pc.fill_null(joined["c_samples"], 0))
    newest, end = (_latest(table[name], joined[other]) for name, other in
                   (("last_sample_ts", "c_ts"), ("window_end", "c_end")))
    table = table.set_column(at("samples"), "samples", total)
    table = table.set_column(at("last_sample_ts"), "last_sample_ts", newest)
    return table.set_column(at("window_end"), "window_end", end)


def _latest(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    """Element-wise max of two timestamp columns, nulls skipped (no such kernel for them)."""
    return pc.cast(pc.max_element_wise(pc.cast(a, pa.int64()), pc.cast(b, pa.int64())), a.type)


def _without_nulls(lists: pa.ListArray) -> pa.ListArray:
    """Each list with its nulls dropped (hash_list keeps them)."""
    counts = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(lists)
    valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
    parents = np.repeat(np.arange(len(counts)), counts)
    kept = np.bincount(parents[valid], minlength=len(counts))
    offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values.filter(pa.array(valid)))


def _segment_partials(windowed: pa.Table, micros: pa.ChunkedArray, is_segments: pa.Array
                      ) -> pa.Table:
    """The newest NumLogSegments of each partition replica per window, with its (ts, offset)."""
    mask = pc.and_(is_segments, pc.is_valid(windowed["value"]))
    segments = windowed.select([*PARTIAL_KEYS, "labels", "value", "source_offset"]).append_column(
        "ts_us", micros).filter(mask)
    segments = segments.append_column("labels_key", labels_key(segments["labels"])
                                      ).drop_columns(["labels"])
    return newest_of_each(segments, SEGMENT_KEYS, "ts_us").select(
        [*SEGMENT_KEYS, "value", "ts_us", "source_offset"])


def nearest_rank_p95(lists: pa.ListArray) -> pa.Array:
    """Nearest-rank 95th percentile of each list: the smallest reported value with at least
    95 % of the window's values at or below it (never interpolated, so it is always a value
    the broker actually had); null for an empty list."""
    counts = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
    parents = np.repeat(np.arange(len(counts)), counts)
    ordered = values[np.lexsort((values, parents))]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    picks = starts + np.ceil(P95 * counts).astype(np.int64) - 1
    has = counts > 0
    out = np.where(has, ordered[np.where(has, picks, 0)] if len(ordered) else 0.0, np.nan)
    return pa.array(out, pa.float64(), mask=~has)


def finalize(partials: pa.Table, segments: pa.Table) -> pa.Table:
    """broker_signals rows from partials with one row per (cluster, broker, window)."""
    schema = arrow_schema("broker_signals")
    if partials.num_rows == 0:
        return schema.empty_table()
    per_broker = _group(segments, PARTIAL_KEYS, [("value", "sum")]).rename_columns(
        [*PARTIAL_KEYS, "log_segments_last"])
    rows = partials.select(list(PARTIAL_KEYS)).append_column(
        "row", pa.array(np.arange(partials.num_rows)))  # a list column cannot ride a join
    aligned = rows.join(per_broker, list(PARTIAL_KEYS), join_type="left outer").sort_by("row")
    grouped = partials.append_column("log_segments_last", aligned["log_segments_last"])
    out: dict[str, pa.ChunkedArray | pa.Array] = {
        name: grouped[name] for name in (*PARTIAL_KEYS, "window_end", "samples",
                                         "last_sample_ts")}
    for name in (*LAST_SIGNALS, *MAX_SIGNALS):
        out[name] = grouped[name]
    out["active_controller_last_at"] = pc.cast(grouped["active_controller_last__ts"], TS)
    out["active_controller_claimed_at"] = pc.cast(grouped["controller_claim_min"], TS)
    for name in INCREASE_METRICS:
        # 0 when the series reported but had nothing to compare; null when it never reported
        reported = pc.greater(grouped[f"{name}_reported_sum"], 0)
        out[name] = pc.if_else(reported, pc.fill_null(grouped[f"{name}_sum"], 0.0),
                               pa.scalar(None, pa.float64()))
    errors = [out[name] for name in METADATA_ERROR_INCREASES]
    out["metadata_errors_increase"] = pc.if_else(
        pc.or_(pc.or_(pc.is_valid(errors[0]), pc.is_valid(errors[1])), pc.is_valid(errors[2])),
        pc.add(pc.add(pc.fill_null(errors[0], 0.0), pc.fill_null(errors[1], 0.0)),
               pc.fill_null(errors[2], 0.0)),
        pa.scalar(None, pa.float64()))

    def mean(name: str) -> pa.ChunkedArray:
        count = grouped[f"{name}_count"]
        return pc.if_else(pc.greater(count, 0), pc.divide(grouped[f"{name}_sum"],
                                                          pc.cast(count, pa.float64())),
                          pa.scalar(None, pa.float64()))

    out["request_queue_utilization_max"] = grouped["ratio"]
    out["request_queue_utilization_p95"] = nearest_rank_p95(
        grouped["ratio_values"].combine_chunks())
    # OneMinuteRate, the broker's own figure, wins; rate(Count) for schemes with Count only.
    # MeanRate, an average over the broker's whole uptime, is never used: it hides the present.
    out["request_handler_idle_min"] = pc.coalesce(grouped["rate_idle_min"],
                                                  grouped["idle_from_count_min"])
    out["request_handler_idle_mean"] = pc.coalesce(mean("rate_idle"), mean("idle_from_count"))
    out["network_processor_idle_min"] = grouped["network_processor_idle_min"]
    out["network_processor_idle_mean"] = mean("network_processor_idle")
    out["log_segments_last"] = grouped["log_segments_last"]
    out["updated_at"] = pa.array([datetime.now(UTC)] * grouped.num_rows, TS)
    table = pa.table({name: out[name] for name in schema.names})
    return table.sort_by([(k, "ascending") for k in BROKER_KEYS]).cast(schema)


def broker_signals(samples: pa.Table, config: SignalsConfig) -> pa.Table:
    """One row per (cluster, broker, window) with every broker signal (schema broker_signals)."""
    return finalize(*signal_partials(prepared(samples, config), config))
