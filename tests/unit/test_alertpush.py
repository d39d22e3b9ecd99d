"""streaming.alertpush: the alerts it POSTs, their agreement with the Prometheus rules, and
that no failure ever reaches the job. A local HTTP server stands in for Alertmanager."""

from __future__ import annotations

import base64
import json
import re
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from streaming import alertpush
from streaming.alertpush import ALERTNAMES, SOURCE, build_alerts, push_incidents
from streaming.config import AlertPushConfig, ConfigError, SecretRef, load_config
from streaming.signals.incidents import CLUSTER_SCOPE_KINDS, KINDS

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


@pytest.fixture
def am() -> Iterator[FakeAlertmanager]:
    alertpush.reset_stats()
    server = FakeAlertmanager()
    yield server
    server.close()
    alertpush.reset_stats()


def incident(kind: str = "unclean_election", broker: str = "3", resolved: datetime | None = None,
             cluster: str = "c1", started: datetime = T0, peak: float = 2.0) -> dict[str, Any]:
    return {"incident_id": f"id-{kind}-{broker}", "cluster": cluster, "broker": broker,
            "kind": kind, "started_at": started, "resolved_at": resolved, "peak_value": peak,
            "updated_at": started}


def config(url: str | None, kinds: list[str] | None = None, timeout: float = 2.0
           ) -> AlertPushConfig:
    return AlertPushConfig(alertmanager_url=url, kinds=kinds or ["unclean_election"],
                           timeout_seconds=timeout)


def parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


# --- agreement with the Prometheus rules and Alertmanager routing ---------------------------


def rules_by_name(path: Path = RULES) -> dict[str, dict[str, Any]]:
    spec = yaml.safe_load(path.read_text())
    return {r["alert"]: r for g in spec["groups"] for r in g["rules"] if "alert" in r}


CAUSE_BLOCK = re.compile(r"\{\{ with printf `kafka_health_metadata_cause_info.*?\}\}\{\{ range \. \}\}"
                         r"(.*?)\{\{ \.Labels\.cause \}\}(.*?)\{\{ end \}\}\{\{ end \}\}")


def render_rule_text(template: str, labels: dict[str, str], value: str,
                     cause: str | None = None) -> str:
    """The actions the push renders, substituted naively (no whitespace folding: the pushed
    text must equal the rule's to the character, as promtool checks in
    tests/alerts/test_alertpush_render.py); a cause block is its text around `cause`, or
    nothing without one."""
    text = CAUSE_BLOCK.sub(lambda m: f"{m.group(1)}{cause}{m.group(2)}" if cause else "",
                           template)
    text = text.replace("{{ $value }}", value)
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)


@pytest.fixture
def rules_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """edit(alertname, **changes) writes a copy of the rules file with that rule's
    annotations/labels changed and points the push at it (KAFKA_HEALTH_RULES)."""
    document = yaml.safe_load(RULES.read_text())
    path = tmp_path / "kafka-health.rules.yml"

    def edit(alertname: str, annotations: dict[str, str] | None = None,
             labels: dict[str, str] | None = None) -> Path:
        [rule] = [r for g in document["groups"] for r in g["rules"] if r.get("alert") == alertname]
        rule["annotations"].update(annotations or {})
        rule["labels"].update(labels or {})
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        monkeypatch.setenv(alertpush.RULES_ENV, str(path))
        return path

    return edit


@pytest.fixture(autouse=True)
def committed_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(alertpush.RULES_ENV, raising=False)


@pytest.mark.parametrize("kind", list(ALERTNAMES))
def test_pushed_alert_is_the_rule_of_its_kind(kind: str) -> None:
    broker = "*" if kind in CLUSTER_SCOPE_KINDS else "3"
    [alert] = build_alerts(config("http://x", [kind]), [incident(kind, broker, peak=2)], now=T0)
    assert alertpush.rules_path() == RULES
    rule = rules_by_name()[ALERTNAMES[kind]]
    labels = alert["labels"]
    assert labels == {"alertname": rule["alert"], **rule["labels"], "cluster": "c1",
                      "source": SOURCE, **({} if broker == "*" else {"broker": broker})}
    assert labels["severity"] == "critical"
    assert ("broker" in labels) == ("broker" in rule["annotations"]["summary"]), \
        "cluster-wide rules carry no broker label, broker rules do"
    series = {"cluster": "c1", **({} if broker == "*" else {"broker": broker})}
    assert alert["annotations"] == {
        **{name: render_rule_text(text, series, "2") for name, text in rule["annotations"].items()},
        "incident_id": f"id-{kind}-{broker}"}
    assert "{{" not in json.dumps(alert) and "{cluster}" not in json.dumps(alert)


