"""Delta tables written with delta-rs from the driver (`delta.engine: delta-rs`, the default).

delta-rs records the app transaction but does not refuse a stale version, so every write
first reads `transaction_version(app_id)` and skips a batch id already committed (see
streaming.sinks.base); the commit records the new one. Reads go through pyarrow datasets.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.schema import Field
from deltalake.transaction import AddAction

from streaming.locations import is_local, local_path
from streaming.redact import redact_text, redact_url
from streaming.sinks.base import (
    DROP_COLUMN,
    LOG_RETENTION,
    DeltaSink,
    PartitionFilters,
    TableUnreadable,
    key_ranges,
)
from streaming.sinks.predicates import Filter, arrow_filter
from streaming.sinks.task_files import TaskFile


class DeltaRsTable(DeltaSink):
    """One table under `root`, a local path or a URL (s3://, s3a://, abfss://, gs://, ...);
    `storage_options` are delta-rs' (config `delta.storage_options` with its secrets)."""

    def __init__(self, root: str, name: str, app_id: str,
                 storage_options: Mapping[str, str] | None = None,
                 log_retention_minutes: float | None = None) -> None:
        super().__init__(root, name, app_id, log_retention_minutes)
        self.storage_options = dict(storage_options) if storage_options else None
        self._table: DeltaTable | None = None

    def ensure(self) -> DeltaTable:
        """The table at its newest version; the handle is kept and refreshed incrementally
        so each micro-batch does not replay the whole log."""
        if self._table is not None:
            self._table.update_incremental()
            return self._table
        properties = {LOG_RETENTION: self.log_retention} if self.log_retention else {}
        try:
            try:
                table = DeltaTable(self.path, storage_options=self.storage_options)
            except TableNotFoundError:
                raise
            except DeltaError as err:  # a torn or missing log file: say which table
                raise TableUnreadable(
                    f"Delta table {redact_url(self.path)} cannot be read: repair its "
                    f"_delta_log or restore the table. {redact_text(str(err))}") from err
            if properties and table.metadata().configuration.get(LOG_RETENTION) != self.log_retention:
                table.alter.set_table_properties(properties)
        except TableNotFoundError:
            if is_local(self.path):  # an object store has no folders to make
                Path(local_path(self.path)).mkdir(parents=True, exist_ok=True)
            table = DeltaTable.create(self.path, self.schema, partition_by=self.partition_by,
                                      mode="ignore", configuration=properties or None,
                                      storage_options=self.storage_options)
        self._table = table
        return table

    def exists(self) -> bool:
        return self._table is not None or DeltaTable.is_deltatable(
            self.path, storage_options=self.storage_options)

    def transaction_version(self) -> int | None:
        return self.ensure().transaction_version(self.app_id)

    def version(self) -> int:
        return self.ensure().version()

    def columns(self) -> list[str]:
        return list(self.ensure().schema().to_arrow().names)

    def add_columns(self, fields: list[pa.Field]) -> None:
        self.ensure().alter.add_columns([Field.from_arrow(f) for f in fields])

    def _props(self, batch_id: int) -> CommitProperties:
        return CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)])

    def _append(self, data: pa.Table, batch_id: int) -> None:
        write_deltalake(self.ensure(), data, mode="append",
                        partition_by=self.partition_by, commit_properties=self._props(batch_id))

    def _add_files(self, files: list[TaskFile], batch_id: int) -> None:
        actions = [AddAction(f.path, f.size, f.partition_values, f.modification_time, True,
                             f.stats) for f in files]
        self.ensure().create_write_transaction(
            actions, mode="append", schema=self.schema, partition_by=self.partition_by,
            commit_properties=self._props(batch_id))

    def _merge(self, source: pa.Table, batch_id: int) -> None:
        predicate = " AND ".join([*(f"t.`{k}` = s.`{k}`" for k in self.keys),
                                  *self.key_bounds(source)])
        drop = f"s.`{DROP_COLUMN}`"
        merge = (
            self.ensure().merge(source, predicate, source_alias="s",
                                target_alias="t", commit_properties=self._props(batch_id))
            .when_matched_delete(drop)
            .when_matched_update_all(except_cols=[DROP_COLUMN])
            .when_not_matched_insert_all(f"NOT {drop}", except_cols=[DROP_COLUMN])
        )
        self.last_merge = merge.execute()

    def _delete_keys(self, keys: pa.Table, batch_id: int) -> None:
        predicate = " AND ".join([*(f"t.`{k}` = s.`{k}`" for k in keys.column_names),
                                  *self.key_bounds(keys, keys.column_names)])
        self.last_merge = (
            self.ensure().merge(keys, predicate, source_alias="s", target_alias="t",
                                commit_properties=self._props(batch_id))
            .when_matched_delete().execute())

    def key_bounds(self, data: pa.Table, keys: list[str] | None = None) -> list[str]:
        """Target-side bounds on the ordered keys (the table's keys unless `keys` names
        others), as delta-rs' SQL: see streaming.sinks.base.key_ranges for why. The
        literals are integers and ISO times, never text from the data."""
        return [f"t.`{r.key}` >= {_literal(r.low)} AND t.`{r.key}` <= {_literal(r.high)}"
                for r in key_ranges(self.schema, data, self.keys if keys is None else keys)]

    def read(self, pushdown: Filter | None = None, where: Filter | None = None,
             columns: list[str] | None = None) -> pa.Table:
        """Rows matching `pushdown` (file-pruning on timestamps and partition columns) and
        `where` (applied in memory after casting to the table schema).

        String predicates are never pushed down: once a delta-rs MERGE has written a file
        holding several values of a string column, pyarrow 26 compares the file's string
        statistics with string_view values and fails the whole scan.
        """
        dataset = self.ensure().to_pyarrow_dataset()
        names = list(columns) if columns else list(self.schema.names)
        if where is not None:  # only the columns this version of the table has
            names += [n for n in self.schema.names
                      if n not in names and n in dataset.schema.names]
        table = dataset.to_table(filter=arrow_filter(pushdown), columns=names)
        table = table.cast(pa.schema([self.schema.field(n) for n in names]))
        if where is not None:
            table = table.filter(arrow_filter(where))
        return table.select(list(columns) if columns else list(self.schema.names))

    def compact(self, partition_filters: PartitionFilters | None = None) -> None:
        """Merge the small files one file per micro-batch leaves, and checkpoint the log."""
        table = self.ensure()
        if self.partition_by is None:
            partition_filters = None
        table.optimize.compact(partition_filters=partition_filters)
        table.create_checkpoint()

    def delete_where(self, predicate: str) -> int:
        metrics = self.ensure().delete(predicate)
        return int(metrics.get("num_deleted_rows") or 0)

    def vacuum(self, retain_hours: float, untracked: bool = False) -> None:
        # full: every file the log does not reference, not only those it removed
        self.ensure().vacuum(retention_hours=int(retain_hours), dry_run=False,
                             enforce_retention_duration=False, full=untracked)


def _literal(value: int | datetime) -> str:
    """A key bound as delta-rs SQL: an integer, or an ISO time in quotes."""
    return f"'{value.isoformat()}'" if isinstance(value, datetime) else str(int(value))
