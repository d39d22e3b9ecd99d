#!/usr/bin/env bash
# Installs what kafka-health needs on a fresh machine, idempotently:
# a virtualenv in .venv with the package (editable) and its pinned ranges, and the JVM
# artifacts pinned in deploy/jvm/pom.xml (Apache Kafka, the Jolokia and jmx_exporter agents,
# and for Spark its Kafka source, delta-spark and hadoop-aws), resolved by Maven into
# ~/.cache/kafka-health/jvm, and the class-data archives of the Spark driver's and the test
# bed's Kafka JVMs (about half their start-up; streaming/runtime/class_archive.py) in
# ~/.cache/kafka-health/class-archives.
# Usage: bash deploy/bootstrap.sh [--test]   (--test adds pytest, hypothesis, ruff, mypy)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help)
    cat <<'USAGE'
usage: bash deploy/bootstrap.sh [--test]

Installs, idempotently: Java and Maven from the Debian archive when missing, a virtualenv
in .venv with kafka-health (editable) and its pinned dependencies, and the JVM artifacts of
deploy/jvm/pom.xml (Apache Kafka, Jolokia, jmx_exporter; spark-sql-kafka, delta-spark and
hadoop-aws with the AWS SDK bundle for Spark) into ~/.cache/kafka-health/jvm, and builds
the class-data archives of the Spark driver's and the test bed's Kafka JVMs (once per Java,
Spark and Kafka install, about 50 s) into ~/.cache/kafka-health/class-archives.
  --test   also pytest, hypothesis, ruff and mypy
Environment: PYTHON, the interpreter for the virtualenv (default python3, needs >= 3.11).
USAGE
    exit 0 ;;
  ""|--test) ;;
  *) echo "bootstrap.sh: unknown option $1 (usage: bash deploy/bootstrap.sh [--test])" >&2; exit 2 ;;
esac
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "kafka-health needs Python >= 3.11 (found $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
if ! command -v java >/dev/null 2>&1; then
  echo "kafka-health needs Java 17+ for Spark; installing Debian's default JRE" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends default-jre-headless
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "kafka-health resolves its JVM artifacts with Maven; installing Debian's maven" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends maven
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=".venv/.kafka-health-installed"
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
# the ranges in pyproject.toml, and the one tested set within them (deploy/constraints.txt)
want="$(cat pyproject.toml deploy/constraints.txt | sha1sum | cut -d' ' -f1)$extras"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # pip's and the build backend's chatter goes to a log, shown only when the install fails
  pip_log="$(mktemp)"
  if ! { .venv/bin/python -m pip install --quiet --upgrade pip \
         && .venv/bin/python -m pip install --quiet -c deploy/constraints.txt -e ".$extras"; } >"$pip_log" 2>&1; then
    cat "$pip_log" >&2
    echo "bootstrap.sh: installing the Python packages failed (pip's output above)" >&2
    rm -f "$pip_log"
    exit 1
  fi
  rm -f "$pip_log"
  echo "$want" > "$stamp"
fi
bash deploy/jvm/resolve.sh
# Once per Java and Spark install; without it the job starts as well, only slower. Spark's
# own chatter goes to a log, shown only when the build fails.
# The Spark driver's archive, then the test bed's and the demo's Kafka nodes'.
archive_log="$(mktemp)"
for builder in streaming.runtime.class_archive_build streaming.testbed.class_archive; do
  if ! .venv/bin/python -m "$builder" 2>"$archive_log"; then
    tail -n 20 "$archive_log" >&2
    echo "bootstrap.sh: a class-data archive was not built (above); the JVMs start without it" >&2
  fi
done
rm -f "$archive_log"
