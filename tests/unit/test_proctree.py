"""The benchmarks' process-tree memory: every process once, an address space once."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time

import pytest

from tests.benchmarks.proctree import KCMP_SYSCALL, process_tree, shares_address_space

needs_kcmp = pytest.mark.skipif(KCMP_SYSCALL is None, reason="kcmp(2) number unknown here")


@needs_kcmp
def test_a_thread_shares_its_process_address_space_and_a_child_process_does_not() -> None:
    # A thread is a task made with CLONE_VM, as a posix_spawn child is before its exec.
    native_ids: list[int] = []
    release = threading.Event()
    thread = threading.Thread(target=lambda: (native_ids.append(threading.get_native_id()),
                                              release.wait(10)))
    thread.start()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.time() + 10
        while not native_ids and time.time() < deadline:
            time.sleep(0.01)
        assert shares_address_space(native_ids[0], threading.get_native_id())
        assert not shares_address_space(child.pid, threading.get_native_id())
    finally:
        release.set()
        thread.join()
        child.kill()
        child.wait()


@needs_kcmp
def test_the_tree_counts_a_child_process_memory_of_its_own() -> None:
    child = subprocess.Popen([sys.executable, "-c",
                              "b = b'x' * (64 << 20); import time; time.sleep(30)"])
    try:
        deadline = time.time() + 20
        rss = 0.0
        while time.time() < deadline:
            found = {p.pid: p for p in process_tree(os.getpid())}
            rss = found[child.pid].rss_mb if child.pid in found else 0.0
            if rss > 64:
                break
            time.sleep(0.05)
        assert rss > 64
    finally:
        child.kill()
        child.wait()


def test_roles_tell_the_driver_from_the_executors_and_the_cluster_daemons() -> None:
    """The scale-out projection divides by each role's CPU: a standalone cluster's
    executor JVM must not count as the driver's, nor its worker daemon as an executor."""
    from tests.benchmarks.proctree import Process, role_of

    def java(cmdline: str, pid: int = 7) -> Process:
        return Process(pid, "jvm", 0.0, 0.0, f"/usr/bin/java -cp x {cmdline}")

    root = 1
    assert role_of(Process(root, "python-driver", 0.0, 0.0, "python bench.py"), root) == (
        "driver-python")
    assert role_of(java("org.apache.spark.deploy.SparkSubmit pyspark-shell"), root) == (
        "driver-jvm")
    assert role_of(java("org.apache.spark.executor.CoarseGrainedExecutorBackend --id 0"),
                   root) == "executor-jvm"
    assert role_of(java("org.apache.spark.deploy.worker.Worker spark://h:7077"), root) == (
        "spark-daemon")
    assert role_of(Process(9, "python-worker", 0.0, 0.0, "python -m pyspark.daemon"),
                   root) == "python-worker"


def test_a_child_that_exits_keeps_its_cpu_and_its_parent_does_not_take_it() -> None:
    """Spark's planning daemons are the driver JVM's children, counted apart while they
    live; once they exit, /proc adds their CPU to the JVM's (cutime). A span timed across
    their exit must not count it as the JVM's, nor count it twice."""
    from tests.benchmarks.proctree import CpuLedger

    ledger = CpuLedger(os.getpid())
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nend = time.process_time() + 0.6\n"
                              "while time.process_time() < end: pass\n"
                              "time.sleep(30)"])
    try:
        deadline = time.time() + 30
        seen = 0.0
        while seen < 0.6 and time.time() < deadline:
            seen = next((p.cpu_seconds for p in ledger.read() if p.pid == child.pid), 0.0)
            time.sleep(0.05)
        assert seen >= 0.6
        before = {p.pid: p.cpu_seconds for p in ledger.read()}
    finally:
        child.kill()
        child.wait()  # reaped: its CPU is now in this process's cutime
    after = {p.pid: p.cpu_seconds for p in ledger.read()}
    assert after[child.pid] == pytest.approx(before[child.pid])
    assert after[os.getpid()] - before[os.getpid()] < 0.3  # this thread's own reading, no more


def _spinner(name: str, seconds: float, spun: threading.Semaphore,
             hold: threading.Event | None = None) -> threading.Thread:
    """A thread that names itself (prctl PR_SET_NAME, as the JVM names its threads), spins
    for `seconds` of its own CPU, releases `spun`, then waits on `hold` if given."""
    def run() -> None:
        ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)  # 15: PR_SET_NAME
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass
        spun.release()
        if hold is not None:
            hold.wait(20)

    return threading.Thread(target=run)


def _wait_until_gone_from_proc(threads: list[threading.Thread]) -> None:
    """join() returns once a thread's Python state is released, a moment before its OS
    thread exits and leaves /proc/self/task: wait for that, with a deadline."""
    deadline = time.monotonic() + 20
    while any(os.path.exists(f"/proc/self/task/{t.native_id}") for t in threads):
        assert time.monotonic() < deadline, "a joined thread stayed in /proc/self/task"
        time.sleep(0.01)


def _cpu_by_thread_group(names: list[str], keep_alive: bool) -> tuple[dict[str, float], float]:
    """threads_between over threads of these names that spin 0.3 s each and either stay
    alive or exit before the last reading; with the process's own growth."""
    from tests.benchmarks.proctree import read_threads, threads_between

    spun, hold = threading.Semaphore(0), threading.Event()
    threads = [_spinner(name, 0.3, spun, hold if keep_alive else None) for name in names]
    first = read_threads(os.getpid())
    for thread in threads:
        thread.start()
    try:
        for _ in threads:
            assert spun.acquire(timeout=20)
        if not keep_alive:
            for thread in threads:
                thread.join()
            _wait_until_gone_from_proc(threads)
        last = read_threads(os.getpid())
    finally:
        hold.set()
        for thread in threads:
            thread.join()
    assert first is not None and last is not None
    return threads_between(first, last), last.process_cpu_seconds - first.process_cpu_seconds


def test_a_pools_threads_are_one_group() -> None:
    """The driver JVM's CPU by thread: threads of one pool (names differing by number) are
    one group, and the groups add up to the process's own growth."""
    groups, grew = _cpu_by_thread_group(["worker-3", "worker-14"], keep_alive=True)
    assert groups["worker-#"] >= 0.55  # two threads of 0.3 s each, at 10 ms ticks
    assert sum(groups.values()) == pytest.approx(grew)


def test_a_thread_that_exited_between_the_readings_keeps_its_cpu() -> None:
    from tests.benchmarks.proctree import EXITED_THREADS

    groups, grew = _cpu_by_thread_group(["short-1", "short-2"], keep_alive=False)
    assert "short-#" not in groups
    assert groups[EXITED_THREADS] >= 0.55
    assert sum(groups.values()) == pytest.approx(grew)
