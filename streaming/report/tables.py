"""Reading the Delta tables for reports: bounded by time and cluster, never crashing on absence.

Every reader returns a ``TableRead``: the rows as a pandas DataFrame plus a ``status`` that
says why there may be nothing to show ("missing" table, "empty" for no rows in the
window, "error" with the message). A report turns those into a "no data" section; an
operator reading it learns whether the job never wrote the table or the window was quiet.

Tables are read through the sink's own reader (``DeltaRsTable.read``): time filters prune
files so a long history is not read into memory to show the last few hours, and the
cluster filter is applied in memory, since pyarrow fails a pushed-down string predicate
on files a MERGE wrote. Columns the table does not have (an older table version) come
back as all-null, so a schema change upstream degrades to "no data" for that signal
instead of a KeyError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from streaming.schemas import arrow_schema

TS_TYPE = pa.timestamp("us", tz="UTC")


@dataclass
class TableRead:
    table: str
    path: str
    status: str  # "ok" | "empty" | "missing" | "error"
    frame: pd.DataFrame
    detail: str = ""
    version: int | None = None
    columns_missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def why_empty(self) -> str:
        """One sentence for the report's "no data" section."""
        if self.status == "missing":
            return f"Table {self.table} does not exist at {self.path} (the job has not written it yet)."
        if self.status == "error":
            return f"Table {self.table} at {self.path} could not be read: {self.detail}"
        if self.status == "empty":
            return f"Table {self.table} has no rows {self.detail}."
        return ""


def utc(ts: datetime | None) -> datetime:
    """``now`` defaults to the wall clock; a naive datetime is taken as UTC."""
    if ts is None:
        return datetime.now(UTC)
    if ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC)


def table_path(delta_root: str | Path, table: str) -> str:
    return str(Path(delta_root) / table)


def _ts(value: datetime) -> pa.Scalar:
    return pa.scalar(utc(value), type=TS_TYPE)


def _empty_frame(table: str, columns: Sequence[str] | None) -> pd.DataFrame:
    schema = arrow_schema(table)
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    return schema.empty_table().to_pandas()


def read_table(
    delta_root: str | Path,
    table: str,
    *,
    columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,  # noqa: A002 - the pyarrow name
    cluster: str | None = None,
    window_text: str = "",
) -> TableRead:
    """Rows of ``table`` matching ``filter`` (and ``cluster`` when the table has one).

    ``filter`` is pushed down to prune files, so it must not compare string columns (see
    ``DeltaRsTable.read``); ``cluster`` is the string filter, applied in memory.
    """
    from deltalake import DeltaTable

    from streaming.sinks.delta_rs import DeltaRsTable

    path = table_path(delta_root, table)
    wanted = list(columns) if columns is not None else arrow_schema(table).names
    try:
        if not DeltaTable.is_deltatable(path):
            return TableRead(table, path, "missing", _empty_frame(table, wanted))
        reader = DeltaRsTable(str(delta_root), table, app_id="kafka-health-report")
        dt = reader.ensure()
        present = set(dt.schema().to_arrow().names)
    except Exception as exc:  # a corrupt log or unreadable store: report it, do not crash
        return TableRead(table, path, "error", _empty_frame(table, wanted), detail=_one_line(exc))

    where = None
    if cluster is not None and "cluster" in present:
        where = pads.field("cluster") == cluster
    try:
        data = reader.read(filter, where, columns=[c for c in wanted if c in present])
    except Exception as exc:
        return TableRead(table, path, "error", _empty_frame(table, wanted), detail=_one_line(exc),
                         version=dt.version())

    expected = arrow_schema(table)
    missing = [c for c in wanted if c not in present]
    for name in missing:
        data = data.append_column(expected.field(name), pa.nulls(data.num_rows, expected.field(name).type))
    data = data.select(wanted)
    frame = data.to_pandas()
    status = "ok" if len(frame) else "empty"
    return TableRead(table, path, status, frame, detail=window_text, version=dt.version(),
                     columns_missing=missing)


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text.splitlines()[0][:300] if text else type(exc).__name__


def window_text(since: datetime, now: datetime, cluster: str | None) -> str:
    where = f" for cluster {cluster}" if cluster else ""
    return f"between {fmt_ts(since)} and {fmt_ts(now)}{where}"


def fmt_ts(ts: datetime | pd.Timestamp | None) -> str:
    if ts is None or pd.isna(ts):
        return "-"
    return pd.Timestamp(ts).tz_convert("UTC").strftime("%Y-%m-%d %H:%M UTC")


