"""The job's Admin API pollers, built from the `metadata` section of its config.

The cause board exists from the start, so the pipeline can be handed it before any
poller runs (it names no cause until a poll has succeeded). The pollers themselves are
built in `start`, after the job holds its lease: they write the metadata tables under
`delta.path`, and their secrets are read only then.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from streaming.metadata.board import CauseBoard
from streaming.metadata.handler import PollHandler
from streaming.metadata.poller import MetadataPoller, PollerSettings
from streaming.metadata.rules import load_rules
from streaming.metadata.store import MetadataStore

if TYPE_CHECKING:
    from streaming.config import Config
    from streaming.exporter import Exporter

LOG = logging.getLogger("kafka_health.metadata")
# A view this many intervals old names no cause any more: two polls in a row failed.
FRESH_INTERVALS = 3


class MetadataService:
    """`start(app_id)` polls every cluster of `metadata.clusters` (when enabled) on a
    thread each; `stop()` returns once every poll in progress has ended."""

    def __init__(self, config: Config, exporter: Exporter | None,
                 poller_factory: Callable[..., MetadataPoller] = MetadataPoller) -> None:
        self.config = config
        self.exporter = exporter
        self.poller_factory = poller_factory
        section = config.metadata
        self.board = CauseBoard(FRESH_INTERVALS * section.interval_seconds)
        self.pollers: list[MetadataPoller] = []
        self.handler: PollHandler | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.config.metadata.polled())

    def start(self, app_id: str, storage_options: Mapping[str, str] | None = None) -> None:
        """Build and start one poller per cluster; raises ConfigError for a secret that
        cannot be read (before any poller runs)."""
        clusters = self.config.metadata.polled()
        if not clusters or self.pollers:
            return
        section = self.config.metadata
        settings = PollerSettings(section.interval_seconds, section.timeout_seconds,
                                  section.describe_configs_batch)
        client_configs: dict[str, dict[str, Any]] = {
            name: cluster.client_config(f"metadata.clusters.{name}")
            for name, cluster in clusters.items()}
        rules = load_rules()
        store = MetadataStore(self.config.delta.path, app_id, rules,
                              storage_options=storage_options, engine=self.config.delta.engine,
                              log_retention_minutes=self.config.delta.log_retention_minutes)
        self.handler = PollHandler(store, self.exporter, rules, self.board)
        self.pollers = [self.poller_factory(name, client, settings, on_poll=self.handler)
                        for name, client in client_configs.items()]
        for poller in self.pollers:
            poller.start()
        LOG.info("metadata: polling the Admin API of %d cluster(s) every %g s: %s",
                 len(self.pollers), section.interval_seconds, ", ".join(clusters))

    def stop(self) -> None:
        """Stop every poller at once (each returns once its poll in progress ends, within
        its request timeouts), so several hanging clusters cost one timeout, not the sum."""
        pollers, self.pollers = self.pollers, []
        stopping = [threading.Thread(target=p.stop, name=f"stop-{p.cluster}", daemon=True)
                    for p in pollers]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
