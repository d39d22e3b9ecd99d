"""The job with `delta.catalog`, then a reader of its tables by name, in a process of its
own (pyspark keeps one JVM per process, and these sessions need Spark's Hive catalog and
delta-spark, which the test session has not).

    python -m tests.integration.catalog_tables_runs OUT EXPECTED TIMEOUT CONFIG...

One session for every CONFIG (a `kafka-health run` config file, the first with
delta.engine delta-spark), each run as the job runs (`Job.start`) until its bronze holds
EXPECTED rows and every table it wrote is registered under its delta.catalog, then
stopped; the first CONFIG is started a second time on the same checkpoint (a restart's
registration). Then that session stops, and a new one, a new SparkContext with a new
Hive client on the same metastore, as a lakehouse reader's, reads every table each job
registered by name (`SELECT * FROM namespace.table`) into OUT/<namespace>/<table>.arrow
in the table's own schema. OUT/facts.json: per run the tables written and registered
after each start, the catalog's warnings, per namespace the names the reader's catalog
lists and their locations, and how long each step took.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import pyarrow as pa

from streaming.config import Config, load_config
from streaming.job import Job
from streaming.pipeline.catalog_tables import table_name
from streaming.pipeline.tables import TABLES
from streaming.runtime.spark_session import build_spark
from streaming.schemas import arrow_schema
from tests.conftest import wait_for
from tests.integration.helpers import count


class Said(logging.Handler):
    """The catalog's warnings, kept for the test."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def written(config: Config) -> list[str]:
    """The tables the job has created under delta.path."""
    return [name for name in TABLES if (Path(config.delta.path) / name / "_delta_log").is_dir()]


def run(spark, config: Config, expected: int, timeout: float) -> list[str]:  # noqa: ANN001
    """Run the job until bronze holds `expected` rows and every table it wrote has its name;
    returns the names registered."""
    job = Job(config, spark=spark, printer=None)
    job.start()
    try:
        def done() -> bool:
            if not job.query.isActive:
                raise AssertionError(f"query stopped: {job.query.exception()}")
            return (count(config.delta.path, "bronze") >= expected
                    and "cluster_metadata" in written(config)
                    and set(written(config)) <= job.catalog.registered)

        wait_for(done, timeout, f"{expected} bronze rows and every table written registered")
        return sorted(job.catalog.registered)
    finally:
        job.stop()


def write(spark, expected: int, timeout: float, configs: list[Config]) -> dict:  # noqa: ANN001
    """The runs (the first config twice: a restart); what each wrote and registered."""
    runs: dict[str, list[dict[str, object]]] = {}
    for config in [*configs, configs[0]]:
        started = time.monotonic()
        names = run(spark, config, expected, timeout)
        assert config.delta.catalog
        runs.setdefault(config.delta.catalog, []).append(
            {"registered": names, "written": written(config),
             "seconds": round(time.monotonic() - started, 1)})
    return runs


def read(spark, out: Path, configs: list[Config]) -> dict:  # noqa: ANN001
    """Every table each config's namespace lists, read by name; the names and locations."""
    facts: dict[str, object] = {}
    for config in configs:
        namespace = config.delta.catalog
        assert namespace
        names = sorted(row.tableName for row in spark.sql(f"SHOW TABLES IN {namespace}")
                       .collect())
        folder = out / namespace
        folder.mkdir(parents=True, exist_ok=True)
        locations = {}
        for name in names:
            full = table_name(namespace, name)
            schema = arrow_schema(name)
            rows = spark.sql(f"SELECT * FROM {full}").toArrow()
            rows = rows.select(schema.names).cast(schema)
            with pa.OSFile(str(folder / f"{name}.arrow"), "wb") as sink, \
                    pa.ipc.new_file(sink, schema) as writer:
                writer.write_table(rows)
            detail = spark.sql(f"DESCRIBE DETAIL {full}").first()
            locations[name] = detail["location"] if detail else None
        facts[namespace] = {"tables": names, "locations": locations}
    return facts


def main(out: Path, expected: int, timeout: float, configs: list[Config]) -> int:
    said = Said()
    logging.getLogger("kafka_health.catalog").addHandler(said)
    seconds: dict[str, float] = {}
    started = time.monotonic()
    spark = build_spark(configs[0])
    seconds["session"] = time.monotonic() - started
    try:
        runs = write(spark, expected, timeout, configs)
    finally:
        spark.stop()
    started = time.monotonic()
    reader = build_spark(configs[0])
    try:
        tables = read(reader, out, configs)
    finally:
        reader.stop()
    seconds["read"] = time.monotonic() - started
    facts = {"runs": runs, "warnings": said.lines, "read": tables,
             "seconds": {k: round(v, 1) for k, v in seconds.items()}}
    (out / "facts.json").write_text(json.dumps(facts, indent=1))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]),
                  [load_config(path, environ={}) for path in sys.argv[4:]]))
