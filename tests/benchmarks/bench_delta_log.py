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
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from streaming.sinks.delta_rs import DeltaRsTable
from streaming.sinks.task_files import write_task_files

RESULTS = Path(__file__).resolve().parent / "results" / "delta-log.json"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=1800,
                        help="commits before the last measurement (default 1800; with the "
                             "driver writing and Delta's default log, the last commits take "
                             "about 0.1 ms for every commit before them)")
    args = parser.parse_args()
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
