"""Fixtures for report tests: Delta tables written once per session, one report rendered from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report import fixtures

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="session")
def delta_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fixtures.build(tmp_path_factory.mktemp("report-delta") / "delta")


@pytest.fixture(scope="session")
def report_dir(delta_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from streaming.report import write_report

    out = tmp_path_factory.mktemp("report-out") / "report"
    index = write_report(str(delta_root), str(out), hours=6.0, now=fixtures.NOW)
    assert index == out / "index.html"
    return out
