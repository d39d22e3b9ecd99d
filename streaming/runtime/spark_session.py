"""The Spark session the job runs in, and why each of its settings is what it is."""

from __future__ import annotations

import os
import sys
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from streaming.allocator import PURGE_DELAY_ENV, PURGE_DELAY_MS, set_purge_delay
from streaming.config import Config
from streaming.locations import S3_SCHEMES, s3a_hadoop_conf, scheme
from streaming.logsetup import SPARK_LEVEL_ENV
from streaming.runtime.class_archive import sharing_options
from streaming.runtime.jvm_jars import session_jars, spark_jars_dir

# delta.engine delta-spark (streaming/sinks/delta_spark.py), and delta.catalog
# (streaming/pipeline/catalog_tables.py): Delta's SQL extension (MERGE, OPTIMIZE, VACUUM,
# idempotent DML) and catalog, both read once when the session starts;
# timestamps written as INT64 microseconds, the type delta-rs writes and reads, instead of
# Spark's default INT96, so the tables' files are the same whichever engine wrote them.
DELTA_SPARK_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def build_spark(config: Config) -> SparkSession:
    return start_session(config, spark_conf(config))


def start_session(config: Config, conf: dict[str, str]) -> SparkSession:
    """A session of `config`'s master and app name with the settings `conf`."""
    # Python workers must run this interpreter (the venv with pyarrow and this package).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The JVM about to start, and the Python workers it forks, inherit the allocator setting
    set_purge_delay()
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(config.spark.app_name)
    if config.spark.master:
        builder = builder.master(config.spark.master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # The command line's verbosity (streaming.logsetup) when it set one, else warnings
    spark.sparkContext.setLogLevel(os.environ.get(SPARK_LEVEL_ENV, "warn").upper())
    return spark


def spark_conf(config: Config) -> dict[str, str]:
    """The session's settings: ours, then `spark.conf` of the config over them."""
    defaults = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(config.spark.shuffle_partitions),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        # 1g: in local mode this heap is the executor's too; 500k-record batches (the
        # default cap) fit with room, as what the read tasks send is their files and
        # partials, and a larger heap mostly raises the process tree's peak RSS
        # (docs/performance.md).
        "spark.driver.memory": "1g",
        # pyspark.daemon without pyspark's redundant zip archives on the workers' path:
        # ~0.1 s less per task (see streaming/runtime/spark_daemon.py)
        "spark.python.daemon.module": "streaming.runtime.spark_daemon",
        # A read task's result (its decoded rows, ~12 MB for a 125k-record share) goes back
        # to the driver inside the task's status message instead of through the block
        # manager (a store, a fetch over the block transfer service, a release), which it
        # would take above the 1 MB default and which costs the JVM CPU on every result.
        # Bounded by spark.rpc.message.maxSize (128 MB); larger results still take the store.
        "spark.task.maxDirectResultSize": "64m",
        # Executors on other hosts do not inherit the driver's environment: their Python
        # workers get pyarrow's allocator setting (streaming/allocator.py) this way.
        f"spark.executorEnv.{PURGE_DELAY_ENV}": PURGE_DELAY_MS,
    }
    if (config.spark.master or "").startswith("local") and "SPARK_LOCAL_IP" not in os.environ:
        # A local session's driver and executor are one JVM: its RPC and block manager
        # ports (no authentication by default) have no one to talk to off this host, so
        # they listen on the loopback, not on every interface.
        defaults["spark.driver.bindAddress"] = "127.0.0.1"
        defaults["spark.driver.host"] = "127.0.0.1"
    if urlparse(config.spark.checkpoint).scheme in ("", "file"):
        # Spark's default checkpoint file manager goes through Hadoop's FileContext, whose
        # local file system resolves symlinks and sets permissions by running `readlink` and
        # `chmod` (without Hadoop's native library): ~10 process spawns for each offset- and
        # commit-log file, serial between micro-batches. The FileSystem-based manager
        # writes the same temp file and renames it (rename(2), atomic on a local disk) with
        # 2 spawns (tests/benchmarks/bench_checkpoint_files.py times both).
        # HDFS or object stores keep Spark's own choice.
        defaults["spark.sql.streaming.checkpointFileManagerClass"] = (
            "org.apache.spark.sql.execution.streaming.checkpointing."
            "FileSystemBasedCheckpointFileManager")
    if config.source.engine == "python":
        # With the Python source the JVM only moves Arrow blobs and runs the micro-batch
        # loop, and its C2 compiler costs more than it buys: over a long catch-up it takes
        # a large share of the JVM's CPU and is still compiling at the end, so the JVM runs
        # C1 only, which also lowers produced -> gauge latency under steady load. Spark's
        # own kafka source parses and converts in the JVM and keeps C2, and so does
        # delta-spark, whose MERGEs, OPTIMIZE and VACUUM plan and run there: a C1-only
        # JVM gets a 48 MB code cache, which Spark's and Delta's compiled code fills, and
        # then stops compiling for good (everything after runs interpreted).
        # 4 MB G1 regions: a packed blob of 10k decoded rows (~1.6 MB) is then below half a
        # region, not a humongous object allocated straight into the old generation (with
        # the 1 MB regions of a 1 GB heap such objects start G1 concurrent marking cycles
        # that cost the JVM CPU every few seconds).
        # -Xms at the heap's cap: a read task's result (~12 MB) is still humongous, and each
        # one starts a G1 concurrent cycle once the heap holds more than 45 % of its current
        # size. A lazily grown heap stays small, so the threshold is easy to pass and many
        # of those cycles go on to mark; sized at the cap from the start, few do.
        # The young generation fixed at a quarter of it: G1's own sizing grows it towards
        # 60 % and touches it all, which raises the JVM's RSS for no gain in throughput.
        memory = {**defaults, **config.spark.conf}["spark.driver.memory"]
        c1_only = "-XX:TieredStopAtLevel=1 " if config.delta.engine == "delta-rs" else ""
        defaults["spark.driver.extraJavaOptions"] = (
            f"{c1_only}-XX:G1HeapRegionSize=4m -Xms{memory} "
            "-XX:+UnlockExperimentalVMOptions -XX:G1NewSizePercent=25 -XX:G1MaxNewSizePercent=25")
    if "s3a" in (scheme(config.spark.checkpoint), scheme(config.delta.path)) or (
            config.delta.catalog and scheme(config.delta.path) in S3_SCHEMES):
        # Spark's checkpoint (and delta-spark, and the catalog's registration) reach the
        # store through S3A: the same endpoint and keys as delta-rs (delta.storage_options);
        # spark.conf still wins.
        defaults.update(s3a_hadoop_conf(config.delta.storage()))
    if config.delta.engine == "delta-spark" or config.delta.catalog:
        defaults.update(DELTA_SPARK_CONF)
    if config.delta.catalog and hive_support():
        # Names in Spark's default in-memory catalog last as long as the job's session and
        # no other reader sees them: a catalog means a metastore, Hive's by default (its
        # address from hive-site.xml or spark.hadoop.hive.metastore.uris; without one an
        # embedded Derby in the working directory). spark.conf names another.
        defaults["spark.sql.catalogImplementation"] = "hive"
    merged = {**defaults, **config.spark.conf}
    with_jars(merged, config)
    if "spark.driver.extraJavaOptions" not in config.spark.conf:
        # The driver JVM maps its class-data archive when one was built for this class
        # path (streaming/runtime/class_archive.py): about half the start-up. A user's own
        # driver options replace ours, this one included.
        options = merged.get("spark.driver.extraJavaOptions", "").split()
        options += sharing_options(driver_classpath(merged))
        if options:
            merged["spark.driver.extraJavaOptions"] = " ".join(options)
    return merged


