"""`kafka-health demo --simulated` as an operator runs it: its own process, the simulated
cluster's metrics (through the real metrics cluster) reach the exported gauges and Delta,
it narrates (a status line, a summary at the end) without the libraries' noise, and a
SIGTERM (Ctrl-C, `docker stop`, a pod eviction) ends it promptly and cleanly even with
--duration pending."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from streaming.testbed.kafka import free_port
from tests.benchmarks.bench_steady import gauge
from tests.conftest import wait_for
from tests.integration.helpers import count

# Lines the demo printed before its output was made quiet: great_expectations' registry,
# py4j, librdkafka writing to stderr itself (%<level>|), Spark's startup warnings.
NOISE = ("great_expectations", "py4j", "%3|", "%4|", "%5|", "%6|", "%7|",
         "Using Spark's default log4j profile", "NativeCodeLoader", "Setting default log level")


def test_the_demo_exports_broker_gauges_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "demo.log"
    demo = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "demo", "--simulated", "--data-dir", str(tmp_path / "data"),
         "--metrics-port", str(port), "--scrape-interval", "1", "--duration", "3600"],
        stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,  # noqa: SIM115
    )
    try:
        wait_for(lambda: demo.poll() is not None or gauge(
                     port, "kafka_health_under_min_isr_partitions", 'broker="1",cluster="demo"')
                 is not None, 240, "the demo's broker 1 under-min-ISR gauge")
        assert demo.poll() is None, log.read_text()[-3000:]
        assert count(tmp_path / "data" / "delta", "bronze") > 0
        wait_for(lambda: demo.poll() is not None or "status: " in log.read_text(), 60,
                 "the demo's status line")
        demo.send_signal(signal.SIGTERM)
        # stops after the current batch; the hour of --duration left must not hold it up
        assert demo.wait(90) == 0, log.read_text()[-3000:]
        output = log.read_text()
        assert "records/s, lag " in output and "open incident(s)" in output
        assert "summary: " in output and str(tmp_path / "data" / "report" / "index.html") in output
        noise = [line for line in output.splitlines() if any(n in line for n in NOISE)]
        assert noise == [], noise[:10]
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)  # the broker and Spark with it
            demo.wait(30)
