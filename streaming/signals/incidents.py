"""Incidents: runs of consecutive windows in which a paging-grade condition held.

Recomputed from the signal rows of a bounded horizon every batch, like the signals
themselves, so late data and replays converge instead of opening duplicates. An
incident's id is a hash of (cluster, broker, kind, started_at): stable across
recomputations, and the job reconciles the runs with the incidents already stored
(`reconcile_incidents`): a run that continues or overlaps a stored incident keeps its id
and start, and a stored incident that the recomputation no longer bears out is closed and
marked withdrawn, never deleted: it may have been shown (status, /metrics, a page).

What a shorter episode leaves: an incident needs a window in which its condition held
(a stale broker: a window by whose end it had sent nothing for stale_after seconds of
event time). The exporter's live gauges (kafka_health_broker_stale, the under-min-ISR
gauge, ...) follow each batch and the wall clock, so a silence or a spike shorter than
that shows on /metrics, in Prometheus's history and in ALERTS, and leaves no row here.

Arrow on the driver, like broker_signals and cluster_signals: the horizon is a few
thousand signal rows, already on the driver, and as Spark queries (two window functions,
two joins, a union of six parts) this stage cost ~1.2 s of fixed planning per micro-batch.
The window functions become numpy over rows sorted by series. Comparisons keep Spark's
semantics where Arrow's differ: NaN is greater than every number (so NaN > 0 holds and
a NaN peak wins the max), and unknown (null) conditions are not active.

Two conditions can be undecided in a window whose evidence is still incomplete: the
controller count while the last controller's numbers are missing (signals.cluster), and
a broker's staleness in a window it has not reported in yet, until the cluster's event
time is a watermark past the window (its rows may be in flight). An undecided window
holds the state of the window before it: it neither opens nor resolves an incident, so
no incident lives for one batch and no push is taken back by the next.
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.config import SignalsConfig
from streaming.identity import CLUSTER_WIDE
from streaming.schemas import arrow_schema

# Kinds whose condition is "this broker_signals column is above zero in the window" (and
# whose peak is that column): the direct alert push reads them from a batch's broker rows.
POSITIVE_BROKER_CONDITIONS = {
    "under_min_isr": "under_min_isr_max",
    # a failed log directory: its replicas went offline on this broker
    "offline_log_dir": "offline_log_dirs_max",
}
# Kinds whose condition is "some broker's column is above zero in the window" but whose
# event is the cluster's: every KRaft controller counts each unclean election it applies,
# so one election raises the column on every controller. One incident per cluster (broker
# CLUSTER_WIDE), its peak the highest broker count, as the alert rule reads the gauges
# (`max without (broker)`). Not cluster_signals' de-duplicated count: that one takes a
# count in the window after an election as catching up, which may hide a second election
# from the history while the rule pages on it.
CLUSTER_EVENT_CONDITIONS = {
    "unclean_election": "unclean_elections_increase",
    # a leader from the eligible leader replicas (KIP-966): they held the committed data,
    # so nothing acknowledged was lost; its own kind, never counted as unclean
    "elr_election": "elr_elections_increase",
}
# Kinds with one incident per cluster (broker CLUSTER_WIDE): their alerts carry no broker.
CLUSTER_SCOPE_KINDS = ("offline_partitions", "controller", "fenced_broker", "controller_churn",
                       *CLUSTER_EVENT_CONDITIONS)
KINDS = ("under_min_isr", "offline_partitions", "unclean_election", "controller", "saturation",
         "stale_broker", "offline_log_dir", "fenced_broker", "metadata", "controller_churn",
         "elr_election")
# A broker applying the metadata log this far behind serves a stale view of leaders and
# ISRs (healthy lag is under a second: the controller appends a record at least every
# metadata.max.idle.interval.ms, 500 ms by default). The rule KafkaBrokerMetadataUnhealthy
# reads the same limit.
METADATA_LAG_LIMIT_MS = 30_000.0
# Controller elections within cluster.CHURN_SPAN that make churn: one failover counts one
# or two (the restarted node counts the leader it finds); the rule KafkaControllerChurn
# reads the same number.
CHURN_ELECTIONS = 3.0

TS = pa.timestamp("us", "UTC")
SERIES = ("cluster", "broker", "kind")
NO_TS = np.iinfo(np.int64).min  # stands for a null timestamp in int64 arrays (sorts first)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CONDITIONS_SCHEMA = pa.schema([
    pa.field("cluster", pa.string()), pa.field("broker", pa.string()),
    pa.field("kind", pa.string()), pa.field("window_start", TS), pa.field("window_end", TS),
    pa.field("active", pa.bool_()), pa.field("value", pa.float64()),
    pa.field("measure", pa.string()),
])
# Measures whose worst value is the lowest (an incident's peak is their minimum).
LOWER_IS_WORSE = frozenset({"request_handler_idle_min"})
STALE_MEASURE = "stale_seconds"
STALE_SCHEMA = pa.schema([
    pa.field("cluster", pa.string()), pa.field("broker", pa.string()),
    pa.field("window_start", TS), pa.field("window_end", TS),
    pa.field("stale", pa.bool_()), pa.field("age", pa.float64()),
])


def _above(values: pa.ChunkedArray | pa.Array, threshold: float) -> pa.ChunkedArray:
    """values > threshold as Spark compares doubles: NaN is above every number."""
    values = pc.cast(values, pa.float64())
    return pc.or_kleene(pc.greater(values, threshold), pc.is_nan(values))


def _condition(rows: pa.Table, broker: pa.ChunkedArray | str, kind: str,
               active: pa.ChunkedArray, value: pa.ChunkedArray, measure: pa.ChunkedArray | str,
               undecided: bool = False) -> pa.Table:
    """Condition rows of one kind; `measure` names what `value` is (the column it comes
    from). With `undecided`, a null `active` stays null (the window holds the state before
    it, see incident_runs) and its value is not a peak; otherwise an unknown condition is
    not active."""
    n = rows.num_rows
    if isinstance(measure, str):
        measure = pa.array([measure] * n, pa.string())
    brokers = pa.array([broker] * n, pa.string()) if isinstance(broker, str) else broker
    value = pc.cast(value, pa.float64())
    if undecided:
        value = pc.if_else(pc.is_valid(active), value, pa.scalar(None, pa.float64()))
    return pa.table({
        "cluster": rows["cluster"], "broker": brokers, "kind": pa.array([kind] * n, pa.string()),
        "window_start": rows["window_start"], "window_end": rows["window_end"],
        "active": active if undecided else pc.fill_null(active, False), "value": value,
        "measure": measure,
    }).cast(CONDITIONS_SCHEMA)


def _cluster_event(broker_rows: pa.Table, kind: str, column: str) -> pa.Table:
    """Condition rows of a cluster event: per (cluster, window), the highest broker value."""
    per_window = broker_rows.group_by(["cluster", "window_start"], use_threads=False).aggregate(
        [("window_end", "max"), (column, "max")]).rename_columns(
        ["cluster", "window_start", "window_end", column])
    return _condition(per_window, CLUSTER_WIDE, kind, _above(per_window[column], 0),
                      per_window[column], column)


def _micros(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Timestamps as int64 microseconds, NO_TS where null (to_numpy would go through float)."""
    return pc.fill_null(pc.cast(column, pa.int64()), NO_TS).to_numpy(zero_copy_only=False)


