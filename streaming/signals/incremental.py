"""The open broker-signal windows, kept on the driver so that a batch aggregates only its
own samples instead of re-reading every sample of its windows from bronze.

Why: at a steady 10k samples/s a 60 s window holds 600k samples; re-reading and
re-aggregating it on every micro-batch made batch time (so the produced -> paged latency)
grow with the window, and at 100k/s it put up to 6 M samples on the driver per batch.

What is kept, per (cluster, broker, window): the partials of `broker.signal_partials`
(max, min, sum, count, the value with the newest (ts, offset), the queue ratios), the
newest NumLogSegments of each partition replica, and per counter series its newest sample
(the predecessor of the next one, for its increase). Every piece combines exactly, so a
window built batch by batch equals the window recomputed from all its samples (up to the
order of floating-point additions).

It answers only when it can prove that; otherwise `update` returns None and the caller
recomputes the touched windows from bronze (the authority) and hands the result to `seed`:
- after a start, a restart or a replayed batch (the state is in memory only; a replay
  after a failure would count its samples twice);
- a sample in a window that is not held and below its cluster's floor (older than the
  kept horizon behind where most of its brokers are, `OpenWindows.head`), or of a cluster
  whose state is unknown; a window at or above the floor that is not held has had no
  sample before, so it starts from the batch's;
- a counter sample older than its series' newest (the increases after it would change).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.config import SignalsConfig
from streaming.signals.broker import (
    LAST_SIGNALS,
    PARTIAL_KEYS,
    SAMPLE_COLUMNS,
    SEGMENT_KEYS,
    SKIP_NULLS,
    finalize,
    known_metrics,
    newest_of_each,
    prepared,
    series_keys,
    signal_partials,
    window_starts,
)
from streaming.signals.segment_store import Key, SegmentStore

LAST_COLUMNS = {f"{name}{part}" for name in LAST_SIGNALS for part in ("", "__ts", "__offset")}


def _micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def _extreme(pick: Any, a: float | None, b: float | None) -> float | None:
    """max/min as Arrow's kernels do them: nulls skipped, NaN only when nothing else."""
    present = [v for v in (a, b) if v is not None]
    if not present:
        return None
    numbers = [v for v in present if not math.isnan(v)]
    return pick(numbers) if numbers else math.nan


def _add(a: float | None, b: float | None) -> float | None:
    present = [v for v in (a, b) if v is not None]
    return sum(present) if present else None


