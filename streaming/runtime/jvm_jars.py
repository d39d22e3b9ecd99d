"""The jars a Spark session needs for a config, from the components `deploy/jvm/resolve.sh`
resolved with Maven (pinned in deploy/jvm/pom.xml) into `$KAFKA_HEALTH_CACHE/jvm/<component>/`
(default `~/.cache/kafka-health/jvm`).

    source.engine: spark           -> spark-kafka  (Spark's kafka source, kafka-clients)
    delta.engine: delta-spark      -> delta        (delta-spark, delta-storage, Delta Kernel)
    delta.catalog set              -> delta        (the catalog's tables are Delta tables)
    an s3a:// spark.checkpoint or delta.path -> hadoop-aws (S3A with the AWS SDK bundle)

Each component's folder holds only what the pyspark wheel's own jars lack (the poms exclude
the rest), so the list goes to the session as it is (streaming.runtime.spark_session: the
driver's class path in local mode, `spark.jars` otherwise). A component already inside Spark's
own jars folder (an image that copied it there, see deploy/docker/Dockerfile) needs nothing
from the cache, and a jar of the same file name as one in that folder is left out.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from streaming.config import Config
from streaming.locations import S3_SCHEMES, scheme
from streaming.runtime.jvm import JvmError, cache_dir

# component -> a file-name prefix of the jar that makes it present in Spark's jars folder
MARKERS = {
    "spark-kafka": "spark-sql-kafka-0-10_",
    "delta": "delta-spark_",
    "hadoop-aws": "hadoop-aws-",
}


class MissingJars(JvmError):
    """A component the config needs was never resolved; the message says how to get it."""


def required_components(config: Config) -> dict[str, str]:
    """The components the config needs, in classpath order, each with the reason (the
    config key and value that asks for it)."""
    needed: dict[str, str] = {}
    if config.source.engine == "spark":
        needed["spark-kafka"] = "source.engine is 'spark'"
    if config.delta.engine == "delta-spark":
        needed["delta"] = "delta.engine is 'delta-spark'"
    elif config.delta.catalog:
        needed["delta"] = "delta.catalog is set (Spark's catalog registers Delta tables)"
    for key, location in (("spark.checkpoint", config.spark.checkpoint),
                          ("delta.path", config.delta.path)):
        if scheme(location) == "s3a":
            needed.setdefault("hadoop-aws", f"{key} is an s3a:// location")
    if config.delta.catalog and scheme(config.delta.path) in S3_SCHEMES:
        # Spark reads the registered tables' logs through S3A
        needed.setdefault("hadoop-aws", "delta.catalog registers tables on S3 through Spark")
    return needed


def spark_jars_dir() -> Path | None:
    """Spark's own jars folder: $SPARK_HOME/jars, else the installed pyspark's."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    spec = importlib.util.find_spec("pyspark")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "jars").is_dir():
            return Path(location) / "jars"
    return None


def session_jars(config: Config) -> list[str]:
    """Absolute paths of the jars the Spark session needs for `config`: every jar of each
    required component's cache folder, components in the order spark-kafka, delta,
    hadoop-aws, jars by name within one. Empty when the config needs none (the python
    source, delta-rs, no s3a:// location).

    Raises MissingJars naming the component, the config key that needs it and
    `bash deploy/bootstrap.sh` when a required component is neither in the cache nor in
    Spark's own jars folder. Reads only the file system; never downloads."""
    needed = required_components(config)
    if not needed:
        return []  # the common case touches no file system
    spark_dir = spark_jars_dir()
    own = {p.name for p in spark_dir.glob("*.jar")} if spark_dir is not None else set()
    folder = cache_dir() / "jvm"
    jars: list[str] = []
    for component, reason in needed.items():
        resolved = sorted((folder / component).glob("*.jar"))
        if not resolved:
            if any(name.startswith(MARKERS[component]) for name in own):
                continue  # baked into Spark's jars folder (the image)
            raise MissingJars(
                f"{reason}, which needs the JVM component {component!r}, but {folder / component} "
                f"has no jars: run `bash deploy/bootstrap.sh` (or `bash deploy/jvm/resolve.sh`) "
                "to resolve it with Maven")
        jars.extend(str(jar.resolve()) for jar in resolved if jar.name not in own)
    return jars
