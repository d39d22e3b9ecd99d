"""alerts/alertmanager.yml inhibition, in a real Alertmanager: a blind pipeline mutes only
its own clusters' faults, a dark cluster only its own, a stale broker its own faults but
not the durability probe's, and data loss and the heartbeat are never muted.

Alerts are posted straight to Alertmanager's API with the labels Prometheus would send
(rule labels + the scraped series' job/instance/pipeline); `status.inhibitedBy` says
what Alertmanager mutes. Starts one alertmanager (run under the shared lock).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.e2e.stack import PagerDutyReceiver, get_json, post_json, start_alertmanager, which

JOB = {"job": "kafka-health"}
P1 = {**JOB, "pipeline": "p1", "instance": "p1-0:9464"}
P2 = {**JOB, "pipeline": "p2", "instance": "p2-0:9464"}


def alert(name: str, severity: str, category: str, **labels: str) -> dict[str, str]:
    return {"alertname": name, "severity": severity, "category": category, "team": "kafka",
            **labels}


SOURCES = [
    # the one pipeline of a default install, gone: absent() carries only job
    alert("KafkaHealthPipelineDown", "critical", "pipeline", **JOB),
    # pipeline p1 of two is stalled
    alert("KafkaHealthPipelineStalled", "critical", "pipeline", **P1),
    # cluster d, read by the healthy pipeline p2, is dark
    alert("KafkaClusterDark", "critical", "staleness", cluster="d", **P2),
    # broker 4 of cluster g, read by p2, sends no metrics
    alert("KafkaBrokerMetricsStale", "warning", "staleness", cluster="g", broker="4", **P2),
]
MUTED = {
    "default install, cluster fault": alert(
        "KafkaUnderMinIsrPartitions", "critical", "cluster_fault", cluster="a", broker="1",
        instance="driver:9464", **JOB),
    "default install, broker stale": alert(
        "KafkaBrokerMetricsStale", "warning", "staleness", cluster="a", broker="2",
        instance="driver:9464", **JOB),
    "stalled p1, its cluster fault": alert(
        "KafkaOfflinePartitions", "critical", "cluster_fault", cluster="b", **P1),
    "stalled p1, its dark cluster": alert(
        "KafkaClusterDark", "critical", "staleness", cluster="f", **P1),
    "dark d, its cluster fault": alert(
        "KafkaOfflinePartitions", "critical", "cluster_fault", cluster="d", **P2),
    "stale broker, its own gauges' fault": alert(
        "KafkaUnderMinIsrPartitions", "critical", "cluster_fault", cluster="g", broker="4",
        **P2),
}
PAGED = {
    "data loss under a down pipeline": alert(
        "KafkaUncleanLeaderElection", "critical", "data_loss", cluster="a", broker="1",
        instance="driver:9464", **JOB),
    "data loss under a stalled pipeline": alert(
        "KafkaUncleanLeaderElection", "critical", "data_loss", cluster="b", broker="3", **P1),
    "data loss in a dark cluster": alert(
        "KafkaUncleanLeaderElection", "critical", "data_loss", cluster="d", broker="1", **P2),
    "p2's cluster fault while p1 stalls": alert(
        "KafkaOfflinePartitions", "critical", "cluster_fault", cluster="e", **P2),
    "the probe's failing writes through a stale broker": alert(
        "KafkaProbeWritesFailing", "critical", "cluster_fault", cluster="g", broker="4", **P2),
    "the probe's writes through a stale broker, unexplained": alert(
        "KafkaProbeWritesFailingUnexplained", "critical", "cluster_fault", cluster="g",
        broker="4", **P2),
    "the dark cluster itself": SOURCES[2],
    "the pipeline pages themselves": SOURCES[1],
    "heartbeat": alert("KafkaHealthWatchdog", "none", "heartbeat"),
}


@pytest.fixture(scope="module")
def am_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if which("alertmanager", "prometheus-alertmanager") is None:
        pytest.fail("alertmanager not on PATH: run deploy/install-prometheus.sh", pytrace=False)
    receiver = PagerDutyReceiver()
    am, url, _ = start_alertmanager(Path(tmp_path_factory.mktemp("inhibition")), receiver.url)
    try:
        starts = (datetime.now(UTC) - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
        body = [{"labels": labels, "annotations": {"summary": "test"}, "startsAt": starts}
                for labels in [*SOURCES, *MUTED.values(), *PAGED.values()]]
        post_json(f"{url}/api/v2/alerts", body)
        yield url
    finally:
        am.stop()
        receiver.close()


def inhibited(url: str) -> dict[frozenset[tuple[str, str]], bool]:
    return {frozenset(a["labels"].items()): bool(a["status"]["inhibitedBy"])
            for a in get_json(f"{url}/api/v2/alerts")}


def test_inhibition_scope(am_url: str) -> None:
    want = {frozenset(labels.items()): True for labels in MUTED.values()}
    want.update({frozenset(labels.items()): False for labels in PAGED.values()})
    names = {frozenset(v.items()): k for k, v in {**MUTED, **PAGED}.items()}

    def wrong() -> list[str]:
        state = inhibited(am_url)
        return [names[k] for k, v in want.items() if state.get(k) != v]

    # the inhibitor reads the posted alerts asynchronously: wait for it, with a deadline
    deadline = time.monotonic() + 15
    while (bad := wrong()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not bad, f"inhibited or not, wrongly: {bad}"