def combine(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Two partials of one (cluster, broker, window): `new` holds the later batch's rows."""
    out = dict(old)
    for name in LAST_SIGNALS:  # the newest (ts, offset) wins; a tie goes to the later batch
        ts, offset = new[f"{name}__ts"], new[f"{name}__offset"]
        if ts is not None and (old[f"{name}__ts"] is None
                               or (ts, offset) >= (old[f"{name}__ts"], old[f"{name}__offset"])):
            out[name], out[f"{name}__ts"], out[f"{name}__offset"] = new[name], ts, offset
    for name, value in new.items():
        if name in PARTIAL_KEYS or name in LAST_COLUMNS:
            continue
        if name in ("window_end", "last_sample_ts"):
            out[name] = max(old[name], value)
        elif name == "ratio_values":
            out[name] = old[name] + value
        elif name.endswith("_min"):
            out[name] = _extreme(min, old[name], value)
        elif name.endswith(("_sum", "_count")) or name == "samples":
            out[name] = _add(old[name], value)
        else:  # the maxima, the queue ratio's among them
            out[name] = _extreme(max, old[name], value)
    return out


def _per_cluster(table: pa.Table, decide: Callable[[str | None, np.ndarray], np.ndarray]
                 ) -> pa.Array:
    """A mask over the rows of a partials or segments table, decided per cluster on its
    rows' window starts (µs). Why per cluster: a segments table holds a row per partition
    replica and window, and a Python test per row cost more than the rest of a batch's
    held-window step; a table holds a handful of clusters."""
    windows = pc.cast(table["window_start"], pa.int64()).to_numpy(zero_copy_only=False)
    encoded = pc.dictionary_encode(table["cluster"].combine_chunks())
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
    out = np.zeros(table.num_rows, dtype=bool)
    for code, cluster in [*enumerate(encoded.dictionary.to_pylist()), (-1, None)]:
        rows = codes == code
        if rows.any():
            out[rows] = decide(cluster, windows[rows])
    return pa.array(out, pa.bool_())


class OpenWindows:
    """The recent windows' partials of every cluster seen at the head of its stream."""

    def __init__(self, config: SignalsConfig, clock_skew_seconds: float) -> None:
        """`clock_skew_seconds`: how far behind its cluster's newest window (beyond the kept
        horizon) a broker's newest may be and still count towards where the cluster's
        stream is; the job passes the allowance for a broker's clock
        (quality.max_timestamp_skew_seconds). A broker further behind has gone dark or lags
        for good, and holding windows for it would grow without bound."""
        self.config = config
        self.width = config.window_seconds * 1_000_000
        # late samples up to the watermark land in held windows; older ones recompute
        self.keep = (config.watermark_seconds * 1_000_000 // self.width + 2) * self.width
        self.live_span = self.keep + int(clock_skew_seconds * 1_000_000)
        self.lookback = config.counter_lookback_seconds * 1_000_000
        self.clear()

    def clear(self) -> None:
        self.partials: dict[Key, dict[str, Any]] = {}
        self.segments = SegmentStore()  # each partition replica's newest NumLogSegments
        self.held: set[tuple[str, int]] = set()  # (cluster, window): every sample is in
        # cluster -> the oldest window that may be held: one below and not held is unknown
        # (evicted, or never read), one at or above and not held has had no sample yet
        self.floor: dict[str, int] = {}
        self.broker_newest: dict[str, dict[str, int]] = {}  # cluster -> broker -> window
        self.counters: pa.Table | None = None  # newest sample of each counter series
        self.schema: pa.Schema | None = None
        self.last_batch: int | None = None

    def begin(self, batch_id: int) -> None:
        """Every batch passes here first: a batch seen before is a replay, so forget all."""
        if self.last_batch is not None and batch_id <= self.last_batch:
            self.clear()
        self.last_batch = batch_id

    # ---- the incremental path ----
    def update(self, samples: pa.Table) -> pa.Table | None:
        """broker_signals rows of every window `samples` touched, or None: recompute."""
        if self.schema is None or self.counters is None:
            return None
        if samples.num_rows == 0:
            return finalize(self.schema.empty_table(), SEGMENT_SCHEMA.empty_table())
        windows = window_starts(samples["ts"], self.config.window_seconds)
        counters = _counters(samples)
        return self._take(
            pa.table({"cluster": samples["cluster"], "window": windows}), counters,
            lambda priors: signal_partials(prepared(samples, self.config, priors),
                                           self.config))

    def update_parts(self, samples: pa.Table, partials: list[pa.Table],
                     segments: list[pa.Table]) -> pa.Table | None:
        """update() from what the read tasks sent for a batch's signal samples: per chunk,
        the partials and segments of its gauges (chunk_parts), and the samples not in them
        (`samples`: the counters, whose increases need the held predecessors, and every
        sample of a chunk that could not be reduced)."""
        if self.schema is None or self.counters is None:
            return None
        windows = [pa.table({"cluster": part["cluster"],
                             "window": pc.cast(part["window_start"], pa.int64())})
                   for part in partials]
        windows.append(pa.table({"cluster": samples["cluster"], "window": window_starts(
            samples["ts"], self.config.window_seconds)}))
        touched = pa.concat_tables(windows)
        if touched.num_rows == 0:
            return finalize(self.schema.empty_table(), SEGMENT_SCHEMA.empty_table())

        def batch_partials(priors: pa.Table) -> tuple[pa.Table, pa.Table]:
            own, own_segments = list(partials), list(segments)
            if samples.num_rows:
                counted, counted_segments = signal_partials(
                    prepared(samples, self.config, priors), self.config)
                own.append(counted)
                own_segments.append(counted_segments)
            assert self.schema is not None
            # the segments as sent, in chunk order: _take reduces only those it does not hold
            return (merge_partials([p.cast(self.schema) for p in own], self.schema),
                    pa.concat_tables([s.cast(SEGMENT_SCHEMA) for s in own_segments]) if
                    own_segments else SEGMENT_SCHEMA.empty_table())

        return self._take(touched, _counters(samples), batch_partials)

    def _take(self, windows: pa.Table, counters: pa.Table,
              partials_of: Callable[[pa.Table], tuple[pa.Table, pa.Table]]
              ) -> pa.Table | None:
        """The batch into the held windows: `windows` (cluster, window start in µs) are
        those its samples touched, `counters` its counter samples, `partials_of(priors)`
        its partials (one row per key) and segments (in the order sent, a replica's window
        may come more than once) given the counters' predecessors."""
        pairs = windows.group_by(["cluster", "window"], use_threads=False).aggregate([])
        touched = set(zip(pairs["cluster"].to_pylist(), pairs["window"].to_pylist(), strict=True))
        for cluster, window in touched:
            floor = self.floor.get(cluster)
            if floor is None or ((cluster, window) not in self.held and window < floor):
                return None
        priors = self._priors(counters)
        if priors is None:
            return None
        partials, segments = partials_of(priors)
        was_held, segment_was_held = self._was_held(partials), self._was_held(segments)
        self.held |= touched
        self._advance(partials)
        # Windows held before and those within the kept horizon are held from now on, and
        # answered from what is held; the others are the batch's partials as they are (a
        # catch-up batch spans hours of windows: holding them would be Python work for
        # nothing), and only their segments need reducing here.
        holding = pc.or_(was_held, self._kept(partials))
        segment_holding = pc.or_(segment_was_held, self._kept(segments))
        self._absorb(partials.filter(holding), segments.filter(segment_holding))
        self._remember_counters(counters)
        answered = partials.filter(holding).select(list(PARTIAL_KEYS)).to_pylist()
        own = partials.filter(pc.invert(holding))
        own_segments = newest_segments([segments.filter(pc.invert(segment_holding))])
        rows = self._rows({(r["cluster"], r["broker"], _micros(r["window_start"]))
                           for r in answered}, own, own_segments)
        self._evict()
        return rows

    def _was_held(self, table: pa.Table) -> pa.Array:
        """Per row of a partials or segments table: is its (cluster, window) held?"""
        held: dict[str | None, list[int]] = {}
        for cluster, window in self.held:
            held.setdefault(cluster, []).append(window)
        return _per_cluster(table, lambda cluster, windows: np.isin(
            windows, np.array(held.get(cluster, []), dtype=np.int64)))

    def _kept(self, table: pa.Table) -> pa.Array:
        """Per row of a partials or segments table: is its window at or above its
        cluster's floor? (A cluster without one keeps everything.)"""
        def within(cluster: str | None, windows: np.ndarray) -> np.ndarray:
            floor = self.floor.get(cluster)  # type: ignore[arg-type]
            return np.ones(len(windows), bool) if floor is None else windows >= floor
        return _per_cluster(table, within)

    def _advance(self, partials: pa.Table) -> None:
        """Each broker's newest window from a batch's partials, then each cluster's floor:
        the kept horizon below where most of its live brokers are (`head`)."""
        newest = partials.select(["cluster", "broker"]).append_column(
            "window", pc.cast(partials["window_start"], pa.int64())).group_by(
            ["cluster", "broker"], use_threads=False).aggregate([("window", "max")])
        for cluster, broker, window in zip(*(newest[c].to_pylist() for c in (
                "cluster", "broker", "window_max")), strict=True):
            brokers = self.broker_newest.setdefault(cluster, {})
            brokers[broker] = max(brokers.get(broker, window), window)
        for cluster in set(newest["cluster"].to_pylist()):
            floor = self.head(cluster) - self.keep
            self.floor[cluster] = max(self.floor.get(cluster, floor), floor)

    def head(self, cluster: str) -> int:
        """Where the cluster's stream is: the newest window that most of its live brokers
        (those not further behind its newest than the live span) have reached. Why not its
        newest window: one broker whose clock runs minutes ahead (within the skew allowance)
        would move the horizon past every other broker's windows, and each batch of theirs
        would then be recomputed from bronze."""
        windows = sorted(self.broker_newest[cluster].values(), reverse=True)
        live = [w for w in windows if w >= windows[0] - self.live_span]
        return live[len(live) // 2]

    def _priors(self, counters: pa.Table) -> pa.Table | None:
        """The held predecessor of each counter series in the batch, or None when a sample
        is not newer than it."""
        assert self.counters is not None
        if counters.num_rows == 0:
            return self.counters.slice(0, 0)
        keys = series_keys(counters)
        first = pa.table({"series": keys, "at": pc.cast(counters["ts"], pa.int64()),
                          "source_offset": counters["source_offset"]}).sort_by(
            [("series", "ascending"), ("at", "ascending"), ("source_offset", "ascending")])
        first = first.group_by("series", use_threads=False).aggregate(
            [("at", "first"), ("source_offset", "first")])
        held = pa.table({"series": series_keys(self.counters),
                         "held_at": pc.cast(self.counters["ts"], pa.int64()),
                         "held_offset": self.counters["source_offset"],
                         "row": np.arange(self.counters.num_rows)})
        pairs = held.join(first, "series", join_type="inner")  # no map column rides a join
        if pairs.num_rows == 0:
            return self.counters.slice(0, 0)
        newer = pc.or_(pc.greater(pairs["at_first"], pairs["held_at"]), pc.and_(
            pc.equal(pairs["at_first"], pairs["held_at"]),
            pc.greater(pairs["source_offset_first"], pairs["held_offset"])))
        if not pc.all(newer).as_py():
            return None
        return self.counters.take(pairs["row"])  # too old ones: with_counter_deltas

    def _absorb(self, partials: pa.Table, segments: pa.Table) -> None:
        for row in partials.to_pylist():
            key = (row["cluster"], row["broker"], _micros(row["window_start"]))
            held = self.partials.get(key)
            self.partials[key] = row if held is None else combine(held, row)
        self.segments.absorb(segments)

    def _remember_counters(self, counters: pa.Table) -> None:
        assert self.counters is not None
        if counters.num_rows:
            self.counters = newest_per_series(pa.concat_tables(
                [self.counters, counters.select(self.counters.column_names)]))

    def _evict(self) -> None:
        horizon = self.floor
        self.held = {(c, w) for c, w in self.held if w >= horizon[c]}
        for key in [k for k in self.partials if k[2] < horizon[k[0]]]:
            del self.partials[key]
        self.segments.evict(horizon)
        if self.counters is not None and self.counters.num_rows and horizon:
            # each series by its own cluster's floor (the times stand in for window starts):
            # by the lowest floor of all, a cluster gone dark (whose floor stays) would keep
            # every other cluster's finished series for good
            def recent(cluster: str | None, at: np.ndarray) -> np.ndarray:
                floor = horizon.get(cluster)  # type: ignore[arg-type]
                return np.ones(len(at), bool) if floor is None else at >= floor - self.lookback
            self.counters = self.counters.filter(_per_cluster(
                self.counters.select(["cluster"]).append_column(
                    "window_start", pc.cast(self.counters["ts"], pa.int64())), recent))

    def _rows(self, keys: Iterable[Key], own: pa.Table | None = None,
              own_segments: pa.Table | None = None) -> pa.Table:
        """Rows of the held windows `keys`, plus those of partials not held before (`own`)."""
        assert self.schema is not None
        ordered = sorted(keys)
        partials = pa.Table.from_pylist([self.partials[k] for k in ordered], schema=self.schema)
        # finalize() sums the replicas' newest values per key: a held key's sum goes as one
        # row (its replicas are the window's whole fleet, re-sent on every batch otherwise)
        summed = self.segments.totals(ordered)
        segments = pa.table({
            "cluster": pa.array([k[0] for k, _ in summed], pa.string()),
            "broker": pa.array([k[1] for k, _ in summed], pa.string()),
            "window_start": pa.array([k[2] for k, _ in summed], pa.int64()).cast(
                SEGMENT_SCHEMA.field("window_start").type),
            "labels_key": [""] * len(summed),
            "value": pa.array([total for _, total in summed], pa.float64()),
            "ts_us": pa.array([0] * len(summed), pa.int64()),
            "source_offset": pa.array([0] * len(summed), pa.int64())}).cast(SEGMENT_SCHEMA)
        if own is not None and own_segments is not None:
            partials = pa.concat_tables([partials, own.cast(self.schema)])
            segments = pa.concat_tables([segments, own_segments.cast(SEGMENT_SCHEMA)])
        return finalize(partials, segments)

    # ---- after a recompute ----
    def seed(self, samples: pa.Table, partials: pa.Table, segments: pa.Table,
             spans: list[tuple[datetime, datetime]], clusters: list[str],
             later_windows: set[str]) -> None:
        """Hold the windows of the last span just recomputed from bronze, for every cluster
        of the batch that has no samples in later windows (`later_windows` names those that
        have: their head was not recomputed, so nothing about it is known)."""
        self.schema = partials.schema
        lo, hi = (_micros(moment) for moment in spans[-1])
        at_head = [c for c in clusters if c not in later_windows]
        for cluster in clusters:
            self._forget(cluster)
        if not at_head:
            return
        heads = pa.array(at_head)
        starts = pc.cast(partials["window_start"], pa.int64())
        self._advance(partials.filter(pc.and_(pc.is_in(partials["cluster"], heads),
                                              pc.greater_equal(starts, lo))))
        for cluster in at_head:  # the span may be hours long (a catch-up)
            self.floor[cluster] = max(lo, self.floor.get(cluster, lo))
            self.held |= {(cluster, w) for w in range(self.floor[cluster], hi + 1, self.width)}
        self._absorb(*(table.filter(pc.and_(pc.is_in(table["cluster"], heads),
                                            self._kept(table)))
                       for table in (partials, segments)))
        # The slice is contiguous from the look-back before the last span to the head.
        recent = samples.filter(pc.and_(pc.and_(
            pc.is_in(samples["cluster"], heads),
            pc.fill_null(pc.equal(samples["kind"], "counter"), False)),
            pc.greater_equal(pc.cast(samples["ts"], pa.int64()), lo - self.lookback)))
        held = [] if self.counters is None else [self.counters]
        self.counters = newest_per_series(pa.concat_tables([*held, recent]))
        self._evict()

    def _forget(self, cluster: str) -> None:
        self.held = {(c, w) for c, w in self.held if c != cluster}
        self.floor.pop(cluster, None)
        self.broker_newest.pop(cluster, None)
        for key in [k for k in self.partials if k[0] == cluster]:
            del self.partials[key]
        self.segments.forget(cluster)
        if self.counters is not None:
            self.counters = self.counters.filter(pc.not_equal(self.counters["cluster"], cluster))


def _counters(samples: pa.Table) -> pa.Table:
    return samples.filter(pc.fill_null(pc.equal(samples["kind"], "counter"), False))


def chunk_parts(samples: pa.Table, config: SignalsConfig
                ) -> tuple[pa.Table, pa.Table, pa.Table]:
    """What a read task sends the driver for its chunk's signal samples: the counter
    samples (all of `samples`' columns), whose increases need their series' predecessors
    (held on the driver), and the partials and segments of every other sample, which need
    nothing from other chunks or batches. OpenWindows.update_parts takes them."""
    known = known_metrics(samples)
    is_counter = pc.fill_null(pc.equal(known["kind"], "counter"), False)
    # the gauges by a mask: a filter would copy every column it keeps (the labels maps);
    # the counters' deltas, without their predecessors, are computed and not read
    partials, segments = signal_partials(prepared(known.select(SAMPLE_COLUMNS), config),
                                         config, rows=pc.invert(is_counter))
    return known.filter(is_counter), partials, segments


def _merge_how(name: str) -> str:
    """How a partial column combines over rows of one key: combine()'s rules, as an Arrow
    hash aggregation (nulls skipped, null when every row is null)."""
    if name in ("window_end", "last_sample_ts"):
        return "max"
    if name.endswith("_min"):
        return "min"
    if name.endswith(("_sum", "_count")) or name == "samples":
        return "sum"
    return "max"  # the maxima, the queue ratio's among them


def merge_partials(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """Partials of several chunks, one row per (cluster, broker, window): what combine()
    gives, folding the rows of a key in chunk order (a tie in (ts, offset) goes to the
    later chunk, as the later of two batches wins), done as Arrow aggregations."""
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    keyed = table.select(list(PARTIAL_KEYS))
    distinct = keyed.group_by(list(PARTIAL_KEYS), use_threads=False).aggregate([])
    if distinct.num_rows == table.num_rows:
        return table
    ids = distinct.append_column("key", pa.array(np.arange(distinct.num_rows)))
    key = keyed.append_column("row", pa.array(np.arange(table.num_rows))).join(
        ids, list(PARTIAL_KEYS)).sort_by("row")["key"]
    rows = table.append_column("key", key)
    simple = [f.name for f in schema if f.name not in PARTIAL_KEYS
              and f.name not in LAST_COLUMNS and f.name != "ratio_values"]
    merged = rows.group_by("key", use_threads=False).aggregate(
        [(name, _merge_how(name), SKIP_NULLS) for name in simple]).sort_by("key")
    columns: dict[str, pa.ChunkedArray | pa.Array] = {
        **{k: distinct[k] for k in PARTIAL_KEYS},
        **{name: merged[f"{name}_{_merge_how(name)}"] for name in simple}}
    for name in LAST_SIGNALS:  # the value at the newest (ts, offset); sort_by is stable
        parts = [name, f"{name}__ts", f"{name}__offset"]
        present = rows.select(["key", *parts]).filter(pc.is_valid(rows[f"{name}__ts"]))
        newest = present.sort_by([(f"{name}__ts", "ascending"),
                                  (f"{name}__offset", "ascending")]).group_by(
            "key", use_threads=False).aggregate([(p, "last") for p in parts])
        at = ids.select(["key"]).join(newest, "key", join_type="left outer").sort_by("key")
        columns.update({p: at[f"{p}_last"] for p in parts})
    # each key's queue ratios, all its rows' lists end to end (a list column cannot ride a
    # join or a hash aggregation): the flattened values ordered by key, cut by counts
    values = rows["ratio_values"].combine_chunks()
    owners = pc.take(rows["key"], pc.list_parent_indices(values)).to_numpy()
    order = np.argsort(owners, kind="stable")
    counts = np.bincount(owners, minlength=distinct.num_rows)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    columns["ratio_values"] = pa.ListArray.from_arrays(
        pa.array(offsets), pc.take(pc.list_flatten(values), pa.array(order)))
    return pa.table({f.name: columns[f.name] for f in schema}).cast(schema)


def newest_segments(tables: list[pa.Table]) -> pa.Table:
    """Segment partials of several chunks: the newest (ts, offset) of each partition
    replica per window, a tie to the later chunk."""
    if not any(t.num_rows for t in tables):  # most batches: every window held, none left
        return SEGMENT_SCHEMA.empty_table()
    segments = pa.concat_tables([t.cast(SEGMENT_SCHEMA) for t in tables])
    return newest_of_each(segments, SEGMENT_KEYS, "ts_us")


class NewestSegments:
    """Segment partials, each table one row per replica and window (chunk_parts' output),
    folded in chunk order into newest_segments' answer; reduced again whenever `bound`
    rows have come since the last reduction, so memory follows the distinct replicas and
    windows and the sorting is paid about once per `bound` rows."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.tables: list[pa.Table] = []
        self.unreduced = 0

    @property
    def empty(self) -> bool:
        return not any(t.num_rows for t in self.tables)

    def add(self, segments: pa.Table) -> None:
        self.tables.append(segments)
        self.unreduced += segments.num_rows
        if self.unreduced >= self.bound:
            self.tables = [newest_segments(self.tables)]
            self.unreduced = 0

    def table(self) -> pa.Table:
        if len(self.tables) == 1:  # one chunk's, or already reduced
            return self.tables[0].cast(SEGMENT_SCHEMA)
        return newest_segments(self.tables)


SEGMENT_SCHEMA = pa.schema([
    pa.field("cluster", pa.string()), pa.field("broker", pa.string()),
    pa.field("window_start", pa.timestamp("us", "UTC")), pa.field("labels_key", pa.string()),
    pa.field("value", pa.float64()), pa.field("ts_us", pa.int64()),
    pa.field("source_offset", pa.int64()),
])


def newest_per_series(samples: pa.Table) -> pa.Table:
    """The two newest samples (by ts, then offset) of each series: the predecessors a
    counter's next sample needs (its increase from the newest; whether its rate may be
    taken, from the interval between the two: broker.with_counter_deltas)."""
    if samples.num_rows == 0:
        return samples
    # a series' labels are a map, which no key can be: its series_keys string stands in
    keyed = samples.append_column("series", series_keys(samples))
    return newest_of_each(keyed, ["series"], "ts", count=2).drop_columns(["series"])
