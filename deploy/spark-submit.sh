#!/usr/bin/env bash
# Submit kafka-health to a Spark cluster (YARN, Kubernetes, standalone). Run with --help.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
    cat <<'EOF'
Usage: deploy/spark-submit.sh --config FILE --master URL [options] [-- spark-submit args...]

Submits the always-on kafka-health stream (deploy/spark_main.py -> `kafka-health run`) to a
Spark cluster. What it does, so you can do it by hand too:

  1. Loads FILE locally with the job's own loader (env overrides applied, validated): a typo
     fails here, not an hour later on the cluster.
  2. Builds, in a temp folder:
       kafka_health.zip     the `streaming` package (+ metrics_schemas/)  -> --py-files
       metrics_schemas.zip  the schema/catalog data                        -> --archives ...#metrics_schemas
       alerts.zip           alerts/kafka-health.rules.yml (the direct push's
                            alert texts, read beside metrics_schemas/)     -> --archives ...#alerts
       kafka-health.yaml    a copy of FILE                                 -> --files
  3. Sets KAFKA_HEALTH_SCHEMAS=metrics_schemas (a path relative to the working directory,
     where --archives unpacks) for the executors (spark.executorEnv.*) and, in cluster mode,
     for the driver (spark.yarn.appMasterEnv.* on YARN, spark.kubernetes.driverEnv.* on
     Kubernetes). Spark has no generic driver-env conf, so other masters run the driver in
     client mode with the local environment. The schemas cannot be read from inside the
     --py-files zip (they are data files read by path), hence the separate archive.
  4. Forwards every KAFKA_HEALTH__SECTION__KEY variable of this shell to the driver the same
     way (never put secrets there: use source.secrets {file: ...} and mount the file on the
     driver AND the executors, the Kafka source reads it on the executors).
  5. Forces spark.master to null in the job config (KAFKA_HEALTH__SPARK__MASTER=null): a
     master in the YAML (the default is local[2]) would override the cluster's and run the
     whole stream inside the driver. In cluster mode a loopback exporter.bind becomes
     0.0.0.0 so Prometheus can scrape the driver's /metrics (exporter.port, default 9464).
  6. Runs spark-submit --deploy-mode cluster (default) deploy/spark_main.py
     --config kafka-health.yaml, with --conf spark.pyspark.python=PYTHON and without waiting
     for the (never-ending) application.

