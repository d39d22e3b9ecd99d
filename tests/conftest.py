"""Shared fixtures: one embedded broker and one local Spark session per test run, and the
summary of dashboard query runs (tests/dashboards, tests/e2e) printed at the end."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")

_QUERY_REPORT: list[str] = []


def wait_for(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.5) -> Any:
    """Poll until condition() is truthy; fail with `what` at the deadline (never sleep-and-hope)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="session")
def broker() -> Iterator[Any]:
    from streaming.testbed.kafka import metrics_cluster

    with metrics_cluster() as running:
        yield running


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from streaming.config import load_config
    from streaming.runtime.spark_session import build_spark

    session = build_spark(load_config(None, environ={}))
    yield session
    session.stop()


@pytest.fixture
def topic(broker: Any) -> str:
    from streaming.testbed.kafka import create_topic

    name = f"metrics-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, name, partitions=3)
    return name


@pytest.fixture
def job_env(broker: Any, topic: str, tmp_path: Path) -> dict[str, str]:
    """Environment-style config for a job on the embedded broker under tmp_path."""
    return {
        "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": broker.bootstrap,
        "KAFKA_HEALTH__SOURCE__TOPICS": f'[{{"name": "{topic}", "format": "auto"}}]',
                "KAFKA_HEALTH__SPARK__CHECKPOINT": str(tmp_path / "checkpoint"),
        "KAFKA_HEALTH__DELTA__PATH": str(tmp_path / "delta"),
        "KAFKA_HEALTH__QUALITY__MAX_TIMESTAMP_SKEW_SECONDS": "86400",
        "KAFKA_HEALTH__SIGNALS__SCRAPE_INTERVAL_SECONDS": "15",
        # KH_TEST_BRONZE_WRITERS=driver runs the scenarios with the driver writing bronze
        **({"KAFKA_HEALTH__DELTA__BRONZE_WRITERS": os.environ["KH_TEST_BRONZE_WRITERS"]}
           if os.environ.get("KH_TEST_BRONZE_WRITERS") else {}),
    }


@pytest.fixture(scope="session")
def query_report() -> list[str]:
    """One line per scenario of dashboard queries run against Prometheus."""
    return _QUERY_REPORT


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    if _QUERY_REPORT:
        terminalreporter.section("dashboard queries against Prometheus")
        for line in _QUERY_REPORT:
            terminalreporter.write_line(line)
