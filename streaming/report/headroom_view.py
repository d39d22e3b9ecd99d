"""Partition headroom for a terminal and for a PNG, read from the partition_headroom table.

    df = headroom_table("data/demo/delta")          # latest row per broker
    print(format_headroom_table(df))                # fixed-width, "-" for unknowns
    write_headroom_chart("data/demo/delta", "headroom.png")
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow.dataset as pads

from streaming.headroom.chart import (
    ceilings_frame_from_rows,
    history_frame_from_rows,
    write_headroom_png,
)
from streaming.headroom.model import BOUND_ORDER
from streaming.report.tables import (
    _ts,
    broker_label,
    fmt_ts,
    latest_per_broker,
    read_table,
    utc,
)
from streaming.text import shown, text_table

TABLE = "partition_headroom"

# Short headers so the table fits a 150-column terminal; the footer spells them out.
BOUND_HEADERS: dict[str, str] = {
    "max_broker_partitions": "max.broker",
    "mmap": "mmap",
    "file_descriptors": "fds",
    "recovery": "recovery",
    "baseline": "baseline",
}

# A broker whose newest row is this much older than the newest overall is called out.
STALE_AFTER = timedelta(minutes=5)


def headroom_table(delta_root: str | Path, cluster: str | None = None, *,
                   as_of: datetime | None = None) -> pd.DataFrame:
    """The latest partition_headroom row per (cluster, broker), columns as in tables.yaml.

    Empty (with the table's columns) when the table is missing or has no rows; use
    ``format_headroom_table`` to show it, which says so. ``as_of`` ignores rows evaluated
    after it (for reports of a past window).
    """
    read = latest_per_broker(delta_root, TABLE, "evaluated_at", cluster=cluster,
                             as_of=utc(as_of) if as_of is not None else None)
    frame = read.frame.reset_index(drop=True)
    frame.attrs["status"] = read.status
    frame.attrs["why_empty"] = read.why_empty()
    return frame


def format_headroom_table(df: pd.DataFrame) -> str:
    """Fixed-width text: one line per broker, "-" for unknown values, binding ceiling starred."""
    if df is None or df.empty:
        why = df.attrs.get("why_empty") if df is not None else ""
        return "No partition headroom rows. " + (why or "")
    multi_cluster = "cluster" in df.columns and df["cluster"].nunique(dropna=False) > 1
    bounds = [b for b in BOUND_ORDER if f"ceiling_{b}" in df.columns]
    # A bound that is unset on every broker (max.broker.partitions usually) is still shown:
    # "-" tells the operator the guard rail is not configured.
    headers = (["cluster"] if multi_cluster else []) + ["broker", "partitions", "leaders"]
    headers += [BOUND_HEADERS.get(b, b) for b in bounds]
    headers += ["binding", "headroom", "headroom %", "growth/day", "days to ceil"]

    rows: list[list[str]] = []
    for _, r in df.iterrows():
        line = [shown(r["cluster"])] if multi_cluster else []
        line += [shown(r["broker"]), _int(r.get("partitions")), _int(r.get("leaders"))]
        for b in bounds:
            cell = _int(r.get(f"ceiling_{b}"))
            line.append(cell + ("*" if b == r.get("binding_bound") and cell != "-" else ""))
        line += [
            _text(r.get("binding_bound")),
            _int(r.get("headroom"), signed=True),
            _num(r.get("headroom_pct"), "{:.1f}%"),
            _num(r.get("growth_per_day"), "{:+,.1f}"),
            _num(r.get("days_to_ceiling"), "{:,.1f}"),
        ]
        rows.append(line)

    out = [text_table(headers, rows, left={"cluster", "broker", "binding"}), ""]
    out.append(_as_of_line(df))
    out.extend(_stale_lines(df))
    out.append("ceilings in partitions; * = binding (lowest) bound; fds = file descriptors; "
               "max.broker = max.broker.partitions (KIP-578); '-' = unknown or not configured;")
    out.append("growth/day = least-squares partitions per day over the look-back; "
               "days to ceil '-' when not growing.")
    return "\n".join(out)


def write_headroom_chart(delta_root: str | Path, path: str | Path, cluster: str | None = None, *,
                         since: datetime | None = None, now: datetime | None = None) -> Path:
    """Partitions over time per broker against each bound's ceiling, as a PNG at ``path``.

    History is the partition_headroom rows in [since, now] (default: the 7 days up to the
    newest row); ceilings are each broker's latest row. Raises ``LookupError`` when there
    is nothing to draw, so a caller can print "no data" instead of an empty picture.
    """
    latest = headroom_table(delta_root, cluster, as_of=now)
    if latest.empty:
        raise LookupError(latest.attrs.get("why_empty") or "no partition_headroom rows")
    end = utc(now) if now is not None else latest["evaluated_at"].max().to_pydatetime()
    start = utc(since) if since is not None else end - timedelta(days=7)
    history = read_history(delta_root, start, end, cluster)
    return write_headroom_png(
        history_frame_from_rows(history, broker_label(history)),
        ceilings_frame_from_rows(latest, broker_label(latest)),
        path,
    )


def read_history(delta_root: str | Path, since: datetime, now: datetime,
                 cluster: str | None = None) -> pd.DataFrame:
    expr = (pads.field("evaluated_at") >= _ts(since)) & (pads.field("evaluated_at") <= _ts(now))
    read = read_table(delta_root, TABLE, columns=["cluster", "broker", "evaluated_at", "partitions"],
                      filter=expr, cluster=cluster)
    return read.frame.sort_values("evaluated_at", kind="stable").reset_index(drop=True)


# --- formatting helpers -----------------------------------------------------------------


def _missing(value: object) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _int(value: object, signed: bool = False) -> str:
    if _missing(value) or (isinstance(value, float) and math.isinf(value)):
        return "-"
    return f"{float(value):+,.0f}" if signed else f"{float(value):,.0f}"


def _num(value: object, pattern: str) -> str:
    if _missing(value) or (isinstance(value, float) and math.isinf(value)):
        return "-"
    return pattern.format(float(value))


def _text(value: object) -> str:
    return "-" if _missing(value) or value == "" else str(value)


def _as_of_line(df: pd.DataFrame) -> str:
    times = df["evaluated_at"].dropna()
    if times.empty:
        return "evaluated at: -"
    newest, oldest = times.max(), times.min()
    if newest == oldest:
        return f"evaluated at {fmt_ts(newest)}"
    return f"evaluated between {fmt_ts(oldest)} and {fmt_ts(newest)}"


def _stale_lines(df: pd.DataFrame) -> list[str]:
    times = df["evaluated_at"]
    if times.dropna().empty:
        return []
    newest = times.max()
    lines = []
    for label, ts in zip(broker_label(df), times, strict=True):
        if not _missing(ts) and newest - ts > STALE_AFTER:
            lines.append(f"broker {label}: newest headroom row is from {fmt_ts(ts)} "
                         f"({(newest - ts).total_seconds() / 60:.0f} min older than the rest)")
    return lines
