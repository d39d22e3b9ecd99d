#!/usr/bin/env bash
# Entrypoint of the kafka-health image.
#
# Spark on Kubernetes (spark-submit --master k8s://... or the Spark Operator) starts the
# driver pod with `driver <spark-submit args>` and executor pods with `executor`, passing the
# rest in SPARK_* environment variables. Spark's own images implement that contract in their
# entrypoint.sh (Apache Spark, resource-managers/kubernetes/docker); this is a small
# re-implementation of it for an image built on python:3.11-slim with the pyspark wheel.
# Anything else is run as given (`kafka-health run --config ...`, `kafka-health broker`).
set -euo pipefail

classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:${SPARK_HOME}/jars/*"
if [ -n "${HADOOP_CONF_DIR:-}" ]; then classpath="$HADOOP_CONF_DIR:$classpath"; fi
if [ -n "${SPARK_EXTRA_CLASSPATH:-}" ]; then classpath="$classpath:$SPARK_EXTRA_CLASSPATH"; fi
classpath="$classpath:$PWD"
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-python3}"

case "${1:-}" in
    driver)
        shift
        # The driver pod runs spark-submit in client mode against the cluster it lives in.
        exec tini -s -- "$SPARK_HOME/bin/spark-submit" \
            --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
            --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
            --deploy-mode client \
            "$@"
        ;;
    executor)
        shift
        # JVM options arrive as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in order.
        java_opts=()
        while IFS= read -r name; do
            java_opts+=("${!name}")
        done < <(compgen -e | grep '^SPARK_JAVA_OPT_[0-9]*$' | sort -t_ -k4 -n || true)
        exec tini -s -- "${JAVA_HOME}/bin/java" "${java_opts[@]}" \
            -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
            -cp "${classpath}${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}" \
            org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
            --driver-url "$SPARK_DRIVER_URL" \
            --executor-id "$SPARK_EXECUTOR_ID" \
            --cores "$SPARK_EXECUTOR_CORES" \
            --app-id "$SPARK_APPLICATION_ID" \
            --hostname "$SPARK_EXECUTOR_POD_IP" \
            --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
            --podName "$SPARK_EXECUTOR_POD_NAME"
        ;;
    *)
        exec tini -s -- "$@"
        ;;
esac
