"""A real Spark standalone cluster (one master, N workers) on loopback, from the pip pyspark.

Used by the scale-out test and benchmark, which must prove the job runs unchanged on a
distributed engine: executors in their own JVMs and Python workers, talking to the driver
over RPC, not the single-JVM `local[*]` shortcut. Each daemon runs in its own process
group, so stop() also takes down the executors (and their Python workers) that a worker
forked, even when a test fails half-way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyspark

from streaming.testbed.kafka import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster did not come up (the message carries the tail of the daemons' logs)."""


class StandaloneCluster:
    """Master + workers as `spark-class` processes; a context manager that always tears down."""

    def __init__(self, work_dir: Path, worker_cores: int = 1, worker_memory: str = "1g") -> None:
        self.work_dir = Path(work_dir)
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.port = free_port()
        self.webui_port = free_port()
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def webui(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def _env(self) -> dict[str, str]:
        # Loopback only; executors must run this venv's Python, which has the editable
        # install of `streaming` (the source and decode code runs in executor Python workers).
        return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable}

    def _spawn(self, name: str, *args: str) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.work_dir / f"{name}.log", "ab")  # noqa: SIM115 (owned by the child)
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args], env=self._env(),
            cwd=self.work_dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        self.processes.append((name, process))

    def start(self, workers: int, timeout: float = 90.0) -> StandaloneCluster:
        """Start the master and `workers` workers; return once the master lists them ALIVE."""
        try:
            self._spawn("master", MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
                        "--webui-port", str(self.webui_port))
            for _ in range(workers):
                self.add_worker(timeout=None)
            self.wait_for_workers(workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self, timeout: float | None = 90.0) -> None:
        """One more worker; with a timeout, wait until the master counts it ALIVE."""
        index = sum(1 for name, _ in self.processes if name.startswith("worker"))
        work = self.work_dir / f"worker-{index}"
        self._spawn(f"worker-{index}", WORKER_CLASS, "--host", "127.0.0.1",
                    "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                    "--webui-port", str(free_port()), "--work-dir", str(work), self.url)
        if timeout is not None:
            self.wait_for_workers(index + 1, timeout)

    def state(self) -> dict[str, Any] | None:
        """The master's JSON status page, or None while it is not answering yet."""
        return _get_json(f"{self.webui}/json/")

    def alive_workers(self) -> list[dict[str, Any]]:
        state = self.state() or {}
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def active_app(self, name: str) -> dict[str, Any] | None:
        """The running application called `name` as the master sees it (cores granted etc.)."""
        state = self.state() or {}
        return next((a for a in state.get("activeapps", []) if a.get("name") == name), None)

    def wait_for_workers(self, count: int, timeout: float) -> list[dict[str, Any]]:
        """Poll the master until `count` workers are ALIVE; fail early if a daemon died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes:
                if process.poll() is not None:
                    raise ClusterError(f"{name} exited with {process.returncode}\n{self.logs()}")
            alive = self.alive_workers()
            if len(alive) >= count:
                return alive
            time.sleep(0.5)
        raise ClusterError(f"{count} ALIVE workers not listed by {self.webui}/json within "
                           f"{timeout:.0f}s\n{self.logs()}")

    def logs(self, tail: int = 2000) -> str:
        """The end of every daemon's log, for failure messages."""
        parts = []
        for path in sorted(self.work_dir.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every process group (workers first, then the master), SIGKILL what is left."""
        processes, self.processes = list(reversed(self.processes)), []
        for _, process in processes:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for _, process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
            # Executors and Python workers forked by a worker share its group: kill it whole.
            _signal_group(process, signal.SIGKILL)
            process.wait(10)

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _get_json(url: str, timeout: float = 10.0) -> Any:
    """GET a JSON document; None while the server is not answering (yet, or any more).

    The timeout is generous: a driver UI on a loaded 2-core machine took over 2 s to answer
    its first REST call, and a too-short timeout reads as "no executors"."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def driver_ui_conf(ui_port: int) -> dict[str, str]:
    """Spark settings that make a driver usable against this cluster and observable.

    The driver binds and advertises loopback (the executors connect back to it); its UI is
    on (job.spark_conf turns it off) so executors() can ask which executors ran tasks; the
    first batch waits for every executor to register, so the work spreads from the start.
    Harmless under `local[*]`, so the same settings serve both runs of a comparison.
    """
    return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "true", "spark.ui.port": str(ui_port),
            "spark.port.maxRetries": "0",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0"}


def executors(ui_port: int) -> list[dict[str, Any]]:
    """Executors (not the driver) of the application whose UI is on `ui_port`, from the
    driver's REST API: id, hostPort, totalTasks, ... ([] while it is not up)."""
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    apps = _get_json(base) or []
    if not apps:
        return []
    found = _get_json(f"{base}/{apps[0]['id']}/executors") or []
    return [e for e in found if e.get("id") != "driver"]


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group is already gone
        os.killpg(process.pid, signum)
