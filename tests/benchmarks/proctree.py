"""Memory and CPU of a process tree (the job, its JVM, Python workers and broker), from /proc.

The benchmarks report whole-tree figures: on a 2-core machine the broker, Spark's JVM, the
Python workers and the driver compete for the same cores, so one process's numbers say
little about the limit.

A process that shares its parent's address space is not counted twice. The JVM starts
every external command (Hadoop's `chmod` and `readlink` on checkpoint files, ~8 a
micro-batch) through posix_spawn, whose child runs in the JVM's own memory until it execs
`jspawnhelper`. /proc reports the JVM's whole RSS for that child for the few milliseconds
it lives, so a sampler that lands there would read the JVM twice: a spike of exactly
twice its RSS that no memory of the JVM's own explains.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
KCMP_SYSCALL = {"x86_64": 312, "aarch64": 272}.get(platform.machine())
KCMP_VM = 1  # enum kcmp_type: KCMP_FILE, KCMP_VM, ...
_libc = ctypes.CDLL(None, use_errno=True)


def shares_address_space(pid: int, other: int) -> bool:
    """True if the two processes run in one address space (kcmp(2) KCMP_VM): a vfork or
    posix_spawn child before its exec. False if not, or if the kernel will not say."""
    if KCMP_SYSCALL is None:
        return False
    return _libc.syscall(KCMP_SYSCALL, pid, other, KCMP_VM, 0, 0) == 0


@dataclass(frozen=True)
class Process:
    pid: int
    kind: str  # jvm | broker | python-worker | python-driver
    rss_mb: float  # 0 for a process in its parent's address space (counted there)
    cpu_seconds: float  # user + system, its reaped children's included
    cmdline: str = ""
    ppid: int = 0
    started: int = 0  # clock ticks after boot: with pid, names one process for good
    reaped_cpu_seconds: float = 0.0  # the part of cpu_seconds its reaped children used


def kind_of(cmdline: str) -> str:
    return ("broker" if " kafka.Kafka " in cmdline else "jvm" if "java" in cmdline.split(" ")[0]
            else "python-worker" if "pyspark" in cmdline else "python-driver")


# Python processes the driver's JVM runs to plan a Python data source: the streaming
# source's runner (latestOffset, partitions and commit, every batch) and the daemons that
# look the source up, create it and plan its read (stopped after the first batch).
PLANNER_MODULES = ("pyspark.sql.streaming.python_streaming_source_runner",
                   "pyspark.sql.worker.")
DRIVER_ROLES = ("driver-python", "driver-jvm", "driver-planner")


def role_of(process: Process, root_pid: int) -> str:
    """A finer kind for the scale-out figures: the driver's Python and JVM, the Python
    processes planning the source for the driver, executor JVMs, a standalone cluster's
    master and worker daemons, Python workers, the broker."""
    if process.pid == root_pid:
        return "driver-python"
    if process.kind == "python-worker" and any(m in process.cmdline for m in PLANNER_MODULES):
        return "driver-planner"
    if process.kind != "jvm":
        return process.kind
    if "CoarseGrainedExecutorBackend" in process.cmdline:
        return "executor-jvm"
    if "deploy.master.Master" in process.cmdline or "deploy.worker.Worker" in process.cmdline:
        return "spark-daemon"
    return "driver-jvm"  # local[N]: the executors' task threads run in it too


def driver_us(per_role: dict[str, float]) -> float:
    """The driver's CPU (a sample, or in all) from figures per role_of: its Python, its
    JVM and the Python processes that plan the source for it."""
    return sum(per_role.get(role, 0.0) for role in DRIVER_ROLES)


# Where the watching thread's own CPU is reported, apart from the job's and its total.
WATCHER = "benchmark-thread"


def job_cpu_seconds(root_pid: int) -> tuple[dict[str, float], dict[str, float]]:
    """The job's CPU seconds so far below root_pid (inclusive, the calling process), per
    process kind and per role_of, each with its total, from one reading of /proc.

    The calling thread's own CPU is taken out of the driver's Python: the benchmarks call
    this from the thread that watches the query, which the job never runs on, and that
    thread's polling of the query's progress and its readings of /proc (every process on
    the machine) are the measurement's, not the job's. It is kept apart under WATCHER."""
    watcher = time.thread_time()
    processes = _ledger(root_pid).read()
    kinds = _totals((p.kind, p.cpu_seconds) for p in processes)
    roles = _totals((role_of(p, root_pid), p.cpu_seconds) for p in processes)
    for figures, driver in ((kinds, "python-driver"), (roles, "driver-python")):
        figures[driver] = figures.get(driver, 0.0) - watcher
        figures["total"] -= watcher
        figures[WATCHER] = watcher
    return kinds, roles


class CpuLedger:
    """The processes of a tree across readings, each one's CPU kept under its own kind and
    role after it exits.

    Why: a process's CPU in /proc includes what its reaped children used (cutime), and a
    child that exits leaves the tree. Between two readings, then, an exiting child's CPU
    would move from its own figure to its parent's: Spark's planning daemons (Python, seconds
    of start-up CPU, stopped by the job after its first batch) would count as the driver
    JVM's CPU within a span timed from that batch's end. The ledger keeps an exited process at its
    last reading, and takes from its parent's reaped CPU what such children explain (at most
    what the parent's reaped CPU grew by); the rest, children too short-lived for any
    reading to see (the JVM's chmod and jspawnhelper), stays the parent's."""

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self.live: dict[tuple[int, int], Process] = {}
        self.gone: dict[tuple[int, int], Process] = {}
        self.explained: dict[tuple[int, int], float] = {}  # reaped CPU owed to gone children

    def read(self) -> list[Process]:
        """The tree now with every process that left it since the first reading; each
        process's cpu_seconds without the reaped CPU of children listed apart."""
        now = {(p.pid, p.started): p for p in process_tree(self.root_pid)}
        exited = [p for key, p in self.live.items() if key not in now]
        by_parent: dict[int, float] = {}
        for child in exited:
            by_parent[child.ppid] = by_parent.get(child.ppid, 0.0) + child.cpu_seconds
            self.gone[(child.pid, child.started)] = child
        for key, process in now.items():
            before = self.live.get(key)
            if process.pid in by_parent and before is not None:
                grew = process.reaped_cpu_seconds - before.reaped_cpu_seconds
                self.explained[key] = (self.explained.get(key, 0.0)
                                       + min(max(grew, 0.0), by_parent[process.pid]))
        self.live = now
        return [*(replace(p, cpu_seconds=p.cpu_seconds - self.explained.get(key, 0.0))
                  for key, p in now.items()), *self.gone.values()]


_LEDGERS: dict[int, CpuLedger] = {}


def _ledger(root_pid: int) -> CpuLedger:
    """One ledger per root for the life of the process: every reading of a benchmark's
    runs goes through it, so a figure's two ends agree on who exited when."""
    return _LEDGERS.setdefault(root_pid, CpuLedger(root_pid))


def _totals(pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    """The values summed per key, and the total."""
    out: dict[str, float] = {}
    for key, value in pairs:
        out[key] = out.get(key, 0.0) + value
    out["total"] = sum(out.values())
    return out


def process_tree(root_pid: int) -> list[Process]:
    """root_pid and every process below it."""
    children: dict[int, list[int]] = {}
    found: dict[int, Process] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            # Asked before reading the RSS: a process never joins an address space, it only
            # leaves one (exec), so a child not sharing now reports its own memory below.
            shared = shares_address_space(pid, int(stat[1]))
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        children.setdefault(int(stat[1]), []).append(pid)
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        rss_mb = int(match.group(1)) / 1024 if match and not shared else 0.0
        found[pid] = Process(pid, kind_of(cmdline), rss_mb,
                             sum(int(stat[i]) for i in (11, 12, 13, 14)) / TICKS, cmdline,
                             ppid=int(stat[1]), started=int(stat[19]),
                             reaped_cpu_seconds=(int(stat[13]) + int(stat[14])) / TICKS)
    out, stack = [], [root_pid]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        if pid in found:
            out.append(found[pid])
    return out


def per_kind(root_pid: int, measure: str) -> dict[str, float]:
    """A Process field (rss_mb, cpu_seconds) summed per process kind, and the total."""
    return _totals((p.kind, getattr(p, measure)) for p in process_tree(root_pid))


def tree_rss_mb(root_pid: int) -> dict[str, float]:
    """RSS in MB per process kind below root_pid (inclusive), and the total."""
    return per_kind(root_pid, "rss_mb")


def tree_cpu_seconds(root_pid: int) -> dict[str, float]:
    """CPU seconds so far per process kind below root_pid (inclusive), and the total."""
    return per_kind(root_pid, "cpu_seconds")


@dataclass(frozen=True)
class ThreadReading:
    """One process's CPU seconds in all (its threads' that exited included) and per live
    thread, keyed by thread id, with the thread's name."""

    process_cpu_seconds: float
    threads: dict[int, tuple[str, float]]


def read_threads(pid: int) -> ThreadReading | None:
    """The process's CPU and its live threads' from /proc; None once it has gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return None
    threads: dict[int, tuple[str, float]] = {}
    for tid in tids:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # exited between the listing and the reading
        name = text[text.index("(") + 1: text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        threads[tid] = (name, (int(fields[11]) + int(fields[12])) / TICKS)
    return ThreadReading((int(stat[11]) + int(stat[12])) / TICKS, threads)


# Where the CPU of threads that exited between two readings goes in threads_between.
EXITED_THREADS = "(threads that exited)"


def thread_group(name: str) -> str:
    """A thread's name with its numbers as '#': a JVM's pool threads (`task-result-getter-3`,
    `C2 CompilerThread0`, `GC Thread#1`) count as one group each."""
    return re.sub(r"\d+", "#", name)


def threads_between(first: ThreadReading, last: ThreadReading) -> dict[str, float]:
    """CPU seconds per thread group from one reading to a later one of the same process.
    A thread born since counts from zero; what the process used beyond its live threads'
    growth (threads that exited in between) is EXITED_THREADS, so the groups sum to the
    process's own growth."""
    groups: dict[str, float] = {}
    for tid, (name, cpu) in last.threads.items():
        grew = cpu - first.threads.get(tid, (name, 0.0))[1]
        groups[thread_group(name)] = groups.get(thread_group(name), 0.0) + grew
    groups[EXITED_THREADS] = (last.process_cpu_seconds - first.process_cpu_seconds
                              - sum(groups.values()))
    return groups


def driver_jvm_pid(root_pid: int) -> int | None:
    """The driver's JVM below root_pid (the process whose Python is root_pid), if any."""
    for process in process_tree(root_pid):
        if process.kind == "jvm" and role_of(process, root_pid) == "driver-jvm":
            return process.pid
    return None
