"""The KRaft beans as real Kafka 4.4 nodes expose them, decoded through the catalog.

tests/fixtures/kafka_4_4_kraft_beans.json was read from the test bed (a combined
broker+controller node and a broker-only node) through each node's Jolokia agent and its
jmx_exporter agent under the test bed's rules (Strimzi's naming): the names here are the
brokers' own, not written by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from streaming.catalog import load_catalog
from streaming.decode import jolokia, prometheus

FIXTURE = json.loads((Path(__file__).parent.parent / "fixtures" /
                      "kafka_4_4_kraft_beans.json").read_text())
NODES = FIXTURE["nodes"]
LINE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>[^}]*)\})? (?P<value>\S+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')
# Catalog metrics of the KRaft controller, on controller nodes only
CONTROLLER_METRICS = {"FencedBrokerCount", "ActiveBrokerCount", "TimedOutBrokerHeartbeatCount",
                      "NewActiveControllersCount", "LastAppliedRecordLagMs",
                      "MetadataErrorCount", "PreferredReplicaImbalanceCount",
                      "ElectionFromEligibleLeaderReplicasPerSec"}
# ... and of every broker
BROKER_METRICS = {"BrokerMetadataLastAppliedRecordLagMs", "BrokerMetadataLoadErrorCount",
                  "BrokerMetadataApplyErrorCount", "OfflineLogDirectoryCount", "FinalizedLevel",
                  "EligibleLeaderReplicasVersion", "FinalizedMetadataVersion"}
COUNTERS = {"TimedOutBrokerHeartbeatCount", "NewActiveControllersCount", "MetadataErrorCount",
            "BrokerMetadataLoadErrorCount", "BrokerMetadataApplyErrorCount"}


def jolokia_doc(node: dict) -> list[dict]:
    """The node's recorded beans as a Jolokia bulk read answer."""
    return [{"request": {"type": "read", "mbean": bean}, "value": attributes, "status": 200,
             "timestamp": 1796526244}
            for bean, attributes in node["jolokia"].items() if attributes is not None]


def adapter_doc(node: dict) -> list[dict]:
    """The node's recorded jmx_exporter lines as prometheus-kafka-adapter samples."""
    out = []
    for line in node["jmx_exporter"]:
        match = LINE.match(line)
        assert match, line
        labels = dict(LABEL.findall(match["labels"] or ""))
        out.append({"name": match["name"], "labels": {**labels, "cluster": "c", "broker": "1"},
                    "value": match["value"], "timestamp": "2026-12-06T03:04:04Z"})
    return out


def decoded(role: str, fmt: str) -> dict[str, tuple[str, str, dict[str, str]]]:
    node = NODES[role]
    if fmt == "jolokia":
        observations, _ = jolokia.decode(jolokia_doc(node), load_catalog())
    else:
        observations, _ = prometheus.decode(adapter_doc(node), load_catalog())
    return {o.metric: (o.attribute, o.kind, dict(o.labels)) for o in observations if o.metric}


@pytest.mark.parametrize("fmt", ["jolokia", "prometheus"])
def test_a_controller_node_reports_every_kraft_metric(fmt):
    found = decoded("broker,controller", fmt)
    assert set(found) >= CONTROLLER_METRICS | BROKER_METRICS
    for metric in COUNTERS:
        assert found[metric][1] == "counter", metric
    assert found["ElectionFromEligibleLeaderReplicasPerSec"][:2] == ("Count", "counter")
    assert found["FencedBrokerCount"][:2] == ("Value", "gauge")
    assert found["OfflineLogDirectoryCount"][:2] == ("Value", "gauge")


@pytest.mark.parametrize("fmt", ["jolokia", "prometheus"])
def test_a_broker_only_node_has_no_controller_beans(fmt):
    """A broker-only node publishes no kafka.controller bean: its controller-scope signals
    are absent (null), never 0."""
    found = decoded("broker", fmt)
    assert set(found) >= BROKER_METRICS
    assert not CONTROLLER_METRICS & set(found)


@pytest.mark.parametrize("fmt", ["jolokia", "prometheus"])
def test_the_elr_and_metadata_levels_are_metrics_of_their_own_the_others_keep_labels(fmt):
    """The ELR feature's FinalizedLevel series is EligibleLeaderReplicasVersion and
    metadata.version's FinalizedMetadataVersion, without the label that named them (in both
    formats alike); the other features stay FinalizedLevel, told apart by their label."""
    node = NODES["broker"]
    observations, _ = (jolokia.decode(jolokia_doc(node), load_catalog()) if fmt == "jolokia"
                       else prometheus.decode(adapter_doc(node), load_catalog()))
    features = {o.labels.get("featureName") for o in observations if o.metric == "FinalizedLevel"}
    assert features == {"groupVersion", "shareVersion", "streamsVersion", "transactionVersion"}
    for metric, value in (("EligibleLeaderReplicasVersion", 1.0),
                          ("FinalizedMetadataVersion", 33.0)):
        found = [o for o in observations if o.metric == metric]
        assert [(o.attribute, o.kind, o.value) for o in found] == [("Value", "gauge", value)]
        assert "featureName" not in found[0].labels


def test_every_recorded_kraft_name_is_in_the_catalog_and_nothing_else_is_claimed():
    """Each catalog name of the test bed's scheme for these metrics is one the brokers wrote."""
    catalog = load_catalog()
    written = {LINE.match(line)["name"] for node in NODES.values()
               for line in node["jmx_exporter"]}
    for entry in catalog.prometheus:
        if entry.metric.name in CONTROLLER_METRICS | BROKER_METRICS and "strimzi" in entry.tags:
            assert entry.name in written, entry.name
    beans = {bean.split(",*")[0] for node in NODES.values() for bean in node["jolokia"]}
    for name in CONTROLLER_METRICS | BROKER_METRICS:
        mbean = catalog.metrics[name].jmx_mbean
        assert any(b == mbean or b.startswith(mbean + ",") for b in beans), mbean
