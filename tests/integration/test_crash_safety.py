"""SIGKILL at exact places between Delta commits and at random times, six runs in a row:
the tables end equal to an uninterrupted run over the same input."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from streaming.config import load_config
from tests.conftest import wait_for
from tests.integration.helpers import config_file, count, running_job, table
from tests.integration.test_restart import start_job
from tests.integration.test_skeleton import faulted_simulation

pytestmark = pytest.mark.integration
TABLES = ("bronze", "quarantine", "broker_signals", "cluster_signals", "incidents",
          "partition_headroom")
VOLATILE = {"ingest_ts", "updated_at", "evaluated_at_wall"}


def comparable(root: Path, name: str) -> pd.DataFrame:
    frame = table(root, name)
    if frame.empty:
        return frame
    frame = frame.drop(columns=[c for c in frame.columns if c in VOLATILE])
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, list | dict)).any():
            frame[column] = frame[column].map(lambda v: repr(sorted(dict(v).items())))
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def run_to_end(config: Path, root: Path, expected: int, log: Path) -> None:
    job = start_job(config, log)
    try:
        wait_for(lambda: count(root, "bronze") >= expected, 300, f"{expected} bronze rows")
    finally:
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0, log.read_text()[-3000:]


def test_five_kills_leave_tables_equal_to_an_uninterrupted_run(broker, topic, tmp_path, spark):
    sim = faulted_simulation(broker.bootstrap, topic, minutes=6)
    expected = sim.truth.samples_total
    reference = tmp_path / "reference"
    reference_config = load_config(config_file(reference, broker.bootstrap, topic))
    with running_job(spark, reference_config) as job:  # same code, in this process
        wait_for(lambda: count(reference / "delta", "bronze") >= expected, 300, "reference run")
        wait_for(lambda: not job.query.status["isTriggerActive"], 60, "the last batch")

    crashed = tmp_path / "crashed"
    config = config_file(crashed, broker.bootstrap, topic)
    root, log = crashed / "delta", tmp_path / "crashed.log"
    kills = 0
    for failpoint in ("bronze_committed:2", "broker_signals_committed:2",
                      "incidents_committed:3"):
        os.environ["KAFKA_HEALTH_FAILPOINTS"] = failpoint
        try:
            job = start_job(config, log)
        finally:
            del os.environ["KAFKA_HEALTH_FAILPOINTS"]
        assert job.wait(300) == -signal.SIGKILL, f"{failpoint} was not reached"
        kills += 1
    rng = random.Random(7)
    for _ in range(2):
        before = count(root, "bronze")
        job = start_job(config, log)
        wait_for(lambda b=before: count(root, "bronze") > b, 180, "progress after restart")
        time.sleep(rng.uniform(0.0, 1.5))  # a random moment: mid-batch, mid-commit or idle
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
        kills += 1
    assert kills == 5 and count(root, "bronze") < expected, "the kills came too late"
    run_to_end(config, root, expected, log)

    for name in TABLES:
        got, want = comparable(root, name), comparable(reference / "delta", name)
        assert len(got) == len(want), f"{name}: {len(got)} rows vs {len(want)} uninterrupted"
        pd.testing.assert_frame_equal(got, want, obj=name)
    assert len(comparable(root, "incidents")) > 0, "the scenario must produce incidents"
