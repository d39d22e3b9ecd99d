"""`kafka-health run` starts its driver JVM, and the test bed its Kafka nodes, from the
class-data archives that deploy/bootstrap.sh built (streaming/runtime/class_archive.py):
each archive is mapped into the JVM's memory, which a class path that differs from the
archive's would prevent."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from streaming.runtime.class_archive import archive_path, kafka_archive_path
from tests.benchmarks.proctree import process_tree
from tests.conftest import wait_for
from tests.integration.helpers import config_file, start_job

pytestmark = pytest.mark.integration


def mapped_by_a_jvm(root_pid: int, archive: Path) -> bool:
    for process in process_tree(root_pid):
        if "java" not in process.cmdline:
            continue
        try:
            if str(archive) in Path(f"/proc/{process.pid}/maps").read_text():
                return True
        except OSError:
            continue
    return False


def test_the_jobs_driver_jvm_maps_the_class_data_archive(broker, topic, tmp_path):
    archive = archive_path([])
    assert archive is not None and archive.is_file(), (
        "deploy/bootstrap.sh builds the default session's archive; it is missing")
    log = tmp_path / "job.log"
    job = start_job(config_file(tmp_path, broker.bootstrap, topic), log)
    try:
        wait_for(lambda: job.poll() is None and mapped_by_a_jvm(job.pid, archive), 120,
                 "the job's driver JVM to map the archive")
        # stopped once running, when a SIGTERM stops it after its batch
        wait_for(lambda: b"kafka-health running" in log.read_bytes(), 120, "the job running")
    finally:
        job.send_signal(signal.SIGTERM)
        code = job.wait(120)
    assert code == 0, log.read_text()[-3000:]


def test_the_test_beds_kafka_nodes_map_their_class_data_archive(broker):
    archive = kafka_archive_path()
    assert archive is not None and archive.is_file(), (
        "deploy/bootstrap.sh builds the Kafka nodes' archive; it is missing")
    node = broker.nodes[0]
    assert node.running() and str(archive) in Path(f"/proc/{node.pid}/maps").read_text()
