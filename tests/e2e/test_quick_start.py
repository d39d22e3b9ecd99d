"""The README's quick start, followed as written against a real Kafka cluster.

The commands and the config are read from the README's fenced blocks marked
`<!-- quick-start -->` (commands, one a line) and `<!-- quick-start: FILE -->` (a file to
write), so the quick start cannot rot. The test bed plays the reader's own Kafka: a
one-node watched cluster with its JMX agents, the session's metrics cluster, and the test
bed's shipper standing in for the reader's Telegraf (both put the brokers' Jolokia reads on
the metrics topic). The only edits are the ones a reader makes: their addresses, their
topic name and a free port for /metrics.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from streaming.testbed.kafka import KafkaCluster, create_topic, free_port
from streaming.testbed.shipper import Shipper, Target
from tests.conftest import wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CLI = ".venv/bin/kafka-health"
MARKED_BLOCK = re.compile(r"<!-- quick-start(?::\s*(?P<file>\S+))?\s*-->\s*\n```\w*\n(?P<body>.*?)```",
                          re.DOTALL)
CLUSTER = "prod-east"  # the name the README's shipper recipe gives the watched cluster


@dataclass(frozen=True)
class Step:
    file: str | None  # a file to write, or None for commands
    body: str


def quick_start_steps(readme: str) -> list[Step]:
    """The marked blocks of the README, in order."""
    return [Step(m.group("file"), m.group("body")) for m in MARKED_BLOCK.finditer(readme)]


def test_readme_marks_the_quick_start_commands() -> None:
    steps = quick_start_steps(README.read_text())
    commands = [line for step in steps if step.file is None for line in step.body.splitlines()]
    verbs = [shlex.split(line)[1] for line in commands]
    assert verbs == ["peek", "check-config", "run", "status"], commands
    assert [step.file for step in steps if step.file] == ["kafka-health.yaml"]
    assert all(line.startswith(CLI + " ") for line in commands), commands


@pytest.fixture
def own_cluster(broker: Any) -> Iterator[dict[str, str]]:
    """A watched cluster and a shipper putting its brokers' metrics on a metrics topic:
    what the README's step 1 sets up; yields what the reader substitutes."""
    topic = f"kafka-metrics-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=2)
    with KafkaCluster(1) as watched:
        targets = [Target(n.node_id, n.jolokia_url, n.jmx_exporter_url) for n in watched.nodes]
        with Shipper(targets, CLUSTER, broker.bootstrap, topic, None, interval=2.0):
            yield {"metrics-kafka:9092": broker.bootstrap, "kafka-1:9092": watched.bootstrap,
                   "kafka-metrics": topic, "9464": str(free_port())}


def substitute(text: str, mine: dict[str, str]) -> str:
    for placeholder, value in mine.items():
        text = re.sub(rf"(?<![\w-]){re.escape(placeholder)}(?![\w-])", value, text)
    return text


def argv(line: str) -> list[str]:
    """The README's command as this checkout's interpreter runs it (the same entry point
    as the installed script, also from a worktree)."""
    words = shlex.split(line)
    assert words[0] == CLI
    return [sys.executable, "-m", "streaming.cli", *words[1:]]


def test_quick_start_reaches_a_first_batch_and_status(own_cluster: dict[str, str],
                                                      tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env = {k: v for k, v in env.items() if not k.startswith("KAFKA_HEALTH__")}
    steps = quick_start_steps(README.read_text())
    commands: dict[str, str] = {}
    for step in steps:
        if step.file:
            (tmp_path / step.file).write_text(substitute(step.body, own_cluster))
            continue
        for line in step.body.splitlines():
            commands[shlex.split(line)[1]] = substitute(line, own_cluster)

    def run(verb: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv(commands[verb]), cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)

    def peeked() -> str | None:
        out = run("peek")
        return out.stdout if out.returncode == 0 and CLUSTER in out.stdout else None

    shown = wait_for(peeked, 60, "peek to show the shipped records", every=2)
    assert "jolokia" in shown

    checked = run("check-config")
    assert checked.returncode == 0, checked.stdout + checked.stderr

    log = tmp_path / "run.log"
    job = subprocess.Popen(argv(commands["run"]), cwd=tmp_path, env=env,  # noqa: S603
                           stdout=open(log, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
                           start_new_session=True)
    try:
        bronze = tmp_path / "data" / "delta" / "bronze"

        def first_batch() -> int:
            assert job.poll() is None, log.read_text()[-3000:]
            if not (bronze / "_delta_log").is_dir():
                return 0
            from deltalake import DeltaTable
            return DeltaTable(str(bronze)).to_pyarrow_dataset().count_rows()

        wait_for(first_batch, 90, "the first batch in bronze", every=1)

        def status() -> str | None:
            out = run("status")
            return out.stdout if out.returncode == 0 and CLUSTER in out.stdout else None

        wait_for(status, 60, f"status to show {CLUSTER}", every=2)
        job.send_signal(signal.SIGTERM)
        assert job.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