Checkpoint and tables: spark.checkpoint and delta.path come from FILE (or
KAFKA_HEALTH__SPARK__CHECKPOINT / KAFKA_HEALTH__DELTA__PATH). In cluster mode they must be
on shared storage (s3a://, abfss://, hdfs://, gs://, ...): the driver can restart on
another node and must find its offsets and tables. The checkpoint goes through Hadoop
(s3a:// needs hadoop-aws on the classpath); with delta.engine=delta-rs the tables are
written by delta-rs: bronze and quarantine files by the executors' read tasks, the commits
and the signal tables by the driver, so both need the store's credentials (the
delta.storage_secrets files mounted on every node, or the variables set on the driver and
through spark.executorEnv.<NAME> on the executors).

Options:
  --config FILE         job config (deploy/config.example.yaml documents every key). Required.
  --master URL          yarn | k8s://https://HOST:PORT | spark://HOST:7077 | local[N]
                        (default: $SPARK_MASTER). Required.
  --deploy-mode MODE    cluster (default) | client. Python apps cannot run in cluster mode
                        on a standalone master (Spark's rule): spark:// and local default
                        to client.
  --python PATH         interpreter on the cluster nodes, with this package's dependencies
                        (spark.pyspark.python, and spark.pyspark.driver.python in cluster
                        mode; default $PYSPARK_PYTHON or python3; in client mode the driver
                        uses KAFKA_HEALTH_PYTHON). With a packed venv:
                        --python ./venv/bin/python -- --archives venv.tar.gz#venv
  --name NAME           application name (default: spark.app_name from the config)
  --allow-local-paths   accept a local checkpoint/table path in cluster mode (single node only)
  --dry-run             print the spark-submit command and keep the temp folder; run nothing
  -h, --help            this text
  -- ARGS               everything after -- goes to spark-submit unchanged (last --conf wins):
                        --num-executors 4, --conf spark.executor.memory=4g, --queue ...

Environment:
  SPARK_SUBMIT          spark-submit to use (default: spark-submit on PATH, else .venv/bin)
  DELTA_SPARK=1         tables through delta-spark (KAFKA_HEALTH__DELTA__ENGINE=delta-spark).
  KAFKA_SOURCE=spark    Spark's own kafka source (KAFKA_HEALTH__SOURCE__ENGINE=spark).
                        The jars either needs (delta-spark, spark-sql-kafka; hadoop-aws for an
                        s3a:// checkpoint or tables) are the ones `bash deploy/bootstrap.sh`
                        resolved with Maven from deploy/jvm/pom.xml; they go with --jars.
  KAFKA_HEALTH_PYTHON   local Python used to read the config (default: .venv/bin/python)

Restarts: on YARN the defaults add spark.yarn.maxAppAttempts=4 with a 1h validity window;
on Kubernetes prefer the Spark Operator (deploy/k8s/sparkapplication.yaml, restartPolicy
Always) over this script, and the image (deploy/docker/Dockerfile) over shipped zips; if
you do submit to k8s from here, local files need
--conf spark.kubernetes.file.upload.path=s3a://bucket/path.

Examples:
  deploy/spark-submit.sh --config prod.yaml --master yarn -- --num-executors 3 --queue streaming
  DELTA_SPARK=1 deploy/spark-submit.sh --config prod.yaml --master yarn
  deploy/spark-submit.sh --config dev.yaml --master spark://spark-master:7077   # client mode
EOF
}

die() { echo "spark-submit.sh: $*" >&2; exit 2; }
note() { echo "spark-submit.sh: $*" >&2; }

CONFIG=""
MASTER="${SPARK_MASTER:-}"
DEPLOY_MODE=""
PY_REMOTE="${PYSPARK_PYTHON:-python3}"
NAME=""
ALLOW_LOCAL=0
DRY_RUN=0
PASSTHROUGH=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --config) [ $# -ge 2 ] || die "--config needs a file"; CONFIG="$2"; shift 2 ;;
        --config=*) CONFIG="${1#*=}"; shift ;;
        --master) [ $# -ge 2 ] || die "--master needs a URL"; MASTER="$2"; shift 2 ;;
        --master=*) MASTER="${1#*=}"; shift ;;
        --deploy-mode) [ $# -ge 2 ] || die "--deploy-mode needs cluster or client"; DEPLOY_MODE="$2"; shift 2 ;;
        --deploy-mode=*) DEPLOY_MODE="${1#*=}"; shift ;;
        --python) [ $# -ge 2 ] || die "--python needs a path"; PY_REMOTE="$2"; shift 2 ;;
        --python=*) PY_REMOTE="${1#*=}"; shift ;;
        --name) [ $# -ge 2 ] || die "--name needs a value"; NAME="$2"; shift 2 ;;
        --name=*) NAME="${1#*=}"; shift ;;
        --allow-local-paths) ALLOW_LOCAL=1; shift ;;
        --dry-run) DRY_RUN=1; shift ;;
        --) shift; PASSTHROUGH=("$@"); break ;;
        *) die "unknown option $1 (spark-submit options go after --; see --help)" ;;
    esac
done

[ -n "$CONFIG" ] || die "--config FILE is required (see --help)"
[ -f "$CONFIG" ] || die "config file $CONFIG not found"
[ -n "$MASTER" ] || die "--master is required: yarn, k8s://https://HOST:PORT, spark://HOST:7077 or local[N]"
CONFIG="$(cd "$(dirname "$CONFIG")" && pwd)/$(basename "$CONFIG")"

case "$MASTER" in
    yarn) KIND=yarn ;;
    k8s://*) KIND=k8s ;;
    spark://*) KIND=standalone ;;
    local*) KIND=local ;;
    *) die "unsupported master $MASTER (yarn, k8s://..., spark://..., local[N])" ;;
esac
if [ -z "$DEPLOY_MODE" ]; then
    case "$KIND" in yarn|k8s) DEPLOY_MODE=cluster ;; *) DEPLOY_MODE=client ;; esac
fi
case "$DEPLOY_MODE" in
    cluster|client) ;;
    *) die "--deploy-mode must be cluster or client, not $DEPLOY_MODE" ;;
esac
if [ "$DEPLOY_MODE" = cluster ] && [ "$KIND" != yarn ] && [ "$KIND" != k8s ]; then
    die "cluster deploy mode for a Python application needs YARN or Kubernetes; Spark refuses it on $MASTER. Use --deploy-mode client (the driver runs here: keep it alive with systemd or similar)."
