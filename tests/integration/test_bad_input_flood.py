"""A flood of malformed records (every class, ~90 % of the records) next to a healthy
cluster's metrics, through the real job: it stays up, each bad record is quarantined
exactly once with its reason, and the good records give the same signals as alone."""

from __future__ import annotations

import json
import random
import time
from collections import Counter

import pytest
from confluent_kafka import Producer

from streaming.decode.records import RAW_KEEP_BYTES
from streaming.exporter import Exporter
from streaming.simulate.formats import ENCODERS
from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Simulator
from streaming.simulate.samples import broker_samples
from tests.integration.helpers import count, run_until, table, truth_mismatches

pytestmark = pytest.mark.integration
COPIES = 30
MAX_MESSAGE_BYTES = 64 * 1024
URP = "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"
SHRINKS = "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec"


def jolokia(mbean: str, value: object, ts: float) -> bytes:
    return json.dumps([{"request": {"mbean": mbean, "type": "read"}, "value": value,
                        "timestamp": int(ts), "status": 200}]).encode()


def malformed(now: float, rnd: random.Random) -> dict[str, tuple[bytes, str]]:
    """One record per malformed class -> (bytes, the quarantine reason category expected)."""
    [(_, good)] = ENCODERS["jolokia"]("c1", 1, now, broker_samples(
        ClusterModel("c1", [1, 2, 3], {"orders": 3}), 1, 15.0))
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    adapter_nan = json.dumps({  # prometheus-kafka-adapter writes values as strings
        "labels": {"__name__": "kafka_server_replicamanager_underreplicatedpartitions",
                   "instance": "b1:9404"},
        "name": "kafka_server_replicamanager_underreplicatedpartitions",
        "timestamp": iso, "value": "NaN"}).encode()
    return {
        "non-JSON": (b"UnderReplicatedPartitions=0 broker=1", "not_json"),
        "truncated": (good[: len(good) // 2], "not_json"),
        "huge": (b'{"pad": "' + b"x" * (MAX_MESSAGE_BYTES + 1000) + b'"}', "message_too_large"),
        "wrong type": (jolokia(URP, {"Value": "zero"}, now), "wrong_type"),
        "NaN": (adapter_nan, "non_finite_value"),
        "Inf": (jolokia(URP, {"Value": 1}, now).replace(b'"Value": 1', b'"Value": 1e999'),
                "not_json"),
        "negative counter": (jolokia(SHRINKS, {"Count": -5}, now), "negative_counter"),
        "far future": (jolokia(URP, {"Value": 0}, now + 400 * 86400), "timestamp_skew"),
        "far past": (jolokia(URP, {"Value": 0}, now - 400 * 86400), "timestamp_skew"),
        "unknown format": (json.dumps({"metric": "x", "v": 1}).encode(), "unknown_format"),
        "binary garbage": (bytes(rnd.getrandbits(8) for _ in range(300)), "not_json"),
    }


def test_bad_input_flood_is_quarantined_once_and_good_records_unaffected(
        broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 6})
    start = (int(time.time()) // 60 - 5) * 60.0
    sim = Simulator(model, broker.bootstrap, topic, scrape_interval=15, start=start)
    sim.run(180)
    rnd = random.Random(11)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 1 << 20})
    expected: Counter[str] = Counter()
    for i in range(COPIES):
        for value, reason in malformed(start + 60 + i, rnd).values():
            producer.produce(topic, value=value, key=f"c1/{1 + i % 3}".encode())
            expected[reason] += 1
    assert producer.flush(30) == 0
    bad = sum(expected.values())
    assert bad / (bad + sim.records) > 0.85, "a flood, not a trickle"

    env = {**job_env, "KAFKA_HEALTH__QUALITY__MAX_MESSAGE_BYTES": str(MAX_MESSAGE_BYTES)}
    root = env["KAFKA_HEALTH__DELTA__PATH"]
    exporter = Exporter()
    run_until(spark, env, lambda: count(root, "quarantine") >= bad
              and count(root, "bronze") >= sim.truth.samples_total, 240,
              f"{bad} quarantined records and {sim.truth.samples_total} samples", exporter)

    quarantine = table(root, "quarantine")
    assert len(quarantine) == bad
    assert not quarantine.duplicated(["source_partition", "source_offset"]).any()
    got = Counter(reason.split(":", 1)[0] for reason in quarantine["reason"])
    assert got == expected
    assert quarantine["raw"].map(len).max() <= RAW_KEEP_BYTES, "raw bytes kept, bounded"
    for reason, n in expected.items():
        assert exporter.registry.get_sample_value(
            "kafka_health_pipeline_quarantined_records_total", {"reason": reason}) == n

    bronze = table(root, "bronze")
    assert len(bronze) == sim.truth.samples_total
    assert truth_mismatches(table(root, "broker_signals"), sim.truth.rows()) == []
