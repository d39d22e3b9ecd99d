"""`kafka-health status`: what needs attention now, from the job's Delta tables.

Three answers an on-call engineer wants before anything else:

* open incidents (resolved_at null in ``incidents``) with since-when, their peak and their
  cause (the brokers the Admin API blames, when the job polls the cluster: config
  ``metadata``);
* stale brokers: the job's own rule (``signals.incidents.stale_rows``) applied to each
  broker's newest ``broker_signals`` window, so a broker counts as stale here exactly when
  the job would call it so (silent for longer than stale_after_intervals scrapes while its
  cluster's peers reported), and whether a stale_broker incident is open for it;
* the lowest partition headroom per cluster (``partition_headroom``, newest row per broker);
* the clients' truth, where the job runs them (config ``probe`` and ``consumer_groups``):
  brokers whose acks=all probe writes failed or were lost in the last
  ``CLIENTS_LOOK_BACK`` (``probe_windows``), and consumer groups whose newest status is not
  ok or that lost records to retention in that time (``consumer_group_status`` and
  ``consumer_group_losses``). Their tables are missing when the job does not run them:
  that is said, and is no unknown.

A table that is missing or unreadable is a note, never a crash: status is what one runs
when something is already wrong. Nor is it an all-clear: the section it feeds reads
"unknown" (null in JSON), and the command exits 1. The newest signal window, and how long
ago it ended, heads the output: tables a stopped job left behind read as calm as a
healthy fleet's, and only their age tells them apart.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from streaming.report.clients_view import clients_view
from streaming.report.headroom_view import headroom_table
from streaming.report.tables import (
    TableRead,
    fmt_ts,
    latest_per_broker,
    read_table,
    sort_brokers,
    utc,
)
from streaming.schemas import arrow_schema
from streaming.signals.incidents import stale_rows
from streaming.text import shown, text_table

# The newest window older than this (beyond the stale threshold) is said to be old: the
# job writes a window's signals within a minute or two of its end.
OLD_AFTER_SECONDS = 600.0
# How far back the clients' sections look: a probe failure or a group's loss this recent is
# news to whoever is on call.
CLIENTS_LOOK_BACK = timedelta(minutes=15)


@dataclass
class Status:
    # None: unknown, the table it comes from is missing or could not be read
    open_incidents: list[dict[str, Any]] | None = field(default_factory=list)
    stale_brokers: list[dict[str, Any]] | None = field(default_factory=list)
    lowest_headroom: list[dict[str, Any]] | None = field(default_factory=list)
    # None: not run by the job (its table missing), or unreadable (then also a note)
    probe_failing: list[dict[str, Any]] | None = None
    groups_in_trouble: list[dict[str, Any]] | None = None
    # the end of the newest broker_signals window, and its age when read
    newest_window_end: str | None = None
    newest_window_age_seconds: float | None = None
    # why a section may be empty or unknown: a table not written yet, or not readable
    notes: list[str] = field(default_factory=list)

    @property
    def known(self) -> bool:
        """Whether every section could be read."""
        return None not in (self.open_incidents, self.stale_brokers, self.lowest_headroom)


def read_status(delta_root: str | Path, cluster: str | None = None,
                stale_after_seconds: float = 45.0, now: datetime | None = None) -> Status:
    """The status of every cluster in the tables (or of ``cluster`` alone), at ``now``
    (the wall clock by default)."""
    status = Status()
    incidents = read_table(delta_root, "incidents", filter=pads.field("resolved_at").is_null(),
                           cluster=cluster)
    frame = incidents.frame
    if incidents.ok:
        # one row per incident_id; a duplicate would be a writer bug: the newest row wins
        frame = frame.sort_values("updated_at", kind="stable").drop_duplicates(
            "incident_id", keep="last").sort_values(["started_at", "cluster", "broker"])
        status.open_incidents = [
            {"cluster": r.cluster, "kind": r.kind, "broker": r.broker,
             "since": _iso(r.started_at), "peak": _number(r.peak_value),
             "opened_by": getattr(r, "opened_by", None)
             if isinstance(getattr(r, "opened_by", None), str) else None,
             "cause": r.cause if isinstance(r.cause, str) else None}
            for r in frame.itertuples()]
    elif incidents.status in ("missing", "error"):
        status.open_incidents = None
        status.notes.append(incidents.why_empty())
    stale_open = {(i["cluster"], i["broker"]) for i in status.open_incidents or []
                  if i["kind"] == "stale_broker"}
    latest = latest_per_broker(delta_root, "broker_signals", "window_start", cluster=cluster)
    if latest.ok:
        newest = pd.Timestamp(latest.frame["window_end"].max())
        status.newest_window_end = _iso(newest)
        if not pd.isna(newest):
            status.newest_window_age_seconds = (
                utc(now) - newest.to_pydatetime()).total_seconds()
    status.stale_brokers = _stale(latest, stale_after_seconds, stale_open, status)
    status.lowest_headroom = _lowest_headroom(delta_root, cluster, status)
    clients = clients_view(delta_root, cluster, utc(now) - CLIENTS_LOOK_BACK)
    status.probe_failing, status.groups_in_trouble = clients.probe, clients.groups
    status.notes += clients.notes
    return status


def _stale(latest: TableRead, stale_after_seconds: float,
           open_incidents: set[tuple[str, str]], status: Status
           ) -> list[dict[str, Any]] | None:
    if not latest.ok:
        if latest.status in ("missing", "error"):
            status.notes.append(latest.why_empty())
            return None
        return []
    columns = ["cluster", "broker", "window_start", "window_end", "last_sample_ts"]
    rows = pa.Table.from_pandas(latest.frame[columns], preserve_index=False).cast(
        pa.schema([arrow_schema("broker_signals").field(c) for c in columns]))
    judged = stale_rows(rows, stale_after_seconds)
    # each cluster's newest window: where a silent broker's age is measured against the
    # peers that did report
    newest = judged.group_by("cluster").aggregate([("window_start", "max")])
    judged = judged.join(newest, "cluster")
    now = judged.filter(pc.and_(pc.equal(judged["window_start"], judged["window_start_max"]),
                                pc.fill_null(judged["stale"], False)))
    last_seen = latest.frame.set_index(["cluster", "broker"])["last_sample_ts"]
    found = sort_brokers(now.select(["cluster", "broker", "age"]).to_pandas())
    return [{"cluster": r.cluster, "broker": r.broker,
             "last_sample": _iso(last_seen.get((r.cluster, r.broker))),
             "behind_seconds": _number(r.age),
             "incident_open": (r.cluster, r.broker) in open_incidents}
            for r in found.itertuples()]


def _lowest_headroom(delta_root: str | Path, cluster: str | None,
                     status: Status) -> list[dict[str, Any]] | None:
    table = headroom_table(delta_root, cluster)
    if table.empty:
        if table.attrs.get("status") in ("missing", "error"):
            status.notes.append(table.attrs.get("why_empty", ""))
            return None
        return []
    known = table[table["headroom"].notna()]
    # by the share left, as KafkaPartitionHeadroomLow pages: a broker holding no partitions
    # has a ceiling of its own (no leaders to scale by) and can read fewest partitions left
    lowest = known.sort_values(["headroom_pct", "headroom"], kind="stable",
                               na_position="last").drop_duplicates("cluster")
    return [{"cluster": r.cluster, "broker": r.broker, "headroom": _number(r.headroom),
             "headroom_pct": _number(r.headroom_pct), "partitions": _number(r.partitions),
             "binding_bound": r.binding_bound, "binding_ceiling": _number(r.binding_ceiling),
             "days_to_ceiling": _number(r.days_to_ceiling),
             "evaluated_at": _iso(r.evaluated_at)}
            for r in lowest.sort_values("cluster").itertuples()]


def _iso(ts: Any) -> str | None:
    return None if ts is None or pd.isna(ts) else pd.Timestamp(ts).isoformat()


def _number(value: Any) -> float | None:
    """JSON has no NaN or infinity: unknown is null."""
    if value is None or pd.isna(value) or math.isinf(float(value)):
        return None
    return float(value)


def status_json(status: Status) -> str:
    return json.dumps(asdict(status), indent=2)


def _heading(section: list[Any] | None) -> str:
    if section is None:
        return "unknown (see below)"
    return str(len(section) or "none")


def _newest(status: Status, stale_after_seconds: float) -> str:
    if status.newest_window_end is None:
        return "Newest signals: none written yet"
    line = f"Newest signals: window ending {_when(status.newest_window_end)}"
    age = status.newest_window_age_seconds
    if age is None:
        return line
    line += f", {_age(age)} ago"
    if age > OLD_AFTER_SECONDS + stale_after_seconds:
        line += " (nothing newer written since: is the job running?)"
    return line


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


def format_status(status: Status, stale_after_seconds: float) -> str:
    """The three sections as aligned text; identity strings bounded and printable."""
    out = [_newest(status, stale_after_seconds), "",
           f"Open incidents: {_heading(status.open_incidents)}"]
    if status.open_incidents:
        out.append(text_table(
            ["cluster", "kind", "broker", "since", "peak", "cause"],
            [[shown(i["cluster"]), i["kind"], shown(i["broker"]), _when(i["since"]),
              _peak(i["peak"], i.get("opened_by")), shown(i["cause"])]
             for i in status.open_incidents],
            left={"cluster", "kind", "broker", "since", "cause"}))
    out += ["", f"Stale brokers (silent over {stale_after_seconds:g}s while their cluster "
            f"reported): {_heading(status.stale_brokers)}"]
    if status.stale_brokers:
        out.append(text_table(
            ["cluster", "broker", "last sample", "behind", "incident"],
            [[shown(s["cluster"]), shown(s["broker"]), _when(s["last_sample"]),
              _count(s["behind_seconds"]) + "s", "open" if s["incident_open"] else "-"]
             for s in status.stale_brokers],
            left={"cluster", "broker", "last sample", "incident"}))
    out += ["", f"Lowest partition headroom per cluster: {_heading(status.lowest_headroom)}"]
    if status.lowest_headroom:
        out.append(text_table(
            ["cluster", "broker", "partitions", "ceiling", "bound", "headroom", "headroom %",
             "days to ceil", "evaluated"],
            [[shown(h["cluster"]), shown(h["broker"]), _count(h["partitions"]),
              _count(h["binding_ceiling"]), h["binding_bound"] or "-", _count(h["headroom"]),
              "-" if h["headroom_pct"] is None else f"{h['headroom_pct']:.1f}%",
              "-" if h["days_to_ceiling"] is None else f"{h['days_to_ceiling']:,.1f}",
              _when(h["evaluated_at"])] for h in status.lowest_headroom],
            left={"cluster", "broker", "bound", "evaluated"}))
    out += _clients_sections(status)
    if status.notes:
        out += ["", *status.notes]
    return "\n".join(out)


def _clients_sections(status: Status) -> list[str]:
    look_back = f"{CLIENTS_LOOK_BACK.total_seconds() / 60:.0f} min"
    out = [""]
    if status.probe_failing is None:
        out.append("Durability probe: not run (config probe.enabled)")
    else:
        out.append(f"Durability probe, brokers with failed or lost writes in the last "
                   f"{look_back}: {_heading(status.probe_failing)}")
        if status.probe_failing:
            out.append(text_table(
                ["cluster", "broker", "writes", "failed", "lost", "availability"],
                [[shown(p["cluster"]), shown(p["broker"]), _count(p["attempted"]),
                  _count(p["failed"]), _count(p["lost"]),
                  "-" if p["availability"] is None else f"{100 * p['availability']:.1f}%"]
                 for p in status.probe_failing],
                left={"cluster", "broker"}))
    out.append("")
    if status.groups_in_trouble is None:
        out.append("Consumer groups: not read (config consumer_groups.enabled)")
    else:
        out.append(f"Consumer groups not ok, or losing records to retention in the last "
                   f"{look_back}: {_heading(status.groups_in_trouble)}")
        if status.groups_in_trouble:
            out.append(text_table(
                ["cluster", "group", "topic", "status", "lag", "lag s", "lost to retention"],
                [[shown(g["cluster"]), shown(g["group"]), shown(g["topic"]), g["status"],
                  _count(g["lag_records"]), _count(g["lag_seconds"]),
                  _count(g["lost_to_retention"])] for g in status.groups_in_trouble],
                left={"cluster", "group", "topic", "status"}))
    return out


def _when(iso: str | None) -> str:
    return fmt_ts(pd.Timestamp(iso)) if iso else "-"


def _peak(value: float | None, opened_by: str | None) -> str:
    """An incident's peak in the measure that opened it, named: a fraction keeps its
    digits (an idle fraction of 0.05 is not "0")."""
    if value is None:
        return "-"
    number = _count(value) if value == value and float(value).is_integer() else f"{value:.3g}"
    return f"{number} {opened_by}" if opened_by else number


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"
