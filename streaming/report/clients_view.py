"""The clients' truth (the durability probe and the consumer groups, streaming/clients)
for `status` and the report: what failed or was lost in a span, from their Delta tables.

Their tables exist only where the job runs the probe or reads the groups (config `probe`,
`consumer_groups`): a missing table is "not run", never an unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads

from streaming.report.tables import TableRead, read_table, sort_brokers


@dataclass
class ClientsView:
    """None: the job does not run that client (its table is missing or unreadable; an
    unreadable one adds a note)."""

    probe: list[dict[str, Any]] | None = None  # per cluster and broker, failed or lost writes
    probe_losses: list[dict[str, Any]] | None = None  # acked records lost, each
    groups: list[dict[str, Any]] | None = None  # per group and topic, not ok or lost records
    reads: list[TableRead] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _read(view: ClientsView, root: str | Path, table: str, cluster: str | None,
          column: str, since: datetime, until: datetime | None) -> pd.DataFrame | None:
    where = pads.field(column) >= pa.scalar(since)
    if until is not None:
        where = where & (pads.field(column) < pa.scalar(until))
    read = read_table(root, table, filter=where, cluster=cluster)
    view.reads.append(read)
    if read.status == "error":
        view.notes.append(read.why_empty())
    return read.frame if read.status in ("ok", "empty") else None


def clients_view(root: str | Path, cluster: str | None, since: datetime,
                 until: datetime | None = None) -> ClientsView:
    view = ClientsView()
    windows = _read(view, root, "probe_windows", cluster, "window_start", since, until)
    if windows is not None:
        view.probe = []
        if not windows.empty:
            sums = windows.groupby(["cluster", "broker"], as_index=False)[
                ["attempted", "acked", "failed", "lost"]].sum()
            sums = sort_brokers(sums[(sums.failed > 0) | (sums.lost > 0)])
            view.probe = [
                {"cluster": r.cluster, "broker": r.broker, "attempted": int(r.attempted),
                 "failed": int(r.failed), "lost": int(r.lost),
                 "availability": (None if r.acked + r.failed == 0
                                  else float(r.acked) / float(r.acked + r.failed))}
                for r in sums.itertuples()]
    losses = _read(view, root, "probe_losses", cluster, "found_at", since, until)
    if losses is not None:
        view.probe_losses = losses.sort_values(["cluster", "partition", "offset"]).to_dict(
            "records")
    polled = _read(view, root, "consumer_group_status", cluster, "polled_at", since, until)
    lost = _read(view, root, "consumer_group_losses", cluster, "last_seen", since, until)
    if polled is not None:
        view.groups = _groups(polled, lost)
    return view


def _groups(polled: pd.DataFrame, lost: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Each group and topic whose newest status in the span is not ok, or that lost
    records to retention in it (its loss summed over the episodes seen then)."""
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    if not polled.empty:
        newest = polled.sort_values("polled_at").groupby(
            ["cluster", "group", "topic"], as_index=False).last()
        for r in newest[newest.status != "ok"].itertuples():
            found[(r.cluster, r.group, r.topic)] = {
                "cluster": r.cluster, "group": r.group, "topic": r.topic, "status": r.status,
                "lag_records": int(r.lag_records),
                "lag_seconds": None if r.lag_seconds != r.lag_seconds else float(r.lag_seconds),
                "lost_to_retention": 0}
    if lost is not None and not lost.empty:
        for (c, g, t), rows in lost.groupby(["cluster", "group", "topic"]):
            row = found.setdefault((c, g, t), {
                "cluster": c, "group": g, "topic": t, "status": "-", "lag_records": None,
                "lag_seconds": None, "lost_to_retention": 0})
            row["lost_to_retention"] = int(rows["lost"].sum())
    return [found[k] for k in sorted(found)]
