"""Open incidents read straight off a batch's broker_signals rows, for an early push.

The incidents step (a recomputation over the horizon) comes seconds later in the same batch
and pushes the same alert (same labels, so Alertmanager keeps one) with its id and, later,
its resolution. Pushing from the rows saves those seconds on the data-loss page.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from streaming.exporter import window_rank
from streaming.identity import CLUSTER_WIDE
from streaming.paging.alerts import utc
from streaming.signals.incidents import CLUSTER_EVENT_CONDITIONS, POSITIVE_BROKER_CONDITIONS

# The broker_signals columns of the finalized feature levels the early push reads besides
# the conditions': the ELR feature's, and metadata.version's (published by every KRaft node,
# so a node publishing it and not the ELR level has ELR off: streaming.signals.cluster).
FEATURE_LEVELS = ("elr_version_last", "metadata_version_last")


def opened_in_signals(rows: list[dict[str, Any]], fresh_seconds: float,
                      now: datetime | None = None) -> list[dict[str, Any]]:
    """The incidents `rows` open, as the incidents step would store them (no id yet).

    Only each broker's newest window in the batch, and only if it ended within
    `fresh_seconds`, is read: a late sample that recomputes an old window must not
    re-open an incident that has already been resolved. Windows rank as the exporter ranks
    them (`window_rank`): a window ahead of the wall clock ties with the current one, and
    each of the tied windows is read, so a future-dated sample cannot hide a real fault.
    """
    now = now or datetime.now(UTC)
    newest: dict[tuple[str, str], tuple[datetime, list[dict[str, Any]]]] = {}
    for row in rows:
        key, rank = (row["cluster"], row["broker"]), window_rank(row, now)
        if key not in newest or rank > newest[key][0]:
            newest[key] = (rank, [row])
        elif rank == newest[key][0]:
            newest[key][1].append(row)
    opened = []
    # A cluster event (every controller counts it) opens one incident per cluster, its
    # peak the highest broker count, as the rule's `max without (broker)` reads it.
    cluster_events: dict[tuple[str, str], dict[str, Any]] = {}
    for row in (r for _, tied in newest.values() for r in tied):
        if now - utc(row["window_end"]) > timedelta(seconds=fresh_seconds):
            continue
        for kind, column in POSITIVE_BROKER_CONDITIONS.items():
            if (row.get(column) or 0) > 0:
                opened.append({"kind": kind, "cluster": row["cluster"], "broker": row["broker"],
                               "started_at": row["window_start"], "resolved_at": None,
                               "peak_value": row[column], "incident_id": None})
        for kind, column in CLUSTER_EVENT_CONDITIONS.items():
            count = row.get(column) or 0
            if count > 0:
                event = cluster_events.setdefault((row["cluster"], kind), {
                    "kind": kind, "cluster": row["cluster"], "broker": CLUSTER_WIDE,
                    "started_at": row["window_start"], "resolved_at": None,
                    "peak_value": count, "incident_id": None})
                event["started_at"] = min(event["started_at"], row["window_start"])
                event["peak_value"] = max(event["peak_value"], count)
    found = opened + list(cluster_events.values())
    # whether the cluster had eligible leader replicas on, as kafka_health_elr_enabled says
    # it (the unclean-election page tells), from the levels its newest rows report
    elr: dict[str, float] = {}
    for row in (r for _, tied in newest.values() for r in tied):
        known = [_number(row.get(column)) for column in FEATURE_LEVELS]
        if any(level is not None for level in known):
            on = known[0] is not None and known[0] >= 1
            elr[row["cluster"]] = max(elr.get(row["cluster"], 0.0), float(on))
    for incident in found:
        incident["elr_enabled"] = elr.get(incident["cluster"])
    return found


def _number(value: Any) -> float | None:
    return None if value is None or math.isnan(value) else float(value)
