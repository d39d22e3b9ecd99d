"""Run the job once per engine pair over one topic, in one process and one Spark session.

    python -m tests.integration.engine_matrix_runs OUT EXPECTED_BRONZE_ROWS TIMEOUT CONFIG...

A process of its own, because its session needs what every pair needs, which only a new
JVM takes (pyspark keeps one JVM per process): Spark's kafka source and delta-spark on
its class path, and Delta's SQL extension. One session for the four runs keeps the JVM's
start and warm-up to one. Each CONFIG (a `kafka-health run` config file, its engines
chosen) runs as the job does (`Job.start`) until its bronze holds EXPECTED_BRONZE_ROWS,
then stops after its batch and its signals; OUT/seconds.json says how long each took.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from streaming.config import load_config
from streaming.runtime.spark_session import build_spark
from tests.integration.helpers import count, run_until


def main(out: str, expected: int, timeout: float, configs: list[str]) -> int:
    pairs = {"KAFKA_HEALTH__SOURCE__ENGINE": "spark", "KAFKA_HEALTH__DELTA__ENGINE": "delta-spark"}
    spark = build_spark(load_config(configs[0], environ=pairs))
    took: dict[str, float] = {}
    try:
        for path in configs:
            config = load_config(path, environ={})
            started = time.monotonic()
            run_until(spark, config, lambda config=config: count(
                config.delta.path, "bronze") >= expected, timeout, f"{expected} bronze rows")
            took[f"{config.source.engine} {config.delta.engine} {config.delta.writers()}"] = (
                time.monotonic() - started)
    finally:
        spark.stop()
    (Path(out) / "seconds.json").write_text(json.dumps(took))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]))
