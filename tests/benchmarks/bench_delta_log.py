"""A batch's Delta commit against the length of the table's log.

Every micro-batch commits to bronze (and each signals round to the signal tables), and
Delta keeps each commit as a file in the table's `_delta_log` folder until the log's
retention (`delta.logRetentionDuration`, 30 days unless set) has passed and a checkpoint
covers it, and a delta-rs commit to a local table costs more the more files that folder
holds: at one commit every half second a month of log is five million files, and a
30-minute soak never sees it. This commits batches to bronze
as the job does, the app transaction checked first, both ways the job has: the read
tasks' Parquet files committed as add actions (`DeltaRsTable.add_files`, the default) and
the driver writing the rows (`DeltaRsTable.append`, `delta.bronze_writers: driver`). It
times the commits at growing folder sizes, once with Delta's default retention and once
with a retention as the job sets it (`delta.log_retention_minutes`), shortened to a second
so that its cleanup happens within the run.

    .venv/bin/python tests/benchmarks/bench_delta_log.py --commits 1800
Writes tests/benchmarks/results/delta-log.json; prints the figures last.

    .venv/bin/python tests/benchmarks/bench_delta_log.py --days 1 7
times the job's bronze commit after 1 and 7 days of commits at its default cadence (a
commit every `spark.trigger_seconds`, 172,800 a day), once per log retention (`--retention
-minutes`, by default the job's and a week's). A week of commits is not written one by one:
the log is built as the job's commits and delta-rs' cleanup would have left it, in files
written directly: the commit files the retention still keeps (each the job's commit of a
read task's file, its app transaction numbered by its version), a checkpoint every 100
versions where delta-rs writes them (the state of a real checkpoint, its app transaction's
version set to the checkpoint's), and `_last_checkpoint`. A pool of 99 real commits
(files and all) comes first, and the built commits add those files again, so the table's
state stays 99 files, as compaction keeps it bounded. Then the job's sink
(`DeltaRsTable`, opened afresh) commits batches whose files are written beforehand, with a
checkpoint among them, and the cost of refreshing the table with nothing new (delta-rs
listing `_delta_log`) is timed beside it. Writes tests/benchmarks/results/
delta-log-week.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streaming.config import DeltaConfig, SparkConfig
from streaming.sinks.delta_rs import DeltaRsTable
from streaming.sinks.task_files import write_task_files

RESULTS = Path(__file__).resolve().parent / "results" / "delta-log.json"
WEEK_RESULTS = RESULTS.with_name("delta-log-week.json")
TS = pa.timestamp("us", "UTC")
MEASURE = 50  # commits timed at each folder size


def bronze_rows(table: DeltaRsTable) -> pa.Table:
    """Ten bronze rows of one broker (values do not matter for the commit's cost)."""
    now = datetime.now(UTC)
    n = 10
    columns: dict[str, Any] = {
        "ts": pa.array([now] * n, TS), "cluster": ["prod"] * n, "broker": ["1"] * n,
        "metric": ["UnderMinIsrPartitionCount"] * n, "attribute": ["Value"] * n,
        "labels": pa.array([[]] * n, pa.map_(pa.string(), pa.string())),
        "value": [0.0] * n, "kind": ["gauge"] * n, "source_format": ["jolokia"] * n,
        "source_topic": ["metrics"] * n, "source_partition": pa.array([0] * n, pa.int32()),
        "source_offset": list(range(n)), "ingest_ts": pa.array([now] * n, TS),
        "date": [now.strftime("%Y-%m-%d")] * n}
    return pa.table(columns).cast(table.schema)


def run(root: Path, writer: str, retention_minutes: float | None, sizes: list[int]
        ) -> list[dict[str, Any]]:
    """Commit batches up to each of `sizes`, timing MEASURE commits at each. `writer`:
    "read_tasks" commits a file written beforehand (the tasks write theirs before the
    driver's commit), "driver" writes the rows in the commit."""
    table = DeltaRsTable(str(root), "bronze", "bench", log_retention_minutes=retention_minutes)
    log = root / "bronze" / "_delta_log"
    rows = bronze_rows(table)
    decoded = rows.append_column("reject_reason", pa.nulls(rows.num_rows, pa.string()))

    def commit(batch: int, files: list[Any]) -> None:
        if writer == "driver":
            table.append(rows, batch)
        else:
            table.add_files(files, batch)

    def task_files(count: int) -> list[list[Any]]:
        return [write_task_files(decoded, str(root)) if writer == "read_tasks" else []
                for _ in range(count)]

    batch = 0
    points: list[dict[str, Any]] = []
    for size in sizes:
        while batch < size:  # one commit a batch: without cleanup, a file a commit
            batch += 1
            commit(batch, task_files(1)[0])
        written = task_files(MEASURE)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for files in written:
            batch += 1
            commit(batch, files)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        points.append({"commits": batch, "log_files": len(list(log.iterdir())),
                       "cpu_ms_a_commit": round(cpu / MEASURE * 1e3, 2),
                       "wall_ms_a_commit": round(wall / MEASURE * 1e3, 2)})
        print(f"  {writer}, {table.log_retention or 'the default retention'}: {points[-1]}",
              flush=True)
    return points


# delta-rs writes a checkpoint after the commit of each version v with (v + 1) % 100 == 0
# (delta.checkpointInterval, 100 unless set), so a pool of 99 commits ends at the first.
CHECKPOINT_INTERVAL = 100
POOL = CHECKPOINT_INTERVAL - 1
APP = "bench"
MAX_TIMED, TIMED_SECONDS = 300, 10.0
TXN = re.compile(r'"txn":\{"appId":"' + APP + r':bronze","version":\d+')


def log_name(version: int, suffix: str = "json") -> str:
    return f"{version:020d}.{suffix}"


def build_log(root: Path, days: float, retention_minutes: float, trigger_seconds: float,
              to_checkpoint: int) -> tuple[DeltaRsTable, pa.Table, dict[str, Any]]:
    """The bronze table after `days` of one commit a trigger, its log as the retention and
    delta-rs' cleanup leave it (see the module's docstring), `to_checkpoint` commits before
    delta-rs writes its next checkpoint. Returns the table, decoded rows for more task
    files, and what was built."""
    table = DeltaRsTable(str(root), "bronze", APP, log_retention_minutes=retention_minutes)
    rows = bronze_rows(table)
    decoded = rows.append_column("reject_reason", pa.nulls(rows.num_rows, pa.string()))
    for batch in range(1, POOL + 1):
        table.add_files(write_task_files(decoded, str(root)), batch)
    log = root / "bronze" / "_delta_log"
    state = pq.read_table(log / log_name(POOL, "checkpoint.parquet"))
    commits = [(log / log_name(v)).read_text() for v in range(1, POOL + 1)]
    txn_index = state.schema.get_field_index("txn")
    txn = state.column(txn_index).combine_chunks()
    # The newest version, placed so that the measured commits reach a checkpoint
    per_day = round(86400 / trigger_seconds)
    newest = (round(days * per_day) // CHECKPOINT_INTERVAL * CHECKPOINT_INTERVAL
              - to_checkpoint - 1)
    kept = round(retention_minutes * 60 / trigger_seconds)
    first = max(POOL + 1, newest - kept + 1)
    # what delta-rs' cleanup removes: commits and checkpoints older than the retention,
    # the pool's too when the retention is shorter than the built span (its data files
    # stay: the table's state names them)
    if first > POOL + 1:
        for name in os.listdir(log):
            if name[:20].isdigit() and int(name[:20]) < POOL + 1:
                (log / name).unlink()
    started = time.perf_counter()
    for version in range(first, newest + 1):
        text = TXN.sub(f'"txn":{{"appId":"{APP}:bronze","version":{version}',
                       commits[(version - 1) % POOL])
        (log / log_name(version)).write_text(text)
    checkpoints = [v for v in range(first, newest + 1) if (v + 1) % CHECKPOINT_INTERVAL == 0]
    if first > POOL + 1 and (first + 1) % CHECKPOINT_INTERVAL != 0:
        # a reader starts at the checkpoint before the oldest kept commit; delta-rs keeps it
        checkpoints.insert(0, first - 1 - (first % CHECKPOINT_INTERVAL))
    for version in checkpoints:
        moved = pa.StructArray.from_arrays(
            [txn.field(0), pa.array([version] * len(txn), pa.int64()), txn.field(2)],
            fields=list(txn.type), mask=pc.invert(txn.is_valid()))
        pq.write_table(state.set_column(txn_index, state.schema.field(txn_index), moved),
                       log / log_name(version, "checkpoint.parquet"))
    last = json.loads((log / "_last_checkpoint").read_text())
    last.update(version=checkpoints[-1], sizeInBytes=(
        log / log_name(checkpoints[-1], "checkpoint.parquet")).stat().st_size)
    (log / "_last_checkpoint").write_text(json.dumps(last))
    built = {"days": days, "versions": newest, "log_files": len(os.listdir(log)),
             "build_seconds": round(time.perf_counter() - started, 1)}
    print(f"  built {built}", flush=True)
    return table, decoded, built


def week_point(root: Path, days: float, retention_minutes: float, trigger_seconds: float,
               commits: int) -> dict[str, Any]:
    """`commits` of the job's bronze commit after `days` of them, on a fresh handle."""
    _, decoded, built = build_log(root, days, retention_minutes, trigger_seconds,
                                  max(1, commits // 2))
    started = time.perf_counter()
    table = DeltaRsTable(str(root), "bronze", APP, log_retention_minutes=retention_minutes)
    batch = table.transaction_version()
    assert batch == built["versions"], (batch, built)
    opened = time.perf_counter() - started
    handle = table.ensure()
    cpu0 = time.process_time()
    for _ in range(5):
        handle.update_incremental()
    refresh = (time.process_time() - cpu0) / 5
    # at least `commits`, and more while they take less than TIMED_SECONDS, so that a
    # short log's few milliseconds are not one scheduler hiccup's
    written = [write_task_files(decoded, str(root)) for _ in range(max(commits, MAX_TIMED))]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    timed = 0
    for files in written:
        if timed >= commits and time.perf_counter() - wall0 >= TIMED_SECONDS:
            break
        batch += 1
        timed += 1
        table.add_files(files, batch)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    commits = timed
    assert table.transaction_version() == batch
    log = root / "bronze" / "_delta_log"
    point = {**built, "log_files_after": len(os.listdir(log)),
             "open_seconds": round(opened, 2),
             "refresh_nothing_new_cpu_ms": round(refresh * 1e3, 1),
             "commits_timed": commits,
             "cpu_ms_a_commit": round(cpu / commits * 1e3, 1),
             "wall_ms_a_commit": round(wall / commits * 1e3, 1)}
    print(f"  retention {retention_minutes:g} min, {days:g} days: {point}", flush=True)
    return point


def week(days: list[float], retentions: list[float], commits: int) -> None:
    trigger = SparkConfig().trigger_seconds
    result: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "cadence": f"one bronze commit a trigger, spark.trigger_seconds {trigger:g} "
                   f"({round(86400 / trigger)} a day)",
        "writer": "read_tasks (DeltaRsTable.add_files), local file system",
        "log": "built (see the benchmark's docstring), then committed to by the job's sink",
        "points": {}}
    work = Path(tempfile.mkdtemp(prefix="bench-delta-log-week-"))
    try:
        for minutes in retentions:
            points = result["points"][f"retention {minutes:g} minutes"] = []
            for span in days:
                root = work / f"r{minutes:g}-d{span:g}"
                points.append(week_point(root, span, minutes, trigger, commits))
                shutil.rmtree(root)
            first, last = points[0]["cpu_ms_a_commit"], points[-1]["cpu_ms_a_commit"]
            points.append({f"cpu a commit, {days[-1]:g} days against {days[0]:g}":
                           round(last / first, 2)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    WEEK_RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=1800,
                        help="commits before the last measurement (default 1800; with the "
                             "driver writing and Delta's default log, the last commits take "
                             "about 0.1 ms for every commit before them)")
    parser.add_argument("--days", type=float, nargs="+",
                        help="instead: the commit's cost after these days of commits at the "
                             "job's cadence, on a built log (writes delta-log-week.json)")
    parser.add_argument("--retention-minutes", type=float, nargs="+",
                        default=[DeltaConfig().log_retention_minutes, 7 * 1440.0],
                        help="with --days: the log retentions to build for (default: the "
                             "job's default and 7 days)")
    parser.add_argument("--timed", type=int, default=10,
                        help="with --days: the fewest commits timed at each point, a "
                             "checkpoint among them (default 10: a week's log makes each "
                             "take seconds); more, up to 300, while they take under 10 s")
    args = parser.parse_args()
    if args.days:
        week(sorted(args.days), args.retention_minutes, args.timed)
        return
    sizes = sorted({100, args.commits // 6, args.commits // 2, args.commits})
    result: dict[str, Any] = {"started": datetime.now(UTC).isoformat(timespec="seconds"),
                              "measured_commits_a_point": MEASURE}
    work = Path(tempfile.mkdtemp(prefix="bench-delta-log-"))
    try:
        for writer in ("read_tasks", "driver"):
            for label, minutes in (("default retention (30 days)", None),
                                   ("retention 1 second (cleanup at each checkpoint)", 1 / 60)):
                root = work / f"{writer}-{label.split()[0]}"
                result[f"{writer}, {label}"] = run(root, writer, minutes, sizes)
                shutil.rmtree(root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
