#!/usr/bin/env bash
# The demo on a fresh machine: installs, then runs `kafka-health demo` (Ctrl-C stops it).
# Extra arguments go to `kafka-health demo` (e.g. --simulated, --duration 600).
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  if [ "$arg" = "-h" ] || [ "$arg" = "--help" ]; then
    if [ -x .venv/bin/kafka-health ]; then exec .venv/bin/kafka-health demo --help; fi
    cat <<'USAGE'
usage: bash deploy/demo.sh [kafka-health demo options]

Installs what the demo needs (a virtualenv in .venv, the Python packages, Apache Kafka and
the JMX agents through Maven), then runs a real 3-node Kafka cluster, a metrics cluster,
the shipper, an acks=all producer, the streaming job and a cycle of real faults on
loopback. Options (after installing, `bash deploy/demo.sh --help` lists them all):
  --simulated          a simulated cluster instead of real Kafka
  --duration SECONDS   stop by itself
  --fault-period S     seconds per fault cycle (default 300)
  --data-dir DIR       tables and checkpoint (default data/demo)
  --metrics-port PORT  the job's /metrics (default 9464)
USAGE
    exit 0
  fi
done
bash deploy/bootstrap.sh
exec .venv/bin/kafka-health demo "$@"
