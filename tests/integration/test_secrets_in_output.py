"""Secrets planted in every place a config can hold one never reach the job's output.

The real job runs at its most verbose (`-vv`: Spark, librdkafka and every library logger
on) with a password in an Alertmanager URL's user info, a basic-auth password from the
environment, a SASL password from a secret reference and an S3 secret key in spark.conf,
while it pages an under-min-ISR incident to an Alertmanager that refuses connections (so
the push logs its failures). Its stdout, stderr and /metrics must hold none of them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer

from streaming.testbed.kafka import free_port
from tests.conftest import wait_for
from tests.hostile import jolokia
from tests.integration.helpers import config_file, count

pytestmark = pytest.mark.integration
UMI = "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"
PLANTED = {
    "url_password": "urlpw-Planted-7f3a",
    "am_password": "ampw-Planted-91c2",
    "sasl_password": "sasl-Planted-22b8",
    "s3_secret": "s3-Planted-5d1e",
}


def push_failures(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("kafka_health_pipeline_alert_push_failures_total "):
            return float(line.split()[1])
    return 0.0


def test_planted_secrets_never_reach_the_jobs_output(broker, topic, tmp_path: Path) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    start = (time.time() // 60 - 4) * 60
    for i in range(0, 240, 15):  # four minutes of one broker leading 3 partitions under min ISR
        producer.produce(topic, value=jolokia(UMI, {"Value": 3}, start + i), key=b"c1/1")
    assert producer.flush(30) == 0

    dead_alertmanager = f"http://kh-user:{PLANTED['url_password']}@127.0.0.1:{free_port()}/"
    path = config_file(tmp_path, broker.bootstrap, topic, max_offsets=100,
                       spark={"conf": {"spark.hadoop.fs.s3a.secret.key": PLANTED["s3_secret"]}},
                       source={"kafka": {"sasl.username": "kh-user"},
                               "secrets": {"sasl.password": {"env": "KH_PLANTED_SASL"}}})
    config = yaml.safe_load(path.read_text())
    config["alert_push"] = {"alertmanager_urls": [dead_alertmanager],
                            "kinds": ["under_min_isr"], "username": "kh-user",
                            "password": {"env": "KH_PLANTED_AM"}, "timeout_seconds": 0.5}
    path.write_text(yaml.safe_dump(config))
    port = config["exporter"]["port"]
    env = {**os.environ, "KH_PLANTED_SASL": PLANTED["sasl_password"],
           "KH_PLANTED_AM": PLANTED["am_password"]}
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    job = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "run", "-vv", "--config", str(path)],
        stdout=open(out, "wb"), stderr=open(err, "wb"), env=env,  # noqa: SIM115
        start_new_session=True)
    try:
        root = tmp_path / "delta"
        wait_for(lambda: count(root, "incidents") > 0 and push_failures(port) > 0, 240,
                 "an under-min-ISR incident and a failed push to the dead Alertmanager")
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    finally:
        job.send_signal(signal.SIGTERM)
        code = job.wait(120)
    logs = out.read_text(errors="replace") + err.read_text(errors="replace")
    assert code == 0, logs[-3000:]
    assert "127.0.0.1" in logs and len(logs) > 1000, \
        "the job spoke at -vv, the push named its Alertmanager (else the scan proves nothing)"
    for name, value in PLANTED.items():
        assert value not in logs, f"{name} printed by the job"
        assert value.encode() not in metrics, f"{name} on /metrics"
