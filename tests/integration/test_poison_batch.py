"""The real job with a record whose samples make its driver stages raise: it fails once,
and the restarted job quarantines that record as poison_record and goes on."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Producer

from tests.conftest import wait_for
from tests.hostile import URP, good_jolokia, jolokia
from tests.integration.helpers import config_file, start_job, table

pytestmark = pytest.mark.integration
POISON = 4242.5


def test_a_poison_record_fails_the_job_once_then_is_quarantined(broker, topic, tmp_path):
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    now = time.time()
    records = [good_jolokia("c1", 1, now - 60 + i) for i in range(3)]
    records += [jolokia(URP, {"Value": POISON}, now - 30)]
    records += [good_jolokia("c1", 1, now - 20 + i) for i in range(3)]
    for value in records:  # one partition: the record's offset is its place here
        producer.produce(topic, value=value, key=b"c1/1", partition=0)
    assert producer.flush(30) == 0
    config = config_file(tmp_path, broker.bootstrap, topic, max_offsets=100)
    root, log = tmp_path / "delta", tmp_path / "job.log"
    os.environ["KAFKA_HEALTH_POISON_VALUE"] = str(POISON)
    try:
        first = start_job(config, log)
        assert first.wait(300) == 1, log.read_text()[-3000:]  # the batch's signals failed
        assert (tmp_path / "checkpoint" / "kafka_health_failed_batch.json").exists()
        second = start_job(config, log)
    finally:
        del os.environ["KAFKA_HEALTH_POISON_VALUE"]
    try:
        def settled() -> bool:
            quarantine = table(root, "quarantine")
            return len(quarantine) == 1 and set(table(root, "bronze")["source_offset"]) == {
                0, 1, 2, 4, 5, 6}
        wait_for(settled, 180, "the poison record quarantined, the good ones in bronze")
        quarantine = table(root, "quarantine")
        assert quarantine["reason"].tolist() == ["poison_record: InjectedPoison"]
        assert quarantine["source_offset"].tolist() == [3]
        producer.produce(topic, value=good_jolokia("c1", 1, time.time()), key=b"c1/1",
                         partition=0)
        assert producer.flush(30) == 0
        wait_for(lambda: 7 in set(table(root, "bronze")["source_offset"]), 120,
                 "a later batch in bronze")
        assert len(table(root, "quarantine")) == 1
    finally:
        second.send_signal(signal.SIGTERM)
        code = second.wait(120)
    assert code == 0, log.read_text()[-3000:]
