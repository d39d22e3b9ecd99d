#!/usr/bin/env bash
# The test suite on a fresh machine: installs everything it needs (venv, packages, the
# broker binary, Debian's prometheus + alertmanager, Debian's chromium for the report
# rendering tests), lints, then runs pytest.
# Extra arguments go to pytest (e.g. -k signals). Benchmarks are not run here.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/bootstrap.sh --test
bash deploy/install-prometheus.sh
bash deploy/install-chromium.sh
.venv/bin/ruff check streaming tests dashboards
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
