"""Helpers for tests that run the real streaming job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from streaming.config import Config, load_config
from streaming.exporter import Exporter
from streaming.job import Job
from streaming.locations import join
from streaming.runtime.planning_daemons import PLANNING_MODULES
from streaming.testbed.kafka import free_port
from tests.benchmarks.proctree import process_tree
from tests.conftest import wait_for

TRUTH_FIELDS = (
    "samples", "under_min_isr_max", "under_min_isr_last", "at_min_isr_max", "at_min_isr_last",
    "under_replicated_max", "under_replicated_last", "offline_partitions_max",
    "active_controller_last", "isr_shrinks_increase", "isr_expands_increase",
    "unclean_elections_increase", "partition_count_last", "leader_count_last",
    "request_queue_size_max",
)
# Tables two runs over the same input must agree on (dq_results is left out: it validates a
# sample of rows on a batch cadence and records when it ran).
COMPARED_TABLES = ("bronze", "quarantine", "broker_signals", "cluster_signals", "incidents",
                   "partition_headroom")
# Columns that legitimately differ between runs: wall-clock stamps of when a row was decoded
# (ingest_ts, taken by whichever executor ran the decode) or last upserted (updated_at).
# Checkpoint app ids live only in the Delta log's transactions, never in a column, so
# they need no exclusion; everything else is a function of the input and must match.
VOLATILE = {"ingest_ts", "updated_at"}
WALL_CLOCK_STAMPS = {"withdrawn_at"}


Options = dict[str, str] | None  # delta-rs storage options of a remote root


def table(root: str | Path, name: str, storage_options: Options = None) -> pd.DataFrame:
    try:
        return DeltaTable(join(str(root), name), storage_options=storage_options).to_pandas()
    except TableNotFoundError:
        return pd.DataFrame()


def count(root: str | Path, name: str, storage_options: Options = None) -> int:
    try:
        return DeltaTable(join(str(root), name),
                          storage_options=storage_options).to_pyarrow_dataset().count_rows()
    except TableNotFoundError:
        return 0


def comparable(root: str | Path, name: str, storage_options: Options = None) -> pd.DataFrame:
    """A table without its volatile columns, maps made orderable, rows in a canonical order."""
    frame = table(root, name, storage_options)
    if frame.empty:
        return frame
    frame = frame.drop(columns=[c for c in frame.columns if c in VOLATILE])
    for column in WALL_CLOCK_STAMPS & set(frame.columns):  # when varies, whether does not
        frame[column] = frame[column].notna()
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, list | dict)).any():
            frame[column] = frame[column].map(lambda v: repr(sorted(dict(v).items())))
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def assert_same_tables(got: str | Path, want: str | Path,
                       names: tuple[str, ...] = COMPARED_TABLES,
                       got_options: Options = None) -> None:
    """Every table under `got` equals the one under `want`, row for row, volatile columns aside."""
    for name in names:
        mine, theirs = comparable(got, name, got_options), comparable(want, name)
        assert len(mine) == len(theirs), f"{name}: {len(mine)} rows vs {len(theirs)} in {want}"
        pd.testing.assert_frame_equal(mine, theirs, obj=name)


def planning_daemons() -> list[str]:
    """Command lines of Spark's data-source planning daemons (and their workers) that run
    below this process: `python -m pyspark.daemon pyspark.sql.worker.<step>`."""
    return [process.cmdline.strip() for process in process_tree(os.getpid())
            if f"pyspark.daemon {PLANNING_MODULES}" in process.cmdline]


def start_job(config_path: Path, log: Path) -> subprocess.Popen[bytes]:
    """`kafka-health run` in its own process group (so a test can SIGKILL the whole tree)."""
    return subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "run", "--config", str(config_path)],
        stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True,  # noqa: SIM115
    )


def exit_code(job: subprocess.Popen[bytes], timeout: float, log: Path, what: str) -> int:
    """The job's exit code within `timeout` seconds; past it, the whole process group is
    killed and the failure carries the log's tail (what the job was doing instead)."""
    try:
        return job.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
        raise AssertionError(f"{what} within {timeout:.0f} s; the log's tail:\n"
                             f"{log.read_text(errors='replace')[-4000:]}") from None


