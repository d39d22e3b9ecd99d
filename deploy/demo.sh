#!/usr/bin/env bash
# The demo on a fresh machine: installs, then runs `kafka-health demo` (Ctrl-C stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/bootstrap.sh
exec .venv/bin/kafka-health demo "$@"
