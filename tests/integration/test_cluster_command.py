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


def test_secured_clusters_are_reached_with_what_the_command_prints(tmp_path: Path) -> None:
    """`cluster --secured` prints the job config it wrote; with it (its passwords in files,
    its CA and SASL_SSL settings) `check-config` passes and `peek` reads what the shipper
    wrote, logged in as the least-privilege job user; no password is printed."""
    log = tmp_path / "cluster.log"
    data = tmp_path / "nodes"
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "cluster", "--secured", "--brokers", "1",
         "--broker-only", "0", "--ship", "1", "--data-dir", str(data)],
        stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,  # noqa: SIM115
    )
    try:
        wait_for(lambda: proc.poll() is not None or "Ctrl-C stops" in log.read_text(), 180,
                 "both secured clusters up")
        assert proc.poll() is None, log.read_text()[-3000:]
        printed = log.read_text()
        [config] = [line.split("job config:", 1)[1].strip() for line in printed.splitlines()
                    if "job config:" in line]
        passwords = [p.read_text().strip() for p in data.rglob("*.password")]
        assert passwords and not any(p in printed for p in passwords)
        checked = subprocess.run([sys.executable, "-m", "streaming.cli", "check-config",
                                  config], capture_output=True, text=True, timeout=120)
        assert checked.returncode == 0, checked.stdout + checked.stderr

        def peeked() -> str | None:
            out = subprocess.run(
                [sys.executable, "-m", "streaming.cli", "peek", "--config", config,
                 "--topic", "kafka-metrics", "-n", "1", "--from-beginning", "--timeout", "10"],
                capture_output=True, text=True, timeout=120)
            return out.stdout if out.returncode == 0 and "jolokia" in out.stdout else None

        shown = wait_for(peeked, 120, "peek to read a shipped record over SASL_SSL", every=2)
        assert not any(p in shown for p in passwords)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        for pid in kafka_processes(str(data)):
            os.kill(pid, signal.SIGKILL)
