"""Per (cluster, window) signals from the broker rows of that window.

Arrow on the driver, like broker_signals: a few rows per window, where a Spark query
would cost its fixed planning time in every micro-batch.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.schemas import arrow_schema

KEYS = ["cluster", "window_start"]
# Controller churn is counted over this span of windows (controller_elections_5m): one
# failover is one or two elections (a restarted controller counts the leader it finds),
# repeated failovers are more.
CHURN_SPAN = timedelta(minutes=5)


def controller_claims(broker_rows: pa.Table) -> pa.ChunkedArray:
    """Per broker row: its ActiveControllerCount as the cluster's count takes it.

    That is the window's last value, except for a superseded claim: one whose newest sample
    is older than another node's first claim in the same window. Leadership moved inside
    the window (a failover, a resignation) and the old controller's last word predates the
    new one's first; summing both would read 2 controllers for a window in which there was
    never more than one at a time. A split brain still counts 2: both nodes go on claiming,
    so each one's newest claim is after the other's first. Rows without the claim times
    (written before they were kept) count their last value.
    """
    last = broker_rows["active_controller_last"]
    claiming = pc.fill_null(pc.greater(last, 0), False)
    first_claim = pc.if_else(claiming, broker_rows["active_controller_claimed_at"],
                             pa.scalar(None, broker_rows["active_controller_claimed_at"].type))
    rows = pa.table({"cluster": broker_rows["cluster"],
                     "window_start": broker_rows["window_start"], "first_claim": first_claim,
                     "row": pa.array(np.arange(broker_rows.num_rows))})
    newest_first = rows.group_by(KEYS, use_threads=False).aggregate(
        [("first_claim", "max", pc.ScalarAggregateOptions(skip_nulls=True, min_count=1))])
    aligned = rows.select([*KEYS, "row"]).join(newest_first, KEYS).sort_by("row")
    superseded = pc.fill_null(pc.and_(claiming, pc.less(broker_rows["active_controller_last_at"],
                                                         aligned["first_claim_max"])), False)
    return pc.if_else(superseded, pa.scalar(0.0, last.type), last)


def controller_unknown(broker_rows: pa.Table, keys: pa.Table) -> pa.Array:
    """Per (cluster, window_start) row of `keys`: is its controller count unknown?

    It is when no broker claims the controller in this window and one that claimed it in
    the cluster's latest earlier window with a claim has not reported ActiveControllerCount
    here: the sum would read 0 only because the controller's numbers are missing, whether
    it went silent or its rows are still in flight (a window's first batch). Unknown is not
    0: it opens no controller incident and exports no value, until the claimant reports
    again (its 0 is then a real 0), another broker claims (a failover), or the old claim
    leaves the rows handed in (the look-back).
    """
    reported: dict[tuple[str, int], set[str]] = defaultdict(set)
    claims: dict[tuple[str, int], set[str]] = defaultdict(set)
    # windows as whole microseconds: a catch-up hands in thousands of rows, and Python
    # datetimes cost several times more to make and compare
    reporting = broker_rows.filter(pc.is_valid(broker_rows["controller_claim"]))
    for cluster, broker, window, claim in zip(
            reporting["cluster"].to_pylist(), reporting["broker"].to_pylist(),
            _micros(reporting["window_start"]), reporting["controller_claim"].to_pylist(),
            strict=True):
        reported[(cluster, window)].add(broker)
        if claim > 0:
            claims[(cluster, window)].add(broker)
    asked = list(zip(keys["cluster"].to_pylist(), _micros(keys["window_start"]), strict=True))
    unknown: set[tuple[str, int]] = set()
    claimed: dict[str, set[str]] = {}
    for key in sorted({*reported, *asked}, key=_in_window_order):
        cluster = key[0]
        if not claims[key] and not claimed.get(cluster, set()) <= reported[key]:
            unknown.add(key)
        if claims[key]:
            claimed[cluster] = claims[key]
    return pa.array([key in unknown for key in asked], pa.bool_())


def unclean_elections(broker_rows: pa.Table, keys: pa.Table) -> pa.Array:
    """Per (cluster, window_start) row of `keys`: the unclean elections of that window
    (`controller_events` of unclean_elections_increase)."""
    return controller_events(broker_rows, keys, "unclean_elections_increase")


def controller_events(broker_rows: pa.Table, keys: pa.Table, column: str) -> pa.Array:
    """Per (cluster, window_start) row of `keys`: the events of that window that every
    controller counts (`column`, a per-broker increase: unclean or ELR elections, new
    active controllers), each once.

    Every KRaft controller counts each unclean election it applies, and they apply it a
    little apart: when that straddles a window boundary, some controllers' counts rise in
    one window and the others' in the next, and a plain max over brokers would count the
    one election in both. So the windows are walked in order, keeping each broker's running
    count and the cluster's (the highest of them): a window adds what lifts the highest
    count, and a broker catching up on elections the others counted adds nothing.

    A controller is allowed one window to catch up: at the end of a window, a broker that
    counted nothing in it is put in step with the cluster's count from before that window
    (the elections of the window itself it may still count in the next one; a broker
    quiet in the window of an election and in the one after missed it for good, for
    instance while it was down). A broker is also in step when first seen and when back
    after a window without a row. So a controller that counts an election more than a
    window after the others counts it again, and a broker that missed elections never
    holds back the next one it alone reports. The walk starts at the first row handed in,
    everyone in step; a window in which nobody counts puts everyone back in step, so where
    the walk starts matters only through a run of windows each with a count (a storm of
    elections). A count in the window after an election by a broker that counted nothing in
    the election's window is taken as catching up, which it is under KRaft; it is a second
    election lost from the cluster's count when only one node counts (ZooKeeper mode's
    controller just failed over) or the nodes that counted the first died and the quiet
    one alone reports the next. Likewise a controller restarted while elections happen may
    count old ones again (its counter from zero): those count at once, and the others'
    counts in the window after are taken as catching up on them. Paging and incidents read
    the highest broker increase of each window (incidents.CLUSTER_EVENT_CONDITIONS, the
    alert rule's `max without (broker)` of the per-broker gauge), so none of these changes
    whether or when anyone is paged.
    """
    values = pc.cast(broker_rows[column], pa.float64())
    is_number = pc.fill_null(pc.invert(pc.is_nan(values)), False)
    valid = broker_rows.filter(is_number)
    reported = list(zip(valid["cluster"].to_pylist(), _micros(valid["window_start"]),
                        _micros(valid["window_end"]), valid["broker"].to_pylist(),
                        values.filter(is_number).to_pylist(), strict=True))
    found: dict[tuple[str | None, int], float] = {(r[0], r[1]): 0.0 for r in reported}
    # A broker whose increases are all 0 never lifts the cluster's count, so only the others
    # are walked (in ZooKeeper mode every broker reports the meter, one of them the count)
    counting = {(r[0], r[3]) for r in reported if r[4] > 0}
    rows = sorted((r for r in reported if (r[0], r[3]) in counting),
                  key=_in_window_order)
    state: dict[str | None, tuple[dict[str | None, float], float]] = {}
    seen: dict[tuple[str | None, str | None], int] = {}  # a broker's last window
    for (cluster, start), group in itertools.groupby(rows, key=lambda r: (r[0], r[1])):
        counts, highest = state.get(cluster, ({}, 0.0))
        window = list(group)
        for _, _, end, broker, increase in window:
            if seen.get((cluster, broker)) != start - (end - start):
                counts[broker] = highest  # first seen, or back after a gap: in step
            counts[broker] += increase
            seen[(cluster, broker)] = start
        top = max(highest, *(counts[r[3]] for r in window))
        found[(cluster, start)] = top - highest
        for _, _, _, broker, increase in window:
            # its window to catch up on the elections before this one is over; those of
            # this window (top - highest) it may still count in the next
            if increase == 0:
                counts[broker] = max(counts[broker], highest)
        state[cluster] = (counts, top)
    asked = zip(keys["cluster"].to_pylist(), _micros(keys["window_start"]), strict=True)
    return pa.array([found.get(key) for key in asked], pa.float64())


def trailing_sum(keys: pa.Table, values: pa.Array, span: timedelta) -> pa.Array:
    """Per row of `keys` (cluster, window_start): the sum of `values` over that cluster's
    rows whose window starts less than `span` before this one, this one included. Nulls
    add nothing; null when all are. The windows before the first of `keys` are not in it:
    the caller hands in the span's windows (the look-back is the incident horizon)."""
    clusters = keys["cluster"].to_pylist()
    starts = _micros(keys["window_start"])
    numbers = values.to_pylist()
    width = int(span.total_seconds() * 1_000_000)
    by_cluster: dict[str | None, list[tuple[int, float | None]]] = defaultdict(list)
    for cluster, start, value in zip(clusters, starts, numbers, strict=True):
        by_cluster[cluster].append((start, value))
    out: list[float | None] = []
    for cluster, start in zip(clusters, starts, strict=True):
        counted = [v for s, v in by_cluster[cluster] if start - width < s <= start
                   and v is not None]
        out.append(sum(counted) if counted else None)
    return pa.array(out, pa.float64())


def _in_window_order(row: tuple) -> tuple[bool, str, int]:
    """Sort key of a (cluster, window start µs, ...) tuple: per cluster, windows in order. A
    null cluster sorts after the named ones instead of raising a TypeError against them."""
    return row[0] is None, row[0] or "", row[1]


def _micros(column: pa.ChunkedArray | pa.Array) -> list[int]:
    return pc.cast(column, pa.int64()).to_pylist()


def elr_enabled(elr_level: pa.ChunkedArray, metadata_level: pa.ChunkedArray) -> pa.ChunkedArray:
    """Per window: 1.0 when the ELR feature's finalized level is 1 or more, 0.0 when it is 0
    or unpublished by nodes that publish metadata.version's (Kafka publishes no level of a
    feature at 0), null when no node publishes feature levels. The inputs are the highest
    level any node reported: every node's metadata has the same finalized levels, and the
    highest is the newest (an upgrade reaches the nodes a moment apart)."""
    on = pc.fill_null(pc.greater_equal(elr_level, 1.0), False)
    off = pc.or_(pc.is_valid(elr_level), pc.is_valid(metadata_level))
    return pc.if_else(on, 1.0, pc.if_else(off, 0.0, pa.scalar(None, pa.float64())))


def cluster_signals(broker_rows: pa.Table, since: datetime | None = None) -> pa.Table:
    """Controller-scoped signals need every broker of the window, so this reads broker_signals.

    Rows come for the windows from `since` on; the broker rows before it are the look-back
    that tells which broker was the controller (see `controller_unknown`).

    ActiveControllerCount is 1 only on the active controller (KRaft): the healthy sum is 1
    (a claim superseded inside the window counts 0: `controller_claims`).
    UnderMinIsrPartitionCount counts led partitions only, so the sum of the brokers' maxima
    counts a partition once, except one whose leadership moves inside the window while it
    is under min ISR: both leaders' maxima hold it (the broker rows keep no per-partition
    detail to tell); in the window after, only its new leader counts it.
    A sum over brokers none of which reported the metric stays null ("no data"), not 0.
    Unclean elections are not the sum over brokers: under KRaft every controller replays
    the metadata log and counts each unclean election it applies, so one election raises
    UncleanLeaderElectionsPerSec on several nodes (seen on Kafka 4.4: +1 on two of
    three combined nodes for a single election, and on all three in the same second or
    one second apart). A broker that counts an election a window after the others does
    not count it again (`unclean_elections`), so a window's value needs the broker rows
    of the windows before it.
    """
    schema = arrow_schema("cluster_signals")
    if broker_rows.num_rows == 0:
        return schema.empty_table()
    skip_nulls = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
    broker_rows = broker_rows.append_column("controller_claim", controller_claims(broker_rows))
    grouped = broker_rows.group_by(KEYS, use_threads=False).aggregate([
        ("window_end", "max"), ([], "count_all"),
        ("offline_partitions_max", "max", skip_nulls),
        ("controller_claim", "sum", skip_nulls),
        ("under_min_isr_max", "sum", skip_nulls),
        ("under_replicated_max", "sum", skip_nulls),
        ("heartbeat_timeouts_increase", "sum", skip_nulls),
        ("offline_log_dirs_max", "sum", skip_nulls),
        ("metadata_lag_ms_max", "max", skip_nulls),
        ("metadata_errors_increase", "sum", skip_nulls),
        ("elr_version_last", "max", skip_nulls),
        ("metadata_version_last", "max", skip_nulls),
    ])
    # over every window handed in: the look-back holds the span before the first asked
    churn = trailing_sum(grouped, controller_events(
        broker_rows, grouped, "controller_elections_increase"), CHURN_SPAN)
    if since is not None:
        asked = pc.greater_equal(grouped["window_start"],
                                 pa.scalar(since, grouped["window_start"].type))
        grouped, churn = grouped.filter(asked), churn.filter(asked)
    unknown = controller_unknown(broker_rows, grouped)
    active = pc.if_else(unknown, pa.scalar(None, grouped["controller_claim_sum"].type),
                        grouped["controller_claim_sum"])
    # controller-scope gauges: the active controller's rows only (standbys report their
    # own, possibly older, view; broker-only nodes none)
    from_controller = pc.fill_null(pc.greater(broker_rows["controller_claim"], 0), False)
    claimant = broker_rows.select(KEYS).append_column("row", pa.array(
        np.arange(broker_rows.num_rows)))
    for column in ("fenced_brokers_last", "active_brokers_last", "preferred_imbalance_max"):
        claimant = claimant.append_column(column, pc.if_else(
            from_controller, broker_rows[column], pa.scalar(None, pa.float64())))
    per_controller = claimant.group_by(KEYS, use_threads=False).aggregate([
        (c, "max", skip_nulls) for c in ("fenced_brokers_last", "active_brokers_last",
                                         "preferred_imbalance_max")])
    aligned = grouped.select(KEYS).append_column("row", pa.array(
        np.arange(grouped.num_rows))).join(per_controller, KEYS, join_type="left outer",
                                           use_threads=False).sort_by("row")
    elections = controller_events(broker_rows, grouped, "controller_elections_increase")
    now = datetime.now(UTC)
    return pa.table({
        "cluster": grouped["cluster"], "window_start": grouped["window_start"],
        "window_end": grouped["window_end_max"], "brokers_reporting": grouped["count_all"],
        "offline_partitions_max": grouped["offline_partitions_max_max"],
        "active_controllers": active,
        "under_min_isr_total": grouped["under_min_isr_max_sum"],
        "under_replicated_total": grouped["under_replicated_max_sum"],
        "unclean_elections_increase": unclean_elections(broker_rows, grouped),
        "fenced_brokers": aligned["fenced_brokers_last_max"],
        "active_brokers": aligned["active_brokers_last_max"],
        "preferred_imbalance": aligned["preferred_imbalance_max_max"],
        "heartbeat_timeouts_increase": grouped["heartbeat_timeouts_increase_sum"],
        "controller_elections_increase": elections,
        "elr_elections_increase": controller_events(broker_rows, grouped,
                                                    "elr_elections_increase"),
        "controller_elections_5m": churn,
        "offline_log_dirs_total": grouped["offline_log_dirs_max_sum"],
        "metadata_lag_ms_max": grouped["metadata_lag_ms_max_max"],
        "metadata_errors_increase": grouped["metadata_errors_increase_sum"],
        "elr_enabled": elr_enabled(grouped["elr_version_last_max"],
                                   grouped["metadata_version_last_max"]),
        "updated_at": pa.array([now] * grouped.num_rows, pa.timestamp("us", "UTC")),
    }).cast(schema)
