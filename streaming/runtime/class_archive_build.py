"""Build the class-data sharing archive of the Spark driver for a config's session.

    python -m streaming.runtime.class_archive_build [--config FILE] [--force]

Starts the session the config's job would start (same class path and JVM options) with
`-XX:ArchiveClassesAtExit`, runs a small batch query and a short streaming query so that
the classes a micro-batch needs are loaded, stops the JVM and waits for it to write the
archive at its exit, checks that a JVM maps it, and only then renames it into place
(streaming/runtime/class_archive.py says why and how the job uses it). Idempotent: an
archive already in place is kept unless --force. `deploy/bootstrap.sh` runs it for the
default config; a deployment whose config adds jars (Spark's kafka source, delta-spark,
S3A) runs it once with that config. The test bed's Kafka nodes' archive is built the same
way (`publish`) by streaming.testbed.class_archive.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from streaming.config import Config, load_config
from streaming.logsetup import spark_log_config
from streaming.runtime.class_archive import (
    QUIET,
    archive_dir,
    archive_path,
    dump_options,
    sharing_options,
)
from streaming.runtime.jvm import java
from streaming.runtime.spark_session import driver_classpath, spark_conf, start_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEEP = 4  # archives of a kind kept (a driver one about 150 MB, a Kafka one 50 MB): the newest


def warm_up(spark: SparkSession, scratch: Path) -> None:
    """Load what a micro-batch of the job loads: Arrow to and from Python workers, a
    streaming query's offset and commit logs, foreachBatch."""
    frame = spark.range(20_000).selectExpr("id", "cast(id as double) AS value")
    frame.mapInArrow(lambda batches: batches, frame.schema).toArrow()
    query = (spark.readStream.format("rate").option("rowsPerSecond", 1000).load()
             .writeStream.foreachBatch(lambda batch, _id: batch.toArrow())
             .option("checkpointLocation", str(scratch / "checkpoint"))
             .trigger(processingTime="100 milliseconds").start())
    deadline = time.monotonic() + 60
    while (cast(dict[str, Any], query.lastProgress or {}).get("batchId", -1) < 2
           and time.monotonic() < deadline):
        time.sleep(0.1)
    query.stop()


def maps(archive: Path) -> bool:
    """Whether a JVM maps the archive without failing (a truncated one crashes it)."""
    with tempfile.TemporaryDirectory() as where:
        done = subprocess.run(
            [java(), f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", *QUIET,
             "-XX:-CreateCoredumpOnCrash", f"-XX:ErrorFile={where}/hs_err.log", "-version"],
            cwd=where, capture_output=True, timeout=60)
    return done.returncode == 0


def build(config: Config, force: bool = False) -> tuple[Path | None, str]:
    """(the archive, what happened) for the config's Spark driver class path."""
    conf = spark_conf(config)
    mapping = set(sharing_options(driver_classpath(conf)))  # an archive already in place
    options = [o for o in conf.get("spark.driver.extraJavaOptions", "").split()
               if o not in mapping]

    def dump(partial: Path) -> None:
        conf["spark.driver.extraJavaOptions"] = " ".join(
            [*options, *dump_options(partial)])
        spark = start_session(config, conf)
        gateway = spark.sparkContext._gateway
        if gateway is None:  # a session started here always has one
            raise RuntimeError("the Spark session has no Py4J gateway")
        jvm = gateway.proc  # the spark-submit process, exec'd into java
        with tempfile.TemporaryDirectory() as scratch:
            warm_up(spark, Path(scratch))
            spark.stop()
        jvm.stdin.close()  # the gateway exits on EOF, and writes the archive as it does
        jvm.wait(300)

    return publish(archive_path(driver_classpath(conf)), "driver", dump, force)


def publish(target: Path | None, kind: str, dump: Callable[[Path], None], force: bool
            ) -> tuple[Path | None, str]:
    """Run `dump` (a JVM that writes its archive to the path given, and has exited), check
    that a JVM maps what it wrote, and only then give it the target's name; keep the
    newest KEEP archives of the kind (older ones fit replaced installs)."""
    if target is None:
        return None, f"no {kind} archive: Java or its jars not found"
    if target.is_file() and not force:
        return target, "up to date"
    archive_dir().mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.partial")
    started = time.monotonic()
    try:
        dump(partial)
        if not partial.is_file() or not maps(partial):
            return None, f"no archive: the JVM did not write a usable one at {partial}"
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    for old in sorted(archive_dir().glob(f"{kind}-*.jsa"), key=lambda p: p.stat().st_mtime,
                      reverse=True)[KEEP:]:
        old.unlink(missing_ok=True)
    return target, f"created in {time.monotonic() - started:.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streaming.runtime.class_archive_build",
        description="Build the class-data sharing archive that halves the Spark driver "
                    "JVM's start-up, for the session of a config (default: the built-in "
                    "one). Safe to rerun: an archive in place is kept.")
    parser.add_argument("--config", help="the job's config file (the same as `kafka-health "
                        "run --config`); its engines and locations decide the class path")
    parser.add_argument("--force", action="store_true", help="build it again even if present")
    args = parser.parse_args(argv)
    spark_log_config(0)  # the driver's log settings, as `kafka-health run` starts it
    path, what = build(load_config(args.config), args.force)
    print(f"Spark driver class-data archive: {path or '-'} ({what})")
    return 0 if path is not None else 1


if __name__ == "__main__":
    sys.exit(main())
