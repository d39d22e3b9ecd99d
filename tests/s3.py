"""An S3-compatible server for tests: moto's server mode on 127.0.0.1 with one bucket, and
the storage options that reach it (delta-rs' names, which streaming.locations also maps
for pyarrow and Spark's S3A).

The server runs in its own process, as an object store does: in the test's process its
request threads would share the interpreter lock with whatever else runs there (the
in-process Spark session's callbacks, a reference job), and a request slowed by that past
S3A's or delta-rs' timeouts is retried for minutes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow.fs as pafs

from streaming.testbed.kafka import free_port, port_open

BUCKET = "kafka-health"
KEY_ID, SECRET = "kafka-health-test", "not-a-real-secret"


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:<port>

    def storage_options(self) -> dict[str, str]:
        """Every option, the secret key included (tests that check secret handling pass
        it by reference instead)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": "us-east-1",
                "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": KEY_ID,
                "AWS_SECRET_ACCESS_KEY": SECRET}


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server with the bucket created; stopped on exit."""
    port = free_port()  # below the ephemeral range: bound later, by another process
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not port_open(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto's S3 server did not listen on {port} "
                                   f"(exit code {server.poll()})")
            time.sleep(0.1)
        admin = pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http",
                                  access_key=KEY_ID, secret_key=SECRET, region="us-east-1",
                                  allow_bucket_creation=True)
        admin.create_dir(BUCKET)
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)
