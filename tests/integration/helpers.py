"""Helpers for tests that run the real streaming job."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from streaming.broker import free_port
from streaming.config import Config, load_config
from streaming.exporter import Exporter
from streaming.job import Job
from tests.conftest import wait_for

TRUTH_FIELDS = (
    "samples", "under_min_isr_max", "under_min_isr_last", "at_min_isr_max", "at_min_isr_last",
    "under_replicated_max", "under_replicated_last", "offline_partitions_max",
    "active_controller_last", "isr_shrinks_increase", "isr_expands_increase",
    "unclean_elections_increase", "partition_count_last", "leader_count_last",
    "request_queue_size_max",
)


def table(root: str | Path, name: str) -> pd.DataFrame:
    try:
        return DeltaTable(str(Path(root) / name)).to_pandas()
    except TableNotFoundError:
        return pd.DataFrame()


def count(root: str | Path, name: str) -> int:
    try:
        return DeltaTable(str(Path(root) / name)).to_pyarrow_dataset().count_rows()
    except TableNotFoundError:
        return 0


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
                trigger_seconds: float = 0.2) -> Path:
    """A config file for `kafka-health run` on the embedded broker under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "spark": {"checkpoint": str(directory / "checkpoint"), "trigger_seconds": trigger_seconds},
        "source": {"bootstrap_servers": bootstrap, "embedded_broker": True,
                   "topics": [{"name": topic, "format": "jolokia"}],
                   "max_offsets_per_trigger": max_offsets},
        "delta": {"path": str(directory / "delta")},
        "quality": {"max_timestamp_skew_seconds": 86400},
        "exporter": {"port": free_port()},
    }
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
