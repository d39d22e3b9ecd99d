"""The one place that chooses the Delta engine (`delta.engine`) for a table."""

from __future__ import annotations

from collections.abc import Mapping

from streaming.sinks.base import DeltaSink


def open_table(engine: str, root: str, name: str, app_id: str,
               storage_options: Mapping[str, str] | None = None,
               log_retention_minutes: float | None = None) -> DeltaSink:
    """Table `name` under `root`, written in the transactions of `app_id`: with delta-rs
    from the driver (`storage_options` reach a remote root), or with delta-spark through
    the running Spark session (whose `spark.hadoop.*` settings reach it). With
    `log_retention_minutes` (delta.log_retention_minutes) a delta-rs table's log keeps a
    commit that long."""
    if engine == "delta-rs":
        from streaming.sinks.delta_rs import DeltaRsTable

        return DeltaRsTable(root, name, app_id, storage_options, log_retention_minutes)
    if engine == "delta-spark":
        from streaming.sinks.delta_spark import DeltaSparkTable  # imports pyspark and delta

        # No log retention of ours: Spark's Delta refuses a delta.logRetentionDuration
        # shorter than delta.deletedFileRetentionDuration (7 days)
        return DeltaSparkTable(root, name, app_id)
    raise ValueError(f"unknown delta.engine {engine!r}: 'delta-rs' or 'delta-spark'")
