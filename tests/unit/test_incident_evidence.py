"""Incidents from windows whose evidence is still incomplete, on real Delta tables.

A window's first batch can hold the brokers that report 0 active controllers but not yet
the controller, or one broker's samples but not yet another's. Neither may open an
incident (the next batch would delete it) nor push a page (that cannot be taken back).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from streaming.config import Config
from streaming.pipeline.batch import BatchProcessor
from tests.unit.paging_builders import FakeAlertmanager

W0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BATCH_IDS = itertools.count()


@pytest.fixture
def proc(tmp_path: pytest.TempPathFactory) -> Iterator[tuple[BatchProcessor, FakeAlertmanager]]:
    am = FakeAlertmanager()
    config = Config()
    config.delta.path = str(tmp_path)
    config.alert_push.alertmanager_urls = [am.url]
    config.alert_push.kinds = ["controller"]
    yield BatchProcessor(config, exporter=None), am
    am.close()


def broker_window(proc: BatchProcessor, minute: int, controllers: dict[str, float]) -> None:
    """broker_signals rows of one window: broker -> its ActiveControllerCount."""
    table = proc.tables["broker_signals"]
    start = W0 + timedelta(minutes=minute)
    rows = []
    for broker, value in controllers.items():
        row = {f.name: None for f in table.schema}
        row.update(cluster="c", broker=broker, window_start=start,
                   window_end=start + timedelta(minutes=1), samples=4,
                   last_sample_ts=start + timedelta(seconds=50), active_controller_last=value,
                   under_min_isr_max=0.0, updated_at=start)
        rows.append(row)
    table.upsert(pa.Table.from_pylist(rows, schema=table.schema), next(BATCH_IDS))


def batch(proc: BatchProcessor, minute: int) -> list[tuple[str, str]]:
    """The cluster and incident steps of a batch that touched window `minute`; returns the
    incidents then stored as (kind, broker)."""
    at = W0 + timedelta(minutes=minute)
    batch_id = next(BATCH_IDS)
    proc.stages.update_cluster_signals(["c"], at, at, batch_id)
    proc.stages.update_incidents(["c"], at, at, batch_id)
    rows = proc.tables["incidents"].read(columns=["kind", "broker"]).to_pylist()
    return sorted((r["kind"], r["broker"]) for r in rows)


def test_a_window_whose_controller_is_not_in_yet_opens_and_pushes_nothing(proc) -> None:
    processor, am = proc
    broker_window(processor, 0, {"1": 1.0, "2": 0.0, "3": 0.0})
    assert batch(processor, 0) == []
    broker_window(processor, 1, {"2": 0.0, "3": 0.0})  # the window's first batch
    assert batch(processor, 1) == [], "neither a controller nor a stale-broker incident"
    broker_window(processor, 1, {"1": 1.0})  # the controller's rows arrive
    assert batch(processor, 1) == []
    assert am.bodies == [], "nothing was pushed, so nothing has to be taken back"
    stored = processor.tables["cluster_signals"].read(columns=["window_start",
                                                               "active_controllers"])
    assert sorted(r["active_controllers"] for r in stored.to_pylist()) == [1.0, 1.0]


def test_a_controller_that_stops_reporting_makes_the_count_unknown_not_zero(proc) -> None:
    processor, am = proc
    broker_window(processor, 0, {"1": 1.0, "2": 0.0, "3": 0.0})
    batch(processor, 0)
    for minute in range(1, 6):  # broker 1, the controller, is gone
        broker_window(processor, minute, {"2": 0.0, "3": 0.0})
        assert ("controller", "*") not in batch(processor, minute)
    assert am.bodies == []
    stored = processor.tables["cluster_signals"].read(columns=["window_start",
                                                               "active_controllers"])
    assert [r["active_controllers"] for r in sorted(
        stored.to_pylist(), key=lambda r: r["window_start"])] == [1.0] + [None] * 5
    assert ("stale_broker", "1") in batch(processor, 5), "the silent broker is stale instead"
