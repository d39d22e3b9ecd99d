#!/usr/bin/env bash
# The test suite on a fresh machine: installs everything it needs (venv, packages, the
# broker binary, Debian's prometheus + alertmanager, Debian's chromium for the report
# rendering tests, kustomize + kubeconform for the Kubernetes manifests), lints and
# type-checks, then runs pytest.
# Extra arguments go to pytest (e.g. -k signals). Benchmarks are not run here.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  cat <<'USAGE'
usage: bash deploy/test.sh [pytest arguments]

Installs what the tests need (deploy/bootstrap.sh --test, Debian's prometheus, alertmanager
and chromium, kustomize and kubeconform), runs ruff and mypy, then pytest on two pytest-xdist
workers, a test module at a time (KAFKA_HEALTH_TEST_WORKERS=0 for one process, e.g. to
debug with -x or --pdb), with the arguments given, e.g.
  bash deploy/test.sh tests/unit          bash deploy/test.sh -k signals
Benchmarks are not run here. pytest's own help: .venv/bin/python -m pytest --help
USAGE
  exit 0
fi
bash deploy/bootstrap.sh --test
bash deploy/install-prometheus.sh
bash deploy/install-chromium.sh
bash deploy/install-k8s-tools.sh
.venv/bin/ruff check streaming tests dashboards
# the package's types, at the strictness and with the exceptions of pyproject.toml's [tool.mypy]
.venv/bin/mypy
# Two pytest-xdist workers by default, a module at a time (tests/conftest.py): on 2 cores
# about 1.35x faster than one process, whose tests wait on Kafka, Spark starts and windows
# for a quarter of the time. KAFKA_HEALTH_TEST_WORKERS=0 runs one process.
exec .venv/bin/python -m pytest -p no:cacheprovider -n "${KAFKA_HEALTH_TEST_WORKERS:-2}" "$@"
