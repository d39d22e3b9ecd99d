"""SIGKILL at exact places between Delta commits and at a random time, seven runs in a row,
with the checkpoint and every table on an S3-compatible server (the deployment's object
store; a local checkpoint's restart is tests/integration/test_restart.py): the tables end
equal to an uninterrupted run over the same input.

The crashed job's read tasks write bronze and quarantine (delta.bronze_writers:
read_tasks, to S3 with the secret key by reference), the uninterrupted one's driver does:
so the tables of the two ways are compared too. A kill between the tasks' writes and the
driver's commit leaves files no commit references; the vacuum removes them."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable

from streaming.config import load_config
from streaming.locations import filesystem, join
from streaming.sinks.delta_rs import DeltaRsTable
from tests.conftest import wait_for
from tests.integration.helpers import (
    assert_same_tables,
    comparable,
    config_file,
    count,
    exit_code,
    run_to_end,
    running_job,
    start_job,
)
from tests.integration.test_skeleton import faulted_simulation
from tests.s3 import BUCKET, KEY_ID, SECRET, s3_server

pytestmark = pytest.mark.integration
# 2 records per trigger while the job is killed: enough batches that the input outlasts
# the six kills; the run to the end and the reference take larger bites
PER_TRIGGER = 2
REFERENCE_PER_TRIGGER = 12
FINAL_PER_TRIGGER = 20


def test_six_kills_on_object_storage_leave_tables_equal_to_an_uninterrupted_run(
        broker, topic, tmp_path, spark, monkeypatch):
    sim = faulted_simulation(broker.bootstrap, topic, minutes=6)
    expected = sim.truth.samples_total
    reference = tmp_path / "reference"
    # Batched otherwise than the crashed runs: the tables must not depend on where the
    # batches fell, nor on where the kills fell
    reference_config = load_config(config_file(reference, broker.bootstrap, topic,
                                               max_offsets=REFERENCE_PER_TRIGGER,
                                               delta={"bronze_writers": "driver"}))
    with running_job(spark, reference_config) as job:  # same code, in this process
        wait_for(lambda: count(reference / "delta", "bronze") >= expected, 300, "reference run")
        wait_for(lambda: not job.query.status["isTriggerActive"], 60, "the last batch")

    with s3_server() as s3:
        crash_and_recover(s3.endpoint, broker, topic, tmp_path, expected, monkeypatch)
        options = s3.storage_options()
        root = f"s3://{BUCKET}/crashed/delta"
        assert_same_tables(root, reference / "delta", got_options=options)
        assert len(comparable(root, "incidents", options)) > 0, (
            "the scenario must produce incidents")
        orphans = untracked(root, "bronze", options)
        assert orphans, "the kill between the tasks' writes and the commit left no files"
        DeltaRsTable(root, "bronze", "test", options).vacuum(0, untracked=True)
        assert not untracked(root, "bronze", options)
        assert_same_tables(root, reference / "delta", got_options=options, names=("bronze",))


def untracked(root: str, table: str, options: dict[str, str]) -> set[str]:
    """Parquet files in a table's folder that its log does not reference."""
    location = join(root, table)
    tracked = {uri.rsplit("/", 1)[-1]
               for uri in DeltaTable(location, storage_options=options).file_uris()}
    fs, path = filesystem(location, options)
    found = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    return {info.base_name for info in found if info.base_name.endswith(".parquet")
            and "_delta_log" not in info.path} - tracked


def crash_and_recover(endpoint: str, broker, topic: str, tmp_path, expected: int,
                      monkeypatch) -> None:
    """Kill `kafka-health run` six times (five at failpoints between commits, one at a random
    moment after a restart), then run it to the end. Spark's checkpoint goes through S3A
    (s3a://), delta-rs through s3://, both with the options of delta.storage_options (the
    secret key by reference, from the environment)."""
    monkeypatch.setenv("KH_TEST_S3_SECRET", SECRET)
    # Spark's scratch folders of the crashed runs, which a SIGKILL leaves behind: they must
    # not hold a copy of the S3A jars (600 MB a start)
    scratch = tmp_path / "spark-local"
    scratch.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(scratch))
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1",
               "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": KEY_ID}

    def crashed_config(name: str, per_trigger: int) -> Path:
        return config_file(
            tmp_path / name, broker.bootstrap, topic, max_offsets=per_trigger,
            spark={"checkpoint": f"s3a://{BUCKET}/crashed/checkpoint"},
            # Every batch here reads up to the cap: signal rounds as often as a live
            # stream's, so that the failpoints counted in rounds come before the topic's end.
            delta={"path": f"s3://{BUCKET}/crashed/delta", "storage_options": options,
                   "bronze_writers": "read_tasks", "signals_every_seconds_catching_up": 2,
                   "storage_secrets": {"AWS_SECRET_ACCESS_KEY": {"env": "KH_TEST_S3_SECRET"}}})

    config = crashed_config("crashed", PER_TRIGGER)
    readable = {**options, "AWS_SECRET_ACCESS_KEY": SECRET}
    root, log = f"s3://{BUCKET}/crashed/delta", tmp_path / "crashed.log"

    def bronze() -> int:
        return count(root, "bronze", readable)

    kills = 0
    # signals_deferred: bronze and Spark's commit in, no signal written by their thread yet
    # task_files_written: the read tasks' files are written, the driver has not committed
    for failpoint in ("task_files_written:2", "bronze_committed:2", "broker_signals_committed:2",
                      "incidents_committed:3", "signals_deferred:3"):
        os.environ["KAFKA_HEALTH_FAILPOINTS"] = failpoint
        try:
            job = start_job(config, log)
        finally:
            del os.environ["KAFKA_HEALTH_FAILPOINTS"]
        code = exit_code(job, 300, log, f"{failpoint} was not reached")
        assert code == -signal.SIGKILL, f"{failpoint}: exit code {code}, not SIGKILL"
        kills += 1
    rng = random.Random(7)
    after_deferred_kill = log.stat().st_size
    before = bronze()
    job = start_job(config, log)
    wait_for(lambda: bronze() > before, 180, "progress after restart")
    recovered = log.read_bytes()[after_deferred_kill:]
    assert b"recomputing them from bronze" in recovered, "the pending signals were lost"
    time.sleep(rng.uniform(0.0, 1.5))  # a random moment: mid-batch, mid-commit or idle
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(30)
    kills += 1
    assert kills == 6 and bronze() < expected, "the kills came too late"
    assert list(scratch.iterdir()), "SPARK_LOCAL_DIRS was not Spark's scratch folder"
    assert not list(scratch.rglob("*.jar")), "each killed start left its jars behind"
    # the same checkpoint and tables, a larger trigger: Spark's offsets carry over
    run_to_end(crashed_config("final", FINAL_PER_TRIGGER), root, expected, log,
               storage_options=readable)
