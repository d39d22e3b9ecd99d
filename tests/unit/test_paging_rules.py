"""streaming.paging.rules and .templates: the pushed alerts agree with the Prometheus rules
and Alertmanager's routing, and a rule the push cannot render is refused at start."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from streaming import paging
from streaming.config import ConfigError
from streaming.paging import ALERTNAMES, SOURCE, build_alerts
from streaming.signals.incidents import CLUSTER_SCOPE_KINDS, KINDS
from tests.unit.paging_builders import (
    ALERTMANAGER,
    RULES,
    T0,
    FakeAlertmanager,
    committed_rules,  # noqa: F401 - an autouse fixture
    config,
    incident,
    push,
    rules_by_name,
)

CAUSE_BLOCK = re.compile(r"\{\{ with printf `kafka_health_metadata_cause_info.*?\}\}\{\{ range \. \}\}"
                         r"(.*?)\{\{ \.Labels\.cause \}\}(.*?)\{\{ end \}\}\{\{ end \}\}")
ELR_BLOCK = re.compile(r"\{\{ with printf `kafka_health_elr_enabled.*?\}\}\{\{ range \. \}\}"
                       r"\{\{ if eq \.Value 1\.0 \}\}(.*?)\{\{ else \}\}(.*?)"
                       r"\{\{ end \}\}\{\{ end \}\}\{\{ end \}\}")


def render_rule_text(template: str, labels: dict[str, str], value: str,
                     cause: str | None = None) -> str:
    """The actions the push renders, substituted naively (no whitespace folding: the pushed
    text must equal the rule's to the character, as promtool checks in
    tests/alerts/test_paging_render.py); a cause block is its text around `cause`, or
    nothing without one; an ELR block is nothing (the incident does not say)."""
    text = CAUSE_BLOCK.sub(lambda m: f"{m.group(1)}{cause}{m.group(2)}" if cause else "",
                           template)
    text = ELR_BLOCK.sub("", text)
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
        monkeypatch.setenv(paging.RULES_ENV, str(path))
        return path

    return edit


@pytest.mark.parametrize("kind", list(ALERTNAMES))
def test_pushed_alert_is_the_rule_of_its_kind(kind: str) -> None:
    broker = "*" if kind in CLUSTER_SCOPE_KINDS else "3"
    [alert] = build_alerts(config("http://x", [kind]), [incident(kind, broker, peak=2)], now=T0)
    assert paging.rules_path() == RULES
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
        paging.spec_for("under_min_isr")


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
        rules_copy: Any, caplog, template: str, action: str) -> None:
    path = rules_copy("KafkaUnderMinIsrPartitions", annotations={"description": template})
    with FakeAlertmanager() as am:
        with pytest.raises(ConfigError) as refused:
            paging.check(config(am.url, ["unclean_election", "under_min_isr"]))
        message = str(refused.value)
        for part in ("alert_push.kinds 'under_min_isr'", str(path), "KafkaUnderMinIsrPartitions",
                     "annotation description", repr(action), "{{ $value }}"):
            assert part in message, part
        # only the pushed kinds are checked; a push never raises and skips only that kind
        paging.check(config(am.url, ["unclean_election"]))
        paging.check(config(None, ["under_min_isr"]))
        pusher = push(config(am.url, ["unclean_election", "under_min_isr"]),
                      [incident("under_min_isr", "1"), incident()])
        [(_, body)] = am.bodies
    assert [a["labels"]["alertname"] for a in body] == ["KafkaUncleanLeaderElection"]
    assert "cannot render" in caplog.text and pusher.stats.failures == 0


def test_a_kind_without_a_paging_rule_is_refused_at_config_check() -> None:
    """A misspelt kind (the demo prints kinds hyphenated) would never page: refused at
    start, named; with no Alertmanager to push to, nothing is checked."""
    with pytest.raises(ConfigError) as refused:
        paging.check(config("http://x", ["unclean_election", "under-min-isr"]))
    assert str(refused.value) == (
        "alert_push.kinds[1]: 'under-min-isr' is not a kind with a paging rule; one of: "
        + ", ".join(ALERTNAMES))
    paging.check(config(None, ["under-min-isr"]))
    paging.check(config("http://x", list(ALERTNAMES)))


def test_an_unterminated_template_is_refused(rules_copy: Any) -> None:
    rules_copy("KafkaOfflinePartitions", annotations={"summary": "{{ $labels.cluster "})
    with pytest.raises(ConfigError, match="KafkaOfflinePartitions annotation summary: "
                                          "unterminated template action"):
        paging.spec_for("offline_partitions")


def test_a_missing_rule_or_rules_file_is_refused(rules_copy: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = rules_copy("KafkaOfflinePartitions")
    path.write_text(path.read_text().replace("alert: KafkaOfflinePartitions",
                                             "alert: KafkaOfflinePartitionsRenamed"))
    with pytest.raises(ConfigError, match="has 0 rules named KafkaOfflinePartitions"):
        paging.check(config("http://x", ["offline_partitions"]))
    monkeypatch.setenv(paging.RULES_ENV, str(tmp_path / "nowhere.yml"))
    with pytest.raises(ConfigError, match=r"rules file alerts/kafka-health\.rules\.yml .* not "
                                          r"found \(looked at .*nowhere\.yml\)"):
        paging.check(config("http://x"))


def test_the_rules_file_is_found_beside_metrics_schemas(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the image (/opt/kafka-health/{metrics_schemas,alerts}) and spark-submit's
    working directory: KAFKA_HEALTH_SCHEMAS names the schemas, the rules are beside them."""
    (tmp_path / "alerts").mkdir()
    shutil.copy(RULES, tmp_path / "alerts" / RULES.name)
    monkeypatch.setenv("KAFKA_HEALTH_SCHEMAS", str(tmp_path / "metrics_schemas"))
    assert paging.rules_path() == tmp_path / "alerts" / RULES.name
    (tmp_path / "alerts" / RULES.name).unlink()
    assert paging.rules_path() == RULES, "else the package's copy, the top-level file's link"


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
    tests/alerts/test_paging_render.py)."""
    assert paging.go_value(value) == shown


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
