"""The real-Kafka test bed, shared by every test of this folder (one cluster, restored to
full health between tests): a watched KRaft cluster (3 combined nodes, 2 broker-only) with
the Jolokia and jmx_exporter agents, the shipper carrying both agents' data into the metrics cluster, a
truth sampler on the Admin API, and the streaming job reading both metrics topics.

The same brokers ship under two cluster names, `via-jolokia` (Jolokia bulk reads as the
agent returns them) and `via-prometheus` (jmx_exporter scrapes with the test bed's Strimzi
rule set, in prometheus-kafka-adapter JSON), so every check runs on both formats. The job
polls the watched cluster's Admin API under both names too (config `metadata`, every
METADATA_INTERVAL seconds), so incidents and pages carry their cause.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from streaming.exporter import Exporter
from streaming.testbed import faults
from streaming.testbed.kafka import KafkaCluster, create_topic
from streaming.testbed.shipper import Shipper, Target
from streaming.testbed.truth import TruthSampler
from tests.conftest import summary_section
from tests.integration.helpers import running_job

# 5 s windows of 1 s scrapes: a fault's stable window (tests/real_kafka/truth_checks.py)
# comes within seconds, and elections straddle window boundaries more often than in 10 s ones
WINDOW = 5
NAMES = ("via-jolokia", "via-prometheus")
ORDERS = "orders"
METADATA_INTERVAL = 4  # seconds between Admin API polls (production: 30)
# Where Kafka's JMX and its Admin API tell different stories; printed after the run.
FINDINGS = summary_section("real Kafka: JMX against the Admin API")


@dataclass
class Bed:
    watched: KafkaCluster
    truth: TruthSampler
    job: Any
    exporter: Exporter
    delta: Path
    shippers: tuple[Shipper, ...]

    def stable_windows(self) -> dict[float, tuple[frozenset[int], dict[int, dict[str, int]]]]:
        """The truth's stable windows, each widened by its scrapes' reading lag."""
        lags: dict[float, float] = {}
        for shipper in self.shippers:
            for start, lag in shipper.reading_lag_by_window(WINDOW).items():
                lags[start] = max(lags.get(start, 0.0), lag)
        return self.truth.stable_windows(WINDOW, reading_lag=lags)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "real_kafka" in str(item.fspath):
            item.add_marker(pytest.mark.real_kafka)


@pytest.fixture(scope="package")
def watched() -> Iterator[KafkaCluster]:
    """Nodes 1-3 combined broker+controller, 4 and 5 brokers only; `orders` lives on
    1, 4 and 5 (leaders rotating), so stopping 4 and 5 leaves leader 1 alone in the ISR
    while the controller quorum (1-3) stays whole."""
    with KafkaCluster(3, broker_only=2) as cluster:
        create_topic(cluster.bootstrap, ORDERS, config={"min.insync.replicas": "2"},
                     assignment=[[1, 4, 5], [4, 5, 1], [5, 1, 4]] * 2)
        yield cluster


@pytest.fixture(scope="package")
def bed(watched: KafkaCluster, broker: Any, spark: Any, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Bed]:
    suffix = uuid.uuid4().hex[:6]
    jolokia_topic, prometheus_topic = f"jolokia-{suffix}", f"prometheus-{suffix}"
    for topic in (jolokia_topic, prometheus_topic):
        create_topic(broker.bootstrap, topic, partitions=2)
    targets = [Target(n.node_id, n.jolokia_url, n.jmx_exporter_url) for n in watched.nodes]
    root = tmp_path_factory.mktemp("real-kafka")
    env = {
        "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": broker.bootstrap,
        "KAFKA_HEALTH__SOURCE__TOPICS": (
            f'[{{"name": "{jolokia_topic}", "format": "jolokia"}}, '
            f'{{"name": "{prometheus_topic}", "format": "prometheus"}}]'),
        "KAFKA_HEALTH__SOURCE__STARTING_OFFSETS": "latest",
        "KAFKA_HEALTH__SPARK__CHECKPOINT": str(root / "checkpoint"),
        "KAFKA_HEALTH__SPARK__TRIGGER_SECONDS": "1",
        "KAFKA_HEALTH__DELTA__PATH": str(root / "delta"),
        "KAFKA_HEALTH__SIGNALS__WINDOW_SECONDS": str(WINDOW),
        "KAFKA_HEALTH__SIGNALS__WATERMARK_SECONDS": "60",
        "KAFKA_HEALTH__SIGNALS__SCRAPE_INTERVAL_SECONDS": "1",
        # Stale after 15 s, not 3 x 1 s: on two cores a shipper's round over five brokers
        # has read its gauges up to 4-10 s after its timestamp (the FINDINGS line), and a
        # broker that silent is the bed's load, not a fault under test.
        "KAFKA_HEALTH__SIGNALS__STALE_AFTER_INTERVALS": "15",
        "KAFKA_HEALTH__METADATA__ENABLED": "true",
        "KAFKA_HEALTH__METADATA__INTERVAL_SECONDS": str(METADATA_INTERVAL),
        "KAFKA_HEALTH__METADATA__TIMEOUT_SECONDS": "3",
        "KAFKA_HEALTH__METADATA__CLUSTERS": json.dumps(
            {name: {"bootstrap_servers": watched.bootstrap} for name in NAMES}),
    }
    truth = TruthSampler(watched.bootstrap, [n.node_id for n in watched.nodes]).start()
    exporter = Exporter()
    with Shipper(targets, NAMES[0], broker.bootstrap, jolokia_topic, None, interval=1.0) as a, \
            Shipper(targets, NAMES[1], broker.bootstrap, None, prometheus_topic,
                    interval=1.0) as b, \
            running_job(spark, env, exporter) as job:
        yield Bed(watched, truth, job, exporter, root / "delta", (a, b))
    truth.stop()
    lags = sorted(lag for _, lag in b.reading_lags)
    if lags:
        FINDINGS.append(f"jmx_exporter scrapes read their gauges up to {lags[-1]:.1f} s after "
                        f"their timestamp (median {lags[len(lags) // 2]:.1f} s, "
                        f"{len(lags)} scrapes)")


@pytest.fixture
def healthy(bed: Bed) -> Iterator[Bed]:
    """The bed with every broker running and every partition fully replicated, before and
    after the test."""
    restore(bed.watched)
    yield bed
    restore(bed.watched)


def restore(cluster: KafkaCluster) -> None:
    for node in cluster.nodes:
        if not node.running() or not cluster.alive_brokers() >= {node.node_id}:
            faults.start_broker(cluster, node.node_id)
    faults.wait_fully_replicated(cluster)
