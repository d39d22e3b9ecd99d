"""What the streaming.paging tests build: a local HTTP server standing in for Alertmanager,
incidents, push configs, and a push through a pusher of its own."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from streaming import paging
from streaming.config import AlertPushConfig
from streaming.paging import AlertPusher

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "alerts" / "kafka-health.rules.yml"
ALERTMANAGER = REPO / "alerts" / "alertmanager.yml"
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class FakeAlertmanager:
    """Records POST bodies; `status` and `delay` make it fail or hang on purpose."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.status = 200
        self.delay = 0.0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if outer.delay:
                    time.sleep(outer.delay)  # simulates a hung Alertmanager
                outer.authorizations.append(self.headers.get("Authorization"))
                outer.bodies.append((self.path, json.loads(raw)))
                self.send_response(outer.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeAlertmanager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def dead_url() -> str:
    """The URL of an Alertmanager that was started and stopped: connections are refused."""
    server = FakeAlertmanager()
    server.close()
    return server.url


@pytest.fixture(autouse=True)
def committed_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The push reads the committed rules file, whatever the environment says."""
    monkeypatch.delenv(paging.RULES_ENV, raising=False)


def incident(kind: str = "unclean_election", broker: str = "3", resolved: datetime | None = None,
             cluster: str = "c1", started: datetime = T0, peak: float = 2.0) -> dict[str, Any]:
    return {"incident_id": f"id-{kind}-{broker}", "cluster": cluster, "broker": broker,
            "kind": kind, "started_at": started, "resolved_at": resolved, "peak_value": peak,
            "updated_at": started}


def config(url: str | None, kinds: list[str] | None = None, timeout: float = 2.0
           ) -> AlertPushConfig:
    return AlertPushConfig(alertmanager_url=url, kinds=kinds or ["unclean_election"],
                           timeout_seconds=timeout)


def push(push_config: AlertPushConfig, incidents: list[dict[str, Any]],
         may_page: Callable[[str], bool] | None = None) -> AlertPusher:
    """One push by a new pusher (a job's first), which is returned for its stats."""
    pusher = AlertPusher(push_config)
    pusher.push(incidents, may_page)
    return pusher


def parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def rules_by_name(path: Path = RULES) -> dict[str, dict[str, Any]]:
    spec = yaml.safe_load(path.read_text())
    return {r["alert"]: r for g in spec["groups"] for r in g["rules"] if "alert" in r}
