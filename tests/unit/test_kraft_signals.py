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
from streaming.signals.cluster import cluster_signals

NODES = json.loads((Path(__file__).parent.parent / "fixtures" /
                    "kafka_4_4_kraft_beans.json").read_text())["nodes"]
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CONTROLLER = "kafka.controller:type=KafkaController,name="
STATS = "kafka.controller:type=ControllerStats,name="
BROKER_METADATA = "kafka.server:type=broker-metadata-metrics"
LOG_DIRS = "kafka.log:type=LogManager,name=OfflineLogDirectoryCount"


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
    assert brokers[("4", 0)]["fenced_brokers_max"] is None
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