def run_to_end(config: Path, root: str | Path, expected: int, log: Path,
               before_stop: Callable[[], Any] | None = None, timeout: float = 300,
               storage_options: Options = None) -> Any:
    """Run `kafka-health run` until `expected` bronze rows, then SIGTERM (stops after the
    current batch) and require exit 0. `before_stop` runs while the job is still up (e.g. to
    ask its Spark UI what ran where); its result is returned."""
    job = start_job(config, log)
    observed = None
    try:
        wait_for(lambda: count(root, "bronze", storage_options) >= expected, timeout,
                 f"{expected} bronze rows")
        if before_stop is not None:
            observed = before_stop()
    finally:
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0, log.read_text()[-3000:]
    return observed


@contextmanager
def running_job(spark: Any, env: dict[str, str] | Config, exporter: Exporter | None = None):
    config = env if isinstance(env, Config) else load_config(None, environ=env)
    job = Job(config, spark=spark, exporter=exporter, printer=None)
    job.start()
    try:
        yield job
    finally:
        job.stop()


def run_until(spark: Any, env: dict[str, str], condition: Callable[[], Any], timeout: float,
              what: str, exporter: Exporter | None = None) -> None:
    with running_job(spark, env, exporter) as job:
        def done() -> Any:
            if not job.query.isActive:
                raise AssertionError(f"query stopped: {job.query.exception()}")
            return condition()

        wait_for(done, timeout, what)
        wait_for(lambda: not job.query.status["isTriggerActive"], 60, "the batch to finish")


def truth_mismatches(signals: pd.DataFrame, truth_rows: list[dict[str, Any]],
                     fields: tuple[str, ...] = TRUTH_FIELDS) -> list[str]:
    """Window-by-window differences between the job's broker_signals and the model."""
    got = {
        (r["cluster"], r["broker"], pd.Timestamp(r["window_start"]).isoformat()): r
        for r in signals.to_dict("records")
    }
    problems = []
    expected_keys = set()
    for row in truth_rows:
        key = (row["cluster"], row["broker"], pd.Timestamp(row["window_start"]).isoformat())
        expected_keys.add(key)
        actual = got.get(key)
        if actual is None:
            problems.append(f"missing window {key}")
            continue
        for name in fields:
            if name in row and abs(float(actual[name]) - float(row[name])) > 1e-9:
                problems.append(f"{key} {name}: job {actual[name]} != truth {row[name]}")
    for key in set(got) - expected_keys:
        problems.append(f"unexpected window {key}")
    return problems


def config_file(directory: Path, bootstrap: str, topic: str, max_offsets: int = 6,
                trigger_seconds: float = 0.2, spark: dict[str, Any] | None = None,
                source: dict[str, Any] | None = None, delta: dict[str, Any] | None = None,
                store: str | None = None) -> Path:
    """A config file for `kafka-health run` on the metrics cluster under `directory`;
    `spark`, `source` and `delta` add keys to those sections. With `store` (a URL such as
    s3a://bucket/run) the checkpoint and the tables live there instead of in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    base = store or str(directory)
    config = {
        "spark": {"checkpoint": join(base, "checkpoint"), "trigger_seconds": trigger_seconds,
                  **(spark or {})},
        "source": {"bootstrap_servers": bootstrap,
                   "topics": [{"name": topic, "format": "jolokia"}],
                   "max_offsets_per_trigger": max_offsets, **(source or {})},
        "delta": {"path": join(base, "delta"), **(delta or {})},
        "quality": {"max_timestamp_skew_seconds": 86400},
        "exporter": {"port": free_port()},
    }
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
