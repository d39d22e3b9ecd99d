"""kafka_health_cluster_last_sample_timestamp_seconds: what KafkaClusterDark reads."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from streaming.exporter import Exporter

GAUGE = "kafka_health_cluster_last_sample_timestamp_seconds"


def row(cluster: str, broker: str, last: datetime) -> dict[str, Any]:
    start = last.replace(second=0, microsecond=0)
    return {"cluster": cluster, "broker": broker, "window_start": start,
            "window_end": start + timedelta(minutes=1), "last_sample_ts": last}


def test_the_cluster_gauge_is_its_newest_sample_of_any_broker() -> None:
    now = datetime.fromtimestamp(time.time(), UTC) - timedelta(minutes=10)
    exporter = Exporter()
    exporter.update_brokers([row("a", "1", now), row("a", "2", now + timedelta(seconds=40)),
                             row("b", "1", now - timedelta(minutes=5))])
    exporter.update_staleness(45.0)
    get = exporter.registry.get_sample_value
    assert get(GAUGE, {"cluster": "a"}) == (now + timedelta(seconds=40)).timestamp()
    assert get(GAUGE, {"cluster": "b"}) == (now - timedelta(minutes=5)).timestamp()


def test_a_broker_clock_ahead_cannot_push_the_cluster_past_the_wall_clock() -> None:
    """A sample dated an hour ahead would keep time() - gauge negative for an hour: the
    cluster could go dark unseen for that long."""
    exporter = Exporter()
    ahead = datetime.fromtimestamp(time.time(), UTC) + timedelta(hours=1)
    before = time.time()
    exporter.update_brokers([row("a", "1", ahead)])  # counts as seen when it came
    exporter.update_staleness(45.0)
    exported = exporter.registry.get_sample_value(GAUGE, {"cluster": "a"})
    assert exported is not None and before <= exported <= time.time()
