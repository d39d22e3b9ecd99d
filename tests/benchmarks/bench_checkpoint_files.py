"""One checkpoint log file, written the way Spark writes each micro-batch's offset and
commit logs: `CheckpointFileManager.createAtomic` (a temp file, then a rename), on a local
directory, with Spark's default manager (Hadoop FileContext) and with the FileSystem-based
one the job selects for local checkpoints (`job.spark_conf`).

Without Hadoop's native library, its local file system runs `chmod` for each file it
creates and FileContext runs `readlink` for each path it resolves, each a process the JVM
spawns; both happen twice a micro-batch on the batch's serial path. Rounds alternate the
managers so that the machine's drift falls on both.

    .venv/bin/python tests/benchmarks/bench_checkpoint_files.py [--files 100 --rounds 3]
Writes tests/benchmarks/results/checkpoint-files.json; prints the figures last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from streaming.config import load_config  # noqa: E402
from streaming.runtime.spark_session import build_spark  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "checkpoint-files.json"
MANAGERS = {
    "FileContext (Spark's default)":
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileContextBasedCheckpointFileManager",
    "FileSystem (the job's, local checkpoints)":
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager",
}
# an offset-log entry of a 3-partition topic, about the size Spark writes
ENTRY = b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1795560000000,"conf":{}}\n' + \
    b'{"metrics-0":{"0":1250000,"1":1250001,"2":1249999}}\n'


def write_files(spark, manager: str, files: int) -> list[float]:
    """Seconds per createAtomic + write + close, `files` files into a fresh directory."""
    jvm = spark.sparkContext._jvm
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop_conf.set("spark.sql.streaming.checkpointFileManagerClass", manager)
    directory = tempfile.mkdtemp(prefix="kh-ckpt-")
    files_api = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    manager_object = files_api.create(jvm.org.apache.hadoop.fs.Path(f"file://{directory}"),
                                      hadoop_conf)
    assert manager_object.getClass().getName() == manager, manager_object.getClass().getName()
    seconds = []
    for n in range(files):
        path = jvm.org.apache.hadoop.fs.Path(f"file://{directory}/{n}")
        started = time.perf_counter()
        out = manager_object.createAtomic(path, False)
        out.write(bytearray(ENTRY))
        out.close()
        seconds.append(time.perf_counter() - started)
    written = sorted(name for name in os.listdir(directory) if not name.startswith("."))
    assert written == sorted(str(n) for n in range(files)), "every file renamed into place"
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100, help="files per manager and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spark = build_spark(load_config(None, environ={"KAFKA_HEALTH__SPARK__MASTER": "local[1]"}))
    timings: dict[str, list[float]] = {name: [] for name in MANAGERS}
    for manager in MANAGERS.values():  # warm-up: class loading, JIT
        write_files(spark, manager, 10)
    for _ in range(args.rounds):
        for name, manager in MANAGERS.items():
            timings[name] += write_files(spark, manager, args.files)
    spark.stop()
    figures = {name: {"median_ms": round(statistics.median(s) * 1000, 1),
                      "p90_ms": round(sorted(s)[int(len(s) * 0.9)] * 1000, 1),
                      "files": len(s)} for name, s in timings.items()}
    result = {"benchmark": "checkpoint_files",
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "what": "CheckpointFileManager.createAtomic + write + close of one offset-log "
                      "entry on a local directory", "managers": figures}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    for name, figure in figures.items():
        print(f"{name}: median {figure['median_ms']} ms, p90 {figure['p90_ms']} ms a file "
              f"over {figure['files']} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
