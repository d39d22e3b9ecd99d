"""Identity from the common shippers' own labels, from record headers, and never silently
from a default: a sample whose cluster fell back to `identity.default_cluster` is flagged
(`cluster_defaulted`), counted on the exporter and warned about, naming its topic."""

from __future__ import annotations

import logging

import orjson
import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from streaming.config import IdentityConfig
from streaming.decode.records import DecodeContext, decode_record_batch
from streaming.exporter import Exporter
from streaming.schemas import arrow_schema

T0 = 1772366400
UMI = "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def prometheus(labels: dict[str, str]) -> bytes:
    return orjson.dumps({"timestamp": "2026-03-01T12:00:00Z", "value": "1", "labels": labels,
                         "name": "kafka_server_replicamanager_underminisrpartitioncount"})


def telegraf(tags: dict[str, str]) -> bytes:
    return orjson.dumps({"name": "kafka_replica_manager", "tags": tags, "timestamp": T0,
                         "fields": {"UnderMinIsrPartitionCount.Value": 0}})


def otlp(attributes: dict[str, str]) -> bytes:
    return orjson.dumps({"resourceMetrics": [{
        "resource": {"attributes": [{"key": k, "value": {"stringValue": v}}
                                    for k, v in attributes.items()]},
        "scopeMetrics": [{"metrics": [{"name": "kafka.unknown.gauge", "gauge": {"dataPoints": [
            {"timeUnixNano": str(T0 * 10**9), "asDouble": 1.0}]}}]}],
    }]})


def jolokia(url: str | None = None) -> bytes:
    request = {"mbean": UMI, "attribute": "Value", "type": "read"}
    if url:
        request["target"] = {"url": url}
    return orjson.dumps({"request": request, "value": 1, "status": 200, "timestamp": T0})


