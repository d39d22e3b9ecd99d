"""Where the JVM artifacts resolved by `deploy/jvm/resolve.sh` live, and a clear error when
they or Java are missing.

The artifacts are pinned in `deploy/jvm/pom.xml` and copied by Maven, one classpath folder
per component, under `$KAFKA_HEALTH_CACHE/jvm` (default `~/.cache/kafka-health/jvm`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class JvmError(RuntimeError):
    """Java or a resolved component is missing; the message says how to get it."""


def cache_dir() -> Path:
    base = os.environ.get("KAFKA_HEALTH_CACHE") or Path.home() / ".cache" / "kafka-health"
    return Path(base)


def java() -> str:
    """The `java` to run: $JAVA_HOME/bin/java if set, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise JvmError("Java 17+ is needed for the embedded Kafka cluster and Spark; install "
                       "Debian's default-jre-headless or set JAVA_HOME")
    return found


def component_dir(component: str) -> Path:
    """The folder of one component's jars; raises with the fix when it was never resolved."""
    folder = cache_dir() / "jvm" / component
    if not folder.is_dir() or not any(folder.glob("*.jar")):
        raise JvmError(f"the JVM component {component!r} is not installed in {folder}; run "
                       "`bash deploy/jvm/resolve.sh` (the README's commands run it for you)")
    return folder


def classpath(component: str) -> str:
    """The component's jars as a Java classpath (folder/* is expanded by the JVM)."""
    return str(component_dir(component) / "*")


def agent_jar(component: str) -> Path:
    """The single Java agent jar of an agent component (jolokia, jmx-exporter)."""
    jars = sorted(component_dir(component).glob("*.jar"))
    if len(jars) != 1:
        raise JvmError(f"expected one agent jar in {component_dir(component)}, found "
                       f"{[j.name for j in jars]}; rerun `bash deploy/jvm/resolve.sh`")
    return jars[0]
