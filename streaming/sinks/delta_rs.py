"""Delta tables written with delta-rs from foreachBatch, exactly once per (app id, batch id).

delta-rs records the app transaction but does not refuse a stale version, so every write
first reads `transaction_version(app_id)` and skips a batch id already committed: a batch
replayed after a crash writes nothing twice. Each table carries its own transaction, so a
crash between two tables' commits replays only the missing one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError

from streaming.locations import is_local, join, local_path
from streaming.schemas import arrow_schema, table_spec

LOG = logging.getLogger("kafka_health.delta")
DROP_COLUMN = "__kafka_health_drop"  # a MERGE source flag: delete the matching target row


@dataclass(frozen=True)
class Scope:
    """Target rows a reconciling upsert owns, as Arrow expressions: `pushdown` prunes files
    (timestamps, partition columns), `where` filters in memory (strings; see `read`)."""

    pushdown: ds.Expression | None = None
    where: ds.Expression | None = None


class DeltaRsTable:
    """One table under `root`, a local path or a URL (s3://, s3a://, abfss://, gs://, ...);
    `storage_options` are delta-rs' (config `delta.storage_options` with its secrets)."""

    def __init__(self, root: str, name: str, app_id: str,
                 storage_options: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.path = join(str(root), name)
        self.storage_options = dict(storage_options) if storage_options else None
        self.app_id = f"{app_id}:{name}"
        self.schema = arrow_schema(name)
        spec = table_spec(name)
        self.partition_by = spec.get("partition_by") or None
        self.keys: list[str] = spec.get("keys", [])
        self._table: DeltaTable | None = None
        # delta-rs' metrics of the latest MERGE (rows and files scanned, skipped, written)
        self.last_merge: dict[str, Any] = {}

    def ensure(self) -> DeltaTable:
        """The table at its newest version; the handle is kept and refreshed incrementally
        so each micro-batch does not replay the whole log."""
        if self._table is not None:
            self._table.update_incremental()
            return self._table
        try:
            self._table = DeltaTable(self.path, storage_options=self.storage_options)
        except TableNotFoundError:
            if is_local(self.path):  # an object store has no folders to make
                Path(local_path(self.path)).mkdir(parents=True, exist_ok=True)
            self._table = DeltaTable.create(self.path, self.schema,
                                            partition_by=self.partition_by, mode="ignore",
                                            storage_options=self.storage_options)
        return self._table

    def committed(self, batch_id: int) -> bool:
        version = self.ensure().transaction_version(self.app_id)
        return version is not None and version >= batch_id

    def _props(self, batch_id: int) -> CommitProperties:
        return CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)])

    def conform(self, data: pa.Table) -> pa.Table:
        return data.select(self.schema.names).cast(self.schema)

    def append(self, data: pa.Table, batch_id: int) -> bool:
        """Append once per batch id; returns False when the batch was already committed."""
        if self.committed(batch_id):
            LOG.info("%s: batch %d already committed, skipping", self.name, batch_id)
            return False
        write_deltalake(self.ensure(), self.conform(data), mode="append",
                        partition_by=self.partition_by, commit_properties=self._props(batch_id))
        return True

    def upsert(self, data: pa.Table, batch_id: int, owned: Scope | None = None) -> bool:
        """MERGE by the table's keys: late data corrects a row instead of duplicating it.

        With `owned`, target rows inside that scope whose keys `data` no longer has are
        deleted in the same commit: for derived tables (incidents) whose rows disappear when
        late data corrects the windows they came from; rows outside the scope are never
        touched. The doomed keys are found with Arrow expressions and travel to the MERGE
        as source rows flagged DROP_COLUMN, so no data value is ever spelled into the
        MERGE's SQL text (cluster names hold quotes, backslashes, newlines).
        """
        if self.committed(batch_id):
            return False
        data = self.conform(data)
        source = data.append_column(DROP_COLUMN, pa.repeat(False, data.num_rows))
        if owned is not None:
            source = pa.concat_tables([source, self._tombstones(data, owned)])
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
        return True

    def delete_rows(self, keys: pa.Table, batch_id: int) -> bool:
        """Delete the rows matching `keys` on all its columns, once per batch id. The keys
        are the MERGE's source rows, so no data value is spelled into its SQL text."""
        if self.committed(batch_id):
            return False
        predicate = " AND ".join([*(f"t.`{k}` = s.`{k}`" for k in keys.column_names),
                                  *self.key_bounds(keys, keys.column_names)])
        self.last_merge = (
            self.ensure().merge(keys, predicate, source_alias="s", target_alias="t",
                                commit_properties=self._props(batch_id))
            .when_matched_delete().execute())
        return True

    def _tombstones(self, data: pa.Table, owned: Scope) -> pa.Table:
        """Source rows (keys only, flagged) for the target rows in `owned` that `data` lacks."""
        inside = self.read(owned.pushdown, owned.where, columns=self.keys)
        gone = inside.join(data.select(self.keys), self.keys, join_type="left anti")
        columns = {f.name: (gone[f.name] if f.name in self.keys
                            else pa.nulls(gone.num_rows, f.type)) for f in self.schema}
        columns[DROP_COLUMN] = pa.repeat(True, gone.num_rows)
        return pa.table(columns, schema=self.schema.append(pa.field(DROP_COLUMN, pa.bool_())))

    def key_bounds(self, data: pa.Table, keys: list[str] | None = None) -> list[str]:
        """Target-side bounds on the ordered keys (timestamps, integers; the table's keys
        unless `keys` names others): the source's [min, max] of each.

        Why: delta-rs prunes the MERGE's target files by their statistics only from
        conditions on the target alone; with nothing but `t.k = s.k` it reads every file
        and the cost of each batch's upsert grows with the table's history (measured on
        2.16 M broker_signals rows, 30 days of 50 brokers: 0.6-2.2 s a MERGE, 0.03 s with
        the bounds). A matching target row has the source's key, so it lies inside these
        bounds: the rows matched and inserted are the same. Rows to delete are source rows
        too (see `upsert`), so the bounds cover them. The literals are integers and ISO
        times, never text from the data; a time Python cannot represent only loses its bound.
        """
        bounds: list[str] = []
        if data.num_rows == 0:
            return bounds
        for key in self.keys if keys is None else keys:
            kind = self.schema.field(key).type
            if not (pa.types.is_timestamp(kind) or pa.types.is_integer(kind)):
                continue
            low, high = pc.min_max(data[key]).values()
            if not low.is_valid:
                continue
            if pa.types.is_timestamp(kind):
                try:
                    first, last = low.as_py().isoformat(), high.as_py().isoformat()
                except (OverflowError, ValueError):
                    continue
                bounds.append(f"t.`{key}` >= '{first}' AND t.`{key}` <= '{last}'")
            else:
                bounds.append(f"t.`{key}` >= {int(low.as_py())} "
                              f"AND t.`{key}` <= {int(high.as_py())}")
        return bounds

    def read(self, pushdown: ds.Expression | None = None, where: ds.Expression | None = None,
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
        table = dataset.to_table(filter=pushdown, columns=names)
        table = table.cast(pa.schema([self.schema.field(n) for n in names]))
        if where is not None:
            table = table.filter(where)
        return table.select(list(columns) if columns else list(self.schema.names))

    def compact(self, partition_filters: list[tuple[str, str, str]] | None = None) -> None:
        """Merge the small files one file per micro-batch leaves, and checkpoint the log."""
        table = self.ensure()
        if self.partition_by is None:
            partition_filters = None
        table.optimize.compact(partition_filters=partition_filters)
        table.create_checkpoint()
