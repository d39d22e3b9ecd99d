"""What a Delta table of the job does, whichever engine writes it (`delta.engine`).

Every write happens once per (app id, batch id): the table's own Delta app transaction
(`<app id>:<table>`, version = batch id) is checked before writing and recorded by the
write's commit, so a batch Spark replays after a crash writes nothing twice, and each table
has its own transaction, so a crash between two tables' commits replays only the missing
one. The engine-independent halves live here (the skip, the MERGE's source rows and key
bounds); `streaming.sinks.delta_rs` and `streaming.sinks.delta_spark` commit them.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streaming.locations import join
from streaming.schemas import arrow_schema, table_spec
from streaming.sinks.predicates import Filter
from streaming.sinks.task_files import TaskFile

LOG = logging.getLogger("kafka_health.delta")
DROP_COLUMN = "__kafka_health_drop"  # a MERGE source flag: delete the matching target row
PartitionFilters = list[tuple[str, str, str]]  # (column, "=", value), as delta-rs takes them


@dataclass(frozen=True)
class KeyRange:
    """The source's [low, high] of one ordered key (an int or an aware datetime)."""

    key: str
    low: int | datetime
    high: int | datetime


class TableUnreadable(RuntimeError):
    """A Delta table that is there but whose log cannot be read."""


def key_ranges(schema: pa.Schema, data: pa.Table, keys: list[str]) -> list[KeyRange]:
    """The [min, max] of each ordered key (timestamps, integers) of `data`.

    Why: both engines prune a MERGE's target files by their statistics only from
    conditions on the target alone; with nothing but `t.k = s.k` every file is read and
    each batch's upsert costs more as the table's history grows (measured with delta-rs on
    2.16 M broker_signals rows, 30 days of 50 brokers: 0.6-2.2 s a MERGE, 0.03 s with the
    bounds). A matching target row has the source's key, so it lies inside these bounds:
    the rows matched and inserted are the same. A time Python cannot represent only loses
    its bound.
    """
    ranges: list[KeyRange] = []
    if data.num_rows == 0:
        return ranges
    for key in keys:
        kind = schema.field(key).type
        if not (pa.types.is_timestamp(kind) or pa.types.is_integer(kind)):
            continue
        low, high = pc.min_max(data[key]).values()
        if not low.is_valid:
            continue
        try:
            first, last = low.as_py(), high.as_py()
        except (OverflowError, ValueError):
            continue
        ranges.append(KeyRange(key, first, last))
    return ranges


LOG_RETENTION = "delta.logRetentionDuration"


def log_retention_property(minutes: float) -> str:
    """delta.logRetentionDuration's value for `minutes` (config delta.log_retention_minutes).

    Why the job sets it: Delta keeps a file per commit in `_delta_log` until the retention
    has passed and a checkpoint covers it, 30 days unless set, and each commit of delta-rs
    costs more the more files that folder holds (tests/benchmarks/bench_delta_log.py,
    results/delta-log.json). At a commit a batch the default makes the job slower by the
    hour; a short retention keeps the folder at a few hundred files. Checkpoints hold the
    table's state, so no reader of the newest version needs the older commits.
    """
    return f"interval {max(1, round(minutes * 60))} seconds"


