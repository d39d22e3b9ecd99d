"""The driver JVM's class-data sharing archive: which one fits a session, and the options
that make the JVM map it.

Spark's driver loads some ten thousand classes from about 250 jars at every start; parsing
and verifying them is most of the start-up (about 7 s to a session and 3 s more to its
first job on this project's 2-core machine). A dynamic AppCDS archive (JDK 13+) holds
those classes already parsed and verified, and a JVM that maps it starts a session in
about half that time: a restarted monitor is back sooner after a crash, a deployment or
a kill (`tests/benchmarks/bench_startup.py` measures both).

An archive is only valid for the exact JVM and class path it was dumped with, so it is
kept per fingerprint of both under `$KAFKA_HEALTH_CACHE/class-archives/` (default
`~/.cache/kafka-health`), and created by `python -m streaming.runtime.class_archive_build`
(which `deploy/bootstrap.sh` runs for the default session). A JVM that finds the archive
unusable (another JDK build, a jar replaced since) ignores it and starts as it would
without one (`-Xshare:auto`); its warning is silenced because the job's own log then says
nothing wrong. A missing archive costs nothing but the longer start.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from streaming.runtime.jvm import JvmError, cache_dir, java
from streaming.runtime.jvm_jars import spark_jars_dir

# A JVM that cannot use the archive says so on stdout ([warning][cds] and
# [warning][cds,dynamic]); the job runs correctly either way, so those lines are off.
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def archive_dir() -> Path:
    return cache_dir() / "class-archives"


def fingerprint(extra_classpath: list[str]) -> str | None:
    """What the archive's validity depends on: the `java` binary, Spark's jars and the
    session's extra class path entries, each by path, size and modification time (the
    JVM checks the same of every jar it archived). None without Java or Spark's jars."""
    try:
        binary = Path(os.path.realpath(java()))
    except JvmError:
        return None
    jars = spark_jars_dir()
    if jars is None:
        return None
    digest = hashlib.sha256()
    # Spark puts its conf folder first on the driver's class path (`kafka-health run` points
    # it at a log4j2 config of its verbosity: streaming/logsetup.py)
    digest.update(f"{os.environ.get('SPARK_CONF_DIR', '')}\n".encode())
    for path in [binary, *sorted(jars.glob("*.jar")), *map(Path, extra_classpath)]:
        try:
            stat = path.stat()
        except OSError:
            return None
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:20]


def archive_path(extra_classpath: list[str]) -> Path | None:
    """Where the archive for a driver with these extra class path entries lives (whether
    or not it exists yet); None when no fingerprint can be taken."""
    key = fingerprint(extra_classpath)
    return None if key is None else archive_dir() / f"driver-{key}.jsa"


def sharing_options(extra_classpath: list[str]) -> list[str]:
    """The driver JVM options that map the archive for this class path, or none when it
    was never created. Only complete archives ever carry the final name (the builder
    renames a checked one into place): a truncated one would crash the JVM."""
    path = archive_path(extra_classpath)
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", "-Xshare:auto", *QUIET]
