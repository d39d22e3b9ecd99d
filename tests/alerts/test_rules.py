"""Alert rules, their promtool unit tests, the Alertmanager config and the runbooks.

Runs the real tools (promtool, amtool from Debian's prometheus / prometheus-alertmanager
packages). Nothing is skipped: a missing binary fails with the install hint.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from streaming.signal_catalog import Bad, Signal
from tests.alerts.amconfig import render_alertmanager_config

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "alerts"
RULES = ALERTS / "kafka-health.rules.yml"
RULES_TEMPLATE = ALERTS / "kafka-health.rules.template.yml"
RULE_TESTS = sorted((ALERTS / "tests").glob("*.test.yml"))
RUNBOOKS = ALERTS / "runbooks"
ALERTMANAGER = ALERTS / "alertmanager.yml"
CONTRACT = REPO / "metrics_schemas" / "exported_metrics.yaml"

RUNBOOK_BASE = "https://github.com/kafka-health/kafka-health/blob/main/alerts/runbooks/"
INSTALL_HINT = (
    "run deploy/install-prometheus.sh (installs Debian prometheus + prometheus-alertmanager)"
)

# Labels the contract names only in prose (exported_metrics.yaml keeps one label list per
# group); Prometheus adds job/instance to every scraped series.
EXTRA_LABELS = {
    "kafka_health_partition_ceiling": {"bound"},
    "kafka_health_partition_headroom_ratio": {"binding_bound"},
    "kafka_health_pipeline_quarantined_records_total": {"reason"},
}
SCRAPE_LABELS = {"job", "instance"}
# Series of the Admin API poller (streaming/metadata), not of the broker metrics.
ADMIN_API_SERIES = {"kafka_health_durability_audit_findings",
                    "kafka_health_metadata_cause_broker_partitions"}
# Series of the consumer groups' reader (streaming/clients): fresh while its reads succeed.
GROUP_SERIES = {"kafka_health_consumer_group_lag_records",
                "kafka_health_consumer_group_lag_seconds",
                "kafka_health_consumer_group_status"}
# The durability probe's own writes (streaming/clients): each closed window is what its
# writes met then, whatever the broker metrics say (and a stale broker is when it matters).
PROBE_SERIES = {"kafka_health_probe_availability_ratio",
                "kafka_health_probe_ack_latency_p99_seconds"}

PROMQL_FUNCTIONS = {
    "abs",
    "absent",
    "absent_over_time",
    "avg",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "count",
    "count_over_time",
    "delta",
    "deriv",
    "floor",
    "group",
    "increase",
    "irate",
    "label_replace",
    "last_over_time",
    "max",
    "max_over_time",
    "min",
    "min_over_time",
    "predict_linear",
    "rate",
    "resets",
    "round",
    "scalar",
    "sort",
    "sum",
    "sum_over_time",
    "time",
    "timestamp",
    "topk",
    "vector",
}
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset"}
LABEL_LIST_MODIFIERS = ("on", "ignoring", "by", "without", "group_left", "group_right")


# --- helpers -----------------------------------------------------------------------------


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not on PATH: {INSTALL_HINT}", pytrace=False)
    return path


def run(cmd: list[str], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def assert_ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, (
        f"{' '.join(proc.args)} exited {proc.returncode}\n"
        f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    )


def load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def alert_rules() -> list[dict[str, Any]]:
    return [r for g in load_yaml(RULES)["groups"] for r in g["rules"] if "alert" in r]


def contract() -> dict[str, set[str]]:
    """metric name -> label names, from metrics_schemas/exported_metrics.yaml."""
    out: dict[str, set[str]] = {}
    for group in load_yaml(CONTRACT).values():
        labels = set(group.get("labels") or [])
        for kind in ("gauges", "counters"):
            for name in group.get(kind) or {}:
                out[name] = labels | EXTRA_LABELS.get(name, set())
    return out


# Series Prometheus itself writes: a rule may read its own state (ALERTS) for hysteresis.
PROMETHEUS_SERIES = {"ALERTS", "ALERTS_FOR_STATE"}


def metric_names(expr: str) -> set[str]:
    """Metric names used in a PromQL expression (functions/keywords/label lists removed),
    Prometheus' own series (PROMETHEUS_SERIES) left out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', "", expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range / subquery durations
    text = re.sub(r"\boffset\s+\d+\w*", " ", text)  # offset modifiers
    mods = "|".join(LABEL_LIST_MODIFIERS)
    text = re.sub(rf"\b({mods})\s*\([^)]*\)", " ", text)  # label lists
    names: set[str] = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = m.group(0)
        if word in PROMQL_KEYWORDS:
            continue
        if re.match(r"\s*\(", text[m.end() :]):
            assert word in PROMQL_FUNCTIONS, f"unknown PromQL function {word!r} in {expr!r}"
            continue
        names.add(word)
    return names - PROMETHEUS_SERIES


