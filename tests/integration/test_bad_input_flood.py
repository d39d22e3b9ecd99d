"""A flood of malformed records (every class, ~90 % of the records) next to a healthy
cluster's metrics, through the real job: it stays up, each bad record is quarantined
exactly once with its reason, and the good records give the same signals as alone."""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest
from confluent_kafka import Producer

from streaming.decode.records import RAW_KEEP_BYTES
from streaming.exporter import Exporter
from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Simulator
from tests.hostile import Bounds, Hostile, every_class
from tests.integration.helpers import count, run_until, table, truth_mismatches

pytestmark = pytest.mark.integration
COPIES = 30
BOUNDS = Bounds(max_message_bytes=64 * 1024)


def flood_classes(now: float, rnd: random.Random, key: bytes) -> list[Hostile]:
    """Every hostile class a Kafka broker accepts that must be quarantined whole (record
    timestamps past 1 hour ahead are refused by Kafka 4's broker itself)."""
    return [h for h in every_class(now, rnd, key, BOUNDS)
            if h.reason and not h.also_bronze and h.timestamp_ms is None]


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
        for hostile in flood_classes(start + 60 + i, rnd, f"c1/{1 + i % 3}".encode()):
            producer.produce(topic, value=hostile.value, key=hostile.key)
            expected[hostile.reason] += 1
    assert producer.flush(30) == 0
    bad = sum(expected.values())
    assert bad / (bad + sim.records) > 0.85, "a flood, not a trickle"

    env = {**job_env, **BOUNDS.env()}
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
