"""The job's Delta tables, opened for one job's transactions, and their compaction."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from streaming.sinks.delta_rs import DeltaRsTable

LOG = logging.getLogger("kafka_health.tables")
TABLES = ("bronze", "quarantine", "broker_signals", "cluster_signals", "incidents", "dq_results",
          "partition_headroom")


def open_tables(delta_root: str, app_id: str) -> dict[str, DeltaRsTable]:
    """Every table of the job, created when missing, writing in transactions of `app_id`."""
    tables = {name: DeltaRsTable(delta_root, name, app_id) for name in TABLES}
    for table in tables.values():
        table.ensure()
    return tables


def compact(tables: dict[str, DeltaRsTable]) -> None:
    """Small files from one commit per batch would slow every later read: compact them
    (today's partition for bronze). Idempotent, so a replay after a crash is harmless."""
    today = [("date", "=", datetime.now(UTC).strftime("%Y-%m-%d"))]
    for table in tables.values():
        try:
            table.compact(today)
        except Exception as err:  # maintenance must never stop the stream
            LOG.warning("compaction of %s failed: %s", table.name, err)
