"""The real paging chain on loopback, for tests/e2e and tests/benchmarks/bench_paging.py.

    simulator (realtime) -> the metrics cluster (real Kafka)
      -> streaming job (in-process Spark) -> Exporter /metrics
      -> prometheus (scrape + alerts/kafka-health.rules.yml) -> alertmanager
      (alerts/alertmanager.yml rendered with a local PagerDuty url) -> PagerDutyReceiver

Every process is started here with start_new_session and stopped by `Stack.close()`
(SIGTERM, then SIGKILL after a grace period), so a failing test leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Simulator
from streaming.testbed.kafka import free_port
from tests.alerts.amconfig import render_alertmanager_config

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "alerts" / "kafka-health.rules.yml"
ROUTING_KEY = "e2e-routing-key-0123456789abcdef"


def which(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def get_json(url: str, timeout: float = 10.0) -> Any:
    """A loopback JSON GET; the timeout only bounds a hung server (a loaded machine can
    take seconds to answer, and the callers poll inside deadlines that do not retry)."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def post_json(url: str, body: Any, timeout: float = 5.0) -> None:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=timeout).close()


def poll(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.1,
         alive: Callable[[], None] | None = None) -> Any:
    """Poll until truthy; `alive` raises when a child died (so a crash fails fast)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if alive is not None:
            alive()
        try:
            last = condition()
        except OSError as err:  # not listening yet
            last = err
        if last and not isinstance(last, OSError):
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


# --- PagerDuty Events API v2 stand-in ---------------------------------------------------------


@dataclass
class PagerDutyEvent:
    received: float  # time.time() when the POST arrived
    path: str
    body: dict[str, Any]

    @property
    def action(self) -> str:
        return self.body.get("event_action", "")

    @property
    def dedup_key(self) -> str:
        return self.body.get("dedup_key", "")

    @property
    def payload(self) -> dict[str, Any]:
        return self.body.get("payload", {})

    @property
    def cluster(self) -> str:
        return self.payload.get("group", "")

    @property
    def alertname(self) -> str:
        return self.payload.get("class", "")


class PagerDutyReceiver:
    """Records every POSTed JSON body; answers 202 like the Events API v2."""

    def __init__(self) -> None:
        self.events: list[PagerDutyEvent] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw)
                with outer.lock:
                    outer.events.append(PagerDutyEvent(time.time(), self.path, body))
                reply = json.dumps({"status": "success", "message": "Event processed",
                                    "dedup_key": body.get("dedup_key")}).encode()
                self.send_response(202)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/v2/enqueue"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def matching(self, cluster: str | None = None, alertname: str | None = None,
                 action: str | None = None) -> list[PagerDutyEvent]:
        with self.lock:
            events = list(self.events)
        return [e for e in events
                if (cluster is None or e.cluster == cluster)
                and (alertname is None or e.alertname == alertname)
                and (action is None or e.action == action)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- child processes ---------------------------------------------------------------------------


class Child:
    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name = name
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{tail}")

    def stop(self, grace: float = 10.0) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=grace)


def alertmanager_config(pagerduty_url: str, key_file: Path, group_interval: str | None,
                        heartbeat_url: str | None = None) -> str:
    """alerts/alertmanager.yml with PagerDuty (and optionally the heartbeat webhook) pointed
    at local receivers; optionally a shorter group_interval on the paging routes (routing,
    grouping, inhibition unchanged)."""
    cfg = yaml.safe_load(render_alertmanager_config(pagerduty_url=pagerduty_url,
                                                    routing_key_file=key_file,
                                                    heartbeat_url=heartbeat_url))
    if group_interval is not None:
        for route in cfg["route"].get("routes", []):
            route["group_interval"] = group_interval
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)


def start_alertmanager(workdir: Path, pagerduty_url: str,
                       group_interval: str | None = "2s",
                       heartbeat_url: str | None = None) -> tuple[Child, str, Path]:
    binary = which("alertmanager", "prometheus-alertmanager")
    if binary is None:
        raise FileNotFoundError("alertmanager not on PATH: run deploy/install-prometheus.sh")
    workdir.mkdir(parents=True, exist_ok=True)
    key_file = workdir / "pagerduty-routing-key"
    key_file.write_text(ROUTING_KEY + "\n")
    key_file.chmod(0o400)
    config = workdir / "alertmanager.yml"
    config.write_text(alertmanager_config(pagerduty_url, key_file, group_interval,
                                          heartbeat_url))
    port = free_port()
    child = Child("alertmanager", [
        binary, f"--config.file={config}", f"--storage.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
        "--log.level=warn"], workdir / "alertmanager.log")
    url = f"http://127.0.0.1:{port}"
    poll(lambda: urllib.request.urlopen(url + "/-/ready", timeout=1).status == 200, 30,
         "alertmanager /-/ready", alive=child.check)
    return child, url, key_file


def rules_with(dest: Path, changes: dict[str, dict[str, Any]]) -> Path:
    """alerts/kafka-health.rules.yml with some rules' `for:`, `keep_firing_for:` and one
    literal of their expression replaced ({"Alert": {"for": "2s", "expr": ("> 120", "> 10")}}),
    so a test waits seconds where production waits minutes; every other rule and label as
    committed."""
    doc = yaml.safe_load(RULES.read_text())
    found = set()
    for group in doc["groups"]:
        for rule in group["rules"]:
            change = changes.get(rule.get("alert", ""))
            if change is None:
                continue
            found.add(rule["alert"])
            for key in ("for", "keep_firing_for"):
                if key in change:
                    assert key in rule, f"{rule['alert']} has no {key}"
                    rule[key] = change[key]
            if "expr" in change:
                old, new = change["expr"]
                assert rule["expr"].count(old) == 1, f"{rule['alert']}: {old!r} not once in expr"
                rule["expr"] = rule["expr"].replace(old, new)
    assert found == set(changes), f"no such rules: {set(changes) - found}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(doc, sort_keys=False, width=1000))
    return dest


def start_prometheus(workdir: Path, exporter: str | list[str], alertmanager: str | None,
                     interval: str = "1s", evaluation: str | None = None,
                     rules: bool = True, rules_file: Path = RULES) -> tuple[Child, str]:
    """Debian's prometheus on a free loopback port, scraping `exporter` (host:port, or a
    list of them) as job kafka-health, with `rules_file` (the committed alert rules
    unless a test passes a rules_with() copy) unless `rules` is false."""
    binary = which("prometheus")
    if binary is None:
        raise FileNotFoundError("prometheus not on PATH: run deploy/install-prometheus.sh")
    workdir.mkdir(parents=True, exist_ok=True)
    targets = [exporter] if isinstance(exporter, str) else list(exporter)
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval,
                   "evaluation_interval": evaluation or interval},
        "rule_files": [str(rules_file)] if rules else [],
        "scrape_configs": [{"job_name": "kafka-health",
                            "static_configs": [{"targets": targets}]}],
    }
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [
            {"targets": [alertmanager.removeprefix("http://")]}]}]}
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    child = Child("prometheus", [
        binary, f"--config.file={path}", f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        workdir / "prometheus.log")
    url = f"http://127.0.0.1:{port}"
    poll(lambda: urllib.request.urlopen(url + "/-/ready", timeout=1).status == 200, 30,
         "prometheus /-/ready", alive=child.check)
    return child, url


def prom_query(url: str, expr: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"query": expr})
    return get_json(f"{url}/api/v1/query?{query}")["data"]["result"]


# --- the simulator in wall-clock time -----------------------------------------------------------


@dataclass
class Injection:
    """A model change applied right before a scrape; `produced` is when that scrape (the
    first one showing the change) was handed to Kafka and flushed."""

    cluster: str
    action: Callable[[ClusterModel], object]
    label: str = ""
    produced: float | None = None
    done: threading.Event = field(default_factory=threading.Event)


class RealtimeDriver:
    """Scrapes every model every `interval` seconds of wall time, in one thread.

    Run ONE cluster at a time against the current job (add, remove, drain, add the next):
    a micro-batch holding two clusters makes the job's MERGE write a file spanning both,
    after which every cluster-filtered delta-rs read fails with pyarrow's
    "greater_equal has no kernel matching input types (string, string_view)" (delta-rs
    1.6 MERGE output + pyarrow 26 statistics pruning; reported to the job's owner).

    Tests change a model only through inject(), which applies the change between scrapes
    and records when the first scrape showing it was produced (the fault's time zero).
    """

    def __init__(self, bootstrap: str, topic: str, interval: float = 1.0) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.interval = interval
        self.sims: dict[str, Simulator] = {}
        self.every_sim: list[Simulator] = []
        self.pending: list[Injection] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.scrapes = 0
        self.thread = threading.Thread(target=self._run, name="realtime-driver", daemon=True)

    def add(self, model: ClusterModel) -> Simulator:
        sim = Simulator(model, self.bootstrap, self.topic, scrape_interval=self.interval,
                        producer_conf={"linger.ms": 1})
        with self.lock:
            self.sims[model.name] = sim
            self.every_sim.append(sim)
        return sim

    def records_total(self) -> int:
        """Records produced so far by every simulator this driver ever ran."""
        with self.lock:
            return sum(sim.records for sim in self.every_sim)

    def remove(self, cluster: str) -> None:
        with self.lock:
            sim = self.sims.pop(cluster, None)
        if sim is not None:
            sim.flush()

    def inject(self, cluster: str, action: Callable[[ClusterModel], object], label: str = ""
               ) -> Injection:
        injection = Injection(cluster, action, label)
        with self.lock:
            self.pending.append(injection)
        return injection

    def start(self) -> RealtimeDriver:
        self.thread.start()
        return self

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"simulator failed: {self.error!r}")

    def _run(self) -> None:
        next_tick = time.time()
        try:
            while not self.stopping.is_set():
                with self.lock:
                    applied, self.pending = self.pending, []
                    for injection in applied:
                        injection.action(self.sims[injection.cluster].model)
                    for sim in self.sims.values():
                        sim.now = time.time()
                        sim.tick()
                    for sim in self.sims.values():
                        sim.flush()
                    produced = time.time()
                    self.scrapes += 1
                for injection in applied:
                    injection.produced = produced
                    injection.done.set()
                next_tick += self.interval
                self.stopping.wait(max(0.0, next_tick - time.time()))
        except BaseException as err:  # surfaced by check()
            self.error = err

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(timeout=10)
        with self.lock:
            for sim in self.sims.values():
                sim.flush()


def drain(driver: RealtimeDriver, exporter: Any, timeout: float = 120.0,
          alive: Callable[[], None] | None = None) -> None:
    """Wait until the job has read every record the driver produced."""
    produced = driver.records_total()
    poll(lambda: (exporter.registry.get_sample_value(
        "kafka_health_pipeline_input_records_total") or 0) >= produced, timeout,
        f"the job to read all {produced} records", every=0.2, alive=alive)


def job_environment(bootstrap: str, topic: str, root: Path, trigger: float,
                    scrape_interval: float, push_url: str | None = None) -> dict[str, str]:
    env = {
        "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA_HEALTH__SOURCE__TOPICS": f'[{{"name": "{topic}", "format": "auto"}}]',
                "KAFKA_HEALTH__SPARK__CHECKPOINT": str(root / "checkpoint"),
        "KAFKA_HEALTH__SPARK__TRIGGER_SECONDS": str(trigger),
        "KAFKA_HEALTH__DELTA__PATH": str(root / "delta"),
        "KAFKA_HEALTH__SIGNALS__SCRAPE_INTERVAL_SECONDS": str(scrape_interval),
    }
    if push_url:
        env["KAFKA_HEALTH__ALERT_PUSH__ALERTMANAGER_URL"] = push_url
        env["KAFKA_HEALTH__ALERT_PUSH__KINDS"] = '["unclean_election"]'
    return env
