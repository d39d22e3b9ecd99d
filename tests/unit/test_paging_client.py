"""streaming.paging.client: what it POSTs to each Alertmanager, and that no failure ever
reaches the job. A local HTTP server stands in for Alertmanager."""

from __future__ import annotations

import base64
import re
import ssl
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streaming.config import AlertPushConfig, ConfigError, SecretRef, load_config
from streaming.paging import SOURCE, AlertPusher
from tests.unit.paging_builders import (
    T0,
    FakeAlertmanager,
    committed_rules,  # noqa: F401 - an autouse fixture
    config,
    dead_url,
    incident,
    parse,
    push,
)


@pytest.fixture
def am() -> Iterator[FakeAlertmanager]:
    with FakeAlertmanager() as server:
        yield server


# --- what is POSTed ------------------------------------------------------------------------


def test_posts_one_alert_per_pushed_incident(am: FakeAlertmanager) -> None:
    before = datetime.now(UTC)
    pusher = push(config(am.url), [
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
    assert pusher.stats.alerts_sent == 2 and pusher.stats.failures == 0


def test_resolved_incident_is_sent_with_its_resolution_as_ends_at(am: FakeAlertmanager) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    push(config(am.url), [incident(started=now - timedelta(minutes=2),
                                   resolved=now - timedelta(minutes=1))])
    [(_, [alert])] = am.bodies
    assert parse(alert["startsAt"]) == now - timedelta(minutes=2)
    assert parse(alert["endsAt"]) == now - timedelta(minutes=1)


def test_long_resolved_incidents_are_not_resent(am: FakeAlertmanager) -> None:
    now = datetime.now(UTC)
    push(config(am.url), [incident(started=now - timedelta(hours=2),
                                   resolved=now - timedelta(hours=1))])
    assert am.bodies == []


def test_nothing_to_push_posts_nothing(am: FakeAlertmanager) -> None:
    push(config(am.url), [incident("under_min_isr", "1")])
    push(config(am.url), [])
    push(config(None), [incident()])
    assert am.bodies == []



def test_cluster_wide_incident_has_no_broker_label(am: FakeAlertmanager) -> None:
    push(config(am.url, ["offline_partitions"]), [incident("offline_partitions", "*")])
    [(_, [alert])] = am.bodies
    assert "broker" not in alert["labels"]
    assert alert["labels"]["alertname"] == "KafkaOfflinePartitions"


def test_unknown_kind_is_ignored_with_a_warning_once(am: FakeAlertmanager, caplog) -> None:
    pusher = AlertPusher(config(am.url, ["stale_broker", "unclean_election"]))
    pusher.push([incident("stale_broker", "2"), incident()])
    [(_, body)] = am.bodies
    assert [a["labels"]["alertname"] for a in body] == ["KafkaUncleanLeaderElection"]
    assert "'stale_broker' has no paging rule" in caplog.text
    pusher.push([incident("stale_broker", "2")])
    assert caplog.text.count("'stale_broker' has no paging rule") == 1, "once per kind"


def test_posts_to_every_alertmanager_of_an_ha_pair(am: FakeAlertmanager) -> None:
    other = FakeAlertmanager()
    try:
        push(config(f"{am.url}, {other.url}/"), [incident()])
        assert len(am.bodies) == 1 and len(other.bodies) == 1
    finally:
        other.close()


# --- failures never reach the job ------------------------------------------------------------


def test_unreachable_alertmanager_is_counted_not_raised(caplog) -> None:
    closed = FakeAlertmanager()
    url = closed.url
    closed.close()
    assert push(config(url), [incident()]).stats.failures == 1
    assert "alert push" in caplog.text and "failed" in caplog.text


def test_error_status_is_a_failure_and_backs_off_then_recovers(am: FakeAlertmanager) -> None:
    pusher = AlertPusher(config(am.url))
    am.status = 500
    pusher.push([incident()])
    assert pusher.stats.failures == 1 and len(am.bodies) == 1
    pusher.push([incident()])
    assert pusher.stats.skipped == 1 and len(am.bodies) == 1, "backs off after a failure"
    pusher.backoff_seconds = 0.0
    am.status = 200
    pusher.push([incident()])
    assert len(am.bodies) == 2 and pusher.stats.last_error is None
    assert pusher.stats.alerts_sent == 1
    am.status = 500
    pusher.push([incident()])
    assert pusher.stats.failures == 2
    assert push(config(am.url), [incident()]).stats.skipped == 0, \
        "another pusher (another job) keeps its own back-off"


def test_hung_alertmanager_costs_at_most_the_timeout(am: FakeAlertmanager) -> None:
    am.delay = 3.0
    started = time.monotonic()
    pusher = push(config(am.url, timeout=0.3), [incident()])
    assert time.monotonic() - started < 1.5
    assert pusher.stats.failures == 1


def test_malformed_incident_is_counted_not_raised(am: FakeAlertmanager) -> None:
    pusher = push(config(am.url), [{"kind": "unclean_election"}])  # no cluster, no start
    assert pusher.stats.failures == 1 and am.bodies == []



def test_failed_push_log_hides_the_url_password(caplog) -> None:
    closed = FakeAlertmanager()
    port = closed.server.server_port
    closed.close()
    pusher = push(config(f"http://am:PLANTED-URL-PASS@127.0.0.1:{port}"), [incident()])
    assert pusher.stats.failures == 1
    assert "127.0.0.1" in caplog.text, "the log still says which Alertmanager failed"
    assert "PLANTED-URL-PASS" not in caplog.text
    assert "PLANTED-URL-PASS" not in str(pusher.stats.last_error)


# --- several Alertmanagers, auth ---------------------------------------------------------


def alerts_received(server: FakeAlertmanager) -> list[str]:
    return [a["labels"]["broker"] for _, body in server.bodies for a in body]


@pytest.mark.parametrize("dead_first", [True, False])
def test_a_dead_member_never_holds_back_the_healthy_one(am: FakeAlertmanager, caplog,
                                                        dead_first: bool) -> None:
    """12 batches, each pushing one new alert, to a healthy and a dead member (either
    order): the dead member's back-off is its own, so every alert reaches the healthy one."""
    members = [dead_url(), am.url] if dead_first else [am.url, dead_url()]
    pusher = AlertPusher(AlertPushConfig(alertmanager_urls=members, timeout_seconds=1.0))
    for broker in range(12):
        pusher.push([incident(broker=str(broker))])
    assert alerts_received(am) == [str(b) for b in range(12)]
    assert pusher.stats.alerts_sent == 12
    assert pusher.stats.failures >= 1 and pusher.stats.skipped >= 1, \
        "the dead member failed, then was backed off"
    assert caplog.text.count("failed") == 1, "one warning for the dead member, rate-limited"


def test_single_url_key_and_url_list_are_merged(am: FakeAlertmanager) -> None:
    other = FakeAlertmanager()
    try:
        both = AlertPushConfig(alertmanager_url=am.url, alertmanager_urls=[other.url + "/"])
        assert both.urls() == [am.url, other.url]
        push(both, [incident()])
        assert len(am.bodies) == len(other.bodies) == 1
    finally:
        other.close()


def test_basic_auth_from_a_secret_file_arrives_and_is_never_logged(
        am: FakeAlertmanager, tmp_path: Path, caplog) -> None:
    caplog.set_level("DEBUG")
    secret = tmp_path / "am-password"
    secret.write_text("PLANTED-AM-PASSWORD\n")
    pusher = push(AlertPushConfig(alertmanager_urls=[dead_url(), am.url], username="pager",
                                  password=SecretRef(file=str(secret))), [incident()])
    assert am.authorizations == [
        "Basic " + base64.b64encode(b"pager:PLANTED-AM-PASSWORD").decode()]
    assert "failed" in caplog.text
    assert "PLANTED-AM-PASSWORD" not in caplog.text
    assert "PLANTED-AM-PASSWORD" not in str(pusher.stats.last_error)


def test_bearer_token_from_env_arrives_and_is_never_logged(
        am: FakeAlertmanager, monkeypatch, caplog) -> None:
    caplog.set_level("DEBUG")
    monkeypatch.setenv("KH_TEST_AM_TOKEN", "PLANTED-AM-TOKEN")
    push(AlertPushConfig(alertmanager_urls=[dead_url(), am.url],
                         bearer_token=SecretRef(env="KH_TEST_AM_TOKEN")), [incident()])
    assert am.authorizations == ["Bearer PLANTED-AM-TOKEN"]
    assert "failed" in caplog.text and "PLANTED-AM-TOKEN" not in caplog.text


def test_url_user_info_becomes_basic_auth(am: FakeAlertmanager, caplog) -> None:
    caplog.set_level("DEBUG")
    url = am.url.replace("http://", "http://pager:PLANTED-URL-PASS@")
    push(AlertPushConfig(alertmanager_urls=[url]), [incident()])
    assert am.authorizations == ["Basic " + base64.b64encode(b"pager:PLANTED-URL-PASS").decode()]
    assert "PLANTED-URL-PASS" not in caplog.text


def test_unreadable_push_secret_is_a_failure_naming_the_key(am: FakeAlertmanager, caplog,
                                                           tmp_path: Path) -> None:
    pusher = push(AlertPushConfig(alertmanager_urls=[am.url], username="pager",
                                  password=SecretRef(file=str(tmp_path / "missing"))),
                  [incident()])
    assert am.bodies == [] and pusher.stats.failures == 1
    assert "alert_push.password: file" in caplog.text


def test_https_member_is_verified_with_the_ca_file(tmp_path: Path) -> None:
    """A self-signed Alertmanager is reached with its certificate as ca_file, and refused
    without it."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    server = FakeAlertmanager()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    url = server.url.replace("http://", "https://")
    try:
        unknown = push(AlertPushConfig(alertmanager_urls=[url]), [incident()])
        assert unknown.stats.failures == 1 and server.bodies == [], "unknown CA is refused"
        known = push(AlertPushConfig(alertmanager_urls=[url], ca_file=str(cert)), [incident()])
        assert known.stats.failures == 0 and len(server.bodies) == 1
    finally:
        server.close()


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
    push(cfg, [*flood, *held], may_page=lambda cluster: cluster == "c1")
    [(_, body)] = am.bodies
    assert len(body) == 3
    assert {a["labels"]["cluster"] for a in body} == {"c1"}
    assert body[0]["labels"]["alertname"] == "KafkaUncleanLeaderElection", "data loss first"
