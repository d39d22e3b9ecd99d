"""Class-data sharing archives of the Spark driver JVM and of the test bed's Kafka nodes:
which one fits a JVM, and the options that make the JVM map it.

Spark's driver loads some ten thousand classes from about 250 jars at every start; parsing
and verifying them is most of the start-up (about 7 s to a session and 3 s more to its
first job on this project's 2-core machine; a Kafka node takes about 4 s). A dynamic
AppCDS archive (JDK 13+) holds those classes already parsed and verified, and a JVM that
maps it starts in about half that time: a restarted monitor is back sooner after a crash,
a deployment or a kill (`tests/benchmarks/bench_startup.py` measures both), and the test
bed's clusters come up sooner.

An archive is only valid for the exact JVM and class path it was dumped with, so it is
kept per fingerprint of both under `$KAFKA_HEALTH_CACHE/class-archives/` (default
`~/.cache/kafka-health`), and created by `python -m streaming.runtime.class_archive_build`
(the driver's) and `python -m streaming.testbed.class_archive` (the Kafka nodes'), which
`deploy/bootstrap.sh` runs. A JVM that finds the archive unusable (another JDK build, a
jar replaced since) ignores it and starts as it would without one (`-Xshare:auto`); its
warning is silenced because the job's own log then says nothing wrong. A missing archive
costs nothing but the longer start.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from streaming.runtime.jvm import JvmError, cache_dir, component_dir, java
from streaming.runtime.jvm_jars import spark_jars_dir

# A JVM that cannot use the archive says so on stdout ([warning][cds] and
# [warning][cds,dynamic]); the job runs correctly either way, so those lines are off.
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def archive_dir() -> Path:
    return cache_dir() / "class-archives"


def fingerprint(classpath: list[Path], context: str = "") -> str | None:
    """What an archive's validity depends on: the `java` binary and every class path jar,
    each by path, size and modification time (the JVM checks the same of every jar it
    archived), and `context`. None without Java or when an entry is missing."""
    try:
        binary = Path(os.path.realpath(java()))
    except JvmError:
        return None
    digest = hashlib.sha256(f"{context}\n".encode())
    for path in [binary, *classpath]:
        try:
            stat = path.stat()
        except OSError:
            return None
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:20]


def archive_path(extra_classpath: list[str]) -> Path | None:
    """Where the archive for a Spark driver with these extra class path entries lives
    (whether or not it exists yet); None when no fingerprint can be taken."""
    jars = spark_jars_dir()
    if jars is None:
        return None
    # Spark puts its conf folder first on the driver's class path
    key = fingerprint([*sorted(jars.glob("*.jar")), *map(Path, extra_classpath)],
                      os.environ.get("SPARK_CONF_DIR", ""))
    return None if key is None else archive_dir() / f"driver-{key}.jsa"


def kafka_archive_path() -> Path | None:
    """Where the archive of the test bed's Kafka JVMs (streaming/testbed/kafka.py) lives;
    None when Kafka is not resolved."""
    try:
        jars = sorted(component_dir("kafka").glob("*.jar"))
    except JvmError:
        return None
    key = fingerprint(jars)
    return None if key is None else archive_dir() / f"kafka-{key}.jsa"


def options_for(path: Path | None) -> list[str]:
    """The JVM options that map the archive at `path`, or none when it was never built.
    Only complete archives ever carry the final name (the builder renames a checked one
    into place): a truncated one would crash the JVM."""
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", "-Xshare:auto", *QUIET]


def dump_options(path: Path) -> list[str]:
    """The JVM options that write an archive of the classes it loaded to `path` at exit."""
    return [f"-XX:ArchiveClassesAtExit={path}", *QUIET]


def sharing_options(extra_classpath: list[str]) -> list[str]:
    """options_for() the Spark driver archive of this class path."""
    return options_for(archive_path(extra_classpath))
