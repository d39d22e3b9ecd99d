"""The job's Delta tables, opened for one job's transactions, and their compaction."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from streaming.sinks.base import DeltaSink
from streaming.sinks.engines import open_table

LOG = logging.getLogger("kafka_health.tables")
# Written by the Admin API pollers (streaming.metadata) and the watched clusters' clients
# (streaming.clients) in transactions of their own, and
# only when the job polls: opened here for compaction, never created here, so a missing
# table still says "not polled" (the report tells that apart from "no findings").
POLLER_TABLES = ("cluster_metadata", "durability_audit", "probe_windows", "probe_losses",
                 "consumer_group_status", "consumer_group_losses")
TABLES = ("bronze", "quarantine", "broker_signals", "cluster_signals", "incidents", "dq_results",
          "partition_headroom", *POLLER_TABLES)


def open_tables(delta_root: str, app_id: str,
                storage_options: Mapping[str, str] | None = None,
                engine: str = "delta-rs",
                log_retention_minutes: float | None = None) -> dict[str, DeltaSink]:
    """Every table of the job (the pipeline's created when missing, the pollers' never),
    writing in transactions of `app_id` with `engine` (delta.engine); `storage_options`
    reach a remote root for delta-rs (delta.storage_options with its secrets);
    `log_retention_minutes` is delta.log_retention_minutes."""
    tables = {name: open_table(engine, delta_root, name, app_id, storage_options,
                               log_retention_minutes)
              for name in TABLES}
    for name, table in tables.items():
        if name not in POLLER_TABLES:
            add_missing_columns(table)
    return tables


def add_missing_columns(table: DeltaSink) -> list[str]:
    """Add the columns metrics_schemas/tables.yaml has and the stored table lacks (all
    nullable); returns their names.

    Why: a table written by an older version of the job (incidents before `cause`) would
    otherwise fail every read that names the new column, and a MERGE would silently drop
    it. Rows written before read the new column as null.
    """
    present = set(table.columns())
    missing = [f for f in table.schema if f.name not in present]
    if missing:
        table.add_columns(missing)
        LOG.info("%s: added the column(s) %s", table.name, ", ".join(f.name for f in missing))
    return [f.name for f in missing]


def compact(tables: dict[str, DeltaSink]) -> None:
    """Small files from one commit per batch would slow every later read: compact them
    (today's partition for bronze). Idempotent, so a replay after a crash is harmless."""
    today = [("date", "=", datetime.now(UTC).strftime("%Y-%m-%d"))]
    for name, table in tables.items():
        try:
            if name in POLLER_TABLES and not table.exists():
                continue  # not polled (yet)
            table.compact(today)
        except Exception as err:  # maintenance must never stop the stream
            LOG.warning("compaction of %s failed: %s", table.name, err)
