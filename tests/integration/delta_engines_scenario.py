"""One scenario of sink calls run with each Delta engine, in a process of its own.

    python -m tests.integration.delta_engines_scenario OUT

A process of its own because its Spark session needs delta-spark on its class path and
Delta's SQL extension, which only a new JVM takes (pyspark keeps one JVM per process). The
same calls (appends, upserts with and without an owned scope, deletes, retention, vacuum,
compaction, a column added to an older table) run under OUT/delta-rs and OUT/delta-spark;
a third root, OUT/mixed, is written by the two engines in turn under one app id. What each
call returned goes to OUT/facts.json, and every table as delta-spark reads it to
OUT/read-by-spark/<root>/<table>.arrow, for the test to compare with delta-rs' reading.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from streaming.config import load_config
from streaming.pipeline.tables import add_missing_columns
from streaming.retention import predicate
from streaming.runtime.spark_session import build_spark
from streaming.schemas import arrow_schema
from streaming.sinks.base import DeltaSink
from streaming.sinks.engines import open_table
from streaming.sinks.predicates import field

ENGINES = ("delta-rs", "delta-spark")
TABLES = ("bronze", "quarantine", "broker_signals", "incidents", "dq_results")
TS = pa.timestamp("us", "UTC")
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
AWKWARD = "c'1\\\n"  # a quote, a backslash and a newline: never spliced into a condition
Opener = Callable[[str, str], DeltaSink]


def rows(table: str, values: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(values, schema=arrow_schema(table))


def bronze(day: datetime, offsets: range) -> pa.Table:
    return rows("bronze", [{
        "ts": day + timedelta(seconds=o), "cluster": AWKWARD if o % 2 else "c2", "broker": "1",
        "metric": "under_min_isr", "attribute": "Value", "labels": [("topic", "orders")],
        "value": float(o), "kind": "gauge", "source_format": "jolokia", "source_topic": "m",
        "source_partition": o % 3, "source_offset": o, "ingest_ts": AT,
        "date": day.strftime("%Y-%m-%d")} for o in offsets])


def signals(windows: range, samples: int) -> pa.Table:
    return rows("broker_signals", [{
        "cluster": cluster, "broker": "1", "window_start": AT + timedelta(minutes=w),
        "window_end": AT + timedelta(minutes=w + 1), "samples": samples + w,
        "under_min_isr_max": float(w), "updated_at": AT}
        for cluster in (AWKWARD, "c2") for w in windows])


def incidents(started: list[tuple[str, int]]) -> pa.Table:
    return rows("incidents", [{
        "incident_id": f"{cluster}/{minute}", "cluster": cluster, "broker": "1",
        "kind": "under_min_isr", "started_at": AT + timedelta(minutes=minute),
        "resolved_at": None, "peak_value": 2.0, "updated_at": AT, "cause": None}
        for cluster, minute in started])


def scenario(engine: str, open_: Opener) -> dict[str, Any]:
    """The calls, and what each returned; the tables are left for the comparison."""
    facts: dict[str, Any] = {}
    old = Path(open_("incidents", "app").path)  # an incidents table from before `cause`
    old.mkdir(parents=True)
    DeltaTable.create(str(old), arrow_schema("incidents").remove(
        arrow_schema("incidents").get_field_index("cause")))
    facts["added_columns"] = add_missing_columns(open_("incidents", "app"))

    samples = open_("bronze", "app")
    yesterday = AT - timedelta(days=1)
    facts["bronze"] = [samples.append(bronze(yesterday, range(0, 6)), 0),
                       samples.append(bronze(yesterday, range(0, 6)), 0),
                       samples.append(bronze(AT, range(6, 12)), 1),
                       # a batch whose every record was quarantined: no rows, no chunks
                       samples.append(pa.Table.from_batches([], bronze(AT, range(1)).schema), 2)]
    if engine == "delta-spark":  # Delta's own skip, without the sink's check first
        version = samples.version()
        samples._append(samples.conform(bronze(AT, range(6, 12))), 1)
        facts["bronze_replay_committed_nothing"] = samples.version() == version
    poison = open_("bronze", "app:poison")
    records = pa.table({"source_topic": ["m"], "source_partition": pa.array([1], pa.int32()),
                        "source_offset": pa.array([7], pa.int64())})
    facts["poison"] = [poison.delete_rows(records, 1), poison.delete_rows(records, 1)]

    merged = open_("broker_signals", "app")
    facts["broker_signals"] = [merged.upsert(signals(range(0, 4), 10), 0),
                               merged.upsert(signals(range(0, 4), 99), 0),
                               merged.upsert(signals(range(2, 6), 20), 1)]
    if engine == "delta-spark":
        version = merged.version()
        merged._merge(merged.conform(signals(range(0, 6), 77)).append_column(
            "__kafka_health_drop", pa.repeat(False, 12)), 1)
        facts["merge_replay_committed_nothing"] = merged.version() == version
    facts["filtered"] = merged.read(
        field("window_start") >= pa.scalar(AT + timedelta(minutes=3), TS),
        field("cluster") == AWKWARD, columns=["cluster", "window_start", "samples"],
    ).sort_by("window_start").to_pylist()

    found = open_("incidents", "app")
    facts["incidents"] = [
        found.upsert(incidents([(AWKWARD, 5), (AWKWARD, 11), ("c2", 12), ("c3", 13)]), 0),
        # rows the second upsert lacks are kept: an upsert never deletes
        found.upsert(incidents([(AWKWARD, 14)]), 1)]

    rejects = open_("quarantine", "app")
    facts["quarantine"] = rejects.append(rows("quarantine", [{
        "ingest_ts": AT - timedelta(days=40), "source_topic": "m", "source_partition": 0,
        "source_offset": 1, "source_format": "jolokia", "reason": "bad 'json'\n",
        "raw": b"\xff\x00"}, {
        "ingest_ts": AT, "source_topic": "m", "source_partition": 0, "source_offset": 2,
        "source_format": "jolokia", "reason": "tombstone", "raw": b""}]), 0)
    facts["retention"] = {
        "bronze": samples.delete_where(predicate("bronze", AT - timedelta(hours=1))),
        "quarantine": rejects.delete_where(predicate("quarantine", AT - timedelta(days=30)))}
    samples.vacuum(0)
    samples.compact([("date", "=", AT.strftime("%Y-%m-%d"))])
    merged.compact()
    quality = open_("dq_results", "app")
    facts["dq_results"] = quality.append(rows("dq_results", [{
        "batch_id": 0, "evaluated_at": AT, "expectation": "not_null", "success": True,
        "unexpected_count": 0, "rows_checked": 12}]), 0)
    facts["transactions"] = {name: open_(name, "app").transaction_version()
                             for name in TABLES}
    # delta.log_retention_minutes (delta-rs only): held on a table made without it, and
    # set on a new one
    root = str(Path(found.path).parent)
    for name in ("incidents", "cluster_signals"):
        open_table(engine, root, name, "app", log_retention_minutes=2).ensure()
    facts["log_retention"] = {
        name: DeltaTable(f"{root}/{name}").metadata().configuration.get(
            "delta.logRetentionDuration") for name in ("incidents", "cluster_signals")}
    return facts


def mixed(root: str) -> dict[str, Any]:
    """The two engines in turn on one root and app id: each sees the other's commits."""
    def opener(engine: str) -> Opener:  # Spark writes to delta-rs' tables with a short log
        return lambda name, app: open_table(engine, root, name, app, log_retention_minutes=2)

    rs, spark = opener("delta-rs"), opener("delta-spark")
    return {
        "rs_appends_0": rs("bronze", "app").append(bronze(AT, range(0, 4)), 0),
        "spark_sees_0": spark("bronze", "app").committed(0),
        "spark_appends_0_again": spark("bronze", "app").append(bronze(AT, range(0, 4)), 0),
        "spark_appends_1": spark("bronze", "app").append(bronze(AT, range(4, 8)), 1),
        "rs_sees_1": rs("bronze", "app").committed(1),
        "spark_upserts_0": spark("broker_signals", "app").upsert(signals(range(0, 4), 10), 0),
        "rs_upserts_1": rs("broker_signals", "app").upsert(signals(range(2, 6), 20), 1),
        "spark_upserts_1_again": spark("broker_signals", "app").upsert(
            signals(range(0, 6), 99), 1),
    }


def main(out: str) -> int:
    config = load_config(None, environ={"KAFKA_HEALTH__DELTA__ENGINE": "delta-spark"})
    spark = build_spark(config)
    try:
        facts: dict[str, Any] = {}
        for engine in ENGINES:
            root = f"{out}/{engine}"
            facts[engine] = scenario(engine, lambda name, app, root=root, engine=engine:
                                     open_table(engine, root, name, app))
        facts["mixed"] = mixed(f"{out}/mixed")
        for root in (*ENGINES, "mixed"):
            folder = Path(out) / "read-by-spark" / root
            folder.mkdir(parents=True)
            for name in TABLES:
                if not DeltaTable.is_deltatable(f"{out}/{root}/{name}"):
                    continue
                table = open_table("delta-spark", f"{out}/{root}", name, "reader").read()
                with pa.OSFile(str(folder / f"{name}.arrow"), "wb") as sink, \
                        pa.ipc.new_file(sink, table.schema) as writer:
                    writer.write_table(table)
    finally:
        spark.stop()
    (Path(out) / "facts.json").write_text(json.dumps(facts, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
