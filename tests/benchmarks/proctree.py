"""Memory and CPU of a process tree (the job, its JVM, Python workers and broker), from /proc.

The benchmarks report whole-tree figures: on a 2-core machine the broker, Spark's JVM, the
Python workers and the driver compete for the same cores, so one process's numbers say
little about the limit.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Process:
    pid: int
    kind: str  # jvm | broker | python-worker | python-driver
    rss_mb: float
    cpu_seconds: float  # user + system, its reaped children's included


def kind_of(cmdline: str) -> str:
    return ("jvm" if "java" in cmdline.split(" ")[0] else "broker" if "tansu" in cmdline
            else "python-worker" if "pyspark" in cmdline else "python-driver")


def process_tree(root_pid: int) -> list[Process]:
    """root_pid and every process below it."""
    children: dict[int, list[int]] = {}
    found: dict[int, Process] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        pid = int(entry.name)
        children.setdefault(int(stat[1]), []).append(pid)
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        found[pid] = Process(pid, kind_of(cmdline), int(match.group(1)) / 1024 if match else 0.0,
                             sum(int(stat[i]) for i in (11, 12, 13, 14)) / TICKS)
    out, stack = [], [root_pid]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        if pid in found:
            out.append(found[pid])
    return out


def per_kind(root_pid: int, measure: str) -> dict[str, float]:
    """A Process field (rss_mb, cpu_seconds) summed per process kind, and the total."""
    out: dict[str, float] = {}
    for process in process_tree(root_pid):
        out[process.kind] = out.get(process.kind, 0.0) + getattr(process, measure)
    out["total"] = sum(out.values())
    return out


def tree_rss_mb(root_pid: int) -> dict[str, float]:
    """RSS in MB per process kind below root_pid (inclusive), and the total."""
    return per_kind(root_pid, "rss_mb")


def tree_cpu_seconds(root_pid: int) -> dict[str, float]:
    """CPU seconds so far per process kind below root_pid (inclusive), and the total."""
    return per_kind(root_pid, "cpu_seconds")
