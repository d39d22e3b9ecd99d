"""Dashboards: structure, contract, provisioning, and every query against a real Prometheus.

The Prometheus part starts Debian's `prometheus` binary on a free loopback port
(scrape interval 1 s) scraping two prometheus_client HTTP servers run by this module:

* "full": clusters alpha and beta expose every series of exported_metrics.yaml, with
  open incidents, unclean elections and quarantined records, so every query must
  return data;
* "healthy": cluster gamma, a quiet healthy cluster whose exporter emits no
  days-to-ceiling (not growing), no open incidents and no quarantine series, so only
  the queries listed in dashboards/expectations.yaml may come back empty.

The runner itself (validator.run_panel_queries) knows nothing about these exporters.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shutil
import time
import urllib.request
from collections.abc import Callable

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from streaming.signal_catalog import signals
from streaming.testbed.kafka import free_port
from tests.dashboards import validator as v
from tests.e2e.stack import poll, start_prometheus

REPO = v.REPO
DASHBOARD_FILES = sorted(v.DASHBOARD_DIR.glob("*.json"))
EXPECTED_UIDS = {
    "kafka-health-fleet",
    "kafka-health-broker",
    "kafka-health-durability",
    "kafka-health-headroom",
    "kafka-health-pipeline",
}
PROVISIONING = REPO / "deploy" / "grafana" / "provisioning"


@pytest.fixture(scope="module")
def contract() -> v.Contract:
    return v.load_contract()


@pytest.fixture(scope="module")
def dashboards() -> list[dict]:
    return [json.loads(p.read_text()) for p in DASHBOARD_FILES]


# ------------------------------------------------------------------------------------
# Structure
# ------------------------------------------------------------------------------------
def test_the_five_dashboards_exist_with_stable_uids(dashboards):
    assert {d["uid"] for d in dashboards} == EXPECTED_UIDS
    assert len(dashboards) == len(EXPECTED_UIDS)


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=[p.name for p in DASHBOARD_FILES])
def test_dashboard_structure(path, contract):
    problems = v.validate_paths([path], contract)[str(path)]
    assert problems == [], "\n".join(problems)


def test_uids_unique_across_files(contract):
    results = v.validate_paths(v.DASHBOARD_DIR, contract)
    assert set(results) == {str(p) for p in DASHBOARD_FILES}
    assert all(not problems for problems in results.values()), results


def _build_module():
    spec = importlib.util.spec_from_file_location("kh_dash_build", v.DASHBOARD_DIR / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build


def test_committed_json_is_what_build_py_writes():
    rendered = _build_module().render()
    assert sorted(rendered) == [p.name for p in DASHBOARD_FILES]
    stale = [n for n, text in rendered.items() if (v.DASHBOARD_DIR / n).read_text() != text]
    assert not stale, f"run `.venv/bin/python dashboards/build.py`: {stale} differ"


def test_build_py_reads_series_only_through_the_signal_catalog():
    """Panels, rules and runbooks share one definition of each expression and threshold."""
    source = (v.DASHBOARD_DIR / "build.py").read_text()
    assert re.findall(r"kafka_health_\w+", source) == []


def test_threshold_steps_colour_exactly_the_bad_values():
    build = _build_module()
    for sig in signals().values():
        pairs = build.steps(sig)
        if sig.bad is None:
            assert pairs == [("blue", None)]
            continue
        op, n = sig.bad.op, float(sig.bad.value)
        # steps colour from a value on: a real-valued "> n" colours n itself as well
        fire, quiet = _probes(op, n) if sig.integer else (
            {">": [n + 0.001], ">=": [n], "<": [n - 0.001]}[op],
            {">": [n - 0.001], ">=": [n - 0.001], "<": [n]}[op])
        assert all(_color_at(pairs, x) == sig.bad.color for x in fire), (sig.id, pairs)
        assert all(_color_at(pairs, x) == "green" for x in quiet), (sig.id, pairs)


def test_expectations_name_real_panels_with_reasons(dashboards):
    expectations = v.load_expectations()
    assert expectations, "dashboards/expectations.yaml lists nothing"
    assert v.validate_expectations(expectations, dashboards) == []


def test_every_contract_metric_appears_on_some_dashboard(dashboards, contract):
    used: set[str] = set()
    for d in dashboards:
        for _where, expr in v._exprs(d):
            used |= v.promql_names(expr)[0]
    assert set(contract.labels) - used == set()


def test_template_variables(dashboards):
    for d in dashboards:
        names = {var["name"]: var for var in d["templating"]["list"]}
        assert names["datasource"]["type"] == "datasource"
        if d["uid"] == "kafka-health-pipeline":
            # pipeline series carry no cluster/broker label: filter by scrape instance
            assert "instance" in names
            continue
        assert names["cluster"]["type"] == "query"
        assert "label_values(" in names["cluster"]["definition"]
        if d["uid"] != "kafka-health-fleet":
            assert names["broker"]["multi"] and names["broker"]["includeAll"]


def _steps(panel: dict) -> list[tuple[str, float | None]]:
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    return [(s["color"], s["value"]) for s in steps]


# Threshold steps a panel must carry when it shows one of these series (alert semantics).
ALERT_THRESHOLDS: dict[str, Callable[[list], bool]] = {
    "kafka_health_under_min_isr_partitions": lambda s: ("red", 1) in s and s[0][0] == "green",
    "kafka_health_unclean_leader_elections_window_increase":
        lambda s: ("red", 1) in s and s[0][0] == "green",
    "kafka_health_offline_partitions": lambda s: ("red", 1) in s and s[0][0] == "green",
    "kafka_health_active_controllers":
        lambda s: s == [("red", None), ("green", 1), ("red", 2)],
    "kafka_health_partition_headroom_ratio":
        lambda s: ("green", 0.2) in s and s.index(("green", 0.2)) > 0
        and s[s.index(("green", 0.2)) - 1][0] == "orange",
    "kafka_health_request_queue_utilization_ratio": lambda s: ("orange", 0.8) in s,
    "kafka_health_under_replicated_partitions": lambda s: ("orange", 1) in s,
}


def test_thresholds_follow_the_alert_rules(dashboards):
    checked = 0
    for d in dashboards:
        for p in v.iter_panels(d):
            if p["type"] not in ("stat", "timeseries", "bargauge"):
                continue
            metrics = set()
            for t in p["targets"]:
                metrics |= v.promql_names(t["expr"])[0]
            if len(metrics) != 1 or any("count(" in t["expr"] for t in p["targets"]):
                continue  # mixed panels and counts of brokers carry their own scale
            (metric,) = metrics
            if metric in ALERT_THRESHOLDS:
                checked += 1
                assert ALERT_THRESHOLDS[metric](_steps(p)), (d["uid"], p["title"], _steps(p))
    assert checked >= 20


ALERT_RULES = REPO / "alerts" / "kafka-health.rules.yml"
_RULE = re.compile(r"^\s*(?P<time>time\(\)\s*-\s*)?(?P<metric>kafka_health_\w+)\s*"
                   r"(?P<op>>=|>|<|==|!=)\s*(?P<value>[\d.]+)\s*$")


def _color_at(steps: list[tuple[str, float | None]], value: float) -> str:
    color = steps[0][0]
    for c, v_ in steps[1:]:
        if value >= v_:
            color = c
    return color


def _probes(op: str, n: float) -> tuple[list[float], list[float]]:
    """(values the alert fires on, values it does not) next to the threshold."""
    step = 1.0 if n == int(n) else 0.001  # counts and seconds are whole numbers
    return {
        ">": ([n + step], [n - 0.001]),
        ">=": ([n], [n - step]),
        "<": ([n - 0.001], [n]),
        "==": ([n], [1 - n] if n in (0, 1) else [n + step]),
        "!=": ([n - 1, n + 1], [n]),
    }[op]


def test_thresholds_match_alerts_rules_file(dashboards):
    """Every single-series panel colours exactly the values its alert fires on."""
    if not ALERT_RULES.exists():
        pytest.skip("alerts/kafka-health.rules.yml not written yet")
    rules = []
    for group in yaml.safe_load(ALERT_RULES.read_text())["groups"]:
        for rule in group["rules"]:
            first, *rest = rule["expr"].strip().splitlines()
            m = _RULE.match(first)
            presence_only = any(re.match(r"\s*(unless|and)\b", line)
                                and not re.search(r"==|!=|>|<", line) for line in rest)
            if m and not presence_only:
                rules.append((rule["alert"], m))
    assert len(rules) >= 12
    checked: dict[str, int] = {}
    for alert, m in rules:
        metric, uses_time = m["metric"], bool(m["time"])
        fire, quiet = _probes(m["op"], float(m["value"]))
        for d in dashboards:
            for p in v.iter_panels(d):
                if p["type"] not in ("stat", "timeseries", "bargauge"):
                    continue
                exprs = [t["expr"] for t in p["targets"]]
                metrics = set().union(*(v.promql_names(e)[0] for e in exprs))
                if metrics != {metric} or any("count(" in e for e in exprs) or \
                        any("time()" in e for e in exprs) != uses_time:
                    continue
                steps = _steps(p)
                where = (alert, d["uid"], p["title"], steps)
                assert all(_color_at(steps, x) != "green" for x in fire), where
                assert all(_color_at(steps, x) == "green" for x in quiet), where
                checked[alert] = checked.get(alert, 0) + 1
    assert {a for a, _ in rules} == set(checked), "alerts without a dashboard panel"


_SAID_BAD = re.compile(r"Bad: (?:anything )?(?P<op>>=|>|<) (?P<value>[\d.]+)(?P<unit>%|k)?")


def test_descriptions_say_the_thresholds_the_panels_colour(dashboards):
    """A panel's "Bad: > 0.8" is what its colours show: text written beside a threshold
    from the signal catalog cannot stay behind when the catalog changes."""
    checked = 0
    for d in dashboards:
        for p in v.iter_panels(d):
            said = _SAID_BAD.search(p.get("description", ""))
            if not said or "thresholds" not in p.get("fieldConfig", {}).get("defaults", {}):
                continue
            n = float(said["value"]) * {"%": 0.01, "k": 1000}.get(said["unit"] or "", 1)
            fire, quiet = _probes(said["op"], n)
            steps = _steps(p)
            where = (d["uid"], p["title"], said.group(0), steps)
            assert all(_color_at(steps, x) != "green" for x in fire), where
            assert all(_color_at(steps, x) == "green" for x in quiet), where
            checked += 1
    assert checked >= 20


def test_provisioning_files():
    dash = yaml.safe_load((PROVISIONING / "dashboards" / "kafka-health.yaml").read_text())
    assert dash["apiVersion"] == 1
    (provider,) = dash["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"].startswith("/")
    ds = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yaml").read_text())
    assert ds["apiVersion"] == 1
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus" and source["url"].startswith("http")


# ------------------------------------------------------------------------------------
# The validator catches what it claims to catch
# ------------------------------------------------------------------------------------
def _minimal_dashboard() -> dict:
    ds = dict(v.DATASOURCE_REF)
    return {
        "uid": "t", "title": "t", "schemaVersion": 39,
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus"},
            {"name": "cluster", "type": "query", "datasource": ds,
             "query": "label_values(kafka_health_brokers_reporting, cluster)"},
        ]},
        "panels": [
            {"id": 1, "type": "row", "title": "r", "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1},
             "panels": []},
            {"id": 2, "type": "stat", "title": "a", "description": "bad: > 0",
             "datasource": ds, "gridPos": {"x": 0, "y": 1, "w": 12, "h": 4},
             "fieldConfig": {"defaults": {"unit": "short", "thresholds": {
                 "steps": [{"color": "green", "value": None}]}}},
             "targets": [{"refId": "A", "datasource": ds,
                          "expr": 'sum by (cluster) (kafka_health_offline_partitions'
                                  '{cluster=~"$cluster"})'}]},
        ],
    }


def _broken(mutate: Callable[[dict], None]) -> list[str]:
    d = _minimal_dashboard()
    mutate(d)
    return v.validate_dashboard(d)


def test_minimal_dashboard_is_valid():
    assert v.validate_dashboard(_minimal_dashboard()) == []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["panels"][1].update(id=1), "already used"),
        (lambda d: d["panels"][0]["panels"].append(
            {**copy.deepcopy(d["panels"][1]), "gridPos": {"x": 0, "y": 9, "w": 1, "h": 1}}),
         "already used"),
        (lambda d: d["panels"][1]["gridPos"].update(y=0), "overlap"),
        (lambda d: d["panels"][1]["gridPos"].update(x=20), "> 24"),
        (lambda d: d["panels"][1]["gridPos"].update(w=0), "w/h must be > 0"),
        (lambda d: d["panels"][1].pop("gridPos"), "gridPos missing"),
        (lambda d: d["panels"][1].update(title="$nope"), "not a template variable"),
        (lambda d: d["panels"][1]["targets"][0].update(
            expr='kafka_health_partitions{broker=~"${broker}"}'), "not a template variable"),
        (lambda d: d["panels"][1].update(datasource={"type": "prometheus", "uid": "abc"}),
         "datasource"),
        (lambda d: d["panels"][1]["targets"][0].pop("datasource"), "target A: datasource"),
        (lambda d: d["panels"][1].pop("description"), "no description"),
        (lambda d: d["panels"][1]["targets"][0].update(expr="kafka_health_typo_total"),
         "not in exported_metrics.yaml"),
        (lambda d: d["panels"][1]["targets"][0].update(
            expr='kafka_health_offline_partitions{broker="1"}'), "has no label 'broker'"),
        (lambda d: d["panels"][1]["targets"][0].update(expr="rat(kafka_health_leaders[1m])"),
         "unknown PromQL function"),
        (lambda d: d["templating"]["list"].pop(0), "datasource"),
        (lambda d: d.update(schemaVersion=36), "schemaVersion"),
        (lambda d: d.update(annotations={"list": [
            {"name": "x", "expr": "kafka_health_leaders", "datasource": "Prometheus"}]}),
         "annotation 'x': datasource"),
        (lambda d: d["panels"][1].update(type="graph"), "type 'graph'"),
    ],
)
def test_validator_catches(mutate, expected):
    problems = _broken(mutate)
    assert any(expected in p for p in problems), problems


def test_invalid_json_is_reported(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    assert "not valid JSON" in v.validate_paths([bad])[str(bad)][0]


@pytest.mark.parametrize(
    ("expr", "metrics", "functions"),
    [
        ('sum by (cluster) (rate(kafka_health_pipeline_batches_total{instance=~"$i"}'
         "[$__rate_interval])) * 60", {"kafka_health_pipeline_batches_total"}, {"sum", "rate"}),
        ('kafka_health_partition_ceiling{bound="recovery", cluster=~"a|b"} > 0.2 and on '
         "(cluster, broker) kafka_health_leaders offset 5m",
         {"kafka_health_partition_ceiling", "kafka_health_leaders"}, set()),
        ("time() - max(last_over_time(x_y[1h])) or vector(1e9)", {"x_y"},
         {"time", "max", "last_over_time", "vector"}),
    ],
)
def test_promql_names(expr, metrics, functions):
    assert v.promql_names(expr) == (metrics, functions)


def test_substitute_formats_like_grafana(dashboards):
    broker_dash = next(d for d in dashboards if d["uid"] == "kafka-health-broker")
    text = 'x{cluster=~"$cluster",broker=~"${broker}"}[$__rate_interval]'
    out, unresolved = v.substitute(text, broker_dash, {"cluster": "a.b", "broker": ["1", "2"]})
    assert out == 'x{cluster=~"a.b",broker=~"(1|2)"}[1m]' and not unresolved
    out, _ = v.substitute(text, broker_dash, {"cluster": "c"})  # broker omitted: All
    assert 'broker=~".+"' in out
    out, unresolved = v.substitute("$nope", broker_dash, {})
    assert unresolved == {"nope"}


# ------------------------------------------------------------------------------------
# Real Prometheus scraping fake exporters
# ------------------------------------------------------------------------------------
BOUNDS = ["mmap", "file_descriptors", "recovery", "max_broker_partitions", "baseline"]
KINDS = ["under_min_isr", "offline_partitions", "unclean_election", "controller",
         "saturation", "stale_broker"]
REASONS = ["not_json", "nan_value"]
AUDIT_RULES = ["replication_factor_below_minimum", "unclean_leader_election_enabled"]
# Omitted by the quiet healthy cluster's exporter (see module docstring).
OPTIONAL_IN_HEALTHY = {
    "kafka_health_days_to_partition_ceiling",
    "kafka_health_open_incidents",
    "kafka_health_pipeline_quarantined_records_total",
    "kafka_health_pipeline_identity_defaulted_samples_total",
    # the Admin API poller's error class and cause brokers exist only while in trouble
    "kafka_health_metadata_error",
    "kafka_health_metadata_cause_broker_partitions",
    "kafka_health_metadata_cause_info",
    # the source's error class exists only while the metrics topics cannot be read
    "kafka_health_pipeline_source_error",
    # the probe's failures exist per error class only while writes fail; its loss and
    # duplicate counters, and a group's loss to retention, from their first count on
    "kafka_health_probe_writes_failed",
    "kafka_health_probe_lost_records_total",
    "kafka_health_probe_duplicate_records_total",
    "kafka_health_consumer_group_lost_to_retention_records_total",
}


def _value(metric: str, labels: dict[str, str], troubled: bool) -> float:
    broker = labels.get("broker", "")
    bad = troubled and broker == "1"
    table = {
        "kafka_health_under_min_isr_partitions": 2 if bad else 0,
        "kafka_health_at_min_isr_partitions": 3 if bad else 0,
        "kafka_health_under_replicated_partitions": 4 if bad else 0,
        "kafka_health_isr_shrinks_window_increase": 5 if bad else 0,
        "kafka_health_isr_expands_window_increase": 1 if bad else 0,
        "kafka_health_isr_churn_unmatched_shrinks": 4 if bad else 0,
        "kafka_health_unclean_leader_elections_window_increase": 1 if bad else 0,
        "kafka_health_request_queue_utilization_ratio": 0.9 if bad else 0.05,
        "kafka_health_response_queue_size": 12 if bad else 0,
        "kafka_health_request_handler_idle_ratio": 0.1 if bad else 0.85,
        "kafka_health_network_processor_idle_ratio": 0.15 if bad else 1.01,
        "kafka_health_partitions": 1800,
        "kafka_health_leaders": 600,
        "kafka_health_open_file_descriptors": 9000,
        "kafka_health_max_file_descriptors": 100000,
        "kafka_health_broker_stale": 0,
        "kafka_health_broker_last_sample_age_seconds": 4,
        "kafka_health_offline_partitions": 1 if troubled else 0,
        "kafka_health_active_controllers": 2 if troubled else 1,
        "kafka_health_brokers_reporting": 3,
        "kafka_health_offline_log_directories": 1 if bad else 0,
        "kafka_health_metadata_lag_milliseconds": 45000 if bad else 300,
        "kafka_health_metadata_errors_window_increase": 2 if bad else 0,
        "kafka_health_fenced_brokers": 1 if troubled else 0,
        "kafka_health_active_brokers": 2 if troubled else 3,
        "kafka_health_preferred_replica_imbalance": 4 if troubled else 0,
        "kafka_health_controller_elections_5m": 3 if troubled else 0,
        "kafka_health_elr_elections_window_increase": 1 if troubled else 0,
        "kafka_health_elr_enabled": 0 if troubled else 1,
        "kafka_health_cluster_last_sample_timestamp_seconds": time.time() - 5,
        "kafka_health_partition_ceiling": 2000 + 1000 * BOUNDS.index(labels.get("bound", "mmap")),
        "kafka_health_partition_headroom_ratio": 0.1,
        "kafka_health_partition_headroom": 200,
        "kafka_health_days_to_partition_ceiling": 40,
        "kafka_health_open_incidents": 1 if troubled else 0,
        "kafka_health_pipeline_up": 1,
        "kafka_health_pipeline_last_batch_timestamp_seconds": time.time(),
        "kafka_health_pipeline_batch_duration_seconds": 0.4,
        "kafka_health_pipeline_input_rows_per_second": 95000,
        "kafka_health_pipeline_source_lag_records": 1200,
        "kafka_health_pipeline_newest_event_timestamp_seconds": time.time() - 3,
        "kafka_health_pipeline_batches_total": 100,
        "kafka_health_pipeline_input_records_total": 1_000_000,
        "kafka_health_pipeline_quarantined_records_total": 7,
        "kafka_health_pipeline_identity_defaulted_samples_total": 5 if troubled else 0,
        "kafka_health_pipeline_dq_failures_total": 1 if troubled else 0,
        "kafka_health_pipeline_source_up": 0 if troubled else 1,
        "kafka_health_pipeline_source_partitions": 0 if troubled else 3,
        "kafka_health_pipeline_source_error": 1,
        "kafka_health_pipeline_source_data_loss_total": 1 if troubled else 0,
        "kafka_health_pipeline_alert_push_failures_total": 2 if troubled else 0,
        "kafka_health_pipeline_exported_series": 4200,
        "kafka_health_pipeline_series_dropped_total": 30 if troubled else 0,
        "kafka_health_metadata_up": 0 if troubled else 1,
        "kafka_health_metadata_last_success_timestamp_seconds": time.time() - 20,
        "kafka_health_metadata_error": 1,
        "kafka_health_durability_audit_findings": 2 if troubled else 0,
        "kafka_health_metadata_cause_broker_partitions": 4,
        "kafka_health_metadata_cause_info": 1,
        "kafka_health_pipeline_view_disagreements_total": 1 if troubled else 0,
        "kafka_health_probe_up": 1,
        "kafka_health_probe_pending_writes": 3,
        "kafka_health_probe_writes_attempted": 12,
        "kafka_health_probe_writes_acked": 6 if bad else 12,
        "kafka_health_probe_availability_ratio": 0.5 if bad else 1,
        "kafka_health_probe_ack_latency_p99_seconds": 2.5 if bad else 0.012,
        "kafka_health_probe_read_latency_p99_seconds": 2.6 if bad else 0.02,
        "kafka_health_probe_lost_records_total": 2,
        "kafka_health_probe_duplicate_records_total": 1,
        "kafka_health_probe_writes_failed": 6,
        "kafka_health_consumer_groups_up": 0 if troubled else 1,
        "kafka_health_consumer_group_partitions_left_out": 40 if troubled else 0,
        "kafka_health_consumer_group_lag_records": 5000 if troubled else 12,
        "kafka_health_consumer_group_lag_seconds": 900 if troubled else 1.5,
        "kafka_health_consumer_group_lost_to_retention_records_total": 1500,
        "kafka_health_consumer_group_status": 1,
    }
    return float(table[metric])


def _label_sets(labelnames: list[str], clusters: dict[str, list[str]]) -> list[dict[str, str]]:
    extra_values = {"bound": BOUNDS, "binding_bound": ["file_descriptors"], "kind": KINDS,
                    "reason": REASONS, "field": ["cluster"], "rule": AUDIT_RULES,
                    "error": ["unauthorized"], "leader": ["1"],
                    "cause": ["brokers 4 and 5 out of ISR"], "stale": ["metrics"],
                    "group": ["billing"], "topic": ["invoices"], "status": ["stalled"]}
    sets: list[dict[str, str]] = [{}]
    for name in labelnames:
        if name == "cluster":
            sets = [{**s, "cluster": c} for s in sets for c in clusters]
        elif name == "broker":
            sets = [{**s, "broker": b} for s in sets for b in clusters[s["cluster"]]]
        else:
            sets = [{**s, name: x} for s in sets for x in extra_values[name]]
    return sets


def build_registry(contract: v.Contract, clusters: dict[str, list[str]], *,
                   troubled: bool, healthy_quiet: bool) -> CollectorRegistry:
    """Every series of the contract (minus the optional ones when healthy_quiet)."""
    registry = CollectorRegistry()
    for metric, label_set in contract.labels.items():
        if healthy_quiet and metric in OPTIONAL_IN_HEALTHY:
            continue
        labelnames = [n for n in ("cluster", "broker") if n in label_set]
        labelnames += sorted(label_set - {"cluster", "broker"})
        doc = f"kafka-health test series {metric}"
        if contract.kinds[metric] == "counter":
            m = Counter(metric, doc, labelnames, registry=registry)
            for labels in _label_sets(labelnames, clusters):
                (m.labels(**labels) if labelnames else m).inc(_value(metric, labels, troubled))
        else:
            m = Gauge(metric, doc, labelnames, registry=registry)
            for labels in _label_sets(labelnames, clusters):
                (m.labels(**labels) if labelnames else m).set(_value(metric, labels, troubled))
    return registry


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def stack(contract, tmp_path_factory):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus not on PATH: run deploy/install-prometheus.sh "
                    "(or apt-get install -y prometheus)")
    servers = []
    try:
        full = build_registry(contract, {"alpha": ["1", "2", "3"], "beta": ["1", "2"]},
                              troubled=True, healthy_quiet=False)
        quiet = build_registry(contract, {"gamma": ["1", "2", "3"]},
                               troubled=False, healthy_quiet=True)
        targets = {}
        for name, registry in (("full", full), ("healthy", quiet)):
            server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
            servers.append((server, thread))
            targets[name] = f"127.0.0.1:{server.server_port}"

        prometheus, url = start_prometheus(tmp_path_factory.mktemp("prometheus"),
                                           sorted(targets.values()), None, rules=False)
        try:
            def scraped_enough() -> bool:
                names = set(_get_json(url + "/api/v1/label/__name__/values")["data"])
                if not set(contract.labels) <= names:
                    return False
                body = v.instant_query(
                    url, "count(count_over_time(kafka_health_pipeline_up[1m]) >= 3)")
                result = body.get("data", {}).get("result", [])
                return bool(result) and float(result[0]["value"][1]) == 2

            poll(scraped_enough, 60, "every contract series, 3 scrapes of both targets",
                 alive=prometheus.check)
            yield {"url": url, "targets": targets}
        finally:
            prometheus.stop()
    finally:
        for server, thread in servers:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


def _report(results: list[v.QueryResult], scenario: str, query_report: list[str]) -> None:
    query_report.append(f"{scenario}: " + v.summarize(results).splitlines()[0])


def _dump(results: list[v.QueryResult]) -> str:
    return "\n".join(str(r) for r in results if r.status != "ok")


def test_every_query_returns_data_when_every_series_exists(stack, query_report):
    results = v.run_panel_queries(
        stack["url"], DASHBOARD_FILES,
        {"cluster": "alpha", "broker": "1", "instance": stack["targets"]["full"]})
    _report(results, "full, single values", query_report)
    assert len(results) >= 100
    assert [r for r in results if r.status != "ok"] == [], _dump(results)


def test_multi_value_variables(stack, query_report):
    results = v.run_panel_queries(
        stack["url"], DASHBOARD_FILES,
        {"cluster": ["alpha", "beta"], "broker": ["1", "2"], "instance": "$__all"})
    _report(results, "full, multi values", query_report)
    assert [r for r in results if r.status != "ok"] == [], _dump(results)
    # both clusters come back where the query keeps the cluster label
    fleet_stat = next(r for r in results
                      if r.dashboard_uid == "kafka-health-fleet" and r.panel_id == 2)
    assert {s["cluster"] for s in fleet_stat.sample} == {"alpha", "beta"}


def test_quiet_healthy_cluster_only_listed_panels_are_empty(stack, query_report):
    results = v.run_panel_queries(
        stack["url"], DASHBOARD_FILES,
        {"cluster": "gamma", "broker": ["1", "2", "3"],
         "instance": stack["targets"]["healthy"]})
    _report(results, "healthy quiet cluster", query_report)
    assert [r for r in results if r.problem] == [], _dump(results)
    empty = {(r.dashboard_uid, r.panel_id, r.ref_id) for r in results if r.status == "empty"}
    # the exporter really omitted the optional series: the expectations are exercised
    allowed = {(e.dashboard_uid, e.panel_id) for e in v.load_expectations()}
    assert {(u, p) for u, p, _ in empty} == allowed


def test_paging_values_come_through(stack):
    """Spot-check values, not just presence: the troubled cluster pages, gamma does not."""
    q = 'max by (cluster) (kafka_health_active_controllers{cluster=~"alpha|gamma"})'
    body = v.instant_query(stack["url"], q)
    values = {r["metric"]["cluster"]: float(r["value"][1]) for r in body["data"]["result"]}
    assert values == {"alpha": 2.0, "gamma": 1.0}


def test_runner_reports_errors_and_empty_results(stack):
    dash = _minimal_dashboard()
    base = dash["panels"][1]
    dash["panels"].append({**copy.deepcopy(base), "id": 3, "title": "syntax",
                           "targets": [{**base["targets"][0], "expr": "sum(kafka_health_leaders"}]})
    dash["panels"].append({**copy.deepcopy(base), "id": 4, "title": "absent",
                           "targets": [{**base["targets"][0],
                                        "expr": "kafka_health_leaders{cluster=\"nowhere\"}"}]})
    dash["panels"].append({**copy.deepcopy(base), "id": 5, "title": "unresolved",
                           "targets": [{**base["targets"][0], "expr": "x{a=\"$missing\"}"}]})
    results = v.run_panel_queries(stack["url"], [dash], {"cluster": "alpha"}, expectations=[])
    by_panel = {r.panel_id: r for r in results}
    assert by_panel[None].status == "ok"  # the cluster variable's label_values
    assert by_panel[2].status == "ok" and by_panel[2].series == 1
    assert by_panel[3].status == "error" and "parse" in by_panel[3].error
    assert by_panel[4].status == "empty" and by_panel[4].problem
    assert by_panel[5].status == "error" and "missing" in by_panel[5].error
    allowed = [v.EmptyAllowed("t", 4, None, "test")]
    again = v.run_panel_queries(stack["url"], [dash], {"cluster": "alpha"},
                                expectations=allowed)
    assert not next(r for r in again if r.panel_id == 4).problem


def test_runner_reports_unreachable_prometheus():
    (r, *_) = v.run_panel_queries(f"http://127.0.0.1:{free_port()}", [_minimal_dashboard()],
                                  {"cluster": "alpha"}, expectations=[], timeout=2)
    assert r.status == "error" and r.error.startswith("connection")
