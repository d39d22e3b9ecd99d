"""`kafka-health peek` against a real Kafka topic holding every format and hostile records."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from streaming.cli import main
from streaming.logsetup import kafka_logger
from streaming.simulate.formats import ENCODERS
from streaming.simulate.model import ClusterModel
from streaming.simulate.samples import broker_samples
from tests.hostile import malformed

pytestmark = pytest.mark.integration
ENCODED = {"jolokia": 1, "prometheus-strimzi": 2, "otlp": 3, "telegraf": 1}  # format: broker


def produce(bootstrap: str, topic: str) -> int:
    """One scrape of cluster c1 in each format, then two records no job can use."""
    now = time.time()
    model = ClusterModel("c1", [1, 2, 3], {"orders": 3})
    records = [pair for encoder, broker in ENCODED.items()
               for pair in ENCODERS[encoder]("c1", broker, now,
                                             broker_samples(model, broker, 15.0))]
    bad = {h.name: h for h in malformed(now, random.Random(7), b"c1/1")}
    records += [(bad[name].key, bad[name].value) for name in ("non-JSON", "negative counter")]
    producer = Producer({"bootstrap.servers": bootstrap, "logger": kafka_logger()})
    first_ms = int(now * 1000)
    for i, (key, value) in enumerate(records):
        # a millisecond apart: peek orders records across partitions by record time
        producer.produce(topic, value=value, key=key, timestamp=first_ms + i)
    assert producer.flush(30) == 0
    return len(records)


def test_peek_shows_formats_identities_signals_and_quarantine(
        broker: Any, topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    produced = produce(broker.bootstrap, topic)
    assert main(["peek", "--bootstrap", broker.bootstrap, "--topic", topic,
                 "-n", str(produced), "--timeout", "30"]) == 0
    out = capsys.readouterr().out
    assert f"{produced} record(s) of {topic}" in out
    for name in ("jolokia", "prometheus", "otlp", "telegraf", "undetected"):
        assert name in out
    for broker_id in {1, 2, 3}:
        assert f"cluster=c1 broker={broker_id}" in out
    assert "(defaulted)" not in out
    assert "QUARANTINED not_json" in out and "not_json x1" in out
    assert "negative_counter x1" in out
    assert "signals this data can feed" in out and "under_min_isr_max" in out


def test_peek_as_json_for_scripts(broker: Any, topic: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    produced = produce(broker.bootstrap, topic)
    assert main(["peek", "--bootstrap-server", broker.bootstrap, "--topic", topic,
                 "-n", str(produced), "--timeout", "30", "-o", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["topic"] == topic and len(found["records"]) == produced
    assert {r["format"] for r in found["records"]} >= {"jolokia", "prometheus", "otlp",
                                                        "telegraf"}
    assert found["reasons"]["not_json"] == 1 and "under_min_isr_max" in found["feeds"]


def test_peek_samples_n_from_either_end(broker: Any, topic: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    produce(broker.bootstrap, topic)
    assert main(["peek", "--bootstrap", broker.bootstrap, "--topic", topic, "-n", "2"]) == 0
    newest = capsys.readouterr().out
    assert "2 record(s)" in newest and "QUARANTINED" in newest  # the two bad ones came last
    assert main(["peek", "--bootstrap", broker.bootstrap, "--topic", topic, "-n", "1",
                 "--from-beginning"]) == 0
    oldest = capsys.readouterr().out
    assert "1 record(s)" in oldest and "jolokia" in oldest and "QUARANTINED" not in oldest


def test_peek_at_a_missing_topic_fails_at_run_time(broker: Any, topic: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The topic is the cluster's state, not a mistyped argument argparse could catch: exit
    1 as kcat's, with the topics that are there."""
    assert main(["peek", "--bootstrap-server", broker.bootstrap,
                 "--topic", topic + "-typo"]) == 1
    err = capsys.readouterr().err
    assert f"peek: no topic '{topic}-typo'" in err and "Traceback" not in err
    # the shared broker holds many tests' topics: the meant one comes first, not by name
    assert err.split("its topics: ")[1].startswith(topic)
