"""Writes what the pollers saw to the `cluster_metadata` and `durability_audit` tables.

The store, not the poller, holds the state the rows are computed against (the last
snapshot written, the open findings), and advances it only once a write has committed:
a failed write is retried by the next poll's rows instead of leaving a gap. Open
findings are read back from the table the first time a cluster is recorded, so a
restarted job resolves or continues the findings it left open instead of opening them
twice.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

from streaming.metadata.audit import audit
from streaming.metadata.changes import TABLE as CHANGES_TABLE
from streaming.metadata.changes import snapshot_changes
from streaming.metadata.model import ClusterSnapshot
from streaming.metadata.reconcile import TABLE as AUDIT_TABLE
from streaming.metadata.reconcile import reconcile, still_open
from streaming.metadata.rules import AuditRules, load_rules
from streaming.sinks.base import DeltaSink
from streaming.sinks.engines import open_table
from streaming.sinks.predicates import field


@dataclass(frozen=True)
class Recorded:
    """What one snapshot wrote: its change rows, its findings now, the audit rows upserted."""

    changes: pa.Table
    findings: list[dict[str, Any]]
    audit_rows: pa.Table


class MetadataStore:
    """`record(snapshot)` after each successful poll, from any poller's thread (calls are
    serialised: delta-rs MERGEs of one table must not race each other).

    Each cluster writes under its own Delta app transaction ("<app_id>:metadata:<cluster>")
    whose version is the poll's time in milliseconds, kept increasing: a poll is never
    replayed, so the version only has to grow, and with one transaction per cluster two
    clusters' polls never read as each other's.
    """

    def __init__(self, root: str, app_id: str, rules: AuditRules | None = None,
                 storage_options: Mapping[str, str] | None = None,
                 engine: str = "delta-rs", log_retention_minutes: float | None = None) -> None:
        self.root = root
        self.engine = engine  # delta.engine
        self.log_retention_minutes = log_retention_minutes  # delta.log_retention_minutes
        self.app_id = app_id
        self.storage_options = storage_options
        self.rules = rules or load_rules()
        self._lock = threading.Lock()
        self._tables: dict[tuple[str, str], DeltaSink] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self._written: dict[str, ClusterSnapshot] = {}
        self._open: dict[str, list[dict[str, Any]]] = {}

    def _table(self, name: str, cluster: str) -> DeltaSink:
        key = (name, cluster)
        if key not in self._tables:
            self._tables[key] = open_table(self.engine, self.root, name,
                                           f"{self.app_id}:metadata:{cluster}",
                                           self.storage_options, self.log_retention_minutes)
        return self._tables[key]

    def _version(self, table: DeltaSink, cluster: str, at: datetime) -> int:
        key = (table.name, cluster)
        if key not in self._versions:
            committed = table.transaction_version()
            self._versions[key] = -1 if committed is None else committed
        version = max(int(at.timestamp() * 1000), self._versions[key] + 1)
        self._versions[key] = version
        return version

    def open_findings(self, cluster: str) -> list[dict[str, Any]]:
        """The cluster's open findings, read from the table the first time."""
        if cluster not in self._open:
            table = self._table(AUDIT_TABLE, cluster)
            rows = table.read(where=field("cluster") == cluster)
            self._open[cluster] = [r for r in rows.to_pylist() if r["resolved_at"] is None]
        return self._open[cluster]

    def record(self, snapshot: ClusterSnapshot) -> Recorded:
        """Append the changes since the last snapshot written and upsert the audit's
        opened, changed and resolved findings. Raises what the writes raise; the state
        moves on only past what was written."""
        cluster, at = snapshot.cluster, snapshot.polled_at
        with self._lock:
            rows = snapshot_changes(self._written.get(cluster), snapshot, at)
            if rows.num_rows:
                table = self._table(CHANGES_TABLE, cluster)
                table.append(rows, self._version(table, cluster, at))
            self._written[cluster] = snapshot
            findings = audit(snapshot, self.rules)
            open_now = self.open_findings(cluster)
            upsert = reconcile(open_now, findings, at, clusters={cluster})
            if upsert.num_rows:
                table = self._table(AUDIT_TABLE, cluster)
                table.upsert(upsert, self._version(table, cluster, at))
            self._open[cluster] = still_open(open_now, upsert)
            return Recorded(rows, findings, upsert)
