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

# Lines printed after the run under their section's title; a pytest-xdist worker hands its
# own to the controller when it finishes (pytest_sessionfinish, pytest_testnodedown).
_SUMMARY: dict[str, list[str]] = {}


def summary_section(title: str) -> list[str]:
    """The list whose lines are printed after the run under `title`."""
    return _SUMMARY.setdefault(title, [])


_QUERY_REPORT = summary_section("dashboard queries against Prometheus")


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


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)  # set in an xdist worker only
    if output is not None:
        output["summary"] = _SUMMARY


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:  # noqa: ARG001
    for title, lines in getattr(node, "workeroutput", {}).get("summary", {}).items():
        summary_section(title).extend(lines)


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ANN001, ARG001
    for title, lines in _SUMMARY.items():
        if lines:
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)


def _module_or_real_kafka(nodeid: str) -> str:
    """A test's unit of work on a pytest-xdist worker: its module, or tests/real_kafka as a
    whole, whose package-scoped bed (five Kafka nodes) must start once, on one worker."""
    module = nodeid.split("::", 1)[0]
    return "tests/real_kafka" if "real_kafka" in Path(module).parts else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """deploy/test.sh runs two workers (KAFKA_HEALTH_TEST_WORKERS); each takes a
    whole unit (see above) at a time, so a module's fixtures start once. (xdist's own
    `loadgroup` cannot do it under pytest 9: it renames the test ids through an attribute
    pytest no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _module_or_real_kafka(nodeid)

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers, tests/real_kafka first: the longest unit of work, started early,
    leaves the short modules to even out the two workers' ends."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: _module_or_real_kafka(item.nodeid) != "tests/real_kafka")
