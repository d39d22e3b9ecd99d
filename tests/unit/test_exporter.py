"""streaming.exporter: what a scrape sees after the job hands it broker rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from streaming.exporter import UNCLEAN_GAUGE, Exporter

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def row(minute: int, unclean: float = 0.0, under_min: float = 0.0) -> dict[str, Any]:
    start = T0 + timedelta(minutes=minute)
    return {"cluster": "c1", "broker": "3", "window_start": start,
            "window_end": start + timedelta(minutes=1), "last_sample_ts": start,
            "unclean_elections_increase": unclean, "under_min_isr_last": under_min}


def value(exporter: Exporter, name: str) -> float | None:
    return exporter.registry.get_sample_value(name, {"cluster": "c1", "broker": "3"})


def test_an_unclean_election_is_held_even_when_a_newer_window_comes_in_the_same_batch():
    exporter = Exporter()
    exporter.update_brokers([row(0, unclean=2.0), row(1, under_min=4.0)])
    assert value(exporter, UNCLEAN_GAUGE) == 2.0, "data loss must reach a scrape"
    assert value(exporter, "kafka_health_under_min_isr_partitions") == 4.0, "levels: newest"
    exporter.update_brokers([row(2, unclean=1.0)])
    assert value(exporter, UNCLEAN_GAUGE) == 3.0
    exporter.update_brokers([row(4)])
    assert value(exporter, UNCLEAN_GAUGE) == 3.0, "held for 5 minutes of event time"
    exporter.update_brokers([row(6)])
    assert value(exporter, UNCLEAN_GAUGE) == 1.0, "minute 0 left the hold"
    exporter.update_brokers([row(8)])
    assert value(exporter, UNCLEAN_GAUGE) == 0.0


def test_a_late_recomputation_of_a_held_window_replaces_its_count_not_adds_to_it():
    exporter = Exporter()
    exporter.update_brokers([row(0, unclean=1.0), row(1)])
    exporter.update_brokers([row(0, unclean=2.0)])  # late samples for minute 0
    assert value(exporter, UNCLEAN_GAUGE) == 2.0
