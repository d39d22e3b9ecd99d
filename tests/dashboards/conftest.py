"""Collects a one-line-per-scenario summary of the dashboard query runs for the report."""

from __future__ import annotations

import pytest

_SUMMARY: list[str] = []


@pytest.fixture(scope="session")
def query_report() -> list[str]:
    return _SUMMARY


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    if _SUMMARY:
        terminalreporter.section("dashboard queries against Prometheus")
        for line in _SUMMARY:
            terminalreporter.write_line(line)
