"""Scale-out on a real Spark standalone cluster: the same job and config, with only
spark.master changed, over a 4-partition topic, writes the same Delta tables as `local[2]`.

The cluster (one master, two workers × 1 core) is started from the pip pyspark with
`spark-class` on loopback; the executors run in their own JVMs with their own Python
workers, so this exercises what `local[*]` hides: pickling the source reader and the
decoder to other processes, input partitions spread over executors, and the driver-side
foreachBatch collecting results from them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from streaming.testbed.kafka import create_topic, free_port
from tests.benchmarks.bench_pipeline import prefill, single_sample_messages
from tests.conftest import wait_for
from tests.integration.helpers import (
    COMPARED_TABLES,
    assert_same_tables,
    config_file,
    count,
    run_to_end,
)
from tests.integration.test_skeleton import faulted_simulation
from tests.spark_cluster import StandaloneCluster, driver_ui_conf, executors

pytestmark = pytest.mark.integration
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


def test_standalone_cluster_writes_the_same_tables_as_local(broker, standalone, tmp_path,
                                                            monkeypatch):
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

    on_cluster = tmp_path / "standalone"
    seen = run_to_end(
        config_file(on_cluster, broker.bootstrap, topic, max_offsets=CAP, source=SOURCE,
                    spark={"master": standalone.url, "conf": conf}),
        on_cluster / "delta", expected, tmp_path / "standalone.log", before_stop=executors_at_work)
    assert len(seen["executors"]) == 2, f"tasks ran on {seen['executors']} only"
    assert len({e["hostPort"] for e in seen["executors"]}) == 2
    assert seen["app"] is not None and seen["app"]["cores"] == 2, seen["app"]
    assert [w["coresused"] for w in seen["workers"]] == [1, 1], seen["workers"]

    local = tmp_path / "local"
    run_to_end(config_file(local, broker.bootstrap, topic, max_offsets=CAP, source=SOURCE,
                           spark={"master": "local[2]", "conf": conf}),
               local / "delta", expected, tmp_path / "local.log")

    for name in COMPARED_TABLES:  # an empty table on both sides would prove nothing
        assert count(local / "delta", name) > 0, f"{name}: the input must produce rows"
    assert count(on_cluster / "delta", "bronze") == expected
    assert_same_tables(on_cluster / "delta", local / "delta")
