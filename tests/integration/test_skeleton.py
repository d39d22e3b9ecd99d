"""The walking skeleton on real components: a real Kafka metrics cluster + local Spark + Delta (delta-rs)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer

from streaming.exporter import Exporter
from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Event, Simulator
from tests.conftest import wait_for
from tests.integration.helpers import (
    count,
    planning_daemons,
    run_until,
    table,
    truth_mismatches,
)

pytestmark = pytest.mark.integration


def faulted_simulation(bootstrap: str, topic: str, minutes: int = 8,
                       cluster: str = "c1") -> Simulator:
    """Three brokers, RF 3, min ISR 2: one follower down, then a second (under-min-ISR)."""
    model = ClusterModel(cluster, [1, 2, 3], {"orders": 6, "payments": 3})
    sim = Simulator(model, bootstrap, topic, scrape_interval=15,
                    start=time.time() - minutes * 60 - 60)
    sim.run(minutes * 60, events=[
        Event(120, lambda m: m.broker_down(3), "broker 3 down"),
        Event(200, lambda m: m.broker_down(2), "broker 2 down"),
        Event(330, lambda m: m.broker_up(2), "broker 2 up"),
        Event(400, lambda m: m.broker_up(3), "broker 3 up"),
    ])
    return sim


def test_known_samples_land_once_and_signals_match_truth(broker, topic, job_env, spark):
    sim = faulted_simulation(broker.bootstrap, topic)
    expected = sim.truth.samples_total
    exporter = Exporter()
    root = job_env["KAFKA_HEALTH__DELTA__PATH"]
    run_until(spark, job_env, lambda: count(root, "bronze") >= expected, 180,
              f"{expected} bronze rows", exporter=exporter)
    # Planned at its start, the query left no idle planning daemon behind after a batch
    # (and every batch after the first ran without one).
    wait_for(lambda: not planning_daemons(), 30, "Spark's planning daemons to be stopped")

    bronze = table(root, "bronze")
    assert len(bronze) == expected
    key = ["source_partition", "source_offset", "metric", "attribute", "labels", "ts"]
    assert not bronze[key].astype(str).duplicated().any()
    assert bronze["metric"].notna().all()

    quality = table(root, "dq_results")
    assert len(quality) > 0 and quality["success"].all(), quality

    signals = table(root, "broker_signals")
    assert truth_mismatches(signals, sim.truth.rows()) == []
    assert signals["under_min_isr_max"].max() > 0, "the scenario must exercise the signal"

    # The exporter shows each broker's current (newest window, last scrape) value.
    for broker_id in sim.model.brokers:
        truth = sim.model.broker_values(broker_id)["UnderMinIsrPartitionCount"]
        gauge = exporter.registry.get_sample_value(
            "kafka_health_under_min_isr_partitions", {"cluster": "c1", "broker": str(broker_id)})
        assert gauge == truth


def test_malformed_record_is_quarantined_and_two_clusters_share_a_topic(
        broker, topic, job_env, spark):
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"this is not json {", partition=0)
    producer.flush(10)
    sims = [faulted_simulation(broker.bootstrap, topic, minutes=3, cluster=name)
            for name in ("east", "west")]
    expected = sum(sim.truth.samples_total for sim in sims)
    root = job_env["KAFKA_HEALTH__DELTA__PATH"]

    def settled() -> bool:
        return count(root, "bronze") >= expected and count(root, "quarantine") >= 1

    run_until(spark, job_env, settled, 180, "bronze rows and one quarantine row")
    quarantine = table(root, "quarantine")
    assert len(quarantine) == 1
    row: dict[str, Any] = quarantine.iloc[0].to_dict()
    assert row["reason"].startswith("not_json")
    assert row["raw"] == b"this is not json {"
    assert (row["source_topic"], row["source_partition"], row["source_offset"]) == (topic, 0, 0)
    assert count(root, "bronze") == expected
    signals = table(root, "broker_signals")
    for sim in sims:
        mine = signals[signals["cluster"] == sim.model.name]
        assert truth_mismatches(mine, sim.truth.rows()) == []