fi

# Feature switches -> job config overrides (forwarded to the driver below).
if [ "${DELTA_SPARK:-0}" = 1 ]; then
    export KAFKA_HEALTH__DELTA__ENGINE=delta-spark
fi
if [ "${KAFKA_SOURCE:-python}" = spark ]; then
    export KAFKA_HEALTH__SOURCE__ENGINE=spark
elif [ "${KAFKA_SOURCE:-python}" != python ]; then
    die "KAFKA_SOURCE must be python (default) or spark, not $KAFKA_SOURCE"
fi
export KAFKA_HEALTH__SPARK__MASTER=null

# 1. Load and validate the config locally; read the keys this script needs.
LOCAL_PY="${KAFKA_HEALTH_PYTHON:-}"
if [ -z "$LOCAL_PY" ]; then
    if [ -x "$REPO/.venv/bin/python" ]; then LOCAL_PY="$REPO/.venv/bin/python"; else LOCAL_PY=python3; fi
fi
declare -A CFG
while IFS='=' read -r key value; do
    CFG["$key"]="$value"
done < <(PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$LOCAL_PY" - "$CONFIG" <<'PY'
import sys

from streaming.config import ConfigError, load_config
from streaming.runtime.jvm import JvmError
from streaming.runtime.jvm_jars import session_jars

try:
    c = load_config(sys.argv[1])
    jars = session_jars(c)
except (ConfigError, JvmError) as err:
    print(f"config error: {err}", file=sys.stderr)
    sys.exit(2)
for key, value in {
    "jars": ",".join(jars),
    "checkpoint": c.spark.checkpoint, "delta_path": c.delta.path, "app_name": c.spark.app_name,
    "delta_engine": c.delta.engine, "source_engine": c.source.engine,
    "exporter_enabled": c.exporter.enabled, "exporter_bind": c.exporter.bind,
    "exporter_port": c.exporter.port,
}.items():
    print(f"{key}={value}")
PY
) || die "could not load $CONFIG (see the error above)"
[ -n "${CFG[checkpoint]:-}" ] || die "could not load $CONFIG (see the error above)"
NAME="${NAME:-${CFG[app_name]}}"

is_shared() {  # a URI with a scheme other than file: (s3a://, abfss://, hdfs://, gs://, ...)
    [[ "$1" =~ ^[A-Za-z][A-Za-z0-9+.-]*:// ]] && [[ ! "$1" =~ ^file: ]]
}
if [ "$DEPLOY_MODE" = cluster ] && [ "$ALLOW_LOCAL" = 0 ]; then
    for what in checkpoint delta_path; do
        is_shared "${CFG[$what]}" || die "$what is ${CFG[$what]}, a local path: in cluster mode the driver can restart on another node. Use shared storage (s3a://, abfss://, hdfs://), e.g. KAFKA_HEALTH__SPARK__CHECKPOINT=s3a://bucket/kafka-health/checkpoint, or --allow-local-paths."
    done
fi
if [ "$DEPLOY_MODE" = cluster ] && [ "${CFG[exporter_enabled]}" = True ]; then
    case "${CFG[exporter_bind]}" in
        127.*|localhost|::1)
            export KAFKA_HEALTH__EXPORTER__BIND=0.0.0.0
            note "exporter.bind ${CFG[exporter_bind]} is unreachable from Prometheus in cluster mode; using 0.0.0.0 (port ${CFG[exporter_port]})" ;;
    esac
fi

# 2. Build the artifacts.
BUILD="$(mktemp -d "${TMPDIR:-/tmp}/kafka-health-submit.XXXXXX")"
[ "$DRY_RUN" = 1 ] || trap 'rm -rf "$BUILD"' EXIT
"$LOCAL_PY" - "$REPO" "$BUILD" <<'PY'
import sys
import zipfile
from pathlib import Path

repo, build = Path(sys.argv[1]), Path(sys.argv[2])


def files(folder: Path):
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


with zipfile.ZipFile(build / "kafka_health.zip", "w", zipfile.ZIP_DEFLATED) as z:
    for top in ("streaming", "metrics_schemas"):
        for path in files(repo / top):
            z.write(path, path.relative_to(repo).as_posix())
with zipfile.ZipFile(build / "metrics_schemas.zip", "w", zipfile.ZIP_DEFLATED) as z:
    for path in files(repo / "metrics_schemas"):
        z.write(path, path.relative_to(repo / "metrics_schemas").as_posix())
with zipfile.ZipFile(build / "alerts.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.write(repo / "alerts" / "kafka-health.rules.yml", "kafka-health.rules.yml")
PY
cp "$CONFIG" "$BUILD/kafka-health.yaml"

# 3./4. Environment for the driver and the executors.
DRIVER_ENV_PREFIX=""
case "$KIND/$DEPLOY_MODE" in
    yarn/cluster) DRIVER_ENV_PREFIX=spark.yarn.appMasterEnv. ;;
    k8s/cluster) DRIVER_ENV_PREFIX=spark.kubernetes.driverEnv. ;;
