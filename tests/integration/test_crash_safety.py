"""SIGKILL at exact places between Delta commits and at random times, seven runs in a row:
the tables end equal to an uninterrupted run over the same input."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from streaming.config import load_config
from tests.conftest import wait_for
from tests.integration.helpers import (
    assert_same_tables,
    comparable,
    config_file,
    count,
    run_to_end,
    running_job,
    start_job,
)
from tests.integration.test_skeleton import faulted_simulation

pytestmark = pytest.mark.integration
PER_TRIGGER = 2


def test_six_kills_leave_tables_equal_to_an_uninterrupted_run(broker, topic, tmp_path, spark):
    sim = faulted_simulation(broker.bootstrap, topic, minutes=6)
    expected = sim.truth.samples_total
    reference = tmp_path / "reference"
    # 2 records per trigger: enough batches that the input outlasts the six kills
    reference_config = load_config(config_file(reference, broker.bootstrap, topic,
                                               max_offsets=PER_TRIGGER))
    with running_job(spark, reference_config) as job:  # same code, in this process
        wait_for(lambda: count(reference / "delta", "bronze") >= expected, 300, "reference run")
        wait_for(lambda: not job.query.status["isTriggerActive"], 60, "the last batch")

    crashed = tmp_path / "crashed"
    config = config_file(crashed, broker.bootstrap, topic, max_offsets=PER_TRIGGER)
    root, log = crashed / "delta", tmp_path / "crashed.log"
    kills = 0
    # signals_deferred: bronze and Spark's commit in, no signal written by their thread yet
    for failpoint in ("bronze_committed:2", "broker_signals_committed:2",
                      "incidents_committed:3", "signals_deferred:3"):
        os.environ["KAFKA_HEALTH_FAILPOINTS"] = failpoint
        try:
            job = start_job(config, log)
        finally:
            del os.environ["KAFKA_HEALTH_FAILPOINTS"]
        assert job.wait(300) == -signal.SIGKILL, f"{failpoint} was not reached"
        kills += 1
    rng = random.Random(7)
    after_deferred_kill = log.stat().st_size
    for _ in range(2):
        before = count(root, "bronze")
        job = start_job(config, log)
        wait_for(lambda b=before: count(root, "bronze") > b, 180, "progress after restart")
        recovered = log.read_bytes()[after_deferred_kill:]
        assert b"recomputing them from bronze" in recovered, "the pending signals were lost"
        time.sleep(rng.uniform(0.0, 1.5))  # a random moment: mid-batch, mid-commit or idle
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
        kills += 1
    assert kills == 6 and count(root, "bronze") < expected, "the kills came too late"
    run_to_end(config, root, expected, log)

    assert_same_tables(root, reference / "delta")
    assert len(comparable(root, "incidents")) > 0, "the scenario must produce incidents"
