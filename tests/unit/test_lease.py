"""A second job pointed at the same checkpoint or tables refuses to start, naming the first;
a lease whose job is gone (dead process here, or no heartbeat for the timeout) is taken
over; a job whose lease was taken over learns it on its next heartbeat."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streaming.config import Config
from streaming.lease import LEASE_FILE, Lease, LeaseHeld, LeaseLost, Leases, local_dir

HOLDER = """
import sys, time
from pathlib import Path
from streaming.lease import Lease
Lease(Path(sys.argv[1]), 30.0, owner="first-job").acquire()
print("held", flush=True)
time.sleep(120)
"""


def wait_until(condition, seconds: float = 30.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.fixture
def holder(tmp_path: Path):  # noqa: ANN201
    """Another live process on this host holding the lease of tmp_path."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)],
                             stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        yield child
    finally:
        child.kill()
        child.wait()


def test_second_job_is_refused_with_the_holder_named(tmp_path: Path, holder) -> None:  # noqa: ANN001
    with pytest.raises(LeaseHeld) as refused:
        Lease(tmp_path, 30.0).acquire()
    message = str(refused.value)
    assert "first-job" in message and f"pid {holder.pid}" in message
    assert "spark.lease_timeout_seconds" in message
    assert json.loads((tmp_path / LEASE_FILE).read_text())["owner"] == "first-job"


def test_lease_of_a_dead_process_on_this_host_is_taken_over(
        tmp_path: Path, holder, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    holder.kill()
    holder.wait()
    with caplog.at_level(logging.WARNING, "kafka_health.lease"):
        Lease(tmp_path, 30.0, owner="second-job").acquire()
    assert json.loads((tmp_path / LEASE_FILE).read_text())["owner"] == "second-job"
    assert "first-job" in caplog.text and "taking over" in caplog.text


def foreign(tmp_path: Path, heartbeat: float) -> None:
    """A lease written by a job on another host (its pid says nothing here)."""
    (tmp_path / LEASE_FILE).write_text(json.dumps(
        {"owner": "remote-job", "host": "other-host", "pid": 1, "heartbeat": heartbeat}))


def test_stale_lease_from_another_host_is_taken_over_fresh_one_is_not(tmp_path: Path) -> None:
    now = 1_000_000.0
    foreign(tmp_path, heartbeat=now - 29)
    with pytest.raises(LeaseHeld, match="remote-job on host other-host"):
        Lease(tmp_path, 30.0, clock=lambda: now).acquire()
    foreign(tmp_path, heartbeat=now - 31)
    Lease(tmp_path, 30.0, owner="mine", clock=lambda: now).acquire()
    assert json.loads((tmp_path / LEASE_FILE).read_text())["owner"] == "mine"


@pytest.mark.parametrize("gone", ["folder", "file"])
def test_a_checkpoint_deleted_under_the_job_is_lost_on_the_next_renewal(
        tmp_path: Path, gone: str) -> None:
    """Spark goes on into a new, empty checkpoint folder, and a restart from that would
    read the topics again: the renewal notices instead of writing a fresh lease."""
    import shutil

    folder = tmp_path / "checkpoint"
    mine = Lease(folder, 30.0, owner="mine")
    mine.acquire()
    mine.renew()
    if gone == "folder":
        shutil.rmtree(folder)
    else:
        (folder / LEASE_FILE).unlink()
    with pytest.raises(LeaseLost, match="gone"):
        mine.renew()
    assert not (folder / LEASE_FILE).exists()


def test_taken_over_lease_is_lost_on_the_next_renewal(tmp_path: Path) -> None:
    mine = Lease(tmp_path, 30.0, owner="mine")
    mine.acquire()
    mine.renew()
    foreign(tmp_path, heartbeat=time.time())
    with pytest.raises(LeaseLost, match="remote-job"):
        mine.renew()
    mine.release()  # not ours any more: left alone
    assert json.loads((tmp_path / LEASE_FILE).read_text())["owner"] == "remote-job"


def test_job_leases_guard_checkpoint_and_tables_and_heartbeat(tmp_path: Path) -> None:
    config = Config()
    config.spark.checkpoint = str(tmp_path / "checkpoint")
    config.delta.path = f"file://{tmp_path}/delta"
    config.spark.lease_timeout_seconds = 0.3
    leases = Leases([config.spark.checkpoint, config.delta.path, "s3a://bucket/delta"],
                    config.spark.lease_timeout_seconds)
    assert [lease.path.parent for lease in leases.leases] == [
        tmp_path / "checkpoint", tmp_path / "delta"]
    leases.acquire()
    try:
        first = json.loads((tmp_path / "delta" / LEASE_FILE).read_text())["heartbeat"]
        wait_until(lambda: json.loads(
            (tmp_path / "delta" / LEASE_FILE).read_text())["heartbeat"] > first)
        foreign(tmp_path / "checkpoint", heartbeat=time.time() + 3600)
        wait_until(lambda: leases.lost is not None)
    finally:
        leases.release()
    assert not (tmp_path / "delta" / LEASE_FILE).exists()  # still ours: released
    assert json.loads((tmp_path / "checkpoint" / LEASE_FILE).read_text())["owner"] == "remote-job"


def test_all_or_none(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    foreign(tmp_path / "b", heartbeat=time.time())
    leases = Leases([str(tmp_path / "a"), str(tmp_path / "b")], 30.0)
    with pytest.raises(LeaseHeld):
        leases.acquire()
    assert not (tmp_path / "a" / LEASE_FILE).exists()


def test_local_dir() -> None:
    assert local_dir("data/checkpoint") == Path("data/checkpoint")
    assert local_dir("file:///var/kh") == Path("/var/kh")
    assert local_dir("s3a://bucket/kh") is None


def test_job_start_refuses_before_writing_anything(tmp_path: Path) -> None:
    from streaming.job import Job

    config = Config()
    config.spark.checkpoint = str(tmp_path / "checkpoint")
    config.delta.path = str(tmp_path / "delta")
    (tmp_path / "delta").mkdir()
    foreign(tmp_path / "delta", heartbeat=time.time())
    job = Job(config, spark=object(), printer=None)  # type: ignore[arg-type]
    with pytest.raises(LeaseHeld, match="remote-job"):
        job.start()
    assert not (tmp_path / "checkpoint" / LEASE_FILE).exists()  # all or none


def test_a_disk_that_refuses_the_release_does_not_stop_the_stop(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A volume gone read-only under the job: releasing its lease fails, which must not
    raise out of the stop (the query's failure would go unsaid); the lease stays, for the
    next start to take over."""
    lease = Lease(tmp_path, 60)
    lease.acquire()
    lock = tmp_path / (LEASE_FILE + ".lock")
    lock.unlink()
    lock.mkdir()  # open() for the lock now fails, as on a read-only volume
    caplog.set_level(logging.WARNING, "kafka_health.lease")
    lease.release()
    assert "could not be released" in caplog.text
    assert (tmp_path / LEASE_FILE).exists()