def records(values: list[bytes], keys: list[bytes | None] | None = None,
            headers: list[list[tuple[str, bytes]] | None] | None = None,
            topic: str = "kafka-metrics") -> pa.RecordBatch:
    n = len(values)
    stamp = pa.array([T0 * 1_000_000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    batch = pa.RecordBatch.from_pydict({
        "key": keys or [None] * n, "value": values, "topic": [topic] * n,
        "partition": [0] * n, "offset": list(range(n)), "timestamp": stamp,
        "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))
    if headers is not None:
        column = pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                           for h in headers], HEADERS)
        batch = batch.append_column("headers", column)
    return batch


def identities(batch: pa.RecordBatch, ctx: DecodeContext | None = None,
               columnar: bool = True) -> list[tuple]:
    out = decode_record_batch(batch, ctx or DecodeContext(), columnar=columnar)
    reasons = [r for r in out.column("reject_reason").to_pylist() if r]
    assert not reasons, reasons
    return list(zip(out.column("cluster").to_pylist(), out.column("broker").to_pylist(),
                    out.column("cluster_defaulted").to_pylist(), strict=True))


def test_strimzi_labelled_adapter_records_resolve_to_their_cluster_and_broker():
    """Strimzi's PodMonitor: `instance` is the pod IP (10.244.0.17 read as broker 10)."""
    base = {"instance": "10.244.0.17:9404", "kubernetes_namespace": "kafka", "job": "kafka"}
    batch = records([
        prometheus({**base, "strimzi_io_cluster": "my-cluster",
                    "strimzi_io_pod_name": "my-cluster-kafka-0"}),
        prometheus({**base, "strimzi_io_cluster": "my-cluster",
                    "kubernetes_pod_name": "my-cluster-broker-3"}),
    ])
    assert identities(batch) == [("my-cluster", "0", False), ("my-cluster", "3", False)]


def test_confluent_hostname_label_names_the_broker():
    """Confluent's jmx-monitoring-stacks relabel the target host into `hostname`."""
    batch = records([prometheus({"instance": "10.0.0.7:1234", "hostname": "kafka2",
                                 "env": "dev"})])
    assert identities(batch) == [("default", "2", True)]


def test_telegraf_takes_the_broker_from_the_agent_url_not_its_own_host():
    """One central Telegraf polling every broker: `host` names the Telegraf machine."""
    batch = records([
        telegraf({"host": "telegraf-7", "jolokia_agent_url": "http://kafka-1:8778/jolokia",
                  "cluster": "prod"}),
        telegraf({"host": "telegraf-7", "jolokia_agent_url": "http://kafka-2:8778/jolokia",
                  "cluster": "prod"}),
    ])
    assert identities(batch) == [("prod", "1", False), ("prod", "2", False)]


def test_a_telegraf_beside_each_broker_polls_localhost_and_its_host_names_the_broker():
    batch = records([telegraf({"host": "kafka-3", "cluster": "prod",
                               "jolokia_agent_url": "http://localhost:8778/jolokia"}),
                     telegraf({"host": "kafka-4", "cluster": "prod",
                               "jolokia_agent_url": "http://127.0.0.1:8778/jolokia"})])
    assert identities(batch) == [("prod", "3", False), ("prod", "4", False)]


def test_otlp_resource_attributes_name_cluster_and_broker():
    batch = records([otlp({"kafka.cluster.alias": "prod", "host.name": "kafka-4"}),
                     otlp({"service.instance.id": "kafka-5:9999"})])
    assert identities(batch) == [("prod", "4", False), ("default", "5", True)]


def test_otlp_service_instance_id_as_a_uuid_names_no_broker_and_host_name_does():
    """OpenTelemetry's Java agent sets service.instance.id to a random UUID, new at every
    start, and a container's host name is its id: their digits (a UUID ending in 9 would be
    broker 9) must not name the broker."""
    out = decode_record_batch(records([
        otlp({"service.instance.id": "5f3c9a2e-0b7d-4c1e-9a55-2d9e1b7c4a09",
              "host.name": "kafka-4"}),
        otlp({"service.instance.id": "5F3C9A2E-0B7D-4C1E-9A55-2D9E1B7C4A10"}),
        otlp({"host.name": "a1b2c3d4e5f6"})]),
        DecodeContext()).to_pylist()
    assert [row["broker"] for row in out] == ["4", None, None]
    assert [(row["reject_reason"] or "").split(":")[0] for row in out] == [
        "", "no_broker_identity", "no_broker_identity"]


def test_record_headers_name_cluster_and_broker_in_both_decode_paths():
    headers = [[("cluster", b"east"), ("broker", b"7")], [("cluster", b"west")], None]
    values = [jolokia(), jolokia("http://kafka-3:8778/jolokia"), jolokia()]
    batch = records(values, keys=[None, None, b"9"], headers=headers)
    expected = [("east", "7", False), ("west", "3", False), ("default", "9", True)]
    assert identities(batch, columnar=True) == expected
    assert identities(batch, columnar=False) == expected
    adapter = records([prometheus({"instance": "x"})], headers=[[("cluster", b"c"),
                                                                  ("broker", b"2")]])
    assert identities(adapter) == [("c", "2", False)]


def test_headers_come_after_labels_and_before_the_record_key():
    batch = records([prometheus({"cluster": "from-label", "broker": "1"}), prometheus({})],
                    keys=[b"k/8", b"k/8"],
                    headers=[[("cluster", b"h"), ("broker", b"5")]] * 2)
    assert identities(batch) == [("from-label", "1", False), ("h", "5", False)]


def test_a_per_topic_cluster_is_configuration_not_a_default():
    ctx = DecodeContext(topic_clusters={"kafka-metrics": "prod"})
    assert identities(records([jolokia()], keys=[b"1"]), ctx) == [("prod", "1", False)]


def test_strimzi_cluster_is_among_the_default_cluster_labels():
    assert "strimzi_io_cluster" in IdentityConfig().cluster_labels
    labels = IdentityConfig().instance_labels
    assert labels.index("jolokia_agent_url") < labels.index("host")


def test_defaulted_samples_are_counted_per_field_and_warned_about_per_topic(caplog):
    from streaming.pipeline.identity_warning import DefaultedIdentity

    registry = CollectorRegistry()
    exporter = Exporter(registry)
    now = [1000.0]
    report = DefaultedIdentity(warn_every_seconds=300.0, clock=lambda: now[0])
    decoded = pa.concat_tables([
        pa.Table.from_batches([decode_record_batch(
            records([jolokia(), jolokia()], keys=[b"1", b"prod/2"]), DecodeContext())]),
        pa.Table.from_batches([decode_record_batch(
            records([telegraf({"host": "kafka-3"})], topic="telegraf-metrics"),
            DecodeContext())]),
    ])
    with caplog.at_level(logging.WARNING, logger="kafka_health.job"):
        report(decoded, exporter)
        now[0] = 1001.0
        report(decoded, exporter)  # counted again, not warned again
    value = registry.get_sample_value("kafka_health_pipeline_identity_defaulted_samples_total",
                                      {"field": "cluster"})
    assert value == 4.0
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings
    assert any("'kafka-metrics'" in w and "cluster" in w for w in warnings)
    assert any("'telegraf-metrics'" in w for w in warnings)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kafka_health.job"):
        now[0] = 1400.0
        report(decoded, exporter)
    assert len(caplog.records) == 2


def test_the_python_source_carries_record_headers_to_the_decoder():
    from confluent_kafka import TIMESTAMP_CREATE_TIME, Message

    from streaming.source.ranges import KafkaRange
    from streaming.source.records import records_batch

    def consumed(offset: int, headers: list[tuple[str, bytes | None]] | None) -> Message:
        return Message(topic="kafka-metrics", partition=0, offset=offset, value=jolokia(),
                       timestamp=(TIMESTAMP_CREATE_TIME, T0 * 1000), headers=headers)

    messages = [consumed(0, [("cluster", b"east"), ("broker", b"4"), ("trace", None)]),
                consumed(1, None)]
    batch, _ = records_batch(messages, KafkaRange("kafka-metrics", 0, 0, 2), 0)
    assert batch.schema.field("headers").type == HEADERS
    assert identities(batch.slice(0, 1)) == [("east", "4", False)]
    decoded = decode_record_batch(batch, DecodeContext())
    assert decoded.column("reject_reason").to_pylist()[1].startswith("no_broker_identity")
    bare, _ = records_batch([consumed(0, None)], KafkaRange("kafka-metrics", 0, 0, 1), 0)
    assert bare.column("headers").null_count == 1


@pytest.mark.parametrize("columnar", [True, False])
def test_a_partitioning_key_names_no_broker_and_the_payload_does(columnar: bool) -> None:
    """Shippers key records to partition them: Telegraf's routing_tag (a central Telegraf's
    own host), routing_key "random" (a UUID), the OpenTelemetry Collector's hash of the
    resource (raw bytes). Read as a broker, each would move every sample to a broker of that
    name; a key names a broker only as its id, "cluster/3" or "3"."""
    central = telegraf({"host": "telegraf-central",
                        "jolokia_agent_url": "http://kafka-2.kafka.svc:8778/jolokia"})
    batch = records([central, central, jolokia("http://kafka-4:8778/jolokia"),
                     otlp({"host.name": "kafka-5"}), jolokia(), jolokia()],
                    keys=[b"telegraf-central", b"4f3c2a1e-7b9d-4c1e-9a55-2d9e1b7c4a01",
                          b"prod/kafka-4", bytes(range(200, 216)), b"east/3", b"7"])
    assert identities(batch, columnar=columnar) == [
        ("default", "2", True), ("default", "2", True), ("default", "4", True),
        ("default", "5", True), ("east", "3", False), ("default", "7", True)]


def test_the_earlier_default_key_pattern_in_a_config_means_the_default() -> None:
    from streaming.config import DEFAULT_KEY_PATTERN, EARLIER_DEFAULT_KEY_PATTERN

    identity = IdentityConfig(key_pattern=EARLIER_DEFAULT_KEY_PATTERN)
    assert identity.key_pattern == DEFAULT_KEY_PATTERN


@pytest.mark.parametrize("columnar", [True, False])
def test_a_padded_broker_id_is_the_broker_kafka_names(columnar: bool) -> None:
    """A fleet's hosts kafka01, kafka02 and a label " 3" name brokers 1, 2 and 3, as the
    Admin API does, so an incident finds its causes; a broker name that is no id stays."""
    batch = records([jolokia("http://kafka01.example.com:8778/jolokia"),
                     prometheus({"hostname": "kafka02"}), prometheus({"broker": " 3"}),
                     prometheus({"broker": "000"}), prometheus({"broker": "kafka-east-a"}),
                     prometheus({"broker": "\u0661"})])
    assert [broker for _, broker, _ in identities(batch, columnar=columnar)] == [
        "1", "2", "3", "0", "kafka-east-a", "\u0661"]


@pytest.mark.parametrize("columnar", [True, False])
def test_a_batch_no_kafka_source_writes_does_not_stop_the_decoder(columnar: bool) -> None:
    """A null header in a record's list and a record without a topic: neither Kafka nor
    Spark writes them, and each still ends as a row, not as an exception."""
    batch = records([jolokia(), jolokia(), jolokia()], keys=[b"3", b"4", b"5"],
                    headers=[[("cluster", b"east")], None, None])
    column = pa.array([[{"key": "cluster", "value": b"east"}, None], None, None], HEADERS)
    batch = batch.set_column(batch.schema.get_field_index("headers"), "headers", column)
    topic = pa.array(["kafka-metrics", None, "kafka-metrics"], pa.string())
    batch = batch.set_column(batch.schema.get_field_index("topic"), "topic", topic)
    out = decode_record_batch(batch, DecodeContext(), columnar=columnar)
    assert sorted(out.column("source_offset").to_pylist()) == [0, 1, 2]
    assert out.column("cluster").to_pylist()[0] == "east"