esac
ENV_CONFS=(--conf spark.executorEnv.KAFKA_HEALTH_SCHEMAS=metrics_schemas)
if [ -n "$DRIVER_ENV_PREFIX" ]; then
    ENV_CONFS+=(--conf "${DRIVER_ENV_PREFIX}KAFKA_HEALTH_SCHEMAS=metrics_schemas")
    while IFS= read -r var; do
        ENV_CONFS+=(--conf "${DRIVER_ENV_PREFIX}${var}=${!var}")
    done < <(compgen -e | grep '^KAFKA_HEALTH__' | sort || true)
    MAIN_CONFIG=kafka-health.yaml        # shipped with --files into the driver's working dir
    PY_DRIVER="$PY_REMOTE"
else
    export KAFKA_HEALTH_SCHEMAS="$REPO/metrics_schemas"   # client mode: the driver runs here
    MAIN_CONFIG="$BUILD/kafka-health.yaml"
    PY_DRIVER="$LOCAL_PY"                                  # ... with this machine's Python
fi

RUNTIME_CONFS=()
case "$KIND" in
    yarn) RUNTIME_CONFS+=(--conf spark.yarn.submit.waitAppCompletion=false
                          --conf spark.yarn.maxAppAttempts=4
                          --conf spark.yarn.am.attemptFailuresValidityInterval=1h) ;;
    k8s) RUNTIME_CONFS+=(--conf spark.kubernetes.submission.waitAppCompletion=false) ;;
esac

SUBMIT="${SPARK_SUBMIT:-}"
if [ -z "$SUBMIT" ]; then
    if command -v spark-submit >/dev/null 2>&1; then SUBMIT=spark-submit
    elif [ -x "$REPO/.venv/bin/spark-submit" ]; then
        SUBMIT="$REPO/.venv/bin/spark-submit"
        # pip's spark-submit looks for pyspark with whatever python3 is on PATH, which need
        # not be the venv's: name its Spark home.
        if [ -z "${SPARK_HOME:-}" ]; then
            SPARK_HOME="$("$LOCAL_PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
            export SPARK_HOME
        fi
    else SUBMIT=spark-submit; fi
fi

CMD=("$SUBMIT"
     --master "$MASTER"
     --deploy-mode "$DEPLOY_MODE"
     --name "$NAME"
     --py-files "$BUILD/kafka_health.zip"
     --archives "$BUILD/metrics_schemas.zip#metrics_schemas,$BUILD/alerts.zip#alerts"
     --files "$BUILD/kafka-health.yaml"
     --conf "spark.pyspark.python=$PY_REMOTE"
     --conf "spark.pyspark.driver.python=$PY_DRIVER"
     --conf spark.sql.streaming.stopGracefullyOnShutdown=true
     "${ENV_CONFS[@]}"
     "${RUNTIME_CONFS[@]}")
if [ -n "${CFG[jars]:-}" ]; then
    CMD+=(--jars "${CFG[jars]}")   # the Maven-resolved components the config needs
fi
CMD+=("${PASSTHROUGH[@]}" "$REPO/deploy/spark_main.py" --config "$MAIN_CONFIG")

note "checkpoint ${CFG[checkpoint]}, tables ${CFG[delta_path]} (${KAFKA_HEALTH__DELTA__ENGINE:-${CFG[delta_engine]}}), source ${KAFKA_HEALTH__SOURCE__ENGINE:-${CFG[source_engine]}}, metrics :${CFG[exporter_port]}/metrics on the driver"
if [ "$DRY_RUN" = 1 ]; then
    note "dry run; artifacts kept in $BUILD"
    printf '%q ' "${CMD[@]}"
    echo
    exit 0
fi
"${CMD[@]}"
