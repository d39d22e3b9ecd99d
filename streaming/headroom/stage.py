"""Headroom rows from broker signal rows, evaluated as the stream updates each window.

The model is pure (model.py); this module feeds it the broker's current state and its
partition history. The history lives in the partition_headroom table itself and is kept
in memory per broker for the look-back, loaded once per cluster after a (re)start, so
a restart forecasts exactly as an uninterrupted run would.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from streaming.headroom.model import (
    BOUND_ORDER,
    BrokerSnapshot,
    HeadroomConfig,
    broker_headroom,
    make_config,
    sorted_forecast,
)
from streaming.sinks.predicates import field

TS = pa.timestamp("us", "UTC")


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


class PartitionHistory:
    """One broker's partition count per window start (epoch seconds), kept in time order.

    Why arrays and not a dict: every evaluated window forecasts from the broker's whole
    look-back (up to ~20,000 one-minute points), and a catch-up batch evaluates hundreds of
    windows per broker. Rebuilding sorted arrays from a dict for each one costs more with
    every point of history; kept sorted, a window is a binary search and a slice. The
    forecast sees the same points in the same order.
    """

    def __init__(self, points: dict[float, int] | None = None) -> None:
        ordered = sorted((points or {}).items())
        self.times = np.array([t for t, _ in ordered], dtype=float)
        self.counts = np.array([c for _, c in ordered], dtype=float)

    def put(self, at: float, partitions: int) -> None:
        """The count of the window starting at `at`; a window seen before is overwritten."""
        i = int(np.searchsorted(self.times, at))
        if i < len(self.times) and self.times[i] == at:
            self.counts[i] = partitions
        else:
            self.times = np.insert(self.times, i, at)
            self.counts = np.insert(self.counts, i, float(partitions))

    def put_many(self, at: np.ndarray, partitions: np.ndarray) -> None:
        """`put` of each (at, partitions) in turn, in one pass over the history: a catch-up
        batch brings hundreds of windows per broker, and each `put` copies the arrays."""
        if len(at) > 1 and not bool(np.all(np.diff(at) > 0)):
            for one, count in zip(at.tolist(), partitions.tolist(), strict=True):
                self.put(one, count)
            return
        i = np.searchsorted(self.times, at)
        seen = i < len(self.times)
        seen[seen] = self.times[i[seen]] == at[seen]
        self.counts[i[seen]] = partitions[seen]
        self.times = np.insert(self.times, i[~seen], at[~seen])
        self.counts = np.insert(self.counts, i[~seen], partitions[~seen].astype(float))

    def forget_before(self, horizon: float) -> None:
        i = int(np.searchsorted(self.times, horizon))
        if i:
            self.times, self.counts = self.times[i:], self.counts[i:]

    def until(self, at: float) -> tuple[np.ndarray, np.ndarray]:
        """Times and counts at or before `at` (views, no copy): a late window is forecast
        from what preceded it."""
        k = int(np.searchsorted(self.times, at, side="right"))
        return self.times[:k], self.counts[:k]


class HeadroomTracker:
    def __init__(self, cluster_overrides: dict[str, dict[str, Any]],
                 read_history: Callable[..., pa.Table]) -> None:
        self.cluster_overrides = cluster_overrides
        self.read_history = read_history
        self.configs: dict[str, HeadroomConfig] = {}
        self.history: dict[tuple[str, str], PartitionHistory] = {}

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
                if row.get("partition_count_last") is not None
                and row.get("leader_count_last") is not None]
        per_broker: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in rows:
            per_broker.setdefault((row["cluster"], row["broker"]), []).append(row)
        for (cluster, broker), own in per_broker.items():
            self.config(cluster)  # a cluster seen first loads its history from the table
            points = self.history.setdefault((cluster, broker), PartitionHistory())
            points.put_many(np.array([r["window_start"].timestamp() for r in own]),
                            np.array([int(r["partition_count_last"]) for r in own]))
        out = [self._headroom_row(row, now) for row in rows]
        for (cluster, broker), own in per_broker.items():
            self.history[(cluster, broker)].forget_before(
                own[-1]["window_start"].timestamp()
                - self.config(cluster).forecast_lookback_days * 86400)
        return out

    def _headroom_row(self, row: dict[str, Any], now: datetime) -> dict[str, Any]:
        cluster, broker, at = row["cluster"], row["broker"], row["window_start"]
        config = self.config(cluster)
        snapshot = BrokerSnapshot(
            broker=broker, partitions=int(row["partition_count_last"]),
            leaders=int(row["leader_count_last"]),
            log_segments=_int(row.get("log_segments_last")),
            open_fds=_int(row.get("open_fds_last")), max_fds=_int(row.get("max_fds_last")),
        )
        result = broker_headroom(snapshot, config)
        outlook = sorted_forecast(*self.history[(cluster, broker)].until(at.timestamp()),
                                  result.binding_ceiling, config)
        return {
            "cluster": cluster, "broker": broker, "evaluated_at": at,
            "partitions": float(snapshot.partitions), "leaders": float(snapshot.leaders),
            "log_segments": None if snapshot.log_segments is None
            else float(snapshot.log_segments),
            **{f"ceiling_{bound}": None if result.ceilings.get(bound) is None
               else float(result.ceilings[bound]) for bound in BOUND_ORDER},
            "leader_ceiling": float(result.leader_ceiling),
            "binding_bound": result.binding_bound,
            "binding_ceiling": float(result.binding_ceiling),
            "headroom": float(result.headroom),
            "headroom_pct": result.headroom_pct,
            "growth_per_day": outlook.slope_per_day,
            "days_to_ceiling": outlook.days_to_ceiling,
            "updated_at": now,
        }
