#!/usr/bin/env bash
# The demo on a fresh machine: installs, then runs `kafka-health demo` (Ctrl-C stops it).
# Extra arguments go to `kafka-health demo` (e.g. --simulated, --duration 600).
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  if [ "$arg" = "-h" ] || [ "$arg" = "--help" ]; then
    # Help before anything is installed: the command line parser needs only the standard
    # library, so any Python 3 prints the same options the installed command takes.
    echo "usage: bash deploy/demo.sh [kafka-health demo options]"
    echo
    echo "Installs what the demo needs (deploy/bootstrap.sh: a virtualenv in .venv, the Python"
    echo "packages, Apache Kafka and the JMX agents through Maven), then runs kafka-health demo:"
    echo
    python="${PYTHON:-python3}"
    [ -x .venv/bin/python ] && python=.venv/bin/python
    "$python" -c 'import sys; from streaming.cli import build_parser; build_parser().parse_args(["demo", "--help"])' \
      2>/dev/null || echo "(the options are listed by: bash deploy/demo.sh, then .venv/bin/kafka-health demo --help)"
    exit 0
  fi
done
bash deploy/bootstrap.sh
exec .venv/bin/kafka-health demo "$@"