@pytest.mark.parametrize("kind, broker", [("under_min_isr", "1"), ("offline_partitions", "*")])
def test_a_pushed_alert_names_the_incidents_cause_as_the_rule_does(kind: str, broker: str
                                                                  ) -> None:
    with_cause = {**incident(kind, broker, peak=6), "cause": "brokers 4 and 5 out of ISR"}
    [alert] = build_alerts(config("http://x", [kind]), [with_cause], now=T0)
    annotations = alert["annotations"]
    assert annotations["summary"].endswith(": brokers 4 and 5 out of ISR")
    assert annotations["description"].endswith(" Cause from the Admin API: brokers 4 and 5 "
                                               "out of ISR.")
    rule = rules_by_name()[ALERTNAMES[kind]]
    series = {"cluster": "c1", **({} if broker == "*" else {"broker": broker})}
    assert {k: v for k, v in annotations.items() if k != "incident_id"} == {
        name: render_rule_text(text, series, "6", "brokers 4 and 5 out of ISR")
        for name, text in rule["annotations"].items()}
    # without a cause (no poll of the cluster) the text reads as before causes existed
    [plain] = build_alerts(config("http://x", [kind]), [incident(kind, broker, peak=6)], now=T0)
    assert "Admin API" not in json.dumps(plain) and "{cause" not in json.dumps(plain)
    assert plain["annotations"]["summary"] == annotations["summary"].removesuffix(
        ": brokers 4 and 5 out of ISR")


def test_a_cause_with_braces_is_data_not_a_template() -> None:
    odd = {**incident("under_min_isr", "1"), "cause": "brokers {0} and {cluster} out of ISR"}
    [alert] = build_alerts(config("http://x", ["under_min_isr"]), [odd], now=T0)
    assert alert["annotations"]["summary"].endswith(": brokers {0} and {cluster} out of ISR")


def test_a_query_other_than_the_cause_block_is_refused(rules_copy: Any) -> None:
    rules_copy("KafkaUnderMinIsrPartitions", annotations={"summary": (
        "x{{ with printf `kafka_health_broker_stale{cluster=%q}` $labels.cluster | query }}"
        "{{ range . }}{{ .Labels.broker }}{{ end }}{{ end }}")})
    with pytest.raises(ConfigError, match="cannot render the template action"):
        alertpush.spec_for("under_min_isr")


def test_every_pushable_kind_is_an_incident_kind() -> None:
    assert set(ALERTNAMES) <= set(KINDS)


def test_a_changed_rule_text_shows_up_in_the_pushed_alert(rules_copy: Any) -> None:
    """The rules file is the only copy of the texts: edit it and the push follows (literal
    braces included), with no second place to keep equal."""
    rules_copy("KafkaUncleanLeaderElection", labels={"category": "data_loss_edited"}, annotations={
        "summary": "EDITED: {{ $labels.cluster }}/{{$labels.broker}} lost {{ $value }} {sic}",
        "description": "{{ $value }} elections on {{ $labels.broker }}",
        "dashboard": "https://grafana.example/d/kafka?var-cluster={{ $labels.cluster }}"})
    [alert] = build_alerts(config("http://x"), [incident(peak=1234567)], now=T0)
    assert alert["labels"]["category"] == "data_loss_edited"
    assert alert["annotations"]["summary"] == "EDITED: c1/3 lost 1.234567e+06 {sic}"
    assert alert["annotations"]["description"] == "1.234567e+06 elections on 3"
    assert alert["annotations"]["dashboard"] == "https://grafana.example/d/kafka?var-cluster=c1"


