"""The job's clients of a watched cluster as `run` starts them (streaming/clients/service.py)
on a real broker (the suite's metrics broker, one node): the probe creates its topic,
writes through the only leader, reads back, and its windows reach Delta and /metrics with
every write acked; the consumer-group poller reports the cluster's groups as readable."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from streaming.clients.service import ClientsService
from streaming.config import load_config
from streaming.exporter import Exporter
from tests.conftest import wait_for

pytestmark = pytest.mark.integration


def _windows(root: Path) -> list[dict[str, Any]]:
    table = root / "probe_windows"
    return DeltaTable(str(table)).to_pyarrow_table().to_pylist() if table.is_dir() else []


def test_the_probe_and_the_group_poller_write_delta_and_metrics(broker: Any,
                                                                tmp_path: Path) -> None:
    topic = f"probe-{uuid.uuid4().hex[:6]}"
    config = load_config(None, environ={
        "KAFKA_HEALTH__DELTA__PATH": str(tmp_path),
        "KAFKA_HEALTH__METADATA__CLUSTERS":
            f'{{"watched": {{"bootstrap_servers": "{broker.bootstrap}"}}}}',
        "KAFKA_HEALTH__PROBE__ENABLED": "true",
        "KAFKA_HEALTH__PROBE__TOPIC": topic,
        "KAFKA_HEALTH__PROBE__INTERVAL_SECONDS": "1",
        "KAFKA_HEALTH__PROBE__WINDOW_SECONDS": "3",
        "KAFKA_HEALTH__PROBE__TIMEOUT_SECONDS": "3",
        "KAFKA_HEALTH__CONSUMER_GROUPS__ENABLED": "true",
        "KAFKA_HEALTH__CONSUMER_GROUPS__INTERVAL_SECONDS": "2",
        "KAFKA_HEALTH__CONSUMER_GROUPS__TIMEOUT_SECONDS": "1"})
    exporter = Exporter()
    service = ClientsService(config, exporter)
    service.start("test-clients")
    try:
        def value(name: str, **labels: str) -> float | None:
            return exporter.registry.get_sample_value(name, {"cluster": "watched", **labels})

        windows = wait_for(lambda: [w for w in _windows(tmp_path) if w["acked"] > 0], 90,
                           "a probe window with acked writes in Delta")
        wait_for(lambda: value("kafka_health_probe_up") == 1, 30, "the probe up")
        wait_for(lambda: value("kafka_health_consumer_groups_up") == 1, 30,
                 "the groups read")
    finally:
        service.stop()
    leader = str(broker.nodes[0].node_id)
    for window in windows:
        assert window["broker"] == leader, window
        assert window["failed"] == 0 and window["lost"] == 0, window
        assert window["availability"] == 1.0 and window["ack_p99_ms"] is not None, window
        assert window["attempted"] == window["acked"], window
    assert value("kafka_health_probe_availability_ratio", broker=leader) == 1.0
    assert value("kafka_health_probe_writes_acked", broker=leader) > 0
