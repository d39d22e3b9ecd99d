#!/usr/bin/env bash
# The test suite on a fresh machine: installs everything it needs (venv, packages, the
# broker binary, Debian's prometheus + alertmanager, Debian's chromium for the report
# rendering tests), lints, then runs pytest.
# Extra arguments go to pytest (e.g. -k signals). Benchmarks are not run here.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  cat <<'USAGE'
usage: bash deploy/test.sh [pytest arguments]

Installs what the tests need (deploy/bootstrap.sh --test, Debian's prometheus, alertmanager
and chromium), runs ruff, then pytest in one process (KAFKA_HEALTH_TEST_WORKERS=2 for two
pytest-xdist workers) with the arguments given, e.g.
  bash deploy/test.sh tests/unit          bash deploy/test.sh -k signals
Benchmarks are not run here. pytest's own help: .venv/bin/python -m pytest --help
USAGE
  exit 0
fi
bash deploy/bootstrap.sh --test
bash deploy/install-prometheus.sh
bash deploy/install-chromium.sh
.venv/bin/ruff check streaming tests dashboards
# One process by default. KAFKA_HEALTH_TEST_WORKERS=2 runs two pytest-xdist workers, a module
# at a time (tests/conftest.py): about 1.2x faster on 2 cores, not yet the default: under
# that contention timing-sensitive tests have failed (README, "Set-up").
exec .venv/bin/python -m pytest -p no:cacheprovider -n "${KAFKA_HEALTH_TEST_WORKERS:-0}" "$@"
