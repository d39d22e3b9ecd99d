"""`report`, `headroom` and `status` for one cluster, on tables a running job wrote.

Two clusters share the topic, so every micro-batch's MERGEs write files holding both
names: the files on which a cluster filter pushed down as a string predicate failed the
scan. Small triggers make many batches, so the tables have been MERGEd into many times.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from streaming.cli import main
from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Event, Simulator
from tests.integration.helpers import count, run_until

pytestmark = pytest.mark.integration
SECONDS = 420


def simulate(bootstrap: str, topic: str) -> int:
    """c1 loses broker 3 at 2 min and broker 2 at 3 min (under min ISR, both stale until
    the end); c2 stays healthy. Returns the samples produced."""
    start = (int(time.time()) // 60 - SECONDS // 60 - 2) * 60.0  # all in the past
    faulty = Simulator(ClusterModel("c1", [1, 2, 3], {"orders": 6}), bootstrap, topic,
                       scrape_interval=15, start=start)
    faulty.run(SECONDS, events=[Event(120, lambda m: m.broker_down(3)),
                                Event(180, lambda m: m.broker_down(2))])
    healthy = Simulator(ClusterModel("c2", [1, 2, 3], {"payments": 3}), bootstrap, topic,
                        scrape_interval=15, start=start)
    healthy.run(SECONDS)
    return faulty.truth.samples_total + healthy.truth.samples_total


def test_report_headroom_and_status_filter_a_cluster_on_a_running_jobs_tables(
        broker: Any, topic: str, job_env: dict[str, str], spark: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    expected = simulate(broker.bootstrap, topic)
    env = {**job_env, "KAFKA_HEALTH__SOURCE__MAX_OFFSETS_PER_TRIGGER": "40"}
    root = env["KAFKA_HEALTH__DELTA__PATH"]
    run_until(spark, env, lambda: count(root, "bronze") >= expected
              and count(root, "partition_headroom") >= 6, 300, f"{expected} bronze rows")

    out_dir = tmp_path / "report"
    assert main(["report", "--delta", root, "--cluster", "c1", "--hours", "48",
                 "--out", str(out_dir)]) == 0
    assert str(out_dir / "index.html") in capsys.readouterr().out
    page = (out_dir / "index.html").read_text()
    assert "c1" in page and "could not be read" not in page

    assert main(["headroom", "--delta", root, "--cluster", "c2", "--png", ""]) == 0
    headroom = capsys.readouterr().out
    assert "cluster c2:" in headroom and "cluster c1" not in headroom
    assert "No partition headroom rows" not in headroom

    assert main(["status", "--delta", root, "--cluster", "c1", "-o", "json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["notes"] == []
    assert {(i["kind"], i["broker"]) for i in status["open_incidents"]} >= {
        ("under_min_isr", "1"), ("stale_broker", "3")}
    stale = {s["broker"]: s for s in status["stale_brokers"]}
    assert set(stale) == {"2", "3"} and stale["3"]["incident_open"]
    assert {s["cluster"] for s in status["stale_brokers"]} == {"c1"}

    assert main(["status", "--delta", root, "--cluster", "c2", "-o", "json"]) == 0
    healthy = json.loads(capsys.readouterr().out)
    assert healthy["open_incidents"] == [] and healthy["stale_brokers"] == []
    assert [h["cluster"] for h in healthy["lowest_headroom"]] == ["c2"]
