"""Headroom rows from broker signal rows, evaluated as the stream updates each window.

The model is pure (model.py); this module feeds it the broker's current state and its
partition history. The history lives in the partition_headroom table itself and is kept
in memory per broker for the look-back, loaded once per cluster after a (re)start, so
a restart forecasts exactly as an uninterrupted run would.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import numpy as np
import pyarrow as pa

from streaming.headroom.model import (
    BOUND_ORDER,
    SECONDS_PER_DAY,
    BrokerHeadroom,
    BrokerSnapshot,
    Forecast,
    HeadroomConfig,
    broker_headroom,
    growth_from_sums,
    make_config,
    outlook,
    sorted_forecast,
)
from streaming.sinks.predicates import field

TS = pa.timestamp("us", "UTC")
# The running sums are int64: kept only while every sum stays below this.
EXACT_BELOW = 2.0 ** 62
# Counts past this are no broker's: a float holds every whole number up to it exactly, and
# the bounds' products of counts (x 1,000 leaders, x 3 files a segment) stay finite.
COUNT_LIMIT = 2 ** 53
# Points a column of running sums covers: 32 bytes of sums per BLOCK points, and at most
# BLOCK - 1 points summed at each end of a look-back.
BLOCK = 8
# Windows of one broker from which a round's forecasts are computed as arrays.
FORECASTS_AT_ONCE = 8
# Distinct (config, snapshot) bounds kept between rounds; forgotten all at once past this.
BOUNDS_REMEMBERED = 4096


def _int(value: Any) -> int | None:
    """A count, or None: a negative, non-finite or absurdly large one (past COUNT_LIMIT) is
    a producer's value, not Kafka's."""
    if value is None or not math.isfinite(value) or not 0 <= value <= COUNT_LIMIT:
        return None
    return int(value)


class PartitionHistory:
    """One broker's partition count per window start (epoch seconds), kept in time order.

    Why arrays and not a dict: every evaluated window forecasts from the broker's whole
    look-back (up to ~20,000 one-minute points), and a catch-up batch evaluates hundreds of
    windows per broker. Kept sorted, a window's look-back is a binary search, and running
    sums of the points (x, y, x², xy: x in seconds since `_origin`, y the count), one
    column every BLOCK points, make its least-squares slope a few differences of them and
    the few points at its ends: a pass over the look-back for each window was most of the
    headroom stage (`docs/performance.md`). A column every point would cost twice the
    memory of the points themselves (20,000 a broker after two weeks); every BLOCK points
    it costs a quarter. The points and sums sit in buffers with some room to spare, so the
    windows of a live stream, each after the newest, are written in place; a late window
    or a full buffer rebuilds them.

    int64 holds the sums exactly only while every x and y is whole and no sum can pass
    EXACT_BELOW (a producer's partition count is not trusted); otherwise the forecast
    passes over the points (`sorted_forecast`).
    """

    def __init__(self, points: dict[float, int] | None = None) -> None:
        ordered = sorted((points or {}).items())
        self._rebuild(np.array([t for t, _ in ordered], dtype=float),
                      np.array([c for _, c in ordered], dtype=float))

    @property
    def times(self) -> np.ndarray:
        return self._times[self._lo:self._hi]

    @property
    def counts(self) -> np.ndarray:
        return self._counts[self._lo:self._hi]

    def _rebuild(self, times: np.ndarray, counts: np.ndarray) -> None:
        """Fresh buffers holding these points with an eighth more room, and their sums.
        A live stream fills the room in place, forgetting as many old points, and
        rebuilds once per eighth of its look-back."""
        n = len(times)
        room = n + max(64, n // 8)
        self._times, self._counts = np.empty(room), np.empty(room)
        self._times[:n], self._counts[:n] = times, counts
        self._lo, self._hi = 0, n
        self._origin = float(times[0]) if n else 0.0
        self._top_y = 0.0
        self._sums = np.zeros((4, room // BLOCK + 1), np.int64)
        self._exact = self._sum(0, n)

    def _sum(self, first: int, end: int) -> bool:
        """Extend the running sums over the buffer's new points first..end-1; False when
        int64 could not hold them exactly."""
        x, y = self._times[first:end] - self._origin, self._counts[first:end]
        if not (np.all(np.isfinite(y)) and np.array_equal(x, np.floor(x))
                and np.array_equal(y, np.floor(y))):
            return False
        top_x = float(x[-1]) if len(x) else 0.0
        self._top_y = max(self._top_y, float(np.max(np.abs(y))) if len(y) else 0.0)
        if (end * top_x * max(top_x, self._top_y, 1.0) >= EXACT_BELOW
                or end * self._top_y >= EXACT_BELOW):
            return False
        done, due = first // BLOCK, end // BLOCK  # columns held, and held once these are
        if due > done:
            points = slice(done * BLOCK, due * BLOCK)
            whole_x = (self._times[points] - self._origin).astype(np.int64).reshape(-1, BLOCK)
            whole_y = self._counts[points].astype(np.int64).reshape(-1, BLOCK)
            for row, values in enumerate((whole_x, whole_y, whole_x * whole_x,
                                          whole_x * whole_y)):
                np.cumsum(values.sum(axis=1), out=self._sums[row, done + 1:due + 1])
            self._sums[:, done + 1:due + 1] += self._sums[:, done:done + 1]
        return True

    def _sums_before(self, end: int) -> tuple[int, int, int, int]:
        """Σx, Σy, Σx², Σxy of the buffer's points before `end`, as Python integers."""
        column = end // BLOCK
        sx, sy, sxx, sxy = (int(v) for v in self._sums[:, column])
        for at, count in zip(self._times[column * BLOCK:end].tolist(),
                             self._counts[column * BLOCK:end].tolist(), strict=True):
            x, y = int(at - self._origin), int(count)
            sx, sy, sxx, sxy = sx + x, sy + y, sxx + x * x, sxy + x * y
        return sx, sy, sxx, sxy

    def _sums_at(self, ends: np.ndarray) -> np.ndarray:
        """`_sums_before` of each buffer index in `ends`, as int64 rows Σx, Σy, Σx², Σxy (one
        column an end): the column of running sums below each end plus the at most
        BLOCK - 1 points after it, gathered at once. Exact only while `_exact` holds."""
        column = ends // BLOCK
        at = column[:, None] * BLOCK + np.arange(BLOCK - 1)
        inside = at < ends[:, None]
        at = np.minimum(at, self._hi - 1)  # points past an end count zero
        x = np.where(inside, self._times[at] - self._origin, 0.0).astype(np.int64)
        y = np.where(inside, self._counts[at], 0.0).astype(np.int64)
        return self._sums[:, column] + np.stack(
            [x.sum(axis=1), y.sum(axis=1), (x * x).sum(axis=1), (x * y).sum(axis=1)])

    def put(self, at: float, partitions: int) -> None:
        """The count of the window starting at `at`; a window seen before is overwritten."""
        self.put_many(np.array([at], float), np.array([partitions], float))

    def put_many(self, at: np.ndarray, partitions: np.ndarray) -> None:
        """`put` of each (at, partitions) in turn, in one pass over the history: a catch-up
        batch brings hundreds of windows per broker."""
        if len(at) > 1 and not bool(np.all(np.diff(at) > 0)):
            for one, count in zip(at.tolist(), partitions.tolist(), strict=True):
                self.put(one, count)
            return
        if (self._hi > self._lo and at[0] > self._times[self._hi - 1]
                and self._hi + len(at) <= len(self._times)):
            first, self._hi = self._hi, self._hi + len(at)
            self._times[first:self._hi], self._counts[first:self._hi] = at, partitions
            self._exact = self._exact and self._sum(first, self._hi)
            return
        times, counts = self.times, self.counts.copy()
        i = np.searchsorted(times, at)
        seen = i < len(times)
        seen[seen] = times[i[seen]] == at[seen]
        counts[i[seen]] = partitions[seen]
        self._rebuild(np.insert(times, i[~seen], at[~seen]),
                      np.insert(counts, i[~seen], partitions[~seen].astype(float)))

    def forget_before(self, horizon: float) -> None:
        self._lo += int(np.searchsorted(self.times, horizon))

    def until(self, at: float) -> tuple[np.ndarray, np.ndarray]:
        """Times and counts at or before `at` (views, no copy): a late window is forecast
        from what preceded it."""
        k = int(np.searchsorted(self.times, at, side="right"))
        return self.times[:k], self.counts[:k]

    def forecast(self, at: float, ceiling: int, config: HeadroomConfig) -> Forecast:
        """`sorted_forecast` of the points at or before `at`."""
        if not self._exact:
            return sorted_forecast(*self.until(at), ceiling, config)
        times = self.times
        k = int(np.searchsorted(times, at, side="right"))
        if k == 0:
            return outlook(None, 0, None, ceiling)
        start = int(np.searchsorted(
            times, times[k - 1] - config.forecast_lookback_days * SECONDS_PER_DAY))
        sx, sy, sxx, sxy = (to - since for to, since in zip(
            self._sums_before(self._lo + k), self._sums_before(self._lo + start), strict=True))
        slope, used = growth_from_sums(k - start, sx, sy, sxx, sxy, config.forecast_min_points)
        return outlook(slope, used, int(self.counts[k - 1]), ceiling)

    def forecasts(self, ats: np.ndarray, ceilings: list[int], config: HeadroomConfig
                  ) -> list[Forecast]:
        """`forecast` of each window start in `ats` against its ceiling. Why at once: a
        catch-up batch forecasts hundreds of windows a broker, and one at a time each paid
        its binary searches and end sums as NumPy calls on single values. A live round's
        one or two windows a broker go one at a time: the arrays cost more there."""
        if not self._exact or len(self.times) == 0 or len(ats) < FORECASTS_AT_ONCE:
            return [self.forecast(at, ceiling, config)
                    for at, ceiling in zip(ats.tolist(), ceilings, strict=True)]
        times = self.times
        k = np.searchsorted(times, ats, side="right")
        newest = times[np.maximum(k - 1, 0)]
        start = np.searchsorted(times, newest - config.forecast_lookback_days * SECONDS_PER_DAY)
        sums = (self._sums_at(self._lo + k) - self._sums_at(self._lo + start)).T.tolist()
        currents = self.counts[np.maximum(k - 1, 0)].tolist()
        out = []
        for used, points, current, window_sums, ceiling in zip(
                k.tolist(), (k - start).tolist(), currents, sums, ceilings, strict=True):
            if used == 0:
                out.append(outlook(None, 0, None, ceiling))
                continue
            # the four sums' row: mypy spreads an unsized list over min_points too
            slope, n = growth_from_sums(points, *cast(tuple[int, int, int, int], window_sums),
                                        config.forecast_min_points)
            out.append(outlook(slope, n, int(current), ceiling))
        return out


class HeadroomTracker:
    def __init__(self, cluster_overrides: dict[str, dict[str, Any]],
                 read_history: Callable[..., pa.Table]) -> None:
        self.cluster_overrides = cluster_overrides
        self.read_history = read_history
        self.configs: dict[str, HeadroomConfig] = {}
        self.history: dict[tuple[str, str], PartitionHistory] = {}
        self.bounds: dict[tuple[HeadroomConfig, BrokerSnapshot], BrokerHeadroom] = {}

    def config(self, cluster: str) -> HeadroomConfig:
        if cluster not in self.configs:
            self.configs[cluster] = make_config(self.cluster_overrides.get(cluster))
            self._load_history(cluster, self.configs[cluster])
        return self.configs[cluster]

    def _load_history(self, cluster: str, config: HeadroomConfig) -> None:
        since = datetime.now(UTC) - timedelta(days=config.forecast_lookback_days)
        rows = self.read_history(
            field("evaluated_at") >= pa.scalar(since, TS), field("cluster") == cluster,
            columns=["cluster", "broker", "evaluated_at", "partitions"],
        )
        points: dict[str, dict[float, int]] = {}
        for row in rows.to_pylist():
            if row["partitions"] is not None:
                points.setdefault(row["broker"], {})[
                    row["evaluated_at"].timestamp()] = int(row["partitions"])
        for broker, counts in points.items():
            self.history[(cluster, broker)] = PartitionHistory(counts)

    def evaluate(self, broker_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One partition_headroom row per broker signal row that has partition counts.

        Each broker's windows enter its history first, all at once, then each is forecast
        from the points at or before it: the same points, one window after the other, saw.
        """
        now = datetime.now(UTC)
        rows = [row for row in sorted(broker_rows, key=lambda r: r["window_start"])
                if _int(row.get("partition_count_last")) is not None
                and _int(row.get("leader_count_last")) is not None]
        per_broker: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in rows:
            per_broker.setdefault((row["cluster"], row["broker"]), []).append(row)
        for (cluster, broker), own in per_broker.items():
            self.config(cluster)  # a cluster seen first loads its history from the table
            points = self.history.get((cluster, broker))
            if points is None:
                points = self.history[(cluster, broker)] = PartitionHistory()
            points.put_many(np.array([r["window_start"].timestamp() for r in own]),
                            np.array([int(r["partition_count_last"]) for r in own]))
        bounds = {id(row): self._bounds(row, self.config(row["cluster"])) for row in rows}
        ahead: dict[int, Forecast] = {}
        for (cluster, broker), own in per_broker.items():
            found = self.history[(cluster, broker)].forecasts(
                np.array([r["window_start"].timestamp() for r in own]),
                [bounds[id(r)][1].binding_ceiling for r in own], self.config(cluster))
            ahead.update(zip(map(id, own), found, strict=True))
        out = [self._headroom_row(row, *bounds[id(row)], ahead[id(row)], now) for row in rows]
        for (cluster, broker), own in per_broker.items():
            self.history[(cluster, broker)].forget_before(
                own[-1]["window_start"].timestamp()
                - self.config(cluster).forecast_lookback_days * 86400)
        return out

    def _bounds(self, row: dict[str, Any], config: HeadroomConfig
                ) -> tuple[BrokerSnapshot, BrokerHeadroom]:
        """A broker signal row's snapshot and its broker_headroom, remembered per config
        and snapshot: a broker's counts stay the same window after window, and the bounds
        are a pure function of them and the cluster's config. The remembered results name
        no broker (`broker` is empty): the rows take it from the signal row."""
        snapshot = BrokerSnapshot(
            broker="", partitions=int(row["partition_count_last"]),
            leaders=int(row["leader_count_last"]),
            log_segments=_int(row.get("log_segments_last")),
            open_fds=_int(row.get("open_fds_last")), max_fds=_int(row.get("max_fds_last")),
        )
        key = (config, snapshot)
        result = self.bounds.get(key)
        if result is None:
            if len(self.bounds) >= BOUNDS_REMEMBERED:
                self.bounds.clear()
            result = self.bounds[key] = broker_headroom(snapshot, config)
        return snapshot, result

    def _headroom_row(self, row: dict[str, Any], snapshot: BrokerSnapshot,
                      result: BrokerHeadroom, ahead: Forecast, now: datetime
                      ) -> dict[str, Any]:
        cluster, broker, at = row["cluster"], row["broker"], row["window_start"]
        return {
            "cluster": cluster, "broker": broker, "evaluated_at": at,
            "partitions": float(snapshot.partitions), "leaders": float(snapshot.leaders),
            "log_segments": None if snapshot.log_segments is None
            else float(snapshot.log_segments),
            **{f"ceiling_{bound}": None if result.ceilings.get(bound) is None
               else float(cast(int, result.ceilings[bound])) for bound in BOUND_ORDER},
            "leader_ceiling": float(result.leader_ceiling),
            "binding_bound": result.binding_bound,
            "binding_ceiling": float(result.binding_ceiling),
            "headroom": float(result.headroom),
            "headroom_pct": result.headroom_pct,
            "growth_per_day": ahead.slope_per_day,
            "days_to_ceiling": ahead.days_to_ceiling,
            "updated_at": now,
        }
