"""The catalog as data: every transport's names resolve, none is ambiguous, adding one is data."""

from __future__ import annotations

import copy

import pytest

from streaming.catalog import (
    Catalog,
    attribute_quantile,
    load_catalog,
    quantile_attribute,
)
from streaming.schemas import load_yaml


def test_every_metric_has_prometheus_names_and_valid_kinds():
    catalog = load_catalog()
    for metric in catalog.metrics.values():
        assert metric.kind in ("gauge", "meter", "timer", "counter")
        assert any(e.metric is metric for e in catalog.prometheus), metric.name


def test_counts_of_names():
    catalog = load_catalog()
    assert len({(e.name, e.match, e.quantile) for e in catalog.prometheus}) >= 70
    assert len(catalog.otel) >= 16
    assert len(catalog.telegraf) >= 20


@pytest.mark.parametrize("name,labels,expected", [
    ("kafka_server_replicamanager_isrshrinks_total", {}, ("IsrShrinksPerSec", "Count")),
    ("kafka_server_replicamanager_isrshrinkspersec", {}, ("IsrShrinksPerSec", "Count")),
    ("kafka_server_replicamanager_total_isrshrinkspersec_count", {},
     ("IsrShrinksPerSec", "Count")),
    ("kafka_server_replicamanager_count", {"name": "IsrShrinksPerSec"},
     ("IsrShrinksPerSec", "Count")),
    ("kafka_controller_kafkacontroller_offlinepartitionscount_value", {},
     ("OfflinePartitionsCount", "Value")),
    ("kafka_controller_controllerstats_uncleanleaderelections_total", {},
     ("UncleanLeaderElectionsPerSec", "Count")),
    ("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent", {},
     ("RequestHandlerAvgIdlePercent", "MeanRate")),
    ("kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_oneminuterate", {},
     ("RequestHandlerAvgIdlePercent", "OneMinuteRate")),
    ("kafka_network_socketserver_networkprocessoravgidle_percent", {},
     ("NetworkProcessorAvgIdlePercent", "Value")),
    ("kafka_network_requestmetrics_requestqueuetimems", {"quantile": "0.50"},
     ("RequestQueueTimeMs", "50thPercentile")),
    ("process_open_fds", {}, ("OpenFileDescriptorCount", "Value")),
])
def test_prometheus_lookup(name, labels, expected):
    metric, attribute, _ = load_catalog().from_prometheus(name, {**labels, "instance": "x"})
    assert (metric.name, attribute) == expected


def test_name_label_needs_its_matcher():
    catalog = load_catalog()
    assert catalog.from_prometheus("kafka_server_replicamanager_value", {}) is None
    assert catalog.from_prometheus("kafka_server_replicamanager_value",
                                   {"name": "FailedIsrUpdatesPerSec"}) is None
    assert catalog.from_prometheus("kafka_server_replicamanager_underminisrpartitioncount",
                                   {"quantile": "0.99"}) is None


def test_otel_and_telegraf_lookups():
    catalog = load_catalog()
    metric, attribute, consumed = catalog.from_otel("kafka.isr.operation.count",
                                                    {"operation": "shrink"})
    assert (metric.name, attribute, consumed) == ("IsrShrinksPerSec", "Count", ("operation",))
    assert catalog.from_otel("kafka.isr.operation.count", {}) is None
    assert catalog.from_otel("kafka.unclean.election.rate", {})[0].name == (
        "UncleanLeaderElectionsPerSec")
    assert catalog.from_otel("kafka.leaderElection.unclean.count", {})[0].name == (
        "UncleanLeaderElectionsPerSec")
    metric, attribute = catalog.from_telegraf("kafka_replica_manager",
                                              "UnderMinIsrPartitionCount.Value")
    assert (metric.name, attribute) == ("UnderMinIsrPartitionCount", "Value")
    assert catalog.from_telegraf("kafka_partition", "UnderReplicatedPartitions") is None


def test_otel_lacks_what_the_otel_kafka_target_lacks():
    names = {e.metric.name for e in load_catalog().otel}
    assert not names & {"UnderMinIsrPartitionCount", "RequestHandlerAvgIdlePercent",
                        "OpenFileDescriptorCount", "MaxFileDescriptorCount"}


def test_quantile_names_round_trip():
    for attribute in ("50thPercentile", "75thPercentile", "95thPercentile", "98thPercentile",
                      "99thPercentile", "999thPercentile"):
        assert quantile_attribute(attribute_quantile(attribute)) == attribute
    assert quantile_attribute("0.5") == "50thPercentile"
    assert quantile_attribute("1.5") is None and quantile_attribute("x") is None


def test_adding_a_name_is_a_data_change():
    data = copy.deepcopy(load_yaml("catalog.yaml"))
    data["metrics"]["UnderMinIsrPartitionCount"]["prometheus"].append(
        {"name": "my_underminisr", "labels": {"exporter": "mine"}, "attribute": "Value"})
    data["metrics"]["RequestQueueSize"]["telegraf"].append(
        {"measurement": "kafka_network", "field": "RequestQueueSize.Value", "attribute": "Value"})
    catalog = Catalog(data)
    assert catalog.from_prometheus("my_underminisr", {"exporter": "mine"})[0].name == (
        "UnderMinIsrPartitionCount")
    assert catalog.from_telegraf("kafka_network", "RequestQueueSize.Value")[0].name == (
        "RequestQueueSize")


def test_a_name_with_two_meanings_fails_at_load():
    data = copy.deepcopy(load_yaml("catalog.yaml"))
    data["metrics"]["LeaderCount"]["prometheus"].append(
        {"name": "kafka_server_replicamanager_partitioncount", "attribute": "Value"})
    with pytest.raises(ValueError, match="means both"):
        Catalog(data)


def test_original_keys_are_kept():
    data = load_yaml("catalog.yaml")
    for spec in data["metrics"].values():
        assert {"kind", "unit", "scope", "description", "jmx"} <= set(spec)
