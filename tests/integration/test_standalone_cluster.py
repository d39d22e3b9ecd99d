"""The documented cluster deployment on a real Spark standalone cluster: the same job and
config, submitted with `deploy/spark-submit.sh` and with its checkpoint and tables on an
S3-compatible server, over a 4-partition topic of real Kafka, writes the same Delta tables
as `kafka-health run` on `local[2]` with local tables, and serves its gauges from the
driver.

The cluster (one master, two workers × 1 core) is started from the pip pyspark with
`spark-class` on loopback; the executors run in their own JVMs with their own Python
workers, so this exercises what `local[*]` hides: pickling the source reader and the
decoder to other processes, input partitions spread over executors, and the driver-side
foreachBatch collecting results from them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas
import pytest
import yaml
from confluent_kafka import Producer

from streaming.testbed.kafka import create_topic, free_port
from tests.benchmarks.bench_pipeline import prefill, single_sample_messages
from tests.conftest import wait_for
from tests.integration.helpers import (
    COMPARED_TABLES,
    comparable,
    config_file,
    count,
    run_to_end,
)
from tests.integration.test_skeleton import faulted_simulation
from tests.s3 import BUCKET, KEY_ID, SECRET, s3_server
from tests.spark_cluster import StandaloneCluster, driver_ui_conf, executors

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 4
SINGLE_SAMPLE_MESSAGES = 2000  # ~3 scrape rounds of a 6-broker fleet, round-robin over partitions
CAP = 1100  # records per trigger: two micro-batches, so windows and counters span batches
# Batches this small would be one read task by default: split them over both executors.
SOURCE = {"min_records_per_task": 100}


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneCluster]:
    """Master + 2 workers × 1 core × 1 GB; every process group killed in the finalizer."""
    cluster = StandaloneCluster(tmp_path / "cluster", worker_cores=1, worker_memory="1g")
    try:
        yield cluster.start(workers=2)
    finally:
        cluster.stop()


def fill_topic(bootstrap: str, topic: str) -> int:
    """A fixed input for both runs; returns the bronze rows it must produce.

    One malformed record (quarantine), a faulted 3-broker cluster keyed cluster/broker (so
    incidents open and resolve), and single-sample messages of a second fleet spread
    round-robin over all partitions (one broker's samples read by different executors).
    """
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b"this is not json {", partition=0)
    producer.flush(10)
    sim = faulted_simulation(bootstrap, topic, minutes=6)
    messages = single_sample_messages(SINGLE_SAMPLE_MESSAGES, start=time.time() - 3600)
    prefill(bootstrap, topic, messages, partitions=PARTITIONS)
    return sim.truth.samples_total + len(messages)


def test_spark_submit_to_a_standalone_cluster_on_s3_writes_what_local_writes(
        broker, standalone, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # both drivers: loopback only, like the cluster
    topic = f"metrics-scale-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    expected = fill_topic(broker.bootstrap, topic)
    # Identical settings for both runs but spark.master (and their own checkpoint + tables).
    conf = driver_ui_conf(free_port())
    ui_port = int(conf["spark.ui.port"])

    def both_busy() -> list[dict[str, Any]] | None:
        found = executors(ui_port)
        return found if len(found) == 2 and all(e["totalTasks"] > 0 for e in found) else None

    def executors_at_work() -> dict[str, Any]:
        """While the standalone run is up: what the driver and the master say ran where."""
        busy = wait_for(both_busy, 60, "two executors that ran tasks (driver REST API)")
        return {"executors": busy, "app": standalone.active_app("kafka-health"),
                "workers": standalone.alive_workers()}

    with s3_server() as s3:
        # The read tasks write bronze on the executors, so they read the secret themselves:
        # a file every executor can read, as a mounted secret is (the workers started
        # before this test and do not have the driver's environment)
        secret = tmp_path / "s3-secret"
        secret.write_text(SECRET)
        store = f"s3a://{BUCKET}/standalone"
        options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_REGION": "us-east-1",
                   "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": KEY_ID}
        config = config_file(
            tmp_path / "standalone", broker.bootstrap, topic, max_offsets=CAP, source=SOURCE,
            spark={"conf": conf}, store=store,
            delta={"storage_options": options,
                   "storage_secrets": {"AWS_SECRET_ACCESS_KEY": {"file": str(secret)}}})
        seen = submit_until(config, standalone.url, f"{store}/delta", s3.storage_options(),
                            expected, tmp_path / "standalone.log", executors_at_work)
        on_cluster = {name: comparable(f"{store}/delta", name, s3.storage_options())
                      for name in COMPARED_TABLES}
    assert len(seen["executors"]) == 2, f"tasks ran on {seen['executors']} only"
    assert len({e["hostPort"] for e in seen["executors"]}) == 2
    assert seen["app"] is not None and seen["app"]["cores"] == 2, seen["app"]
    assert [w["coresused"] for w in seen["workers"]] == [1, 1], seen["workers"]
    # the driver's exporter, read while the submitted job ran
    assert "kafka_health_pipeline_up 1.0" in seen["metrics"]
    assert "kafka_health_under_min_isr_partitions{" in seen["metrics"]

    local = tmp_path / "local"
    run_to_end(config_file(local, broker.bootstrap, topic, max_offsets=CAP, source=SOURCE,
                           spark={"master": "local[2]", "conf": conf}),
               local / "delta", expected, tmp_path / "local.log")

    for name in COMPARED_TABLES:  # an empty table on both sides would prove nothing
        assert count(local / "delta", name) > 0, f"{name}: the input must produce rows"
        pandas.testing.assert_frame_equal(on_cluster[name], comparable(local / "delta", name),
                                          obj=name)
    assert len(on_cluster["bronze"]) == expected


def submit_until(config: Path, master: str, root: str, options: dict[str, str], expected: int,
                 log: Path, while_up: Any) -> dict[str, Any]:
    """`deploy/spark-submit.sh` in client mode (the driver runs here) until `expected`
    bronze rows, then SIGTERM (stops after the current batch); `while_up()`'s answer, with
    the driver's /metrics text under "metrics", is returned."""
    port = yaml.safe_load(config.read_text())["exporter"]["port"]
    job = subprocess.Popen(
        ["bash", str(REPO / "deploy" / "spark-submit.sh"), "--config", str(config),
         "--master", master, "--python", sys.executable], stdout=open(log, "ab"), stderr=subprocess.STDOUT,  # noqa: SIM115
        start_new_session=True)
    def landed() -> bool:
        if job.poll() is not None:
            raise AssertionError(f"the submitted job exited {job.returncode}: "
                                 f"{log.read_text()[-3000:]}")
        return count(root, "bronze", options) >= expected

    try:
        wait_for(landed, 300, f"{expected} bronze rows on S3 from the submitted job")
        seen = while_up()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
            seen["metrics"] = page.read().decode()
    finally:
        with contextlib.suppress(ProcessLookupError):  # already gone: its code says why
            os.killpg(job.pid, signal.SIGTERM)
        code = job.wait(120)
    assert code in (0, -signal.SIGTERM, 143), log.read_text()[-3000:]
    return seen