@pytest.mark.parametrize("template, action", [
    ("{{ $value | humanizePercentage }} of partitions", "{{ $value | humanizePercentage }}"),
    ("broker {{ $labels.instance }}", "{{ $labels.instance }}"),
    ("lost {{- $value }}", "{{- $value }}"),
    ("x{{ with $labels.instance }} on {{ . }}{{ end }}", "{{ with $labels.instance }}"),
    ("{{ printf \"%.1f\" $value }}", "{{ printf \"%.1f\" $value }}"),
])
def test_a_template_the_push_cannot_render_is_refused_at_config_check(
        rules_copy: Any, am: FakeAlertmanager, caplog, template: str, action: str) -> None:
    path = rules_copy("KafkaUnderMinIsrPartitions", annotations={"description": template})
    with pytest.raises(ConfigError) as refused:
        alertpush.check(config(am.url, ["unclean_election", "under_min_isr"]))
    message = str(refused.value)
    for part in ("alert_push.kinds 'under_min_isr'", str(path), "KafkaUnderMinIsrPartitions",
                 "annotation description", repr(action), "{{ $value }}"):
        assert part in message, part
    # only the pushed kinds are checked; a push never raises and skips only that kind
    alertpush.check(config(am.url, ["unclean_election"]))
    alertpush.check(config(None, ["under_min_isr"]))
    push_incidents(config(am.url, ["unclean_election", "under_min_isr"]),
                   [incident("under_min_isr", "1"), incident()])
    [(_, body)] = am.bodies
    assert [a["labels"]["alertname"] for a in body] == ["KafkaUncleanLeaderElection"]
    assert "cannot render" in caplog.text and alertpush.STATS.failures == 0


def test_a_kind_without_a_paging_rule_is_refused_at_config_check() -> None:
    """A misspelt kind (the demo prints kinds hyphenated) would never page: refused at
    start, named; with no Alertmanager to push to, nothing is checked."""
    with pytest.raises(ConfigError) as refused:
        alertpush.check(config("http://x", ["unclean_election", "under-min-isr"]))
    assert str(refused.value) == (
        "alert_push.kinds[1]: 'under-min-isr' is not a kind with a paging rule; one of: "
        + ", ".join(ALERTNAMES))
    alertpush.check(config(None, ["under-min-isr"]))
    alertpush.check(config("http://x", list(ALERTNAMES)))


def test_an_unterminated_template_is_refused(rules_copy: Any) -> None:
    rules_copy("KafkaOfflinePartitions", annotations={"summary": "{{ $labels.cluster "})
    with pytest.raises(ConfigError, match="KafkaOfflinePartitions annotation summary: "
                                          "unterminated template action"):
        alertpush.spec_for("offline_partitions")