def hive_support() -> bool:
    """Whether Spark's Hive catalog is on its class path (the pyspark wheel has it; a
    Spark built without Hive has not, and a session asking for it would not start)."""
    folder = spark_jars_dir()
    return folder is not None and any(folder.glob("spark-hive_*.jar"))


def driver_classpath(conf: dict[str, str]) -> list[str]:
    """The entries a session's settings put on the driver's class path before Spark's."""
    return [e for e in conf.get("spark.driver.extraClassPath", "").split(os.pathsep) if e]


def with_jars(merged: dict[str, str], config: Config) -> None:
    """Put the jars the config needs on the driver's class path or `spark.jars`."""
    # The JVM components the config asks for (Spark's kafka source, delta-spark, S3A),
    # resolved by Maven into the cache, before a user's own jars.
    jars = session_jars(config)
    if not jars:
        return
    if (config.spark.master or "").startswith("local"):
        # In local mode the executor is the driver's JVM: the jars go on its class path as
        # they are. On `spark.jars` every start would copy them (over 600 MB with S3A's AWS
        # SDK) into a spark-*/userFiles folder under spark.local.dir, which Spark deletes
        # at a clean exit only: each SIGKILL or OOM kill of the job would leave one behind.
        key, separator = "spark.driver.extraClassPath", os.pathsep
    else:  # executors elsewhere fetch them from the driver
        key, separator = "spark.jars", ","
    own = [jar for jar in merged.get(key, "").split(separator) if jar]
    merged[key] = separator.join(jars + own)
