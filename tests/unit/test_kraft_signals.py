"""KRaft signals from real Kafka 4.4 scrapes: the recorded Jolokia answers of a combined and
a broker-only node (tests/fixtures/kafka_4_4_kraft_beans.json), decoded by the job's own
decoder, with the values a fault would move changed scrape by scrape."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from streaming.catalog import load_catalog
from streaming.config import SignalsConfig
from streaming.decode import jolokia
from streaming.schemas import arrow_schema
from streaming.signals.broker import broker_signals
from streaming.signals.cluster import CHURN_SPAN, cluster_signals
from streaming.signals.incidents import (
    CHURN_ELECTIONS,
    METADATA_LAG_LIMIT_MS,
    incident_conditions,
    incident_runs,
)

NODES = json.loads((Path(__file__).parent.parent / "fixtures" /
                    "kafka_4_4_kraft_beans.json").read_text())["nodes"]
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CONTROLLER = "kafka.controller:type=KafkaController,name="
STATS = "kafka.controller:type=ControllerStats,name="
BROKER_METADATA = "kafka.server:type=broker-metadata-metrics"
LOG_DIRS = "kafka.log:type=LogManager,name=OfflineLogDirectoryCount"
ELR_LEVEL = "kafka.server:type=MetadataLoader,name=FinalizedLevel,featureName=eligibleLeaderReplicasVersion"


def scrape(role: str, broker: str, at: float, changes: dict[tuple[str, str], float]
           ) -> list[dict]:
    """Bronze rows of one recorded scrape of a `role` node, as broker `broker`, `at`
    seconds after START, with (bean, attribute) values replaced by `changes`."""
    beans = copy.deepcopy(NODES[role]["jolokia"])
    for (bean, attribute), value in changes.items():
        beans[bean][attribute] = value
    doc = [{"request": {"type": "read", "mbean": bean}, "value": attrs, "status": 200}
           for bean, attrs in beans.items() if attrs is not None]
    observations, _ = jolokia.decode(doc, load_catalog())
    ts = START + timedelta(seconds=at)
    return [{"ts": ts, "cluster": "c", "broker": broker, "metric": o.metric,
             "attribute": o.attribute, "labels": dict(o.labels), "value": o.value,
             "kind": o.kind, "date": ts.strftime("%Y-%m-%d")}
            for o in observations if o.metric]


def signals(scrapes: list[list[dict]]) -> tuple[dict[tuple[str, int], dict], list[dict]]:
    schema = arrow_schema("bronze")
    rows = [{name: None for name in schema.names} | row | {"source_offset": i}
            for i, row in enumerate(r for s in scrapes for r in s)]
    brokers = broker_signals(pa.Table.from_pylist(rows, schema=schema), SignalsConfig())
    by_window = {(r["broker"], int((r["window_start"] - START).total_seconds() // 60)): r
                 for r in brokers.to_pylist()}
    return by_window, cluster_signals(brokers).to_pylist()


def test_the_fenced_count_is_the_active_controllers_and_absent_on_broker_only_nodes():
    active = {(CONTROLLER + "ActiveControllerCount", "Value"): 1.0}
    behind = {(CONTROLLER + "FencedBrokerCount", "Value"): 2.0}  # a standby's stale view
    fenced = {(CONTROLLER + "FencedBrokerCount", "Value"): 1.0,
              (CONTROLLER + "ActiveBrokerCount", "Value"): 4.0}
    brokers, clusters = signals([
        scrape("broker,controller", "1", 5, active | fenced),
        scrape("broker,controller", "2", 5, behind),
        scrape("broker", "4", 5, {}),
    ])
    assert brokers[("4", 0)]["fenced_brokers_last"] is None
    assert brokers[("4", 0)]["offline_log_dirs_max"] == 0.0
    assert clusters[0]["fenced_brokers"] == 1.0
    assert clusters[0]["active_brokers"] == 4.0


def test_offline_log_directories_and_metadata_errors_per_broker():
    brokers, clusters = signals([
        scrape("broker", "4", 5, {}),
        scrape("broker", "4", 20, {(LOG_DIRS, "Value"): 1.0,
                                   (BROKER_METADATA, "metadata-apply-error-count"): 2.0,
                                   (BROKER_METADATA, "last-applied-record-lag-ms"): 45000.0}),
        scrape("broker,controller", "1", 5, {}),
        scrape("broker,controller", "1", 20, {(CONTROLLER + "MetadataErrorCount", "Value"): 1.0}),
    ])
    assert brokers[("4", 0)]["offline_log_dirs_max"] == 1.0
    assert brokers[("4", 0)]["metadata_errors_increase"] == 2.0
    assert brokers[("4", 0)]["metadata_lag_ms_max"] == 45000.0
    assert brokers[("1", 0)]["metadata_errors_increase"] == 1.0
    assert clusters[0]["offline_log_dirs_total"] == 1.0
    assert clusters[0]["metadata_errors_increase"] == 3.0


def test_elections_every_controller_counts_are_counted_once_and_elr_apart_from_unclean():
    elr = STATS + "ElectionFromEligibleLeaderReplicasPerSec"
    elected = CONTROLLER + "NewActiveControllersCount"
    scrapes = []
    for broker in ("1", "2", "3"):
        scrapes.append(scrape("broker,controller", broker, 5, {}))
        scrapes.append(scrape("broker,controller", broker, 20,
                              {(elr, "Count"): 1.0, (elected, "Value"): 2.0}))
    brokers, clusters = signals(scrapes)
    assert {brokers[(b, 0)]["elr_elections_increase"] for b in ("1", "2", "3")} == {1.0}
    assert clusters[0]["elr_elections_increase"] == 1.0
    assert clusters[0]["unclean_elections_increase"] == 0.0
    assert clusters[0]["controller_elections_increase"] == 1.0
    assert clusters[0]["controller_elections_5m"] == 1.0


def test_elr_is_enabled_where_the_nodes_report_the_feature_at_level_one():
    """Recorded 4.4 nodes report eligibleLeaderReplicasVersion 1 beside metadataVersion 33.
    With ELR off Kafka publishes no level for the feature (a level 0 is not finalized), so
    nodes publishing metadataVersion's alone say off; nodes publishing no feature level
    (ZooKeeper mode, or not shipped) say nothing."""
    brokers, clusters = signals([scrape("broker,controller", "1", 5, {}),
                                 scrape("broker", "4", 5, {})])
    assert brokers[("1", 0)]["elr_version_last"] == 1.0
    assert brokers[("4", 0)]["metadata_version_last"] == 33.0
    assert clusters[0]["elr_enabled"] == 1.0
    _, clusters = signals([scrape("broker,controller", "1", 5, {(ELR_LEVEL, "Value"): 0.0})])
    assert clusters[0]["elr_enabled"] == 0.0
    unpublished = [row for row in scrape("broker", "4", 5, {})
                   if row["metric"] != "EligibleLeaderReplicasVersion"]
    brokers, clusters = signals([unpublished])
    assert brokers[("4", 0)]["elr_version_last"] is None
    assert clusters[0]["elr_enabled"] == 0.0
    no_levels = [row for row in unpublished if row["metric"] != "FinalizedMetadataVersion"]
    _, clusters = signals([no_levels])
    assert clusters[0]["elr_enabled"] is None


def test_controller_churn_sums_the_elections_of_the_last_five_minutes():
    elected = CONTROLLER + "NewActiveControllersCount"
    scrapes = [scrape("broker,controller", "1", 5 + 60 * minute, {(elected, "Value"): count})
               for minute, count in enumerate([1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 4.0, 4.0])]
    _, clusters = signals(scrapes)
    churn = [row["controller_elections_5m"] for row in sorted(clusters,
                                                               key=lambda r: r["window_start"])]
    # elections in minutes 1, 3 and 4 (minute 0 has no earlier sample to compare with),
    # each counted in the windows that start less than 5 minutes after it
    assert churn == [0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 2.0, 2.0, 1.0]


def test_a_counter_gauge_reset_by_a_restart_counts_from_zero():
    elected = CONTROLLER + "NewActiveControllersCount"
    brokers, _ = signals([
        scrape("broker,controller", "1", 5, {(elected, "Value"): 5.0}),
        scrape("broker,controller", "1", 35, {(elected, "Value"): 1.0}),  # restarted
    ])
    assert brokers[("1", 0)]["controller_elections_increase"] == 1.0


def incidents(scrapes: list[list[dict]]) -> list[dict]:
    schema = arrow_schema("bronze")
    rows = [{name: None for name in schema.names} | row | {"source_offset": i}
            for i, row in enumerate(r for s in scrapes for r in s)]
    config = SignalsConfig()
    brokers = broker_signals(pa.Table.from_pylist(rows, schema=schema), config)
    conditions = incident_conditions(brokers, cluster_signals(brokers), config)
    return incident_runs(conditions).to_pylist()


def healthy_minute(minute: int, changes: dict[str, dict[tuple[str, str], float]]
                   ) -> list[list[dict]]:
    """One scrape a node every 15 s for a minute: nodes 1-3 combined (1 the active
    controller), 4 broker only; `changes` per broker id."""
    out = []
    for second in range(0, 60, 15):
        at = 60 * minute + second
        for broker, role in (("1", "broker,controller"), ("2", "broker,controller"),
                             ("3", "broker,controller"), ("4", "broker")):
            extra = {(CONTROLLER + "ActiveControllerCount", "Value"): 1.0} if broker == "1" else {}
            out.append(scrape(role, broker, at, extra | changes.get(broker, {})))
    return out


def test_healthy_recorded_nodes_open_no_kraft_incident():
    found = incidents([s for minute in range(4) for s in healthy_minute(minute, {})])
    assert [i["kind"] for i in found] == []


def test_each_kraft_fault_opens_its_own_incident_kind():
    fenced = {(CONTROLLER + "FencedBrokerCount", "Value"): 1.0}
    scrapes = [s for s in healthy_minute(0, {})]
    scrapes += healthy_minute(1, {
        "1": fenced | {(STATS + "ElectionFromEligibleLeaderReplicasPerSec", "Count"): 1.0},
        "2": {(STATS + "ElectionFromEligibleLeaderReplicasPerSec", "Count"): 1.0},
        "4": {(LOG_DIRS, "Value"): 1.0,
              (BROKER_METADATA, "last-applied-record-lag-ms"): METADATA_LAG_LIMIT_MS + 1}})
    scrapes += healthy_minute(2, {"1": {(STATS + "ElectionFromEligibleLeaderReplicasPerSec",
                                         "Count"): 1.0},
                                  "2": {(STATS + "ElectionFromEligibleLeaderReplicasPerSec",
                                         "Count"): 1.0}})
    found = {(i["kind"], i["broker"]): i for i in incidents(scrapes)}
    assert set(found) == {("fenced_broker", "*"), ("elr_election", "*"),
                          ("offline_log_dir", "4"), ("metadata", "4")}
    assert found[("fenced_broker", "*")]["opened_by"] == "fenced_brokers"
    assert found[("metadata", "4")]["opened_by"] == "metadata_lag_ms_max"
    assert found[("elr_election", "*")]["peak_value"] == 1.0
    assert all(i["resolved_at"] is not None for i in found.values())


def test_a_fenced_broker_that_is_also_silent_is_not_a_fenced_broker_incident():
    """Fenced and stale alike (a dead broker): the stale-broker incident speaks for it."""
    fenced = {(CONTROLLER + "FencedBrokerCount", "Value"): 1.0}
    scrapes = []
    for minute in range(6):
        scrapes += [s for s in healthy_minute(minute, {"1": fenced} if minute >= 2 else {})
                    if minute < 2 or s[0]["broker"] != "3"]
    kinds = {(i["kind"], i["broker"]) for i in incidents(scrapes)}
    assert ("stale_broker", "3") in kinds
    assert ("fenced_broker", "*") not in kinds


def test_the_rules_read_the_incidents_thresholds():
    """One definition: the alert rules compare with the limits the incidents use."""
    rules = _rules()
    assert f"> {METADATA_LAG_LIMIT_MS:.0f}" in rules["KafkaBrokerMetadataUnhealthy"]
    assert f">= {CHURN_ELECTIONS:.0f}" in rules["KafkaControllerChurn"]
    assert timedelta(minutes=5) == CHURN_SPAN
    assert "controller_elections_5m" in rules["KafkaControllerChurn"]


def _rules() -> dict[str, str]:
    import yaml

    path = Path(__file__).parents[2] / "alerts" / "kafka-health.rules.yml"
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {r["alert"]: r["expr"] for g in document["groups"] for r in g["rules"] if "alert" in r}
