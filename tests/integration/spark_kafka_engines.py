"""Run both sources over one topic in one local Spark session and save what each decoded.

    python -m tests.integration.spark_kafka_engines CONFIG OUT EXPECTED_RECORDS TIMEOUT

A process of its own, so its session is built with Spark's kafka source on `spark.jars`
(streaming.runtime.jvm_jars.session_jars): pyspark keeps one JVM per process, and a session the
test run already holds could not take jars any more. For each engine ("spark", then
"python") the decoded rows of every micro-batch land in OUT/<engine>.arrow and the Kafka
records they came from are counted; the query stops once EXPECTED_RECORDS were read, and
the process fails at TIMEOUT seconds.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pyarrow as pa

from streaming.config import load_config
from streaming.decode.packing import unpack
from streaming.runtime.jvm_jars import session_jars
from streaming.runtime.spark_session import build_spark
from streaming.source.reader import read_decoded_stream


def main(config_path: str, out: str, expected: int, timeout: float) -> int:
    base = load_config(config_path, environ={})
    spark_engine = dataclasses.replace(base, source=dataclasses.replace(base.source, engine="spark"))
    jars = session_jars(spark_engine)
    base.spark.conf["spark.jars"] = ",".join(jars)
    spark = build_spark(base)
    report: dict[str, object] = {"jars": jars}
    try:
        for engine in ("spark", "python"):
            config = dataclasses.replace(
                base, source=dataclasses.replace(base.source, engine=engine),
                spark=dataclasses.replace(base.spark, checkpoint=f"{out}/checkpoint-{engine}"))
            tables: list[pa.Table] = []
            records = [0]

            def collect(frame, batch_id, tables=tables, records=records) -> None:
                decoded, count = unpack(frame.toArrow())
                tables.append(decoded)
                records[0] += count

            query = (read_decoded_stream(spark, config).writeStream.foreachBatch(collect)
                     .option("checkpointLocation", config.spark.checkpoint)
                     .trigger(processingTime="1 second").start())
            deadline = time.monotonic() + timeout
            while records[0] < expected:
                if query.exception() is not None:
                    raise RuntimeError(f"{engine}: the query failed: {query.exception()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{engine}: {records[0]} of {expected} records after "
                                       f"{timeout:.0f}s")
                query.awaitTermination(0.5)
            query.stop()
            rows = pa.concat_tables(tables)
            with pa.OSFile(str(Path(out) / f"{engine}.arrow"), "wb") as sink, \
                    pa.ipc.new_file(sink, rows.schema) as writer:
                writer.write_table(rows)
            report[engine] = {"records": records[0], "rows": rows.num_rows,
                              "batches": len(tables)}
    finally:
        spark.stop()
    (Path(out) / "report.json").write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
