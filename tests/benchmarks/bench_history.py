"""Per-batch Delta cost against the history the signal tables hold.

An always-on job keeps months of broker_signals, cluster_signals and partition_headroom
rows. Each micro-batch upserts the current window into them and reads the incident
horizon back; if those operations scan the whole history, a batch gets slower every day
and a 30-minute soak cannot show it. This builds the tables with DAYS of one-minute
windows for a fleet of BROKERS (appended a day per commit, then compacted, as the job's
compaction leaves them), then times a batch's Delta work, with and without the MERGE's
key-range bounds (`DeltaRsTable.key_bounds`):

- upsert of a new window and of the same window again (the open window, updated) into
  broker_signals, cluster_signals and partition_headroom;
- the incident horizon (15 min) read back from broker_signals and cluster_signals.

    .venv/bin/python tests/benchmarks/bench_history.py --days 1 7 30 --brokers 50
Writes tests/benchmarks/results/history.json; prints the figures last.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from streaming.sinks.delta_rs import DeltaRsTable

RESULTS = Path(__file__).resolve().parent / "results" / "history.json"
TS = pa.timestamp("us", "UTC")
TABLES = {"broker_signals": "window_start", "cluster_signals": "window_start",
          "partition_headroom": "evaluated_at"}
HORIZON = timedelta(seconds=900)


def windows(table: DeltaRsTable, time_key: str, starts: list[datetime], brokers: int
            ) -> pa.Table:
    """Rows of `starts` for every broker (one per window for cluster_signals), other
    columns filled with plausible values of their type."""
    per_window = 1 if "broker" not in table.schema.names else brokers
    n = len(starts) * per_window
    micros = np.repeat(np.asarray([int(s.timestamp() * 1e6) for s in starts]), per_window)
    rng = np.random.default_rng(len(starts))
    columns: dict[str, Any] = {}
    for field in table.schema:
        if field.name == "cluster":
            columns[field.name] = pa.array(["prod"] * n)
        elif field.name == "broker":
            columns[field.name] = pa.array([str(b) for b in range(per_window)] * len(starts))
        elif field.name == time_key:
            columns[field.name] = pa.array(micros).cast(TS)
        elif pa.types.is_timestamp(field.type):
            columns[field.name] = pa.array(micros + 60_000_000).cast(TS)
        elif pa.types.is_integer(field.type):
            columns[field.name] = pa.array(np.full(n, 12, dtype=np.int64)).cast(field.type)
        elif pa.types.is_floating(field.type):
            columns[field.name] = pa.array(rng.random(n) * 100)
        else:
            columns[field.name] = pa.nulls(n, field.type)
    return pa.table(columns, schema=table.schema)


def build(root: Path, days: int, brokers: int, now: datetime) -> dict[str, DeltaRsTable]:
    tables = {name: DeltaRsTable(str(root), name, "bench-history") for name in TABLES}
    start = now - timedelta(days=days)
    for name, table in tables.items():
        table.ensure()
        for day in range(days):
            starts = [start + timedelta(days=day, minutes=m) for m in range(1440)]
            table.append(windows(table, TABLES[name], starts, brokers), batch_id=day)
        table.compact()
    return tables


def one_batch(tables: dict[str, DeltaRsTable], at: datetime, brokers: int, batch_id: int
              ) -> float:
    """A batch's Delta work for window `at`: each table's upsert twice (the window opens,
    then a later batch updates it), then the incident horizon read back."""
    started = time.perf_counter()
    for name, table in tables.items():
        rows = windows(table, TABLES[name], [at], brokers)
        table.upsert(rows, batch_id)
        table.upsert(rows, batch_id + 1)
    horizon = ((ds.field("window_start") >= pa.scalar(at - HORIZON, TS))
               & (ds.field("window_start") <= pa.scalar(at, TS)))
    for name in ("broker_signals", "cluster_signals"):
        tables[name].read(horizon, ds.field("cluster").isin(["prod"]))
    return time.perf_counter() - started


def measure(days: int, brokers: int, batches: int, bounded: bool) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="kh-history-"))
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    original = DeltaRsTable.key_bounds
    if not bounded:
        DeltaRsTable.key_bounds = lambda self, data: []  # type: ignore[method-assign]
    try:
        tables = build(root, days, brokers, now)
        seconds = [one_batch(tables, now + timedelta(minutes=i), brokers, days + 2 * i)
                   for i in range(batches)]
    finally:
        DeltaRsTable.key_bounds = original  # type: ignore[method-assign]
        shutil.rmtree(root, ignore_errors=True)
    return {"days": days, "brokers": brokers, "bounded": bounded,
            "broker_signals_rows": days * 1440 * brokers,
            "batch_seconds_median": statistics.median(seconds),
            "batch_seconds_max": max(seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, nargs="+", default=[1, 7, 30])
    parser.add_argument("--brokers", type=int, default=50)
    parser.add_argument("--batches", type=int, default=8)
    args = parser.parse_args()
    runs = [measure(days, args.brokers, args.batches, bounded)
            for days in args.days for bounded in (False, True)]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": runs}, indent=2))
    for run in runs:
        print(f"{run['days']:>3} days x {run['brokers']} brokers "
              f"({run['broker_signals_rows']:,} broker_signals rows), "
              f"{'bounded' if run['bounded'] else 'unbounded'} MERGE: a batch's Delta work "
              f"median {run['batch_seconds_median']:.2f} s, max {run['batch_seconds_max']:.2f} s")


if __name__ == "__main__":
    main()
