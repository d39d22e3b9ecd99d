"""The package's run-time data: read through importlib.resources from streaming/_data/, whose
entries in the repository are links to the top-level folders people edit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming.package_data import (
    has_packaged_schemas,
    packaged_alert_rules,
    packaged_schemas,
)
from streaming.schemas import schemas_dir

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "streaming" / "_data"


def test_the_packaged_data_are_links_to_the_top_level_folders() -> None:
    """A copy inside the package would drift from metrics_schemas/ and alerts/, the files the
    README, the rule tests and the deploy generators read."""
    for link, target in ((DATA / "metrics_schemas", REPO / "metrics_schemas"),
                         (DATA / "alerts" / "kafka-health.rules.yml",
                          REPO / "alerts" / "kafka-health.rules.yml")):
        assert link.is_symlink(), f"{link} must be a link to {target}"
        assert not Path(os.readlink(link)).is_absolute(), "relative, so any checkout resolves it"
        assert link.resolve() == target


def test_a_checkout_reads_the_top_level_files_through_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_HEALTH_SCHEMAS", raising=False)
    assert packaged_schemas() == REPO / "metrics_schemas" == schemas_dir()
    assert packaged_alert_rules() == REPO / "alerts" / "kafka-health.rules.yml"
    assert has_packaged_schemas()


def test_the_schemas_folder_can_still_be_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_HEALTH_SCHEMAS", str(tmp_path))
    assert schemas_dir() == tmp_path
