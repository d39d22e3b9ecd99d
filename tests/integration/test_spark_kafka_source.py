"""source.engine spark, for real: a local Spark session with Spark's kafka source on its
classpath (the spark-kafka component resolved by Maven, through streaming.runtime.jvm_jars) reads a
topic of the one-node metrics Kafka cluster, and the decoded rows equal those of the python
engine over the same records: Jolokia and Prometheus records with keys, one naming its
cluster and broker only in headers, a record that is not JSON, a tombstone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from confluent_kafka import Producer

from streaming.config import load_config
from streaming.runtime.jvm_jars import MissingJars, session_jars
from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Simulator

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 240.0


def produce_records(bootstrap: str, topic: str) -> int:
    produced = 0
    start = float(int(time.time()) - 600)
    for fmt, cluster in (("jolokia", "c1"), ("prometheus-strimzi", "c2")):
        sim = Simulator(ClusterModel(cluster, [1, 2, 3], {"orders": 2}), bootstrap, topic, fmt=fmt,
                        scrape_interval=15, start=start)
        sim.run(45)
        produced += sim.records
    read = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount",
                        "attribute": "Value"}, "value": 2, "timestamp": int(start) + 60,
            "status": 200}
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=json.dumps(read).encode(), partition=0,
                     headers=[("cluster", b"c3"), ("broker", b"7")])
    producer.produce(topic, value=b"\xff not json", key=b"c1/1", partition=1)
    producer.produce(topic, value=None, key=b"c1/2", partition=2)
    assert producer.flush(30) == 0
    return produced + 3


def comparable(path: Path) -> list[tuple]:
    with pa.memory_map(str(path)) as source:
        table = pa.ipc.open_file(source).read_all()
    rows = table.drop_columns(["ingest_ts"]).to_pylist()
    return sorted(tuple((k, repr(v)) for k, v in row.items()) for row in rows)


def test_spark_engine_decodes_what_the_python_engine_decodes(broker, topic, tmp_path: Path) -> None:
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump({
        "spark": {"checkpoint": str(tmp_path / "checkpoint")},
        "source": {"bootstrap_servers": broker.bootstrap,
                   "topics": [{"name": topic, "format": "auto"}],
                   "starting_offsets": "earliest", "max_offsets_per_trigger": 50},
        # the driver writes: the harness compares the decoded rows that cross to it
        "delta": {"path": str(tmp_path / "delta"), "bronze_writers": "driver"},
        "quality": {"max_timestamp_skew_seconds": 86400},
    }))
    config = load_config(config_path, environ={})
    config.source.engine = "spark"
    try:
        jars = session_jars(config)
    except MissingJars as err:
        pytest.skip(f"spark-kafka is not resolved: {err}")
    assert any("spark-sql-kafka-0-10_2.13" in Path(jar).name for jar in jars)

    expected = produce_records(broker.bootstrap, topic)
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.spark_kafka_engines", str(config_path),
         str(out), str(expected), str(TIMEOUT)],
        cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT * 2 + 120)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    report = json.loads((out / "report.json").read_text())
    print(f"records {expected}; spark {report['spark']}; python {report['python']}")
    assert report["spark"]["records"] == report["python"]["records"] == expected
    assert report["spark"]["batches"] > 1, "maxOffsetsPerTrigger 50 must split the topic"

    spark_rows, python_rows = comparable(out / "spark.arrow"), comparable(out / "python.arrow")
    assert len(spark_rows) == report["spark"]["rows"] > expected
    assert spark_rows == python_rows
    decoded = {dict(row)["cluster"] for row in spark_rows}
    assert {"'c1'", "'c2'", "'c3'"} <= decoded
    rejected = sorted(dict(row)["reject_reason"] for row in spark_rows
                      if dict(row)["reject_reason"] != "None")
    print(f"decoded rows {len(spark_rows)}, clusters {sorted(decoded)}, rejected {rejected}")
    assert len(rejected) == 2, "the record that is not JSON and the tombstone are quarantined"
