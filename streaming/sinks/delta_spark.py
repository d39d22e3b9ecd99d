"""Delta tables written with delta-spark (`delta.engine: delta-spark`): the driver's Arrow
rows become a Spark DataFrame and the executors write them, through Spark's file systems
(Hadoop's: hdfs://, s3a://, abfss://, gs:// with their connectors and Spark's settings).

The tables are the same Delta tables delta-rs writes (same schemas, partitioning and
protocol; timestamps as INT64 microseconds, see streaming.runtime.spark_session), so either
engine reads and continues what the other wrote.

Each write is idempotent through Delta's own app transactions: an append carries the
`txnAppId`/`txnVersion` write options, a MERGE the session settings
`spark.databricks.delta.write.txnAppId`/`txnVersion` (DML takes no write options), and
Delta itself skips a version already committed. Those settings belong to a session, so
each table has a session of its own (`SparkSession.newSession`: same SparkContext, own SQL
settings) and sets them only around its own MERGE: the signals writer and the Admin API
pollers merge into different tables at the same time. The committed version is read with
Delta Kernel's public API (`Snapshot.getLatestTransactionVersion`), which delta-spark's
Python API lacks.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
from delta.tables import DeltaTable
from pyspark import SparkContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - pyspark's own alias
from pyspark.sql.pandas.types import from_arrow_schema

from streaming.locations import is_local, local_path
from streaming.sinks.base import DROP_COLUMN, DeltaSink, KeyRange, PartitionFilters, key_ranges
from streaming.sinks.predicates import Filter, spark_filter

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def running_session() -> SparkSession:
    """The process's Spark session (the job's, built by streaming.runtime.spark_session).

    Why not `getActiveSession` alone: the active session is per thread, and the signals
    thread and the pollers are threads of our own, where it is None."""
    session = SparkSession.getActiveSession()
    if session is not None:
        return session
    if SparkContext._active_spark_context is None:
        raise RuntimeError("delta.engine delta-spark writes through Spark, and this process "
                           "has no Spark session")
    return SparkSession.builder.getOrCreate()  # the running one, never a new context


def delta_session(base: SparkSession) -> SparkSession:
    """A new session of `base`'s SparkContext (its own SQL settings) for Delta's work, with

    - vacuum keeping what `delta.vacuum_retain_hours` says, also under Delta's default
      7 days, as delta-rs does (`enforce_retention_duration=False`);
    - Delta's own jobs as wide as the cluster's cores: rebuilding a table's state from
      its log (default 50 tasks after each commit, sized for logs of millions of files)
      and VACUUM's listing (Spark's partition-discovery parallelism, default 10,000:
      measured 170k tasks and 130 s for one small table on 2 cores, 6 s with 2).
    """
    session = base.newSession()
    cores = str(session.sparkContext.defaultParallelism)
    for key, value in (("spark.databricks.delta.retentionDurationCheck.enabled", "false"),
                       ("spark.databricks.delta.snapshotPartitions", cores),
                       ("spark.sql.sources.parallelPartitionDiscovery.parallelism", cores)):
        session.conf.set(key, value)
    return session


class DeltaSparkTable(DeltaSink):
    """One table under `root`, a path or a Hadoop URL; the Spark session's settings reach
    the store (`spark.hadoop.*`), so there are no storage options of its own."""

    def __init__(self, root: str, name: str, app_id: str,
                 spark: SparkSession | None = None) -> None:
        super().__init__(root, name, app_id)
        self._base = spark
        self._session: SparkSession | None = None
        self._created = False
        self._kernel: Any = None  # Delta Kernel's engine, on the session's Hadoop settings
        # Held by every DML on this table's Spark session: none may run while a MERGE's transaction
        # settings are set (it would be recorded, or skipped, as that batch's).
        self._lock = threading.Lock()
        self.spark_schema = from_arrow_schema(self.schema)

    @property
    def session(self) -> SparkSession:
        """This table's own session (see the module's docstring and `delta_session`)."""
        if self._session is None:
            self._session = delta_session(self._base or running_session())
        return self._session

    def _create(self) -> None:
        """Create the table with tables.yaml's schema and partitioning when missing."""
        if self._created:
            return
        if not DeltaTable.isDeltaTable(self.session, self.path):
            builder = (DeltaTable.createIfNotExists(self.session).location(self.path)
                       .addColumns(self.spark_schema))
            if self.partition_by:
                builder = builder.partitionedBy(*self.partition_by)
            builder.execute()
        self._created = True

    def ensure(self) -> DeltaTable:
        """The table at its newest version, created when missing."""
        self._create()
        return DeltaTable.forPath(self.session, self.path)

    def exists(self) -> bool:
        return self._created or DeltaTable.isDeltaTable(self.session, self.path)

    def _snapshot(self) -> Any:
        """The table's newest snapshot through Delta Kernel (io.delta.kernel)."""
        self._create()
        jvm = self.session.sparkContext._jvm
        if self._kernel is None:
            self._kernel = jvm.io.delta.kernel.defaults.engine.DefaultEngine.create(
                self.session.sparkContext._jsc.hadoopConfiguration())
        location = (Path(local_path(self.path)).resolve().as_uri() if is_local(self.path)
                    else self.path)
        return jvm.io.delta.kernel.TableManager.loadSnapshot(location).build(self._kernel)

    def transaction_version(self) -> int | None:
        found = self._snapshot().getLatestTransactionVersion(self._kernel, self.app_id)
        return int(found.get()) if found.isPresent() else None

    def version(self) -> int:
        return int(self._snapshot().getVersion())

    def _frame(self) -> DataFrame:
        self._create()
        return self.session.read.format("delta").load(self.path)

    def columns(self) -> list[str]:
        return list(self._frame().columns)

    def add_columns(self, fields: list[pa.Field]) -> None:
        """Delta's schema evolution on write: an empty append with `mergeSchema` adds the
        columns (nullable) and no rows."""
        stored = self._frame().schema
        for added in from_arrow_schema(pa.schema(fields)).fields:
            stored = stored.add(added)
        (self.session.createDataFrame([], stored).write.format("delta").mode("append")
         .option("mergeSchema", "true").save(self.path))

    def _source(self, data: pa.Table) -> DataFrame:
        """The driver's rows as a DataFrame of the table's Spark session, to be written by the executors.
        A batch whose every record was quarantined leaves an empty table, often with no
        chunks at all, which pyspark's Arrow conversion refuses (ArrowInvalid: empty
        vector): it becomes an empty DataFrame of the same schema, still committed, so the
        batch id is recorded as every engine records it."""
        schema = from_arrow_schema(data.schema)
        if data.num_rows == 0:
            return self.session.createDataFrame([], schema)
        return self.session.createDataFrame(data, schema)

    def _append(self, data: pa.Table, batch_id: int) -> None:
        self._create()
        (self._source(data).write.format("delta").mode("append")
         .option("txnAppId", self.app_id).option("txnVersion", batch_id).save(self.path))

    @contextmanager
    def _transaction(self, batch_id: int) -> Iterator[None]:
        """The app transaction for the DML run inside, then none (a lingering version
        would make the Spark session's later writes look committed already)."""
        with self._lock:
            self.session.conf.set(TXN_APP_ID, self.app_id)
            self.session.conf.set(TXN_VERSION, str(batch_id))
            try:
                yield
            finally:
                self.session.conf.unset(TXN_APP_ID)
                self.session.conf.unset(TXN_VERSION)

    def _matching(self, ranges: list[KeyRange], keys: list[str]) -> Column:
        """t.k = s.k for each key, and each ordered key's target inside the source's range."""
        conditions = [F.col(f"t.`{k}`") == F.col(f"s.`{k}`") for k in keys]
        conditions += [F.col(f"t.`{r.key}`").between(F.lit(r.low), F.lit(r.high))
                       for r in ranges]
        return functools.reduce(operator.and_, conditions)

    def _merge(self, source: pa.Table, batch_id: int) -> None:
        drop = F.col(f"s.`{DROP_COLUMN}`")
        values = {name: F.col(f"s.`{name}`") for name in self.schema.names}
        condition = self._matching(key_ranges(self.schema, source, self.keys), self.keys)
        with self._transaction(batch_id):
            metrics = (
                self.ensure().alias("t").merge(self._source(source).alias("s"), condition)
                .whenMatchedDelete(drop)
                .whenMatchedUpdate(set=values)
                .whenNotMatchedInsert(condition=~drop, values=values)
                .execute())
        self.last_merge = _first_row(metrics)

    def _delete_keys(self, keys: pa.Table, batch_id: int) -> None:
        names = keys.column_names
        condition = self._matching(key_ranges(self.schema, keys, names), names)
        with self._transaction(batch_id):
            metrics = (self.ensure().alias("t").merge(self._source(keys).alias("s"), condition)
                       .whenMatchedDelete().execute())
        self.last_merge = _first_row(metrics)

    def read(self, pushdown: Filter | None = None, where: Filter | None = None,
             columns: list[str] | None = None) -> pa.Table:
        """Both filters go to Spark, which prunes files by partition and statistics."""
        frame = self._frame()
        for condition in (pushdown, where):
            if condition is not None:
                frame = frame.filter(spark_filter(condition))
        names = list(columns) if columns else list(self.schema.names)
        table = frame.select(*[F.col(f"`{n}`") for n in names]).toArrow()
        return table.cast(pa.schema([self.schema.field(n) for n in names]))

    def compact(self, partition_filters: PartitionFilters | None = None) -> None:
        """OPTIMIZE (compaction) of the partitions named. Delta checkpoints its log by
        itself (every `delta.checkpointInterval` commits, 10 by default)."""
        optimize = self.ensure().optimize()
        if partition_filters and self.partition_by:
            # our own column names and values (today's date), never data
            optimize = optimize.where(" AND ".join(
                f"`{column}` {op} '{value}'" for column, op, value in partition_filters))
        with self._lock:
            optimize.executeCompaction()

    def delete_where(self, predicate: str) -> int:
        table = self.ensure()
        with self._lock:
            before = _first_row(table.history(1)).get("version")
            table.delete(predicate)
            latest = _first_row(table.history(1))
        if latest.get("version") == before:  # nothing matched: nothing committed
            return 0
        return int((latest.get("operationMetrics") or {}).get("numDeletedRows") or 0)

    def vacuum(self, retain_hours: float, untracked: bool = False) -> None:
        # Delta's VACUUM removes untracked files as well, always
        table = self.ensure()
        with self._lock:
            table.vacuum(float(retain_hours))


def _first_row(frame: DataFrame | None) -> dict[str, Any]:
    """A command's one-row result (MERGE metrics, the latest commit) as a dict."""
    row = frame.first() if frame is not None else None
    return row.asDict() if row is not None else {}