def _codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An integer per distinct value (-1 for null): grouping keys numpy can compare."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = pc.dictionary_encode(column)
    return pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def _series_starts(codes: list[np.ndarray]) -> np.ndarray:
    """True where a row begins a new series (rows sorted by series; key columns as codes)."""
    starts = np.arange(len(codes[0])) == 0
    for c in codes:
        starts[1:] |= c[1:] != c[:-1]
    return starts


def _running_max(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Max so far within each segment of `values` (segments begin where `starts` holds)."""
    out = values.copy()
    bounds = [*np.flatnonzero(starts), len(values)]
    for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
        out[begin:end] = np.maximum.accumulate(values[begin:end])
    return out


def stale_rows(broker_rows: pa.Table, stale_after_seconds: float,
               settle_seconds: float | None = None) -> pa.Table:
    """One row per (cluster window, known broker): stale when it sent nothing recent enough.

    With `settle_seconds`, a broker without samples in a window is undecided (stale null)
    until the cluster's newest sample is that far past the window's end: its samples for
    the window may still be in flight while its peers' have arrived.

    A broker is known once it reported in the horizon; its silence is measured against
    the newest sample of its cluster in that window (event time, so a replay is not stale).
    Ages are whole seconds, both ends truncated to the second first (Spark's unix_timestamp,
    which the Spark version of this stage used), so ages and stale flags did not change when
    the stage moved to Arrow.
    """
    if broker_rows.num_rows == 0:
        return STALE_SCHEMA.empty_table()
    per_window = broker_rows.group_by(["cluster", "window_start"], use_threads=False).aggregate(
        [("window_end", "max"), ("last_sample_ts", "max")]).rename_columns(
        ["cluster", "window_start", "window_end", "cluster_newest"])
    known = broker_rows.group_by(["cluster", "broker"], use_threads=False).aggregate(
        [("window_start", "min")]).rename_columns(["cluster", "broker", "first_seen"])
    grid = per_window.join(known, "cluster", join_type="inner", use_threads=False)
    grid = grid.filter(pc.greater_equal(grid["window_start"], grid["first_seen"]))
    seen = broker_rows.select(["cluster", "broker", "window_start", "last_sample_ts"])
    joined = grid.join(seen, ["cluster", "broker", "window_start"], join_type="left outer",
                       use_threads=False)
    joined = joined.sort_by([("cluster", "ascending"), ("broker", "ascending"),
                             ("window_start", "ascending")])
    # The broker's newest sample so far: it may have been silent in this very window.
    series = _series_starts([_codes(joined[key]) for key in ("cluster", "broker")])
    newest = _running_max(_micros(joined["last_sample_ts"]), series)
    broker_newest = pa.array(newest, pa.int64(), mask=newest == NO_TS)
    age = pc.subtract(pc.divide(pc.cast(joined["cluster_newest"], pa.int64()), 1_000_000),
                      pc.divide(broker_newest, 1_000_000))  # int64 division truncates
    age = pc.cast(age, pa.float64())
    stale = pc.greater(age, float(stale_after_seconds))
    if settle_seconds is not None:
        newest = broker_rows.group_by("cluster", use_threads=False).aggregate(
            [("last_sample_ts", "max")]).rename_columns(["cluster", "settled_by"])
        settled_by = joined.select(["cluster"]).append_column(
            "row", pa.array(np.arange(joined.num_rows))).join(
            newest, "cluster", join_type="left outer", use_threads=False).sort_by("row")
        settles_at = pc.add(pc.cast(joined["window_end"], pa.int64()),
                            int(settle_seconds * 1_000_000))
        settled = pc.greater_equal(pc.cast(settled_by["settled_by"], pa.int64()), settles_at)
        undecided = pc.and_(pc.is_null(joined["last_sample_ts"]),
                            pc.invert(pc.fill_null(settled, False)))
        stale = pc.if_else(undecided, pa.scalar(None, pa.bool_()), stale)
    return pa.table({
        "cluster": joined["cluster"], "broker": joined["broker"],
        "window_start": joined["window_start"], "window_end": joined["window_end"],
        "stale": stale, "age": age,
    }).cast(STALE_SCHEMA)


def incident_conditions(broker_rows: pa.Table, cluster_rows: pa.Table,
                        config: SignalsConfig) -> pa.Table:
    """Per (cluster, broker, kind, window): did the condition hold, and how badly."""
    stale_after = config.stale_after_intervals * config.scrape_interval_seconds
    stale = stale_rows(broker_rows, stale_after, config.watermark_seconds)
    broker = broker_rows["broker"]
    queue_column, idle_column = "request_queue_utilization_max", "request_handler_idle_min"
    queue_high = _above(broker_rows[queue_column], config.saturation_queue_ratio)
    idle = pc.cast(broker_rows[idle_column], pa.float64())
    idle_low = pc.less(idle, config.saturation_idle_ratio)
    saturated = pc.or_kleene(queue_high, idle_low)
    # What made the window saturated: the handlers' idle fraction when it is low (the
    # queue may read 0.0 while every handler is busy), else the queue ratio.
    by_idle = pc.fill_null(idle_low, False)
    parts = [
        *[_condition(broker_rows, broker, kind, _above(broker_rows[column], 0),
                     broker_rows[column], column)
          for kind, column in POSITIVE_BROKER_CONDITIONS.items()],
        *[_cluster_event(broker_rows, kind, column)
          for kind, column in CLUSTER_EVENT_CONDITIONS.items()],
        _condition(broker_rows, broker, "saturation", saturated,
                   pc.if_else(by_idle, idle,
                              pc.cast(broker_rows[queue_column], pa.float64())),
                   pc.if_else(by_idle, pa.scalar(idle_column), pa.scalar(queue_column))),
        _condition(cluster_rows, CLUSTER_WIDE, "offline_partitions",
                   _above(cluster_rows["offline_partitions_max"], 0),
                   cluster_rows["offline_partitions_max"], "offline_partitions_max"),
        _condition(cluster_rows, CLUSTER_WIDE, "controller",
                   pc.not_equal(pc.cast(cluster_rows["active_controllers"], pa.float64()), 1.0),
                   cluster_rows["active_controllers"], "active_controllers", undecided=True),
        _condition(stale, stale["broker"], "stale_broker", stale["stale"], stale["age"],
                   STALE_MEASURE, undecided=True),
        _metadata_condition(broker_rows),
        _fenced_condition(cluster_rows, stale),
        _condition(cluster_rows, CLUSTER_WIDE, "controller_churn",
                   pc.greater_equal(pc.cast(cluster_rows["controller_elections_5m"],
                                            pa.float64()), CHURN_ELECTIONS),
                   cluster_rows["controller_elections_5m"], "controller_elections_5m"),
    ]
    return pa.concat_tables(parts)


def _metadata_condition(broker_rows: pa.Table) -> pa.Table:
    """A broker behind on the metadata log (METADATA_LAG_LIMIT_MS) or failing to load or
    apply it; the measure is the lag when it is over the limit, else the errors."""
    lag = pc.cast(broker_rows["metadata_lag_ms_max"], pa.float64())
    errors = pc.cast(broker_rows["metadata_errors_increase"], pa.float64())
    behind = pc.fill_null(_above(lag, METADATA_LAG_LIMIT_MS), False)
    return _condition(broker_rows, broker_rows["broker"], "metadata",
                      pc.or_kleene(behind, _above(errors, 0)), pc.if_else(behind, lag, errors),
                      pc.if_else(behind, pa.scalar("metadata_lag_ms_max"),
                                 pa.scalar("metadata_errors_increase")))


def _fenced_condition(cluster_rows: pa.Table, stale: pa.Table) -> pa.Table:
    """Brokers the active controller has fenced while their metrics still flow: more fenced
    than stale brokers in the window (a dead or frozen broker is both fenced and stale, and
    pages as stale). Undecided while the controller's count is unknown (a failover window),
    so the controller's silence neither opens nor resolves it."""
    counts = stale.select(["cluster", "window_start"]).append_column(
        "dark", pc.cast(pc.fill_null(stale["stale"], False), pa.int64())).append_column(
        "unsure", pc.cast(pc.is_null(stale["stale"]), pa.int64())).group_by(
        ["cluster", "window_start"], use_threads=False).aggregate(
        [("dark", "sum"), ("unsure", "sum")])
    aligned = cluster_rows.select(["cluster", "window_start"]).append_column(
        "row", pa.array(np.arange(cluster_rows.num_rows))).join(
        counts, ["cluster", "window_start"], join_type="left outer",
        use_threads=False).sort_by("row")
    fenced = pc.cast(cluster_rows["fenced_brokers"], pa.float64())
    dark = pc.cast(pc.fill_null(aligned["dark_sum"], 0), pa.float64())
    unsure = pc.cast(pc.fill_null(aligned["unsure_sum"], 0), pa.float64())
    # a broker whose staleness is undecided (its rows may be in flight) may be the fenced one
    maybe_dark = pc.less_equal(fenced, pc.add(dark, unsure))
    active = pc.if_else(pc.and_(pc.greater(fenced, dark), maybe_dark),
                        pa.scalar(None, pa.bool_()), pc.greater(fenced, dark))
    return _condition(cluster_rows, CLUSTER_WIDE, "fenced_broker", active, fenced,
                      "fenced_brokers", undecided=True)


def _peaks(values: pa.ChunkedArray, starts: np.ndarray) -> pa.Array:
    """Max value per run as Spark computes it: nulls skipped, NaN above every number."""
    valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
    raw = pc.fill_null(values, -np.inf).to_numpy(zero_copy_only=False)
    nan = np.isnan(raw)
    peak = np.maximum.reduceat(np.where(nan, -np.inf, raw), starts)
    peak = np.where(np.logical_or.reduceat(nan, starts), np.nan, peak)
    return pa.array(peak, pa.float64(), mask=~np.logical_or.reduceat(valid, starts))


def _measured_peaks(picked: pa.Table, begins: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Per run (rows sorted by run, each run starting at `begins`): the measure of its
    first window (what opened it) and its worst value in that measure: the max, or the min
    for LOWER_IS_WORSE measures. Windows of the run in another measure are left out."""
    measures = np.array(picked["measure"].to_pylist(), dtype=object)
    lengths = np.diff(np.append(begins, len(measures)))
    run_of_row = np.repeat(np.arange(len(begins)), lengths)
    opened_by = measures[begins]
    sign = np.where([m in LOWER_IS_WORSE for m in opened_by], -1.0, 1.0)
    values = pc.cast(picked["value"], pa.float64())
    raw = pc.fill_null(values, 0.0).to_numpy(zero_copy_only=False) * sign[run_of_row]
    counted = (pc.is_valid(values).to_numpy(zero_copy_only=False)
               & (measures == opened_by[run_of_row]))
    worst = _peaks(pa.array(raw, pa.float64(), mask=~counted), begins)
    return pc.multiply(worst, pa.array(sign)), opened_by


def _incident_id(cluster: str | None, broker: str | None, kind: str | None,
                 started_at: int) -> str:
    """First 16 hex digits of sha256("cluster|broker|kind|yyyy-MM-ddTHH:mm:ss" in UTC).

    Nulls are left out, separator included (Spark's concat_ws), so ids written by the
    Spark version of this stage stay the same.
    """
    start = EPOCH + timedelta(microseconds=int(started_at))
    stamp = (f"{start.year:04d}-{start.month:02d}-{start.day:02d}"
             f"T{start.hour:02d}:{start.minute:02d}:{start.second:02d}")
    text = "|".join(p for p in (cluster, broker, kind, stamp) if p is not None)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def incident_runs(conditions: pa.Table) -> pa.Table:
    """Collapse consecutive active windows into incidents (schema `incidents`).

    A run ends at the first later window of the series in which the condition did not
    hold: resolved_at is that window's start. A run still active in the series' newest
    window is open (resolved_at null). A gap in windows splits runs, and a run followed
    by a gap resolves at its last window's end (the data vouches for nothing later).
    Windows are unique per series (they come from keyed tables).
    """
    schema = arrow_schema("incidents")
    if conditions.num_rows == 0:
        return schema.empty_table()
    codes = [_codes(conditions[key]) for key in SERIES]
    window_start = _micros(conditions["window_start"])
    order = np.lexsort((window_start, *reversed(codes)))
    rows = conditions.take(pa.array(order))
    codes = [c[order] for c in codes]
    start = window_start[order]
    end = _micros(rows["window_end"])
    first_of_series = _series_starts(codes)  # no previous window (Spark's lag is null)
    # An undecided window (null) holds the series' last decided state (none yet: inactive).
    decided = pc.is_valid(rows["active"]).to_numpy(zero_copy_only=False)
    raw = pc.fill_null(rows["active"], False).to_numpy(zero_copy_only=False)
    last_decided = _running_max(np.where(decided, np.arange(len(raw)), -1), first_of_series)
    active = np.where(last_decided >= 0, raw[np.maximum(last_decided, 0)], False)

    last_of_series = np.append(first_of_series[1:], True)  # no next window (lead is null)
    previous_active = np.append(False, active[:-1])
    previous_end = np.append(NO_TS, end[:-1])
    # A window whose predecessor's end is unknown neither starts nor splits a run.
    gap = (previous_end != NO_TS) & (previous_end != start)
    starts = active & (first_of_series | ~previous_active | gap)
    run = np.cumsum(starts)  # unique across series: a series' first active window starts
    next_start = np.append(start[1:], NO_TS)
    next_active = np.append(active[1:], False)

    picked = np.flatnonzero(active)
    if len(picked) == 0:
        return schema.empty_table()
    run = run[picked]
    begins = np.flatnonzero(np.append(True, run[1:] != run[:-1]))  # runs are contiguous
    ends = np.append(begins[1:], len(picked)) - 1
    first, last = picked[begins], picked[ends]  # windows ascend, so the last is the newest
    started_at = start[first]
    run_ends = end[picked]
    last_end = np.maximum.reduceat(run_ends, begins)  # NO_TS only when every end is null
    has_next = ~last_of_series[last]
    following = next_start[last]
    known_end = last_end != NO_TS
    directly = has_next & known_end & (following == last_end) & ~next_active[last]
    after_gap = has_next & known_end & (following != last_end)
    resolved = np.where(directly, following, last_end)
    peaks, opened_by = _measured_peaks(rows.take(pa.array(picked)), begins)
    keys = rows.select(list(SERIES)).take(pa.array(first))
    ids = [_incident_id(c, b, k, s) for c, b, k, s in zip(
        keys["cluster"].to_pylist(), keys["broker"].to_pylist(), keys["kind"].to_pylist(),
        started_at.tolist(), strict=True)]
    now = datetime.now(UTC)
    table = pa.table({
        "incident_id": pa.array(ids, pa.string()),
        "cluster": keys["cluster"], "broker": keys["broker"], "kind": keys["kind"],
        "started_at": pa.array(started_at, pa.int64()).cast(TS),
        "resolved_at": pa.array(resolved, pa.int64(), mask=~(directly | after_gap)).cast(TS),
        "peak_value": peaks,
        "opened_by": pa.array(opened_by.tolist(), pa.string()),
        "updated_at": pa.array([now] * len(ids), TS),
        # Filled by the pipeline from the Admin API (streaming.pipeline.incident_causes):
        # the metrics alone cannot say which brokers are behind a run.
        "cause": pa.nulls(len(ids), pa.string()),
        "withdrawn_at": pa.nulls(len(ids), TS),
    })
    return table.sort_by([("cluster", "ascending"), ("broker", "ascending"),
                          ("kind", "ascending"), ("started_at", "ascending")]
                         ).select(schema.names).cast(schema)


def reconcile_incidents(computed: pa.Table, stored: pa.Table, horizon: datetime,
                        now: datetime | None = None) -> pa.Table:
    """The incident rows to write: the recomputed runs, reconciled with what the table
    already holds (`stored`: open, or resolved inside the horizon), so that an incident
    anyone was shown (status, /metrics, the direct push, a page) is never lost.

    - A stored incident that started before the horizon continues in the first
      recomputed run of its series that starts before its resolution; an open one with no
      continuing run is closed at the horizon, the earliest time the recomputation can
      vouch for.
    - A stored incident inside the horizon continues in the first recomputed run of its
      series that overlaps it (late samples may move a run's start by a window): the run
      keeps its id; its start and peak are the recomputed ones (the data's word).
    - A stored incident inside the horizon that no recomputed run overlaps any more (late
      or corrected samples show that its windows did not meet the condition) stays, closed
      (an open one at its own start: its windows no longer hold), with `withdrawn_at` the
      time the recomputation found out. It is written once: rows the result leaves out
      are left as they are in the table, never deleted.
    """
    now = now or datetime.now(UTC)
    rows = computed.to_pylist()
    if stored.num_rows == 0:
        return _unique_ids(rows, computed.schema)
    by_series: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["started_at"]):
        by_series.setdefault((row["cluster"], row["broker"], row["kind"]), []).append(row)
    previous_rows = sorted(stored.to_pylist(), key=lambda r: r["started_at"])
    claimed: set[int] = set()
    continued: dict[int, dict[str, Any]] = {}  # id(stored row) -> the run continuing it
    # A run whose own id is a stored incident's is that incident (same series and start),
    # whatever else overlaps it: matched first, so no other run can take that id too.
    natural = {r["incident_id"]: r for r in rows}
    for previous in previous_rows:
        run = natural.get(previous["incident_id"])
        if run is not None and id(run) not in claimed:
            claimed.add(id(run))
            continued[id(previous)] = run
    for previous in previous_rows:
        key = (previous["cluster"], previous["broker"], previous["kind"])
        resolved = previous["resolved_at"]
        before_horizon = previous["started_at"] < horizon
        run = continued.get(id(previous))
        if run is None and previous.get("withdrawn_at") is None:
            run = next((r for r in by_series.get(key, []) if id(r) not in claimed and (
                (r["started_at"] <= resolved if resolved is not None else True)
                if before_horizon else _overlaps(r, previous))), None)
            if run is not None:
                claimed.add(id(run))
        if run is not None:
            run["incident_id"] = previous["incident_id"]
            if before_horizon:  # its windows before the horizon are not recomputed
                run["started_at"] = previous["started_at"]
                if previous.get("opened_by") not in (None, run["opened_by"]):
                    run["opened_by"], run["peak_value"] = previous["opened_by"], None
                run["peak_value"] = _worse(run["peak_value"], previous["peak_value"],
                                           run["opened_by"])
        elif before_horizon:
            if resolved is None:
                rows.append({**previous, "resolved_at": horizon, "updated_at": now})
        elif previous.get("withdrawn_at") is None:
            rows.append({**previous, "resolved_at": resolved or previous["started_at"],
                         "withdrawn_at": now, "updated_at": now})
    return _unique_ids(rows, computed.schema)


def _unique_ids(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """The rows with one row per incident id (a MERGE refuses a key twice): a run that
    kept its own id while another run took that id over from the stored incident gets an
    id of its own, derived from the taken one and its start."""
    seen: set[str] = set()
    for row in rows:
        while row["incident_id"] in seen:
            row["incident_id"] = hashlib.sha256(
                f"{row['incident_id']}|{row['started_at']}".encode()).hexdigest()[:16]
        seen.add(row["incident_id"])
    return pa.Table.from_pylist(rows, schema=schema)



def _overlaps(run: dict[str, Any], incident: dict[str, Any]) -> bool:
    """Whether two incidents of one series share time (an open one lasts until now)."""
    def end(row: dict[str, Any]) -> datetime:
        return row["resolved_at"] or datetime.max.replace(tzinfo=UTC)
    return run["started_at"] < end(incident) and incident["started_at"] < end(run)


def _worse(a: float | None, b: float | None, measure: str | None) -> float | None:
    """The worse of two peaks of `measure` (the lower for LOWER_IS_WORSE measures), NaN
    worse than every number as in _peaks, None only when both are."""
    known = [v for v in (a, b) if v is not None]
    if not known:
        return None
    if any(math.isnan(v) for v in known):
        return math.nan
    return min(known) if measure in LOWER_IS_WORSE else max(known)
