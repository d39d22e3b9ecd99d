"""The direct push (streaming/paging) sends, for every pushed kind, the alert Prometheus
itself fires for that kind's rule: promtool evaluates alerts/kafka-health.rules.yml on series
that fire it and must find exactly the labels and annotations `build_alerts` made for the
same fault (the push-only `source` label and `incident_id` annotation aside).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from streaming import metric_names, paging
from streaming.config import AlertPushConfig
from tests.alerts.test_rules import RULES, assert_ok, by_alert, contract, run, tool

# Values the rules' thresholds all fire on, chosen to cover Go's %v of a float64: an
# integer, a fraction, the exponent form from 1e6 up and below 1e-4.
VALUES = (2.0, 2.5, 1234567.0, 0.00001)
CLUSTER, BROKER = "c1", "3"
PUSH_ONLY_LABELS = {"alertname", "source"}  # promtool names the alertname apart
PUSH_ONLY_ANNOTATIONS = {"incident_id"}


@pytest.fixture(autouse=True)
def committed_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paging.RULES_ENV, raising=False)


def value_series(kind: str) -> tuple[str, dict[str, str], bool]:
    """The series whose value the rule of `kind` reports (its expression's first metric),
    the labels it carries (the contract's cluster and, for broker-scoped metrics, broker),
    and whether the alert keeps the broker (a rule may aggregate it away: one per cluster)."""
    expr = by_alert(paging.ALERTNAMES[kind])["expr"]
    metric = re.search(r"kafka_health_[a-zA-Z0-9_:]*", expr).group(0)
    labels = contract()[metric]
    assert labels <= {"cluster", "broker"}, f"{metric}: labels {labels} the push cannot know"
    per_broker = "broker" in labels and not re.search(r"without\s*\(\s*broker\s*\)", expr)
    return (metric, {"cluster": CLUSTER, **({"broker": BROKER} if "broker" in labels else {})},
            per_broker)


def pushed(kind: str, series: dict[str, str], value: float,
           cause: str | None = None, per_broker: bool = True,
           elr: float | None = None) -> dict[str, Any]:
    push = AlertPushConfig(alertmanager_urls=["http://am"], kinds=[kind])
    broker = series.get("broker", "*") if per_broker else "*"
    incident = {"kind": kind, "cluster": CLUSTER, "broker": broker,
                "started_at": datetime(2024, 5, 1, tzinfo=UTC), "resolved_at": None,
                "peak_value": value, "incident_id": "id", "cause": cause, "elr_enabled": elr}
    [alert] = paging.build_alerts(push, [incident])
    return alert


def selector(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


# incident kind -> the cause series' kind and leader (streaming.metadata.board)
CAUSE_KINDS = {"under_min_isr": ("under_min_isr", BROKER), "offline_partitions": ("offline", "none")}


def cause_series(kind: str, cause: str) -> list[dict[str, str]]:
    """The Admin API's cause of the kind's fault, as the exporter serves it, and its poll up."""
    cause_kind, leader = CAUSE_KINDS[kind]
    return [{"series": selector("kafka_health_metadata_cause_info", {
                 "cluster": CLUSTER, "kind": cause_kind, "leader": leader, "cause": cause}),
             "values": "1x60"},
            {"series": selector("kafka_health_metadata_up", {"cluster": CLUSTER}),
             "values": "1x60"}]


def rule_test(kind: str, value: float, edit: Any = None, cause: str | None = None,
              elr: float | None = None) -> dict[str, Any]:
    """A promtool test group: the kind's series at `value` for 10 minutes (past any `for:`),
    every gate open (broker fresh, brokers reporting), with the Admin API's `cause` and the
    cluster's kafka_health_elr_enabled `elr` when given, and the pushed alert expected (its
    incident carrying them)."""
    metric, series, per_broker = value_series(kind)
    alert = pushed(kind, series, value, cause, per_broker, elr)
    expected = {
        "exp_labels": {k: v for k, v in alert["labels"].items() if k not in PUSH_ONLY_LABELS},
        "exp_annotations": {k: v for k, v in alert["annotations"].items()
                            if k not in PUSH_ONLY_ANNOTATIONS},
    }
    if edit:
        edit(expected)
    return {
        "name": f"{kind} pushed with value {value!r} = {paging.ALERTNAMES[kind]} as fired",
        "interval": "10s",
        "input_series": [
            {"series": selector(metric, series), "values": f"{value!r}x60"},
            {"series": selector("kafka_health_broker_stale", {"cluster": CLUSTER,
                                                              "broker": BROKER}),
             "values": "0x60"},
            {"series": selector("kafka_health_brokers_reporting", {"cluster": CLUSTER}),
             "values": "3x60"},
            *(cause_series(kind, cause) if cause else []),
            *([{"series": selector(metric_names.ELR_ENABLED, {"cluster": CLUSTER}),
                "values": f"{elr!r}x60"}] if elr is not None else []),
        ],
        "alert_rule_test": [{"eval_time": "5m", "alertname": alert["labels"]["alertname"],
                             "exp_alerts": [expected]}],
    }


def promtool(tmp_path: Path, groups: list[dict[str, Any]]) -> Any:
    path = tmp_path / "paging.test.yml"
    rules = paging.rules_path()
    assert rules.resolve() == RULES.resolve(), "the push reads the rules promtool tests"
    path.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "10s",
                                    "tests": groups}, sort_keys=False, width=1000))
    return run([tool("promtool"), "test", "rules", str(path)])


def test_each_pushed_kind_is_the_alert_prometheus_fires(tmp_path: Path) -> None:
    groups = [rule_test(kind, value) for kind in paging.ALERTNAMES for value in VALUES]
    assert_ok(promtool(tmp_path, groups))


def test_a_pushed_cause_is_the_cause_prometheus_renders(tmp_path: Path) -> None:
    """The push renders the rules' cause block from the incident's cause; Prometheus from
    kafka_health_metadata_cause_info. Same poll, same text: the same alert."""
    groups = [rule_test(kind, 6.0, cause=cause) for kind in CAUSE_KINDS
              for cause in ("brokers 4 and 5 out of ISR", "broker 2 unavailable (and 3 more)")]
    assert all("Admin API" in str(g) for g in groups), "the cause is in every expectation"
    assert_ok(promtool(tmp_path, groups))


def test_the_pushed_unclean_election_says_whether_elr_was_on_as_prometheus_does(
        tmp_path: Path) -> None:
    """The push renders the ELR block from the incident's elr_enabled; Prometheus from
    kafka_health_elr_enabled of the cluster: on, off, and nothing when unknown."""
    groups = [rule_test("unclean_election", 1.0, elr=elr) for elr in (1.0, 0.0, None)]
    descriptions = [g["alert_rule_test"][0]["exp_alerts"][0]["exp_annotations"]["description"]
                    for g in groups]
    assert "were on" in descriptions[0] and "were off" in descriptions[1]
    assert "KIP-966" not in descriptions[2]
    assert_ok(promtool(tmp_path, groups))


def test_promtool_tells_a_differing_text_apart(tmp_path: Path) -> None:
    """The comparison above is not vacuous: one character off in the expected text fails."""
    def off_by_one(expected: dict[str, Any]) -> None:
        expected["exp_annotations"]["summary"] += "."

    proc = promtool(tmp_path, [rule_test("unclean_election", 2.0, off_by_one)])
    assert proc.returncode != 0 and "summary" in proc.stdout + proc.stderr
