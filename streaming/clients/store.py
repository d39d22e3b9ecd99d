"""Writes what the probe and the consumer-group pollers found to their Delta tables:
`probe_windows`, `probe_losses`, `consumer_group_status` and `consumer_group_losses`.

Each cluster and table writes under a Delta app transaction of its own
("<app_id>:clients:<cluster>"), versioned by the write's time in milliseconds kept
increasing, as the metadata store does: the rows of a window or a poll are written once,
and a write that failed is retried with the next one's rows (the rows are kept until a
write commits).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from streaming.clients.group_status import PartitionStatus, RetentionLoss
from streaming.clients.probe_ledger import Loss, ProbeWindow
from streaming.schemas import arrow_schema, table_spec
from streaming.sinks.base import DeltaSink
from streaming.sinks.engines import open_table

PROBE_WINDOWS = "probe_windows"
PROBE_LOSSES = "probe_losses"
GROUP_STATUS = "consumer_group_status"
GROUP_LOSSES = "consumer_group_losses"
TABLES = (PROBE_WINDOWS, PROBE_LOSSES, GROUP_STATUS, GROUP_LOSSES)
# The order a topic's worst partition status is chosen in.
STATUS_RANK = {"ok": 0, "warning": 1, "stalled": 2, "stopped": 3, "error": 4}


def window_rows(windows: Iterable[ProbeWindow]) -> list[dict[str, Any]]:
    return [{**asdict(w), "availability": w.availability} for w in windows]


def topic_rows(statuses: Iterable[PartitionStatus]) -> list[dict[str, Any]]:
    """One row per (group, topic) of a poll: partitions summed, the worst lag in time and
    the worst status."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for s in statuses:
        row = rows.setdefault((s.cluster, s.group, s.topic), {
            "cluster": s.cluster, "group": s.group, "topic": s.topic, "polled_at": s.at,
            "partitions": 0, "lag_records": 0, "lag_seconds": None, "status": "ok",
            "lost_to_retention": 0})
        row["partitions"] += 1
        row["lag_records"] += s.lag_records
        row["lost_to_retention"] += s.lost_to_retention
        if s.lag_seconds is not None:
            row["lag_seconds"] = max(row["lag_seconds"] or 0.0, s.lag_seconds)
        if STATUS_RANK[s.status] > STATUS_RANK[row["status"]]:
            row["status"] = s.status
    return list(rows.values())


class ClientsStore:
    """`write_*` from the probe and poller threads (calls are serialised: delta-rs writes of
    one table must not race each other). Raises what the writes raise; the rows of a failed
    write stay queued for the next call."""

    def __init__(self, root: str, app_id: str, storage_options: Mapping[str, str] | None = None,
                 engine: str = "delta-rs", log_retention_minutes: float | None = None) -> None:
        self.root = root
        self.app_id = app_id
        self.storage_options = storage_options
        self.engine = engine
        self.log_retention_minutes = log_retention_minutes
        self._lock = threading.Lock()
        self._tables: dict[tuple[str, str], DeltaSink] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self._queued: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def _table(self, name: str, cluster: str) -> DeltaSink:
        key = (name, cluster)
        if key not in self._tables:
            self._tables[key] = open_table(self.engine, self.root, name,
                                           f"{self.app_id}:clients:{cluster}",
                                           self.storage_options, self.log_retention_minutes)
        return self._tables[key]

    def _version(self, table: DeltaSink, cluster: str) -> int:
        key = (table.name, cluster)
        if key not in self._versions:
            committed = table.transaction_version()
            self._versions[key] = -1 if committed is None else committed
        version = max(int(datetime.now(UTC).timestamp() * 1000), self._versions[key] + 1)
        self._versions[key] = version
        return version

    def _write(self, name: str, cluster: str, rows: list[dict[str, Any]], upsert: bool) -> None:
        key = (name, cluster)
        queued = self._queued.setdefault(key, [])
        queued.extend(rows)
        if not queued:
            return
        if upsert:  # a MERGE takes one source row per key: the newest of each
            keys = table_spec(name)["keys"]
            queued[:] = list({tuple(r[k] for k in keys): r for r in queued}.values())
        table = self._table(name, cluster)
        data = pa.Table.from_pylist(queued, schema=arrow_schema(name))
        version = self._version(table, cluster)
        if upsert:
            table.upsert(data, version)
        else:
            table.append(data, version)
        queued.clear()

    def write_probe(self, cluster: str, windows: list[ProbeWindow], losses: list[Loss]) -> None:
        with self._lock:
            self._write(PROBE_LOSSES, cluster, [asdict(loss) for loss in losses], upsert=True)
            self._write(PROBE_WINDOWS, cluster, window_rows(windows), upsert=True)

    def write_groups(self, cluster: str, statuses: list[PartitionStatus],
                     losses: list[RetentionLoss]) -> None:
        with self._lock:
            self._write(GROUP_LOSSES, cluster, [asdict(loss) for loss in losses], upsert=True)
            self._write(GROUP_STATUS, cluster, topic_rows(statuses), upsert=False)
