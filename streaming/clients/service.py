"""The job's clients' truth, built from its `probe` and `consumer_groups` sections: a
durability probe and a consumer-group poller per chosen watched cluster, their rows in
Delta (clients/store.py) and their findings on /metrics (clients/export.py).

Built in `start`, after the job holds its lease (they write tables under `delta.path`, and
their secrets are read only then), as the metadata pollers are. Each probe and poller owns
its thread; the store serialises their writes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from streaming.clients.export import export_groups, export_probe_up, export_probe_windows
from streaming.clients.group_poller import GroupPoller, GroupsRead
from streaming.clients.groups import GroupSettings
from streaming.clients.probe import DurabilityProbe, OnClose, ProbeSettings
from streaming.clients.probe_ledger import Loss, ProbeWindow
from streaming.clients.store import ClientsStore, topic_rows

if TYPE_CHECKING:
    from streaming.config import Config
    from streaming.exporter import Exporter

LOG = logging.getLogger("kafka_health.clients")


class ClientsService:
    """`start(app_id)` runs the probes and pollers the config enables; `stop()` returns once
    each has ended."""

    def __init__(self, config: Config, exporter: Exporter | None) -> None:
        self.config = config
        self.exporter = exporter
        self.probes: list[DurabilityProbe] = []
        self.pollers: list[GroupPoller] = []
        self.store: ClientsStore | None = None
        # per cluster, the loss episodes' records already counted on the exporter (the
        # cluster's poller thread alone touches its entry)
        self._counted: dict[str, dict[tuple[str, str, int, int], int]] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.config.client_clusters("probe")
                    or self.config.client_clusters("consumer_groups"))

    def start(self, app_id: str, storage_options: Mapping[str, str] | None = None) -> None:
        """Build and start every probe and poller; raises ConfigError for a secret that
        cannot be read (before any runs)."""
        if not self.enabled or self.probes or self.pollers:
            return
        probed = {name: cluster.client_config(f"metadata.clusters.{name}")
                  for name, cluster in self.config.client_clusters("probe").items()}
        read = {name: cluster.client_config(f"metadata.clusters.{name}")
                for name, cluster in self.config.client_clusters("consumer_groups").items()}
        delta = self.config.delta
        self.store = ClientsStore(delta.path, app_id, storage_options, delta.engine,
                                  delta.log_retention_minutes)
        section = self.config.probe
        settings = ProbeSettings(section.topic, section.interval_seconds, section.window_seconds,
                                 section.timeout_seconds, retention_ms=section.retention_ms,
                                 topic_check_seconds=section.topic_check_seconds)
        self.probes = [DurabilityProbe(name, client, settings) for name, client in probed.items()]
        for probe in self.probes:
            probe.on_close = self._probe_handler(probe)
        groups = self.config.consumer_groups
        group_settings = GroupSettings(tuple(groups.include), tuple(groups.exclude),
                                       groups.max_partitions, groups.window_polls)
        self.pollers = [GroupPoller(name, client, group_settings, groups.interval_seconds,
                                    groups.timeout_seconds, self.record_groups)
                        for name, client in read.items()]
        for runner in [*self.probes, *self.pollers]:
            runner.start()
        if self.probes:
            LOG.info("probe: acks=all writes to %s every %g s on %s", section.topic,
                     section.interval_seconds, ", ".join(probed))
        if self.pollers:
            LOG.info("consumer groups: read every %g s on %s", groups.interval_seconds,
                     ", ".join(read))

    def _probe_handler(self, probe: DurabilityProbe) -> OnClose:
        """What the probe's thread calls every second: its health, and the windows and
        losses it closed, on /metrics and in Delta."""
        cluster = probe.cluster

        def handle(windows: list[ProbeWindow], losses: list[Loss]) -> None:
            if self.exporter is not None:
                export_probe_up(self.exporter, cluster, probe.up, probe.ledger.pending)
            if not windows and not losses:
                return
            if self.exporter is not None:
                export_probe_windows(self.exporter, cluster, windows, losses)
            assert self.store is not None
            self.store.write_probe(cluster, windows, losses)
        return handle

    def record_groups(self, read: GroupsRead) -> None:
        """A poll of one cluster's groups (on its poller's thread) on /metrics and in Delta."""
        topics = topic_rows(read.statuses)
        if self.exporter is not None:
            counted = self._counted.setdefault(read.cluster, {})
            export_groups(self.exporter, read.cluster, read.up,
                          read.poll.left_out if read.poll else 0, topics, read.losses, counted)
            live = {(s.group, s.topic, s.partition) for s in read.statuses}
            for key in [k for k in counted if k[:3] not in live] if read.up else []:
                del counted[key]
        if read.up and self.store is not None:
            self.store.write_groups(read.cluster, list(read.statuses), list(read.losses))

    def stop(self) -> None:
        runners, self.probes, self.pollers = [*self.probes, *self.pollers], [], []
        for runner in runners:
            runner.stop()
