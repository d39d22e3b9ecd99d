"""Delta tables written with delta-rs from foreachBatch, exactly once per (app id, batch id).

delta-rs records the app transaction but does not refuse a stale version, so every write
first reads `transaction_version(app_id)` and skips a batch id already committed: a batch
replayed after a crash writes nothing twice. Each table carries its own transaction, so a
crash between two tables' commits replays only the missing one.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError

from streaming.schemas import arrow_schema, table_spec

LOG = logging.getLogger("kafka_health.delta")


class DeltaRsTable:
    def __init__(self, root: str, name: str, app_id: str) -> None:
        self.name = name
        self.path = str(Path(root) / name)
        self.app_id = f"{app_id}:{name}"
        self.schema = arrow_schema(name)
        spec = table_spec(name)
        self.partition_by = spec.get("partition_by") or None
        self.keys: list[str] = spec.get("keys", [])

    def ensure(self) -> DeltaTable:
        try:
            return DeltaTable(self.path)
        except TableNotFoundError:
            Path(self.path).mkdir(parents=True, exist_ok=True)
            return DeltaTable.create(self.path, self.schema, partition_by=self.partition_by,
                                     mode="ignore")

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
        write_deltalake(self.path, self.conform(data), mode="append",
                        partition_by=self.partition_by, commit_properties=self._props(batch_id))
        return True

    def upsert(self, data: pa.Table, batch_id: int) -> bool:
        """MERGE by the table's keys: late data corrects a row instead of duplicating it."""
        if self.committed(batch_id):
            return False
        table = self.ensure()
        predicate = " AND ".join(f"t.`{k}` = s.`{k}`" for k in self.keys)
        (
            table.merge(self.conform(data), predicate, source_alias="s", target_alias="t",
                        commit_properties=self._props(batch_id))
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        return True

    def reconcile(self, data: pa.Table, batch_id: int, scope: str) -> bool:
        """Upsert `data` and delete rows inside `scope` that the recomputation no longer has.

        For derived tables (incidents) whose rows can disappear when late data corrects
        the windows they came from; rows outside `scope` are never touched.
        """
        if self.committed(batch_id):
            return False
        table = self.ensure()
        predicate = " AND ".join(f"t.`{k}` = s.`{k}`" for k in self.keys)
        (
            table.merge(self.conform(data), predicate, source_alias="s", target_alias="t",
                        commit_properties=self._props(batch_id))
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(scope)
            .execute()
        )
        return True

    def read(self, filter_expr: ds.Expression | None = None,
             columns: list[str] | None = None) -> pa.Table:
        dataset = self.ensure().to_pyarrow_dataset()
        return dataset.to_table(filter=filter_expr, columns=columns)

    def compact(self) -> None:
        self.ensure().optimize.compact()
