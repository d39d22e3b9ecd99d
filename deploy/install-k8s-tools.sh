#!/usr/bin/env bash
# kustomize, kubeconform and the JSON schemas kubeconform checks deploy/k8s against, pinned,
# into $KAFKA_HEALTH_CACHE/k8s-tools (default ~/.cache/kafka-health/k8s-tools):
#
#   bin/kustomize, bin/kubeconform        go install from the Go module proxy
#   schemas/v<K8S>-standalone-strict/      built-in kinds, from the kubernetes-validate wheel (PyPI)
#   schemas/crds/<group>/<kind>_<v>.json   Prometheus Operator CRDs (its Go module's
#                                          example/prometheus-operator-crd) and the Spark
#                                          Operator's SparkApplication (kubeflow-spark-api
#                                          wheel's models: the proxy does not serve its module)
#
# tests/deploy/test_k8s_validate.py uses them; it skips, naming what is missing, without.
# Idempotent: does nothing while the stamp matches the pins and the converter. Without Go it
# says so and exits 0 (the test then skips). The first run costs about 80 s of CPU, nearly
# all of it the two Go builds (a minute or less on 2 idle cores; the downloads, ~130 MB of
# Go modules and 25 MB of wheels, take seconds); later runs return at once.
set -euo pipefail
cd "$(dirname "$0")/.."

KUSTOMIZE_VERSION=v5.8.1
KUBECONFORM_VERSION=v0.7.0
PROMETHEUS_OPERATOR_VERSION=v0.85.0
KUBERNETES_VALIDATE_VERSION=1.37.0
KUBEFLOW_SPARK_API_VERSION=2.4.0
KUBERNETES_VERSION=1.33.0      # the schemas' Kubernetes release; the test passes it to kubeconform

dir="${KAFKA_HEALTH_CACHE:-$HOME/.cache/kafka-health}/k8s-tools"
python="${KAFKA_HEALTH_PYTHON:-.venv/bin/python}"
converter=deploy/k8s/kubeconform_schemas.py

if ! command -v go >/dev/null 2>&1; then
  echo "install-k8s-tools.sh: no Go toolchain: kustomize and kubeconform not installed (the manifest validation test skips)" >&2
  exit 0
fi
want="$KUSTOMIZE_VERSION $KUBECONFORM_VERSION $PROMETHEUS_OPERATOR_VERSION $KUBERNETES_VALIDATE_VERSION"
want="$want $KUBEFLOW_SPARK_API_VERSION $KUBERNETES_VERSION $(sha1sum "$converter" | cut -d' ' -f1)"
if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$want" ] \
    && [ -x "$dir/bin/kustomize" ] && [ -x "$dir/bin/kubeconform" ]; then
  exit 0
fi
echo "installing kustomize $KUSTOMIZE_VERSION, kubeconform $KUBECONFORM_VERSION and their schemas into $dir" >&2
mkdir -p "$dir/bin"
GOBIN="$dir/bin" go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
GOBIN="$dir/bin" go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"

operator="$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" \
  | "$python" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
rm -rf "$dir/download" "$dir/python" "$dir/schemas.partial"
"$python" -m pip download -q --no-deps --only-binary :all: -d "$dir/download" \
  "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
"$python" -m pip install -q --no-deps --only-binary :all: --target "$dir/python" \
  "kubeflow-spark-api==$KUBEFLOW_SPARK_API_VERSION"
PYTHONPATH="$dir/python" "$python" "$converter" "$dir/schemas.partial" \
  --kubernetes "$dir/download"/kubernetes_validate-*.whl --kubernetes-version "$KUBERNETES_VERSION" \
  --crds "$operator/example/prometheus-operator-crd" \
  --model "kubeflow_spark_api.models.spark_v1beta2_spark_application:SparkV1beta2SparkApplication=sparkoperator.k8s.io/v1beta2/SparkApplication"
rm -rf "$dir/schemas" "$dir/download" "$dir/python"
mv "$dir/schemas.partial" "$dir/schemas"
echo "$KUBERNETES_VERSION" > "$dir/schemas/kubernetes-version"
echo "$want" > "$dir/.installed"
