"""A failed scrape is not a heal: Debian's prometheus with the committed rules.

When /metrics does not answer within the scrape timeout, Prometheus marks every series of
the target stale at once, so for that scrape every rule over the exporter's gauges stops
matching. A page without `keep_firing_for` resolves there (PagerDuty closes the incident)
and fires anew after its `for` once the series are back: two pages for one fault. Here the
under-min-ISR page fires, the exporter stalls past the timeout for a few scrapes (the gauge
reads as absent meanwhile: the premise, checked), and once scrapes succeed again the page is
still the one that fired, not a new one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from tests.conftest import wait_for
from tests.e2e.stack import get_json, prom_query, start_prometheus, which

pytestmark = pytest.mark.integration
ALERT = "KafkaUnderMinIsrPartitions"
SCRAPE = 1.0  # seconds: scrape interval and timeout (tests.e2e.stack.start_prometheus)
STALL = 4.0  # seconds of failed scrapes, well inside the rule's keep_firing_for (3m)


class StallingMetrics(ThreadingHTTPServer):
    """/metrics of a registry, answering later than the scrape timeout until `stall_until`."""

    daemon_threads = True

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.stall_until = 0.0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if time.monotonic() < outer.stall_until:
                    time.sleep(SCRAPE * 1.5)  # prometheus has given up by then
                body = generate_latest(outer.registry)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the scrape that timed out closed its connection
                    pass

            def log_message(self, *_: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def metrics() -> Iterator[StallingMetrics]:
    registry = CollectorRegistry()
    under = Gauge("kafka_health_under_min_isr_partitions", "", ["cluster", "broker"],
                  registry=registry)
    stale = Gauge("kafka_health_broker_stale", "", ["cluster", "broker"], registry=registry)
    under.labels("prod", "1").set(3)
    stale.labels("prod", "1").set(0)
    server = StallingMetrics(registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def firing(url: str) -> list[dict[str, Any]]:
    return [a for a in get_json(f"{url}/api/v1/alerts")["data"]["alerts"]
            if a["labels"]["alertname"] == ALERT and a["state"] == "firing"]


def evaluated_at(url: str) -> float:
    """When prometheus last evaluated the rule (epoch seconds)."""
    for group in get_json(f"{url}/api/v1/rules")["data"]["groups"]:
        for rule in group["rules"]:
            if rule.get("name") == ALERT:
                return pd.Timestamp(rule["lastEvaluation"]).timestamp()  # RFC 3339, ns
    raise AssertionError(f"{ALERT} not loaded")


def test_a_failed_scrape_neither_resolves_nor_repages(metrics: StallingMetrics,
                                                       tmp_path: Path) -> None:
    if which("prometheus") is None:
        pytest.skip("prometheus not on PATH: run deploy/install-prometheus.sh")
    prom, url = start_prometheus(tmp_path / "prometheus", f"127.0.0.1:{metrics.server_port}",
                                 None, f"{SCRAPE:g}s")
    try:
        [page] = wait_for(lambda: prom.check() or firing(url), 60, f"{ALERT} firing")

        metrics.stall_until = time.monotonic() + STALL
        wait_for(lambda: not prom_query(url, "kafka_health_under_min_isr_partitions"),
                 STALL + 5, "the gauge stale after a failed scrape", every=0.1)
        wait_for(lambda: prom_query(url, "kafka_health_under_min_isr_partitions"), 30,
                 "the gauge back once scrapes succeed", every=0.2)
        back = time.time()
        wait_for(lambda: evaluated_at(url) > back + SCRAPE, 30,
                 "two rule evaluations after the series came back", every=0.2)

        now = firing(url)
        assert [a["activeAt"] for a in now] == [page["activeAt"]], (
            f"the page resolved at the failed scrape and fired anew: {now} after {page}")
    finally:
        prom.stop()
