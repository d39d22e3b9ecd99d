"""ISR churn imbalance: shrinks not followed by expands within a configurable time.

A healthy cluster shrinks and re-expands an ISR when a follower briefly lags; a shrink
that stays unmatched for longer than replica catch-up should take means a replica is
still out of sync (Kafka's monitoring docs: the ISR shrink and expand rates should be 0 in
steady state; and every shrink without its expand brings the partition closer to min ISR).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

# The broker_signals columns unmatched_shrinks reads: callers hand it rows of these alone
# (a horizon of every column as dicts cost more than the incident stage's own work).
CHURN_COLUMNS = ["cluster", "broker", "window_end", "isr_shrinks_increase",
                 "isr_expands_increase"]


def unmatched_shrinks(rows: list[dict[str, Any]], match_seconds: float
                      ) -> dict[tuple[str, str], float]:
    """Per (cluster, broker): shrinks older than `match_seconds` minus every expand seen since
    the horizon began, never below zero. `rows` are broker_signals rows of a recent horizon."""
    newest: dict[tuple[str, str], datetime] = {}
    for row in rows:
        key = (row["cluster"], row["broker"])
        if key not in newest or row["window_end"] > newest[key]:
            newest[key] = row["window_end"]
    shrinks: dict[tuple[str, str], float] = dict.fromkeys(newest, 0.0)
    expands: dict[tuple[str, str], float] = dict.fromkeys(newest, 0.0)
    for row in rows:
        key = (row["cluster"], row["broker"])
        if row["window_end"] <= newest[key] - timedelta(seconds=match_seconds):
            shrinks[key] += row.get("isr_shrinks_increase") or 0.0
        expands[key] += row.get("isr_expands_increase") or 0.0
    return {key: max(0.0, shrinks[key] - expands[key]) for key in newest}