# --- per-table readers ------------------------------------------------------------------


def read_windowed(
    delta_root: str | Path, table: str, time_column: str, since: datetime, now: datetime,
    cluster: str | None = None, columns: Sequence[str] | None = None,
) -> TableRead:
    expr = (pads.field(time_column) >= _ts(since)) & (pads.field(time_column) <= _ts(now))
    read = read_table(delta_root, table, columns=columns, filter=expr, cluster=cluster,
                      window_text=window_text(since, now, cluster))
    if read.ok:
        read.frame = read.frame.sort_values(time_column, kind="stable").reset_index(drop=True)
    return read


def read_incidents(delta_root: str | Path, since: datetime, now: datetime,
                   cluster: str | None = None) -> TableRead:
    """Incidents that overlap the window: started before its end, not resolved before its start."""
    started = pads.field("started_at") <= _ts(now)
    still_relevant = pads.field("resolved_at").is_null() | (pads.field("resolved_at") >= _ts(since))
    read = read_table(delta_root, "incidents", filter=started & still_relevant, cluster=cluster,
                      window_text=window_text(since, now, cluster))
    if read.ok:
        # Upserts keep one row per incident_id; a duplicate would be a writer bug, so the
        # newest row wins rather than drawing two bars.
        frame = read.frame.sort_values("updated_at", kind="stable")
        frame = frame.drop_duplicates("incident_id", keep="last")
        read.frame = frame.sort_values(["started_at", "incident_id"]).reset_index(drop=True)
    return read


def read_quarantine(delta_root: str | Path, since: datetime, now: datetime) -> TableRead:
    """Quarantine has no cluster column (a record that fails decoding has no trusted cluster)."""
    cols = ["ingest_ts", "source_topic", "source_format", "reason"]
    return read_windowed(delta_root, "quarantine", "ingest_ts", since, now, columns=cols)


def latest_per_broker(
    delta_root: str | Path, table: str, time_column: str, cluster: str | None = None,
    as_of: datetime | None = None,
) -> TableRead:
    """The newest row per (cluster, broker) at or before ``as_of``.

    Two passes: first only the key and time columns over the whole table to find each
    broker's newest time, then full rows from that earliest newest time on. A broker that
    stopped reporting long ago still shows (with its old time), which is the point.
    """
    keys = ["cluster", "broker", time_column]
    upper = pads.field(time_column) <= _ts(as_of) if as_of is not None else None
    first = read_table(delta_root, table, columns=keys, filter=upper, cluster=cluster)
    if not first.ok:
        if first.status == "empty":
            first.detail = "for cluster " + cluster if cluster else "at all"
        first.frame = _empty_frame(table, None)
        return first
    newest = first.frame.groupby(["cluster", "broker"], dropna=False)[time_column].max()
    since = newest.min().to_pydatetime()
    lower = pads.field(time_column) >= _ts(since)
    rows = read_table(delta_root, table, filter=lower if upper is None else lower & upper, cluster=cluster)
    frame = rows.frame.merge(newest.rename("_newest").reset_index(), on=["cluster", "broker"])
    frame = frame[frame[time_column] == frame["_newest"]].drop(columns="_newest")
    frame = frame.sort_values("updated_at", kind="stable").drop_duplicates(["cluster", "broker"], keep="last")
    rows.frame = sort_brokers(frame).reset_index(drop=True)
    return rows


def sort_brokers(frame: pd.DataFrame) -> pd.DataFrame:
    """Broker ids are strings but usually numbers: 2 before 10."""
    if frame.empty:
        return frame
    key = frame["broker"].map(broker_sort_key)
    order = sorted(range(len(frame)), key=lambda i: (str(frame["cluster"].iloc[i]), key.iloc[i]))
    return frame.iloc[order]


def broker_sort_key(broker: object) -> tuple[int, float, str]:
    text = str(broker)
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def broker_label(frame: pd.DataFrame) -> pd.Series:
    """``broker`` alone for one cluster; ``cluster/broker`` when several share the report."""
    if frame.empty or frame["cluster"].nunique(dropna=False) <= 1:
        return frame["broker"].astype(str)
    return frame["cluster"].astype(str) + "/" + frame["broker"].astype(str)


def window_start(now: datetime, hours: float) -> datetime:
    if not hours > 0:
        raise ValueError(f"hours must be > 0, got {hours!r}")
    return now - timedelta(hours=hours)