class DeltaSink(ABC):
    """One table named `name` under `root` (a path or a URL), written in the transactions
    of `app_id`, with the schema, keys and partitioning of metrics_schemas/tables.yaml."""

    def __init__(self, root: str, name: str, app_id: str,
                 log_retention_minutes: float | None = None) -> None:
        self.name = name
        self.path = join(str(root), name)
        self.app_id = f"{app_id}:{name}"
        self.schema = arrow_schema(name)
        spec = table_spec(name)
        self.partition_by: list[str] | None = spec.get("partition_by") or None
        self.keys: list[str] = spec.get("keys", [])
        # The engine's metrics of the latest MERGE (rows and files scanned, written, ...)
        self.last_merge: dict[str, Any] = {}
        # delta.logRetentionDuration the table is held to (None: leave the table's own)
        self.log_retention = (None if log_retention_minutes is None
                              else log_retention_property(log_retention_minutes))

    # -- the engine's part -------------------------------------------------------------

    @abstractmethod
    def ensure(self) -> Any:
        """The engine's handle on the table at its newest version, creating the table
        when missing."""

    @abstractmethod
    def exists(self) -> bool:
        """Whether the table is there (nothing is created to find out)."""

    @abstractmethod
    def transaction_version(self) -> int | None:
        """The newest version committed under this table's app id (None: never)."""

    @abstractmethod
    def version(self) -> int:
        """The table's newest Delta version."""

    @abstractmethod
    def columns(self) -> list[str]:
        """The stored table's column names (an older table may lack some of `schema`'s)."""

    @abstractmethod
    def add_columns(self, fields: list[pa.Field]) -> None:
        """Add nullable columns to the stored table."""

    @abstractmethod
    def read(self, pushdown: Filter | None = None, where: Filter | None = None,
             columns: list[str] | None = None) -> pa.Table:
        """Rows matching `pushdown` (file-pruning: timestamps, partition columns) and
        `where` (the rest), with `columns` (default: all) cast to the table's schema."""

    @abstractmethod
    def _append(self, data: pa.Table, batch_id: int) -> None: ...

    def _add_files(self, files: list[TaskFile], batch_id: int) -> None:
        """Commit Parquet files already written into the table's folder, in one commit."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot commit files the read tasks wrote; "
            "delta.bronze_writers: read_tasks needs delta.engine: delta-rs")

    @abstractmethod
    def _merge(self, source: pa.Table, batch_id: int) -> None:
        """MERGE `source` (the table's columns and DROP_COLUMN) on the keys, bounded by
        their key ranges: a flagged match is deleted, another match updated, an unflagged
        new key inserted."""

    @abstractmethod
    def _delete_keys(self, keys: pa.Table, batch_id: int) -> None:
        """Delete the rows matching `keys` on all of its columns, in one commit."""

    @abstractmethod
    def compact(self, partition_filters: PartitionFilters | None = None) -> None:
        """Merge the small files one commit per batch leaves (in the partitions named);
        idempotent."""

    @abstractmethod
    def delete_where(self, predicate: str) -> int:
        """Delete the rows matching `predicate`, a Delta SQL condition both engines parse
        (`streaming.retention` builds it from its own column names and cut-off, never from
        data); returns how many went."""

    @abstractmethod
    def vacuum(self, retain_hours: float, untracked: bool = False) -> None:
        """Remove files no version younger than `retain_hours` reads; with `untracked`,
        also files no version ever referenced (the read tasks' uncommitted ones) once they
        are that old."""

    # -- the same for every engine -----------------------------------------------------

    def committed(self, batch_id: int) -> bool:
        version = self.transaction_version()
        return version is not None and version >= batch_id

    def conform(self, data: pa.Table) -> pa.Table:
        return data.select(self.schema.names).cast(self.schema)

    def append(self, data: pa.Table, batch_id: int) -> bool:
        """Append once per batch id; returns False when the batch was already committed."""
        if self.committed(batch_id):
            LOG.info("%s: batch %d already committed, skipping", self.name, batch_id)
            return False
        self._append(self.conform(data), batch_id)
        return True

    def add_files(self, files: list[TaskFile], batch_id: int) -> bool:
        """Commit the read tasks' files of a batch once per batch id (an empty list commits
        nothing but the batch id); returns False when the batch was already committed."""
        if self.committed(batch_id):
            LOG.info("%s: batch %d already committed, skipping", self.name, batch_id)
            return False
        self._add_files(files, batch_id)
        return True

    def upsert(self, data: pa.Table, batch_id: int) -> bool:
        """MERGE by the table's keys: late data corrects a row instead of duplicating it.
        Returns whether it committed (False: a replayed batch, or nothing to write).

        Nothing is deleted: a row the data no longer has stays (incidents that later
        samples withdraw are written as such: signals.incidents.reconcile_incidents).
        """
        if self.committed(batch_id):
            return False
        data = self.conform(data)
        source = data.append_column(DROP_COLUMN, pa.repeat(False, data.num_rows))
        if source.num_rows == 0:
            # Nothing to insert or update: no commit. (A healthy fleet's incidents
            # are empty batch after batch; a version each would be a MERGE's planning and a
            # log entry for nothing. A replay of the batch finds nothing to write again.)
            return False
        self._merge(source, batch_id)
        return True

    def delete_rows(self, keys: pa.Table, batch_id: int) -> bool:
        """Delete the rows matching `keys` on all its columns, once per batch id. The keys
        are a MERGE's source rows, so no data value is spelled into its condition."""
        if self.committed(batch_id):
            return False
        self._delete_keys(keys, batch_id)
        return True