def rule_ids() -> list[str]:
    return [r["alert"] for r in alert_rules()]


def by_alert(name: str) -> dict[str, Any]:
    return next(r for r in alert_rules() if r["alert"] == name)


def matches(matcher: str, labels: dict[str, str]) -> bool:
    """One Alertmanager matcher string (name="v", !=, =~, !~) against a label set."""
    m = re.fullmatch(r'\s*(\w+)\s*(=~|!~|!=|=)\s*"(.*)"\s*', matcher)
    assert m, f"unparsed matcher {matcher!r}"
    name, op, value = m.groups()
    have = labels.get(name, "")
    hit = re.fullmatch(value, have) is not None if "~" in op else have == value
    return hit != op.startswith("!")


def duration_seconds(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    total = 0.0
    for value, unit in re.findall(r"(\d+)(ms|s|m|h|d|w)", str(text)):
        total += int(value) * units[unit]
    return total


def _alerts_build() -> Any:
    spec = importlib.util.spec_from_file_location("kh_alerts_build", ALERTS / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build


# --- generated from the signal catalog ------------------------------------------------------


def test_committed_rules_and_runbooks_are_what_build_py_writes() -> None:
    stale = [str(path.relative_to(REPO)) for path, text in _alerts_build().render().items()
             if path.read_text() != text]
    assert not stale, f"run `.venv/bin/python alerts/build.py`: {stale} differ"


def test_template_expressions_read_series_only_through_the_catalog() -> None:
    """Every series an expression reads is a signal of metrics_schemas/signals.yaml: a rule
    and the panels that show its signal cannot drift apart."""
    text = re.sub(r"\[\[(\w+)(?:\.[\w:]+)?\]\]", r"signal_\1", RULES_TEMPLATE.read_text())
    exprs = [r["expr"] for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    assert len(exprs) == len(rule_ids())
    assert [e for e in exprs if "kafka_health_" in e] == []
    assert sum("signal_" in e for e in exprs) == len(exprs) - 1  # all but the heartbeat


def test_runbook_quotes_follow_the_catalog() -> None:
    build = _alerts_build()
    lag = Signal(id="lag", expr="kafka_health_pipeline_source_lag_records", unit="short",
                 description="", bad=Bad(op=">", value=900000, color="orange"))
    page = ("**Fires when:** `kafka_health_pipeline_source_lag_records > 500000` for 10m;\n"
            "`max_over_time(kafka_health_pipeline_source_lag_records[1h]) > 5` too,\n"
            "not `kafka_health_pipeline_source_lag_records` alone nor `kafka_health_up == 1`.")
    assert build.render_runbook(page, [lag]) == (
        "**Fires when:** `kafka_health_pipeline_source_lag_records > 900000` for 10m;\n"
        "`max_over_time(kafka_health_pipeline_source_lag_records[1h]) > 900000` too,\n"
        "not `kafka_health_pipeline_source_lag_records` alone nor `kafka_health_up == 1`.")


def test_every_alert_on_a_threshold_quotes_it_in_its_runbook() -> None:
    build = _alerts_build()
    for alert, fires_on in build.firing_signals(RULES_TEMPLATE.read_text()).items():
        page = (RUNBOOKS / f"{alert}.md").read_text()
        quoted = [s.id for s in fires_on if not build.quoted_condition(s).search(page)]
        assert not quoted, f"{alert}.md quotes no condition on {quoted}"


# --- the real tools ----------------------------------------------------------------------


def test_tools_installed() -> None:
    for name in ("promtool", "prometheus", "alertmanager", "amtool"):
        tool(name)


def test_promtool_check_rules() -> None:
    assert_ok(run([tool("promtool"), "check", "rules", str(RULES)]))


def test_promtool_unit_tests_pass() -> None:
    assert RULE_TESTS, "no alerts/tests/*.test.yml"
    proc = run([tool("promtool"), "test", "rules", *map(str, RULE_TESTS)])
    assert_ok(proc)
    assert proc.stdout.count("SUCCESS") == len(RULE_TESTS), proc.stdout


def test_amtool_check_committed_config() -> None:
    assert_ok(run([tool("amtool"), "check-config", str(ALERTMANAGER)]))


def test_amtool_check_rendered_local_config(tmp_path: Path) -> None:
    key = tmp_path / "pagerduty-routing-key"
    key.write_text("test-routing-key\n")
    rendered = tmp_path / "alertmanager.yml"
    rendered.write_text(
        render_alertmanager_config(
            pagerduty_url="http://127.0.0.1:18080/v2/enqueue",
            routing_key_file=key,
            warning_webhook_url="http://127.0.0.1:18081/warnings",
            heartbeat_url="http://127.0.0.1:18082/heartbeat",
        )
    )
    assert_ok(run([tool("amtool"), "check-config", str(rendered)]))
    cfg = load_yaml(rendered)
    [heartbeat] = [r for r in cfg["receivers"] if r["name"] == "kafka-health-heartbeat"]
    assert [h["url"] for h in heartbeat["webhook_configs"]] == ["http://127.0.0.1:18082/heartbeat"]
    pds = [pd for r in cfg["receivers"] for pd in r.get("pagerduty_configs") or []]
    assert pds and all(pd["url"] == "http://127.0.0.1:18080/v2/enqueue" for pd in pds)
    assert all(pd["routing_key_file"] == str(key) for pd in pds)
    assert load_yaml(ALERTMANAGER)["route"] == cfg["route"]
    assert load_yaml(ALERTMANAGER)["inhibit_rules"] == cfg["inhibit_rules"]


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (
            ["severity=critical", "category=data_loss", "alertname=KafkaUncleanLeaderElection"],
            "pagerduty-data-loss",
        ),
        (
            ["severity=critical", "category=data_loss", "alertname=KafkaProbeDataLoss"],
            "pagerduty-data-loss",
        ),
        (
            ["severity=critical", "category=data_loss",
             "alertname=KafkaConsumerGroupLostToRetention"],
            "pagerduty-data-loss",
        ),
        (
            ["severity=critical", "category=cluster_fault",
             "alertname=KafkaProbeWritesFailingUnexplained"],
            "pagerduty-critical",
        ),
        (
            ["severity=warning", "category=cluster_fault", "alertname=KafkaConsumerGroupStalled"],
            "kafka-health-warnings",
        ),
        (
            ["severity=critical", "category=cluster_fault", "alertname=KafkaUnderMinIsrPartitions"],
            "pagerduty-critical",
        ),
        (
            ["severity=critical", "category=cluster_fault", "alertname=KafkaOfflinePartitions"],
            "pagerduty-critical",
        ),
        (
            [
                "severity=warning",
                "category=cluster_fault",
                "alertname=KafkaUnderReplicatedPartitions",
            ],
            "kafka-health-warnings",
        ),
        (
            ["severity=warning", "category=pipeline", "alertname=KafkaHealthPipelineLagging"],
            "kafka-health-warnings",
        ),
        (
            ["severity=critical", "category=pipeline", "alertname=KafkaHealthPipelineDown"],
            "pagerduty-critical",
        ),
        (
            ["severity=critical", "category=pipeline", "alertname=KafkaHealthPipelineStalled"],
            "pagerduty-critical",
        ),
        (
            ["severity=critical", "category=pipeline", "alertname=KafkaHealthSourceUnreachable"],
            "pagerduty-critical",
        ),
        (
            ["severity=critical", "category=staleness", "alertname=KafkaClusterDark"],
            "pagerduty-critical",
        ),
        (
            ["severity=none", "category=heartbeat", "alertname=KafkaHealthWatchdog"],
            "kafka-health-heartbeat",
        ),
        (
            ["severity=warning", "category=cluster_fault", "alertname=KafkaDurabilityAuditFinding"],
            "kafka-health-warnings",
        ),
        (
            ["severity=warning", "category=staleness", "alertname=KafkaHealthMetadataUnavailable"],
            "kafka-health-warnings",
        ),
    ],
)
def test_amtool_routes(labels: list[str], receiver: str) -> None:
    proc = run(
        [
            tool("amtool"),
            "config",
            "routes",
            "test",
            f"--config.file={ALERTMANAGER}",
            f"--verify.receivers={receiver}",
            *labels,
        ]
    )
    assert_ok(proc)


def test_pagerduty_secret_not_committed() -> None:
    cfg = load_yaml(ALERTMANAGER)
    pds = [pd for r in cfg["receivers"] for pd in r.get("pagerduty_configs") or []]
    assert pds, "no PagerDuty receiver"
    for pd in pds:
        assert "routing_key" not in pd and "service_key" not in pd, "inline secret in config"
        assert pd["routing_key_file"] == "/etc/alertmanager/secrets/pagerduty-routing-key"
        assert pd["url"].startswith("https://"), pd["url"]
    critical = [r for r in cfg["route"]["routes"] if any("critical" in m for m in r["matchers"])]
    assert critical and all(duration_seconds(r["group_wait"]) <= 5 for r in critical)


def test_heartbeat_is_steady_never_pages_and_never_inhibits() -> None:
    """The watchdog reaches only its webhook, often enough for an external dead man's
    switch, and takes no part in inhibition (as source it would mute everything; as
    target the heartbeat would stop exactly when something else fires)."""
    cfg = load_yaml(ALERTMANAGER)
    [route] = [r for r in cfg["route"]["routes"] if r["receiver"] == "kafka-health-heartbeat"]
    assert cfg["route"]["routes"][0] is route, "matched before any other route"
    assert not route.get("continue") and not route.get("routes")
    assert duration_seconds(route["repeat_interval"]) <= 60
    [receiver] = [r for r in cfg["receivers"] if r["name"] == "kafka-health-heartbeat"]
    assert set(receiver) == {"name", "webhook_configs"}, "no paging integration"
    assert [h["send_resolved"] for h in receiver["webhook_configs"]] == [False]
    watchdog = by_alert("KafkaHealthWatchdog")
    labels = {"alertname": "KafkaHealthWatchdog", **watchdog["labels"]}
    for rule in cfg["inhibit_rules"]:
        for side in ("source_matchers", "target_matchers"):
            assert not all(matches(m, labels) for m in rule[side]), (side, rule)
    assert watchdog["expr"].strip() == "vector(1)" and "for" not in watchdog


# --- rule metadata and the contract --------------------------------------------------------


@pytest.mark.parametrize("name", rule_ids())
def test_rule_metadata(name: str) -> None:
    rule = by_alert(name)
    labels, ann = rule.get("labels", {}), rule.get("annotations", {})
    assert labels.get("severity") in {"critical", "warning", "none"}, labels
    assert labels.get("team") == "kafka", labels
    assert labels.get("category") in {
        "data_loss", "cluster_fault", "staleness", "pipeline", "heartbeat"}
    assert (labels["severity"] == "none") == (labels["category"] == "heartbeat"), labels
    for key in ("summary", "description", "runbook_url"):
        assert str(ann.get(key, "")).strip(), f"{name}: missing annotation {key}"
    url = ann["runbook_url"]
    assert url.startswith(RUNBOOK_BASE), url
    page = RUNBOOKS / url.removeprefix(RUNBOOK_BASE)
    assert page.is_file(), f"{name}: runbook {page} does not exist"
    assert page.name == f"{name}.md"
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# {name}\n"), f"{page} must start with '# {name}'"
    for section in ("## What it means", "## First commands", "## Do not"):
        assert section in text, f"{page}: missing section {section!r}"


def test_every_runbook_belongs_to_an_alert() -> None:
    pages = {p.stem for p in RUNBOOKS.glob("*.md")} - {"README"}
    assert pages == set(rule_ids())


@pytest.mark.parametrize("name", rule_ids())
def test_expr_metrics_are_in_the_contract(name: str) -> None:
    known = contract()
    used = metric_names(by_alert(name)["expr"])
    if by_alert(name)["labels"]["category"] == "heartbeat":
        return  # reads no series by design (vector(1))
    assert used, f"{name}: no metric in expr"
    unknown = used - set(known)
    assert not unknown, f"{name}: {sorted(unknown)} not in {CONTRACT.relative_to(REPO)}"


@pytest.mark.parametrize("name", rule_ids())
def test_templates_use_existing_labels(name: str) -> None:
    rule = by_alert(name)
    known = contract()
    available = set(SCRAPE_LABELS)
    for metric in metric_names(rule["expr"]):
        available |= known[metric]
    for key, text in rule["annotations"].items():
        for label in re.findall(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)", text):
            assert label in available, f"{name}.{key} uses $labels.{label}; series have {available}"


def test_metric_name_parser() -> None:
    expr = (
        'kafka_health_a{cluster="x"} > 0 unless on(cluster, broker) kafka_health_b == 1 '
        "and on() (time() - max_over_time(kafka_health_c[5m]) > 300) "
        "unless kafka_health_d offset 5m"
    )
    assert metric_names(expr) == {"kafka_health_a", "kafka_health_b", "kafka_health_c",
                                  "kafka_health_d"}


# --- semantics the design requires -------------------------------------------------------


def test_unclean_election_pages_on_first_increase() -> None:
    rule = by_alert("KafkaUncleanLeaderElection")
    assert "for" not in rule or duration_seconds(rule["for"]) == 0
    assert rule["labels"]["severity"] == "critical"
    assert "kafka_health_unclean_leader_elections_window_increase" in rule["expr"]


def test_paging_set_matches_design() -> None:
    critical = {r["alert"] for r in alert_rules() if r["labels"]["severity"] == "critical"}
    assert critical == {
        "KafkaUncleanLeaderElection",
        "KafkaUnderMinIsrPartitions",
        "KafkaOfflinePartitions",
        "KafkaActiveControllerCountAbnormal",
        # KRaft: a failed disk, a broker the controller fenced while it still reports
        "KafkaOfflineLogDirectory",
        "KafkaBrokerFenced",
        # a blind monitor pages: the pipeline, its source, or a whole cluster gone quiet
        "KafkaHealthPipelineDown",
        "KafkaHealthPipelineStalled",
        "KafkaHealthSourceUnreachable",
        "KafkaHealthSourceEmpty",
        "KafkaClusterDark",
        # what clients see: acks=all writes failing (explained by a metric alert or not),
        # acked records lost, records a consumer group lost to retention
        "KafkaProbeWritesFailing",
        "KafkaProbeWritesFailingUnexplained",
        "KafkaProbeDataLoss",
        "KafkaConsumerGroupLostToRetention",
    }
    assert duration_seconds(by_alert("KafkaUnderMinIsrPartitions")["for"]) <= 10


@pytest.mark.parametrize(
    "name",
    [r["alert"] for r in alert_rules() if r["labels"]["category"] == "cluster_fault"],
)
def test_cluster_faults_are_gated_on_fresh_data(name: str) -> None:
    expr = by_alert(name)["expr"]
    if any(m in ADMIN_API_SERIES for m in metric_names(expr)):
        # from the Admin API poller: its counts are fresh while its polls succeed
        assert "kafka_health_metadata_up" in expr, f"{name} can fire on a failed poll's counts"
        return
    if any(m in GROUP_SERIES for m in metric_names(expr)):
        assert "kafka_health_consumer_groups_up" in expr, f"{name} can fire on a failed read's"
        return
    if any(m in PROBE_SERIES for m in metric_names(expr)):
        assert "kafka_health_broker_stale" not in expr, f"{name}: stale gauges mute the probe"
        return
    assert ("kafka_health_broker_stale" in expr) or ("kafka_health_brokers_reporting" in expr), (
        f"{name} can page on stale data"
    )


# --- the promtool tests cover every rule ---------------------------------------------------


def _test_cases() -> dict[str, list[list[dict[str, Any]]]]:
    """alertname -> per test group, its alert_rule_test entries sorted by eval_time."""
    out: dict[str, list[list[dict[str, Any]]]] = {}
    for path in RULE_TESTS:
        for group in load_yaml(path)["tests"]:
            per_alert: dict[str, list[dict[str, Any]]] = {}
            for case in group.get("alert_rule_test") or []:
                per_alert.setdefault(case["alertname"], []).append(case)
            for alert, cases in per_alert.items():
                cases.sort(key=lambda c: duration_seconds(c["eval_time"]))
                out.setdefault(alert, []).append(cases)
    return out


@pytest.mark.parametrize("name", rule_ids())
def test_each_rule_is_unit_tested_quiet_firing_resolved(name: str) -> None:
    groups = _test_cases().get(name)
    assert groups, f"{name}: no promtool test"
    if by_alert(name)["labels"]["category"] == "heartbeat":
        cases = [c for cases in groups for c in cases]
        assert any(duration_seconds(c["eval_time"]) == 0 for c in cases), "fires from the start"
        assert all(c.get("exp_alerts") for c in cases), f"{name} must fire at every evaluation"
        return

    def quiet_fire_resolve(cases: list[dict[str, Any]]) -> bool:
        states = ["fire" if c.get("exp_alerts") else "quiet" for c in cases]
        try:
            first_fire = states.index("fire")
        except ValueError:
            return False
        return "quiet" in states[:first_fire] and "quiet" in states[first_fire:]

    assert any(quiet_fire_resolve(c) for c in groups), (
        f"{name}: needs a test group with exp_alerts empty, then firing, then empty again"
    )
    firing = [a for cases in groups for c in cases for a in c.get("exp_alerts") or []]
    for exp in firing:
        assert exp.get("exp_labels", {}).get("severity") == by_alert(name)["labels"]["severity"]
        assert exp.get("exp_annotations"), f"{name}: a firing expectation lacks exp_annotations"
