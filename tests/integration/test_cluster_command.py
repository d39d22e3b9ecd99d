"""`kafka-health cluster` stops every Kafka node it started when it gets SIGTERM (a
`docker stop`, a pod eviction), not only on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import wait_for


def kafka_processes(marker: str) -> list[int]:
    """Pids of running Kafka nodes whose command line names `marker` (their data folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "kafka.Kafka" in cmdline and marker in cmdline:
            found.append(int(entry.name))
    return found


def test_sigterm_stops_every_node(tmp_path: Path) -> None:
    log = tmp_path / "cluster.log"
    data = tmp_path / "nodes"
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "cluster", "--brokers", "1",
         "--broker-only", "0", "--data-dir", str(data)],
        stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,  # noqa: SIM115
    )
    try:
        wait_for(lambda: proc.poll() is not None or "Ctrl-C stops" in log.read_text(), 120,
                 "both clusters up")
        assert proc.poll() is None, log.read_text()[-3000:]
        assert len(kafka_processes(str(data))) == 2  # the metrics node and the watched node
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
        wait_for(lambda: not kafka_processes(str(data)), 30, "every Kafka node to exit")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in kafka_processes(str(data)):
            os.kill(pid, signal.SIGKILL)
