"""The job's pollers from its config: built after the lease with secrets read then, all
stopped together."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streaming.config import ConfigError, load_config
from streaming.metadata.service import MetadataService


class FakePoller:
    def __init__(self, cluster: str, client: dict[str, Any], settings: Any,
                 on_poll: Any = None) -> None:
        self.cluster, self.client, self.settings, self.on_poll = cluster, client, settings, on_poll
        self.started = self.stopped = False

    def start(self) -> FakePoller:
        self.started = True
        return self

    def stop(self) -> None:
        self.stopped = True


def config(tmp_path: Path, **env: str):  # noqa: ANN201
    return load_config(None, environ={"KAFKA_HEALTH__DELTA__PATH": str(tmp_path), **{
        f"KAFKA_HEALTH__METADATA__{k.upper()}": v for k, v in env.items()}})


def test_disabled_metadata_starts_nothing(tmp_path: Path) -> None:
    service = MetadataService(config(tmp_path, clusters='{"a": {"bootstrap_servers": "x:1"}}'),
                              None, poller_factory=FakePoller)
    service.start("app")
    assert not service.enabled and service.pollers == []


def test_one_poller_per_cluster_with_its_own_client_settings(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("value\n")
    service = MetadataService(config(
        tmp_path, enabled="true", interval_seconds="5", timeout_seconds="2",
        clusters='{"a": {"bootstrap_servers": "a:1"}, "b": {"bootstrap_servers": "b:1", '
                 f'"secrets": {{"sasl.password": {{"file": "{secret}"}}}}}}}}'),
        None, poller_factory=FakePoller)
    service.start("app")
    pollers = {p.cluster: p for p in service.pollers}
    assert pollers["a"].client == {"bootstrap.servers": "a:1"}
    assert pollers["b"].client == {"bootstrap.servers": "b:1", "sasl.password": "value"}
    assert all(p.started and p.on_poll is service.handler for p in pollers.values())
    assert pollers["a"].settings.interval_seconds == 5.0
    assert service.board.max_age_seconds == 15.0
    service.stop()
    assert all(p.stopped for p in pollers.values()) and service.pollers == []


def test_an_unreadable_secret_fails_the_start_before_any_poller_runs(tmp_path: Path) -> None:
    service = MetadataService(config(
        tmp_path, enabled="true",
        clusters='{"a": {"bootstrap_servers": "a:1", "secrets": {"sasl.password": '
                 '{"env": "KH_NOT_SET_ANYWHERE"}}}}'), None, poller_factory=FakePoller)
    with pytest.raises(ConfigError, match="metadata.clusters.a.secrets.sasl.password"):
        service.start("app")
    assert service.pollers == []
