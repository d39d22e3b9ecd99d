"""ISR churn imbalance: shrinks not followed by expands within a configurable time.

A healthy cluster shrinks and re-expands an ISR when a follower briefly lags; a shrink
that stays unmatched for longer than replica catch-up should take means a replica is
still out of sync (Kafka's monitoring docs: the ISR shrink and expand rates should be 0 in
steady state; and every shrink without its expand brings the partition closer to min ISR).

Only an expand after a shrink matches it. A leader's IsrShrinksPerSec counts only the
shrinks the leader itself asks for (a follower alive but behind for
replica.lag.time.max.ms); when the controller takes a replica out of the ISR (its broker
fenced after broker.session.timeout.ms, or in controlled shutdown) no broker counts a
shrink, but the leader counts the expand when the replica catches up again
(kafka.cluster.Partition marks a shrink or expand only for its own AlterPartition
requests). So after every broker restart a leader has expands that match nothing, and
banking them would hide the next real shrink for as long as they stay in the horizon.
"""

from __future__ import annotations

import math
from collections import deque
from datetime import datetime, timedelta
from typing import Any

# The broker_signals columns unmatched_shrinks reads: callers hand it rows of these alone
# (a horizon of every column as dicts cost more than the incident stage's own work).
CHURN_COLUMNS = ["cluster", "broker", "window_end", "isr_shrinks_increase",
                 "isr_expands_increase"]


def _count(value: Any) -> float:
    """A window's increase as a count: missing, negative or not finite counts nothing."""
    if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
        return float(value)
    return 0.0


def unmatched_shrinks(rows: list[dict[str, Any]], match_seconds: float
                      ) -> dict[tuple[str, str], float]:
    """Per (cluster, broker): the shrinks older than `match_seconds` that no later expand
    matched. `rows` are broker_signals rows of a recent horizon. Expands match the oldest
    open shrinks first; a window's expands may match its own shrinks (its counters say how
    many, not in which order), and expands with no open shrink before them are dropped."""
    by_broker: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        by_broker.setdefault((row["cluster"], row["broker"]), []).append(row)
    out = {}
    for key, windows in by_broker.items():
        windows.sort(key=lambda row: row["window_end"])
        open_shrinks: deque[list[Any]] = deque()  # [window_end, shrinks not yet matched]
        for row in windows:
            shrinks = _count(row.get("isr_shrinks_increase"))
            if shrinks:
                open_shrinks.append([row["window_end"], shrinks])
            expands = _count(row.get("isr_expands_increase"))
            while expands and open_shrinks:
                matched = min(expands, open_shrinks[0][1])
                expands -= matched
                open_shrinks[0][1] -= matched
                if not open_shrinks[0][1]:
                    open_shrinks.popleft()
        old_enough: datetime = windows[-1]["window_end"] - timedelta(seconds=match_seconds)
        out[key] = float(sum(count for end, count in open_shrinks if end <= old_enough))
    return out