def test_a_missing_rule_or_rules_file_is_refused(rules_copy: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = rules_copy("KafkaOfflinePartitions")
    path.write_text(path.read_text().replace("alert: KafkaOfflinePartitions",
                                             "alert: KafkaOfflinePartitionsRenamed"))
    with pytest.raises(ConfigError, match="has 0 rules named KafkaOfflinePartitions"):
        alertpush.check(config("http://x", ["offline_partitions"]))
    monkeypatch.setenv(alertpush.RULES_ENV, str(tmp_path / "nowhere.yml"))
    with pytest.raises(ConfigError, match=r"rules file alerts/kafka-health\.rules\.yml .* not "
                                          r"found \(looked at .*nowhere\.yml\)"):
        alertpush.check(config("http://x"))


def test_the_rules_file_is_found_beside_metrics_schemas(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the image (/opt/kafka-health/{metrics_schemas,alerts}) and spark-submit's
    working directory: KAFKA_HEALTH_SCHEMAS names the schemas, the rules are beside them."""
    (tmp_path / "alerts").mkdir()
    shutil.copy(RULES, tmp_path / "alerts" / RULES.name)
    monkeypatch.setenv("KAFKA_HEALTH_SCHEMAS", str(tmp_path / "metrics_schemas"))
    assert alertpush.rules_path() == tmp_path / "alerts" / RULES.name
    (tmp_path / "alerts" / RULES.name).unlink()
    assert alertpush.rules_path() == RULES, "else the package's copy, the top-level file's link"


def test_check_config_refuses_a_rule_the_push_cannot_render(rules_copy: Any, tmp_path: Path,
                                                           capsys) -> None:
    from streaming.cli import main

    rules_copy("KafkaUncleanLeaderElection",
               annotations={"summary": "{{ $value | humanize }} elections"})
    path = tmp_path / "config.yaml"
    path.write_text("alert_push: {alertmanager_urls: [http://am:9093]}\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "config error: alert_push.kinds 'unclean_election'" in err
    assert "'{{ $value | humanize }}'" in err


@pytest.mark.parametrize("value, shown", [
    (2, "2"), (2.0, "2"), (2.5, "2.5"), (0, "0"), (-3, "-3"), (123456, "123456"),
    (1234567, "1.234567e+06"), (1e6, "1e+06"), (0.0001, "0.0001"), (0.00001, "1e-05"),
    (0.1 + 0.2, "0.30000000000000004"), (1e21, "1e+21"), (float("inf"), "+Inf"),
    (float("nan"), "NaN"), (12345678901234567890, "1.2345678901234567e+19"),
])
def test_value_is_printed_as_prometheus_prints_it(value: float, shown: str) -> None:
    """Go's %v of a float64, which `{{ $value }}` is (checked against promtool in
    tests/alerts/test_alertpush_render.py)."""
    assert alertpush.go_value(value) == shown


def test_push_and_rule_land_in_one_alertmanager_group() -> None:
    """group_by is (alertname, cluster): a pushed alert and the rule's alert for the same
    fault share both, and match the same route, so they share one PagerDuty dedup_key."""
    am_cfg = yaml.safe_load(ALERTMANAGER.read_text())
    assert am_cfg["route"]["group_by"] == ["alertname", "cluster"]
    rule = rules_by_name()["KafkaUncleanLeaderElection"]
    [pushed] = build_alerts(config("http://x"), [incident()], now=T0)

    def route(labels: dict[str, str]) -> str:
        for sub in am_cfg["route"]["routes"]:
            matchers = [re.fullmatch(r'(\w+)="([^"]*)"', m).groups() for m in sub["matchers"]]
            if all(labels.get(k) == v for k, v in matchers):
                return sub["receiver"]
        return am_cfg["route"]["receiver"]

    rule_alert = {**rule["labels"], "alertname": rule["alert"], "cluster": "c1", "broker": "3",
                  "job": "kafka-health", "instance": "127.0.0.1:9464"}
    assert route(pushed["labels"]) == route(rule_alert) == "pagerduty-data-loss"
    for key in am_cfg["route"]["group_by"]:
        assert pushed["labels"][key] == rule_alert[key]


# --- what is POSTed ------------------------------------------------------------------------


def test_posts_one_alert_per_pushed_incident(am: FakeAlertmanager) -> None:
    before = datetime.now(UTC)
    push_incidents(config(am.url), [
        incident("unclean_election", "3"),
        incident("under_min_isr", "1"),  # not in kinds: left to the Prometheus rule
        incident("unclean_election", "2", cluster="c2"),
    ])
    [(path, body)] = am.bodies
    assert path == "/api/v2/alerts"
    assert [(a["labels"]["cluster"], a["labels"]["broker"]) for a in body] == [
        ("c1", "3"), ("c2", "2")]
    alert = body[0]
    assert alert["labels"] == {
        "alertname": "KafkaUncleanLeaderElection", "severity": "critical", "team": "kafka",
        "category": "data_loss", "cluster": "c1", "broker": "3", "source": SOURCE}
    assert parse(alert["startsAt"]) == T0
    ends = parse(alert["endsAt"])
    assert before + timedelta(minutes=4) < ends < datetime.now(UTC) + timedelta(minutes=6), \
        "an open incident stays firing a few minutes past the push"
    assert alertpush.STATS.alerts_sent == 2 and alertpush.STATS.failures == 0


def test_resolved_incident_is_sent_with_its_resolution_as_ends_at(am: FakeAlertmanager) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    push_incidents(config(am.url), [incident(started=now - timedelta(minutes=2),
                                             resolved=now - timedelta(minutes=1))])
    [(_, [alert])] = am.bodies
    assert parse(alert["startsAt"]) == now - timedelta(minutes=2)
    assert parse(alert["endsAt"]) == now - timedelta(minutes=1)


def test_long_resolved_incidents_are_not_resent(am: FakeAlertmanager) -> None:
    now = datetime.now(UTC)
    push_incidents(config(am.url), [incident(started=now - timedelta(hours=2),
                                             resolved=now - timedelta(hours=1))])
    assert am.bodies == []


def test_nothing_to_push_posts_nothing(am: FakeAlertmanager) -> None:
    push_incidents(config(am.url), [incident("under_min_isr", "1")])
    push_incidents(config(am.url), [])
    push_incidents(config(None), [incident()])
    assert am.bodies == []


def test_naive_and_string_timestamps_are_utc(am: FakeAlertmanager) -> None:
    [alert] = build_alerts(config("http://x"), [
        incident(started=datetime(2024, 5, 1, 12, 0), resolved="2024-05-01T12:01:00+00:00")],
        now=T0 + timedelta(minutes=2))
    assert alert["startsAt"] == "2024-05-01T12:00:00.000Z"
    assert alert["endsAt"] == "2024-05-01T12:01:00.000Z"


def test_cluster_wide_incident_has_no_broker_label(am: FakeAlertmanager) -> None:
    push_incidents(config(am.url, ["offline_partitions"]), [incident("offline_partitions", "*")])
    [(_, [alert])] = am.bodies
    assert "broker" not in alert["labels"]
    assert alert["labels"]["alertname"] == "KafkaOfflinePartitions"


def test_unknown_kind_is_ignored_with_a_warning(am: FakeAlertmanager, caplog) -> None:
    push_incidents(config(am.url, ["stale_broker", "unclean_election"]),
                   [incident("stale_broker", "2"), incident()])
    [(_, body)] = am.bodies
    assert [a["labels"]["alertname"] for a in body] == ["KafkaUncleanLeaderElection"]
    assert "'stale_broker' has no paging rule" in caplog.text


def test_posts_to_every_alertmanager_of_an_ha_pair(am: FakeAlertmanager) -> None:
    other = FakeAlertmanager()
    try:
        push_incidents(config(f"{am.url}, {other.url}/"), [incident()])
        assert len(am.bodies) == 1 and len(other.bodies) == 1
    finally:
        other.close()


# --- failures never reach the job ------------------------------------------------------------


def test_unreachable_alertmanager_is_counted_not_raised(caplog) -> None:
    alertpush.reset_stats()
    closed = FakeAlertmanager()
    url = closed.url
    closed.close()
    push_incidents(config(url), [incident()])
    assert alertpush.STATS.failures == 1
    assert "alert push" in caplog.text and "failed" in caplog.text
    alertpush.reset_stats()


def test_error_status_is_a_failure_and_backs_off_then_recovers(am: FakeAlertmanager,
                                                                monkeypatch) -> None:
    am.status = 500
    push_incidents(config(am.url), [incident()])
    assert alertpush.STATS.failures == 1 and len(am.bodies) == 1
    push_incidents(config(am.url), [incident()])
    assert alertpush.STATS.skipped == 1 and len(am.bodies) == 1, "backs off after a failure"
    monkeypatch.setattr(alertpush, "BACKOFF_SECONDS", 0.0)
    am.status = 200
    push_incidents(config(am.url), [incident()])
    assert len(am.bodies) == 2 and alertpush.STATS.last_error is None
    assert alertpush.STATS.alerts_sent == 1


def test_hung_alertmanager_costs_at_most_the_timeout(am: FakeAlertmanager) -> None:
    am.delay = 3.0
    started = time.monotonic()
    push_incidents(config(am.url, timeout=0.3), [incident()])
    assert time.monotonic() - started < 1.5
    assert alertpush.STATS.failures == 1


def test_malformed_incident_is_counted_not_raised(am: FakeAlertmanager) -> None:
    push_incidents(config(am.url), [{"kind": "unclean_election"}])  # no cluster, no start
    assert alertpush.STATS.failures == 1 and am.bodies == []


# --- early push from a batch's broker rows -------------------------------------------------


def signal_row(broker: str, minute: int, unclean: float = 0.0, under_min: float = 0.0
               ) -> dict[str, Any]:
    start = T0 + timedelta(minutes=minute)
    return {"cluster": "c1", "broker": broker, "window_start": start,
            "window_end": start + timedelta(minutes=1), "unclean_elections_increase": unclean,
            "under_min_isr_max": under_min}


def test_early_push_reads_each_brokers_newest_fresh_window() -> None:
    now = T0 + timedelta(minutes=3, seconds=10)
    rows = [
        signal_row("3", 1, unclean=2.0),   # older window of broker 3: a late recomputation
        signal_row("3", 2),                # broker 3's newest window: nothing
        signal_row("1", 2, unclean=1.0, under_min=4.0),
        # another controller counting the same election: one incident for the cluster
        signal_row("4", 2, unclean=1.0),
        signal_row("2", -5, unclean=1.0),  # ended long ago: never re-opened by a late sample
    ]
    opened = alertpush.opened_in_signals(rows, fresh_seconds=180, now=now)
    assert sorted((o["kind"], o["broker"], o["peak_value"]) for o in opened) == [
        ("unclean_election", "*", 1.0), ("under_min_isr", "1", 4.0)]
    [alert] = build_alerts(config("http://x"), opened, now=now)  # only the pushed kind
    assert alert["labels"]["alertname"] == "KafkaUncleanLeaderElection"
    assert parse(alert["startsAt"]) == T0 + timedelta(minutes=2)
    assert parse(alert["endsAt"]) > now, "open until the incidents step says otherwise"


def test_failed_push_log_hides_the_url_password(caplog) -> None:
    alertpush.reset_stats()
    closed = FakeAlertmanager()
    port = closed.server.server_port
    closed.close()
    push_incidents(config(f"http://am:PLANTED-URL-PASS@127.0.0.1:{port}"), [incident()])
    assert alertpush.STATS.failures == 1
    assert "127.0.0.1" in caplog.text, "the log still says which Alertmanager failed"
    assert "PLANTED-URL-PASS" not in caplog.text
    assert "PLANTED-URL-PASS" not in str(alertpush.STATS.last_error)
    alertpush.reset_stats()


# --- several Alertmanagers, auth ---------------------------------------------------------


def dead_url() -> str:
    """The URL of an Alertmanager that was started and stopped: connections are refused."""
    server = FakeAlertmanager()
    server.close()
    return server.url


def alerts_received(server: FakeAlertmanager) -> list[str]:
    return [a["labels"]["broker"] for _, body in server.bodies for a in body]


@pytest.mark.parametrize("dead_first", [True, False])
def test_a_dead_member_never_holds_back_the_healthy_one(am: FakeAlertmanager, caplog,
                                                        dead_first: bool) -> None:
    """12 batches, each pushing one new alert, to a healthy and a dead member (either
    order): the dead member's back-off is its own, so every alert reaches the healthy one."""
    members = [dead_url(), am.url] if dead_first else [am.url, dead_url()]
    push = AlertPushConfig(alertmanager_urls=members, timeout_seconds=1.0)
    for broker in range(12):
        push_incidents(push, [incident(broker=str(broker))])
    assert alerts_received(am) == [str(b) for b in range(12)]
    assert alertpush.STATS.alerts_sent == 12
    assert alertpush.STATS.failures >= 1 and alertpush.STATS.skipped >= 1, \
        "the dead member failed, then was backed off"
    assert caplog.text.count("failed") == 1, "one warning for the dead member, rate-limited"


def test_single_url_key_and_url_list_are_merged(am: FakeAlertmanager) -> None:
    other = FakeAlertmanager()
    try:
        push = AlertPushConfig(alertmanager_url=am.url, alertmanager_urls=[other.url + "/"])
        assert push.urls() == [am.url, other.url]
        push_incidents(push, [incident()])
        assert len(am.bodies) == len(other.bodies) == 1
    finally:
        other.close()


def test_basic_auth_from_a_secret_file_arrives_and_is_never_logged(
        am: FakeAlertmanager, tmp_path: Path, caplog) -> None:
    caplog.set_level("DEBUG")
    secret = tmp_path / "am-password"
    secret.write_text("PLANTED-AM-PASSWORD\n")
    push = AlertPushConfig(alertmanager_urls=[dead_url(), am.url], username="pager",
                           password=SecretRef(file=str(secret)))
    push_incidents(push, [incident()])
    assert am.authorizations == [
        "Basic " + base64.b64encode(b"pager:PLANTED-AM-PASSWORD").decode()]
    assert "failed" in caplog.text
    assert "PLANTED-AM-PASSWORD" not in caplog.text
    assert "PLANTED-AM-PASSWORD" not in str(alertpush.STATS.last_error)


def test_bearer_token_from_env_arrives_and_is_never_logged(
        am: FakeAlertmanager, monkeypatch, caplog) -> None:
    caplog.set_level("DEBUG")
    monkeypatch.setenv("KH_TEST_AM_TOKEN", "PLANTED-AM-TOKEN")
    push = AlertPushConfig(alertmanager_urls=[dead_url(), am.url],
                           bearer_token=SecretRef(env="KH_TEST_AM_TOKEN"))
    push_incidents(push, [incident()])
    assert am.authorizations == ["Bearer PLANTED-AM-TOKEN"]
    assert "failed" in caplog.text and "PLANTED-AM-TOKEN" not in caplog.text


def test_url_user_info_becomes_basic_auth(am: FakeAlertmanager, caplog) -> None:
    caplog.set_level("DEBUG")
    url = am.url.replace("http://", "http://pager:PLANTED-URL-PASS@")
    push_incidents(AlertPushConfig(alertmanager_urls=[url]), [incident()])
    assert am.authorizations == ["Basic " + base64.b64encode(b"pager:PLANTED-URL-PASS").decode()]
    assert "PLANTED-URL-PASS" not in caplog.text


def test_unreadable_push_secret_is_a_failure_naming_the_key(am: FakeAlertmanager, caplog,
                                                           tmp_path: Path) -> None:
    push = AlertPushConfig(alertmanager_urls=[am.url], username="pager",
                           password=SecretRef(file=str(tmp_path / "missing")))
    push_incidents(push, [incident()])
    assert am.bodies == [] and alertpush.STATS.failures == 1
    assert "alert_push.password: file" in caplog.text


def test_https_member_is_verified_with_the_ca_file(tmp_path: Path) -> None:
    """A self-signed Alertmanager is reached with its certificate as ca_file, and refused
    without it."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    alertpush.reset_stats()
    server = FakeAlertmanager()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    url = server.url.replace("http://", "https://")
    try:
        push_incidents(AlertPushConfig(alertmanager_urls=[url]), [incident()])
        assert alertpush.STATS.failures == 1 and server.bodies == [], "unknown CA is refused"
        alertpush.reset_stats()
        push_incidents(AlertPushConfig(alertmanager_urls=[url], ca_file=str(cert)),
                       [incident()])
        assert alertpush.STATS.failures == 0 and len(server.bodies) == 1
    finally:
        server.close()
        alertpush.reset_stats()


@pytest.mark.parametrize("yaml_text, error", [
    ("alert_push: {alertmanager_urls: [http://a], password: {env: X}}",
     "alert_push.password: needs alert_push.username"),
    ("alert_push: {alertmanager_urls: [http://a], username: u, password: {env: X}, "
     "bearer_token: {env: Y}}", "alert_push.bearer_token: give either"),
    ("alert_push: {alertmanager_urls: [am:9093]}", "alert_push.alertmanager_urls[0]"),
])
def test_push_config_mistakes_are_named(tmp_path: Path, yaml_text: str, error: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=re.escape(error)):
        load_config(path, environ={})


def test_check_secrets_reads_the_push_secrets(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("alert_push: {alertmanager_urls: [http://a], bearer_token: {env: KH_NOPE}}")
    with pytest.raises(ConfigError, match="alert_push.bearer_token: environment variable "
                                          "KH_NOPE is not set"):
        load_config(path, environ={}).check_secrets()


# --- bounded by cluster and per push --------------------------------------------------------


def test_a_push_pages_only_for_clusters_that_may_page_and_at_most_the_cap(
        am: FakeAlertmanager) -> None:
    """One record naming 100k brokers of made-up clusters must not become 100k pages."""
    cfg = AlertPushConfig(alertmanager_url=am.url, kinds=["unclean_election", "under_min_isr"],
                          max_alerts_per_push=3)
    now = datetime.now(UTC)
    flood = [incident("under_min_isr", str(b), cluster="made-up", started=now)
             for b in range(1000)]
    held = [incident("under_min_isr", str(b), started=now) for b in range(4)]
    held += [incident("unclean_election", "9", started=now)]
    push_incidents(cfg, [*flood, *held], may_page=lambda cluster: cluster == "c1")
    [(_, body)] = am.bodies
    assert len(body) == 3
    assert {a["labels"]["cluster"] for a in body} == {"c1"}
    assert body[0]["labels"]["alertname"] == "KafkaUncleanLeaderElection", "data loss first"


def test_early_push_is_not_hidden_by_a_window_ahead_of_the_wall_clock() -> None:
    """A sample dated minutes ahead made its window the broker's "newest": the real
    under-min-ISR of 7 in the current window was not pushed."""
    now = T0 + timedelta(minutes=2, seconds=40)
    rows = [signal_row("1", 2, under_min=7.0), signal_row("1", 6)]
    opened = alertpush.opened_in_signals(rows, fresh_seconds=180, now=now)
    assert [(o["kind"], o["peak_value"], o["started_at"]) for o in opened] == [
        ("under_min_isr", 7.0, T0 + timedelta(minutes=2))]
