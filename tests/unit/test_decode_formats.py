"""Every transport decodes to the same canonical samples as Jolokia, for what it carries.

The simulator's encoders write one model state in each format (and each Prometheus naming
scheme); decode_record_batch must give the same (metric, attribute, labels, value, cluster,
broker, ts) as the Jolokia encoding of that state, restricted to the (metric, attribute)
pairs the catalog names for that format. Metrics a format cannot carry must not appear at all
(no data, never a false zero).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import orjson
import pyarrow as pa
import pytest

from streaming.catalog import load_catalog
from streaming.decode.records import DECODERS, DecodeContext, decode_record_batch
from streaming.schemas import arrow_schema
from streaming.simulate.formats import ENCODERS, OTEL_SOURCES, PROMETHEUS_SCHEMES
from streaming.simulate.model import ClusterModel
from streaming.simulate.samples import broker_samples

T0 = 1_714_564_800.0
CTX = DecodeContext()


def records(messages: list[tuple[bytes | None, bytes]], ts: float = T0,
            topic: str = "kafka-metrics") -> pa.RecordBatch:
    when = datetime.fromtimestamp(ts, UTC)
    n = len(messages)
    return pa.RecordBatch.from_pydict({
        "key": [k for k, _ in messages], "value": [v for _, v in messages],
        "topic": [topic] * n, "partition": [0] * n, "offset": list(range(n)),
        "timestamp": [when] * n, "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))


def canonical(batch: pa.RecordBatch) -> list[tuple]:
    rows = []
    for r in batch.to_pylist():
        if r["reject_reason"] is None:
            rows.append((r["metric"], r["attribute"], tuple(sorted(r["labels"])), r["value"],
                         r["cluster"], r["broker"], r["ts"]))
    return sorted(rows, key=repr)


def rejects(batch: pa.RecordBatch) -> list[str]:
    return [r for r in batch.column("reject_reason").to_pylist() if r is not None]


def decode(messages, **kw) -> pa.RecordBatch:
    return decode_record_batch(records(messages, **kw), CTX)


def carried(fmt: str) -> set[tuple[str, str]]:
    """(metric, attribute) pairs the catalog names for a format; quantiles as '*Percentile'."""
    catalog = load_catalog()
    if fmt.startswith("prometheus-"):
        scheme = fmt.removeprefix("prometheus-")
        entries = [e for e in catalog.prometheus if scheme in e.tags]
    elif fmt in OTEL_SOURCES:
        entries = [e for e in catalog.otel if OTEL_SOURCES[fmt] in e.tags]
    else:
        entries = catalog.telegraf
    return {(e.metric.name, e.attribute or "*Percentile") for e in entries}


def eventful_model() -> ClusterModel:
    model = ClusterModel("prod-eu", [1, 2, 3, 4], {"orders": 12, "payments": 6})
    model.isr_flap(3, count=2)
    model.broker_down(2)
    model.broker_down(4)
    model.unclean_election()
    model.saturate(1, request_queue=420, handler_idle=0.07, network_idle=1.0025)
    model.brokers[3].response_queue = 17
    return model


def scrape(model: ClusterModel, fmt: str, ts: float) -> list[tuple[bytes | None, bytes]]:
    messages = []
    for broker_id, state in model.brokers.items():
        if state.up:
            samples = broker_samples(model, broker_id, 15.0)
            messages += ENCODERS[fmt](model.name, broker_id, ts, samples)
    return messages


OTHER_FORMATS = [f for f in ENCODERS if not f.startswith("jolokia")]


def test_every_format_and_scheme_has_an_encoder():
    assert {f"prometheus-{s}" for s in PROMETHEUS_SCHEMES} <= set(ENCODERS)
    assert {"otlp", "otlp-javaagent", "telegraf", "telegraf-batch"} <= set(ENCODERS)
    assert {"jolokia", "prometheus", "otlp", "telegraf"} <= set(DECODERS)


@pytest.mark.parametrize("fmt", OTHER_FORMATS)
def test_same_canonical_samples_as_jolokia(fmt):
    # Two scrapes of the same evolving state: each format sees exactly the same samples
    # (meters advance between scrapes, RequestHandlerAvgIdlePercent Count accumulates).
    base, other = eventful_model(), eventful_model()
    expected, got = [], []
    for step in range(2):
        ts = T0 + 15 * step
        jolokia_batch = decode(scrape(base, "jolokia", ts), ts=ts)
        format_batch = decode(scrape(other, fmt, ts), ts=ts)
        assert rejects(jolokia_batch) == [] and rejects(format_batch) == []
        expected += canonical(jolokia_batch)
        got += canonical(format_batch)
    pairs = carried(fmt)
    restricted = [r for r in expected
                  if (r[0], r[1]) in pairs
                  or (r[1].endswith("thPercentile") and (r[0], "*Percentile") in pairs)]
    assert restricted, f"{fmt} carries none of the simulated samples"
    assert sorted(got, key=repr) == sorted(restricted, key=repr)
    # nothing the format cannot carry shows up, not even as a zero
    assert {(r[0], r[1]) for r in got} <= {(r[0], r[1]) for r in restricted}
    assert all(r[4] == "prod-eu" and r[5] in {"1", "3"} for r in got)


def test_single_attribute_reads_decode_like_a_bulk_read():
    # The same scrapes as one bulk read per broker and as one read per attribute (the
    # columnar decoder's case): every sample identical, autodetected as Jolokia.
    base, other = eventful_model(), eventful_model()
    for step in range(2):
        ts = T0 + 15 * step
        bulk = decode(scrape(base, "jolokia", ts), ts=ts)
        single = decode(scrape(other, "jolokia-single", ts), ts=ts)
        assert rejects(single) == [] and single.num_rows > 50
        assert sorted(canonical(single), key=repr) == sorted(canonical(bulk), key=repr)
        assert set(single.column("source_format").to_pylist()) == {"jolokia"}


def test_formats_cover_the_paging_signals_where_their_exporters_do():
    must = {"UnderReplicatedPartitions", "OfflinePartitionsCount", "ActiveControllerCount",
            "IsrShrinksPerSec", "IsrExpandsPerSec", "UncleanLeaderElectionsPerSec",
            "PartitionCount"}
    for fmt in OTHER_FORMATS:
        metrics = {m for m, _ in carried(fmt)}
        assert must <= metrics, (fmt, must - metrics)
        if fmt.startswith("otlp"):  # OTel's kafka target has none of these
            assert not metrics & {"UnderMinIsrPartitionCount", "RequestHandlerAvgIdlePercent",
                                  "OpenFileDescriptorCount", "NetworkProcessorAvgIdlePercent"}
        else:
            assert "UnderMinIsrPartitionCount" in metrics


@pytest.mark.parametrize("fmt", OTHER_FORMATS)
def test_autodetection_is_unambiguous(fmt):
    model = eventful_model()
    for _, value in scrape(model, fmt, T0):
        doc = orjson.loads(value)
        matching = [name for name, module in DECODERS.items() if module.looks_like(doc)]
        assert matching == [fmt.split("-")[0]]


def test_jolokia_is_detected_only_as_jolokia():
    doc = orjson.loads(scrape(eventful_model(), "jolokia", T0)[0][1])
    assert [n for n, m in DECODERS.items() if m.looks_like(doc)] == ["jolokia"]


# ---- Prometheus specifics -------------------------------------------------------------

def adapter(name: str, value: str, /, ts: str = "2024-05-01T12:00:00Z", **labels) -> tuple:
    labels = {"__name__": name, "instance": "kafka-7:9404", "job": "kafka",
              "cluster": "c", **labels}
    return (None, orjson.dumps({"timestamp": ts, "value": value, "name": name,
                                "labels": labels}))


def one(batch: pa.RecordBatch) -> dict:
    rows = batch.to_pylist()
    assert len(rows) == 1, rows
    return rows[0]


# Lines copied verbatim from a published /metrics scrape of jmx_prometheus_httpserver 0.6 on a
# Kafka 0.10-era broker, May 2017 (tangfeixiong/go-to-kubernetes,
# examples/kafka/kafka-prometheus-monitoring.md; jmx_exporter's default name-label naming).
SCRAPE_2017 = [
    ('kafka_server_replicamanager_value', {"name": "PartitionCount"}, "51.0",
     ("PartitionCount", "Value", 51.0)),
    ('kafka_server_replicamanager_value', {"name": "UnderReplicatedPartitions"}, "0.0",
     ("UnderReplicatedPartitions", "Value", 0.0)),
    ('kafka_controller_kafkacontroller_value', {"name": "ActiveControllerCount"}, "1.0",
     ("ActiveControllerCount", "Value", 1.0)),
    ('kafka_server_kafkarequesthandlerpool_oneminuterate',
     {"name": "RequestHandlerAvgIdlePercent"}, "0.9996590142663573",
     ("RequestHandlerAvgIdlePercent", "OneMinuteRate", 0.9996590142663573)),
    ('kafka_network_socketserver_value', {"name": "NetworkProcessorAvgIdlePercent"},
     "1.0024901782565627", ("NetworkProcessorAvgIdlePercent", "Value", 1.0024901782565627)),
    ('kafka_controller_controllerstats_oneminuterate', {"name": "UncleanLeaderElectionsPerSec"},
     "0.0", ("UncleanLeaderElectionsPerSec", "OneMinuteRate", 0.0)),
    ('java_lang_operatingsystem_openfiledescriptorcount', {}, "186.0",
     ("OpenFileDescriptorCount", "Value", 186.0)),
    ('java_lang_operatingsystem_maxfiledescriptorcount', {}, "1048576.0",
     ("MaxFileDescriptorCount", "Value", 1048576.0)),
]


@pytest.mark.parametrize("name,labels,value,expected", SCRAPE_2017)
def test_name_label_style_from_a_real_scrape(name, labels, value, expected):
    row = one(decode([adapter(name, value, **labels)]))
    assert (row["metric"], row["attribute"], row["value"]) == expected
    assert dict(row["labels"]) == {}  # the `name` matcher is consumed, identity stripped
    assert (row["cluster"], row["broker"]) == ("c", "7")
    assert row["kind"] == "gauge" and row["source_format"] == "prometheus"


def test_name_label_style_keeps_other_labels_and_unknown_names():
    row = one(decode([adapter("kafka_log_log_value", "3", name="NumLogSegments",
                              topic="orders", partition="4")]))
    assert (row["metric"], dict(row["labels"])) == (
        "NumLogSegments", {"topic": "orders", "partition": "4"})
    row = one(decode([adapter("kafka_log_log_value", "0", name="LogEndOffset",
                              topic="orders", partition="4")]))
    assert row["metric"] is None
    assert dict(row["labels"])["raw_name"] == "kafka_log_log_value"
    assert dict(row["labels"])["name"] == "LogEndOffset"


def test_strimzi_meanrate_trap():
    # Strimzi/upstream write the lifetime MeanRate of RequestHandlerAvgIdlePercent as *_percent.
    row = one(decode([adapter("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                              "0.93")]))
    assert (row["metric"], row["attribute"], row["kind"]) == (
        "RequestHandlerAvgIdlePercent", "MeanRate", "gauge")
    # ...while the Count (idle ns per thread) they export too is the one to derive a rate from.
    row = one(decode([adapter(
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_count", "8.1e12")]))
    assert (row["metric"], row["attribute"], row["kind"]) == (
        "RequestHandlerAvgIdlePercent", "Count", "counter")
    # A Strimzi percent *gauge* is the real value.
    row = one(decode([adapter("kafka_network_socketserver_networkprocessoravgidle_percent",
                              "0.41")]))
    assert (row["metric"], row["attribute"]) == ("NetworkProcessorAvgIdlePercent", "Value")


def test_ambiguous_total_name_stays_unknown():
    name = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_total"
    assert name in load_catalog().ambiguous_prometheus_names
    row = one(decode([adapter(name, "0.5")]))
    assert row["metric"] is None and dict(row["labels"])["raw_name"] == name


def test_confluent_persec_name_is_a_count_not_a_rate():
    row = one(decode([adapter("kafka_server_replicamanager_isrshrinkspersec", "42")]))
    assert (row["metric"], row["attribute"], row["kind"]) == ("IsrShrinksPerSec", "Count",
                                                              "counter")


def test_summary_quantiles_and_confluent_count():
    rows = decode([
        adapter("kafka_network_requestmetrics_requestqueuetimems", "7.5", request="Produce",
                quantile="0.99"),
        adapter("kafka_network_requestmetrics_requestqueuetimems", "3", request="Produce",
                quantile="0.999"),
        adapter("kafka_network_requestmetrics_requestqueuetimems", "912", request="Produce"),
        adapter("kafka_network_requestmetrics_requestqueuetimems_count", "913", request="Fetch"),
    ]).to_pylist()
    got = [(r["metric"], r["attribute"], dict(r["labels"]), r["kind"]) for r in rows]
    assert got == [
        ("RequestQueueTimeMs", "99thPercentile", {"request": "Produce"}, "gauge"),
        ("RequestQueueTimeMs", "999thPercentile", {"request": "Produce"}, "gauge"),
        ("RequestQueueTimeMs", "Count", {"request": "Produce"}, "counter"),
        ("RequestQueueTimeMs", "Count", {"request": "Fetch"}, "counter"),
    ]


@pytest.mark.parametrize("text", ["NaN", "+Inf", "-Inf"])
def test_prometheus_non_finite_values_are_quarantined(text):
    good = adapter("kafka_server_replicamanager_partitioncount", "12")
    batch = decode([good, adapter("kafka_server_replicamanager_underminisrpartitioncount", text),
                    good])
    rows = batch.to_pylist()
    assert [r["reject_reason"] is None for r in rows] == [True, False, True]
    assert rows[1]["reject_reason"].startswith("non_finite_value")
    assert rows[1]["raw"] is not None and rows[1]["source_offset"] == 1


def test_prometheus_timestamp_and_value_parsing():
    row = one(decode([adapter("kafka_server_replicamanager_leadercount", "1e3",
                              ts="2024-05-01T12:00:07Z")]))
    assert row["value"] == 1000.0
    assert row["ts"] == datetime(2024, 5, 1, 12, 0, 7, tzinfo=UTC)
    batch = decode([adapter("kafka_server_replicamanager_leadercount", "12",
                            ts="yesterday")])
    assert rejects(batch)[0].startswith("bad_timestamp")
    batch = decode([adapter("kafka_server_replicamanager_leadercount", "twelve")])
    assert rejects(batch)[0].startswith("wrong_type")


@pytest.mark.parametrize("text, expected", [
    ("2024-05-01T12:00:07Z", datetime(2024, 5, 1, 12, 0, 7, tzinfo=UTC)),
    ("2024-05-01T12:00:07.25Z", datetime(2024, 5, 1, 12, 0, 7, 250000, tzinfo=UTC)),
    ("2024-05-01T14:00:07+02:00", datetime(2024, 5, 1, 12, 0, 7, tzinfo=UTC)),
    ("2024-05-01T12:00:07-00:00", datetime(2024, 5, 1, 12, 0, 7, tzinfo=UTC)),
    ("2024-05-01T12:00:07", datetime(2024, 5, 1, 12, 0, 7, tzinfo=UTC)),  # no offset: UTC
    ("2024-05-01t12:00:07z", datetime(2024, 5, 1, 12, 0, 7, tzinfo=UTC)),  # RFC 3339 5.6
    ("2024-05-01T12:00:07.5z", datetime(2024, 5, 1, 12, 0, 7, 500000, tzinfo=UTC)),
])
def test_a_prometheus_rfc_3339_timestamp_is_read(text, expected):
    row = one(decode([adapter("kafka_server_replicamanager_leadercount", "1", ts=text)]))
    assert row["ts"] == expected


@pytest.mark.parametrize("text", [
    "2024-05-01",  # a date: midnight, a time the adapter never meant
    "2024-05-01T12Z", "2024-05-01T12:00Z",  # no seconds: truncated to the hour or minute
    "20240501T120007Z",  # ISO 8601 basic format
    "2024-W18-3T12:00:07Z",  # an ISO week date
    "2024-05-01T12:00:07,5Z", "2024-05-01T12:00:07.Z",  # comma or empty fraction
    "2024-05-01T14:00:07+0200", "2024-05-01T14:00:07+02", "2024-05-01T14:00:07+02:00:30",
    "2024-05-01T12:00:07Z\n", "2024-05-01T12:00:07zz", "\u0662\u0660\u0662\u0664-05-01T12:00:07Z",
])
def test_a_prometheus_timestamp_python_reads_but_rfc_3339_does_not_is_quarantined(text):
    """datetime.fromisoformat reads ISO 8601's other forms too; the adapter writes Go's
    time.RFC3339. A date alone or a time without seconds would be taken as midnight or the
    whole hour, a wrong time the skew check lets through near it."""
    batch = decode([adapter("kafka_server_replicamanager_leadercount", "1", ts=text)])
    assert [r.split(":")[0] for r in rejects(batch)] == ["bad_timestamp"]
    assert batch.num_rows == 1


def test_prometheus_negative_counter_is_quarantined():
    batch = decode([adapter("kafka_server_replicamanager_isrshrinks_total", "-1")])
    assert rejects(batch)[0].startswith("negative_counter")


# ---- OTLP specifics -------------------------------------------------------------------

def otlp_doc(metrics: list[dict], host: str = "kafka-5", cluster: str = "c") -> dict:
    return {"resourceMetrics": [{
        "resource": {"attributes": [
            {"key": "host.name", "value": {"stringValue": host}},
            {"key": "kafka.cluster.alias", "value": {"stringValue": cluster}},
            {"key": "process.pid", "value": {"intValue": "4242"}},
        ]},
        "scopeMetrics": [{"scope": {"name": "test"}, "metrics": metrics}],
    }]}


NANOS = str(int(T0) * 10**9)


def point(value, **attrs) -> dict:
    p = {"timeUnixNano": NANOS,
         "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}
    p["asInt" if isinstance(value, int) else "asDouble"] = (
        str(value) if isinstance(value, int) else value)
    return p


def test_otlp_delta_sums_are_quarantined_and_gauges_kept():
    doc = otlp_doc([
        {"name": "kafka.partition.count", "gauge": {"dataPoints": [point(40)]}},
        {"name": "kafka.isr.operation.count",
         "sum": {"aggregationTemporality": 1, "isMonotonic": True,
                 "dataPoints": [point(3, operation="shrink"), point(1, operation="expand")]}},
    ])
    rows = decode([(None, orjson.dumps(doc))]).to_pylist()
    assert [(r["metric"], r["value"]) for r in rows if r["reject_reason"] is None] == [
        ("PartitionCount", 40.0)]
    bad = [r["reject_reason"] for r in rows if r["reject_reason"] is not None]
    assert len(bad) == 1 and bad[0].startswith("unsupported_temporality")
    assert "(+1 more" in bad[0]


def test_otlp_resource_attributes_are_identity_not_labels():
    a = otlp_doc([{"name": "kafka.partition.count", "gauge": {"dataPoints": [point(4)]}}],
                 host="kafka-5")
    b = otlp_doc([{"name": "kafka.partition.count", "gauge": {"dataPoints": [point(9)]}}],
                 host="kafka-6", cluster="d")
    a["resourceMetrics"] += b["resourceMetrics"]  # one message, two brokers
    rows = decode([(None, orjson.dumps(a))]).to_pylist()
    assert [(r["cluster"], r["broker"], r["value"], dict(r["labels"])) for r in rows] == [
        ("c", "5", 4.0, {}), ("d", "6", 9.0, {})]


def test_otlp_javaagent_updowncounter_count_is_a_counter():
    doc = otlp_doc([{"name": "kafka.isr.operation.count",
                     "sum": {"aggregationTemporality": "AGGREGATION_TEMPORALITY_CUMULATIVE",
                             "dataPoints": [point(7, operation="expand")]}}])
    row = one(decode([(None, orjson.dumps(doc))]))
    assert (row["metric"], row["attribute"], row["kind"], row["value"]) == (
        "IsrExpandsPerSec", "Count", "counter", 7.0)
    assert row["ts"] == datetime.fromtimestamp(T0, UTC)


def test_otlp_non_finite_and_no_recorded_value():
    stale = point(0.0)
    stale["flags"] = 1
    doc = otlp_doc([{"name": "kafka.request.queue",
                     "gauge": {"dataPoints": [stale, {**point(0.0), "asDouble": "NaN"}]}}])
    batch = decode([(None, orjson.dumps(doc))])
    assert canonical(batch) == []
    assert [r.split(":")[0] for r in rejects(batch)] == ["non_finite_value"]


def test_otlp_histogram_and_summary_points_follow_flags_and_temporality():
    """A histogram point with no recorded value is no sample, not a count of zero; a delta
    histogram is refused as a delta sum is; a cumulative one and a summary are kept."""
    empty = {"timeUnixNano": NANOS, "flags": 1, "count": "0", "sum": 0}
    full = {"timeUnixNano": NANOS, "count": "4", "sum": 10.5}
    doc = otlp_doc([
        {"name": "kafka.h", "histogram": {"aggregationTemporality": 2,
                                          "dataPoints": [empty, full]}},
        {"name": "kafka.d", "histogram": {"aggregationTemporality": 1, "dataPoints": [full]}},
        {"name": "kafka.s", "summary": {"dataPoints": [full, empty]}},
    ])
    batch = decode([(None, orjson.dumps(doc))])
    kept = [(dict(r["labels"])["raw_name"], r["attribute"], r["value"]) for r in batch.to_pylist()
            if r["reject_reason"] is None]
    assert kept == [("kafka.h", "Count", 4.0), ("kafka.h", "Sum", 10.5),
                    ("kafka.s", "Count", 4.0), ("kafka.s", "Sum", 10.5)]
    assert [r.split(":")[0] for r in rejects(batch)] == ["unsupported_temporality"]


def test_an_otlp_int_attribute_keeps_every_digit() -> None:
    doc = otlp_doc([{"name": "kafka.partition.count", "gauge": {"dataPoints": [
        {**point(3), "attributes": [{"key": "id", "value": {"intValue": "9007199254740993"}},
                                    {"key": "max", "value": {"intValue": str(2**63 - 1)}}]}]}}])
    assert dict(one(decode([(None, orjson.dumps(doc))]))["labels"]) == {
        "id": "9007199254740993", "max": str(2**63 - 1)}


@pytest.mark.parametrize("value", [{"intValue": "3"}, {"intValue": 3}, {"intValue": "003"},
                                   {"doubleValue": 3.0}, {"stringValue": "3"}])
def test_an_otlp_broker_id_of_any_scalar_variant_names_the_same_broker(value):
    doc = otlp_doc([{"name": "kafka.partition.count", "gauge": {"dataPoints": [point(4)]}}])
    doc["resourceMetrics"][0]["resource"]["attributes"].append(
        {"key": "kafka.broker.id", "value": value})
    assert one(decode([(None, orjson.dumps(doc))]))["broker"] == "3"


def test_otlp_unknown_metric_kept_with_raw_name():
    doc = otlp_doc([{"name": "jvm.memory.used", "gauge": {"dataPoints": [point(5, pool="x")]}}])
    row = one(decode([(None, orjson.dumps(doc))]))
    assert row["metric"] is None
    assert dict(row["labels"]) == {"pool": "x", "raw_name": "jvm.memory.used"}


# ---- Telegraf specifics ---------------------------------------------------------------

def tg(fields: dict, name: str = "kafka_replica_manager", ts=int(T0), **tags) -> dict:
    return {"fields": fields, "name": name,
            "tags": {"host": "kafka-2", "cluster": "c", **tags}, "timestamp": ts}


def test_telegraf_timestamp_units_and_batch_form():
    """json_timestamp_units is any power of ten from 1ns to 1s (Telegraf truncates 20ms to
    10ms); each count is read as the same time."""
    for tens in range(10):
        ts = int(T0) * 10 ** tens
        row = one(decode([(None, orjson.dumps(tg({"LeaderCount.Value": 3}, ts=ts)))]))
        assert row["ts"] == datetime.fromtimestamp(T0, UTC), tens
        assert (row["metric"], row["broker"], row["cluster"]) == ("LeaderCount", "2", "c")
    doc = {"metrics": [tg({"LeaderCount.Value": 3}),
                       tg({"ActiveControllerCount.Value": 1}, name="kafka_controller")]}
    rows = decode([(None, orjson.dumps(doc))]).to_pylist()
    assert [r["metric"] for r in rows] == ["LeaderCount", "ActiveControllerCount"]


@pytest.mark.parametrize("broken, reason", [
    (None, "wrong_type"), ("x", "wrong_type"), ({"name": "kafka_controller"}, "missing_field"),
    ({**tg({"LeaderCount.Value": 1}), "tags": {"host": None}}, "wrong_type"),
    ({**tg({"LeaderCount.Value": 1}), "timestamp": "now"}, "bad_timestamp"),
    ({**tg({"LeaderCount.Value": 1}), "timestamp": [1]}, "wrong_type")])
def test_one_broken_metric_of_a_telegraf_batch_is_quarantined_and_the_others_kept(
        broken, reason):
    doc = {"metrics": [tg({"LeaderCount.Value": 3}), broken,
                       tg({"ActiveControllerCount.Value": 1}, name="kafka_controller")]}
    rows = decode([(None, orjson.dumps(doc))]).to_pylist()
    assert [r["metric"] for r in rows if r["reject_reason"] is None] == [
        "LeaderCount", "ActiveControllerCount"]
    [refused] = [r["reject_reason"] for r in rows if r["reject_reason"]]
    assert refused.startswith(f"{reason}: [1]: ")


def test_a_telegraf_batch_of_broken_metrics_only_is_quarantined_with_the_first_reason():
    doc = {"metrics": [{"name": "kafka_controller", "fields": {"LeaderCount.Value": 1}}, None]}
    assert rejects(decode([(None, orjson.dumps(doc))])) == [
        "missing_field: [0]: timestamp (+1 more rejected samples)"]


def test_a_telegraf_batch_past_the_samples_cap_is_refused_whole():
    doc = {"metrics": [tg({"LeaderCount.Value": 3}),
                       tg({f"F{i}": 0 for i in range(5)}, name="kafka_custom")]}
    rows = decode_record_batch(records([(None, orjson.dumps(doc))]),
                               DecodeContext(max_samples_per_record=4)).to_pylist()
    assert [r["reject_reason"].split(":")[0] for r in rows] == ["too_many_samples"]


def test_telegraf_per_partition_under_replicated_is_not_the_broker_count():
    doc = tg({"UnderReplicatedPartitions": 1, "NumLogSegments": 4}, name="kafka_partition",
             topic="orders", partition="0")
    rows = decode([(None, orjson.dumps(doc))]).to_pylist()
    by_raw = {(r["metric"], dict(r["labels"]).get("raw_name")): r for r in rows}
    assert (None, "kafka_partition/UnderReplicatedPartitions") in by_raw
    assert ("NumLogSegments", None) in by_raw
    assert dict(by_raw[("NumLogSegments", None)]["labels"]) == {"topic": "orders",
                                                                "partition": "0"}


def test_telegraf_string_fields_are_skipped_not_zero():
    doc = tg({"IsrShrinksPerSec.RateUnit": "SECONDS", "IsrShrinksPerSec.Count": 5})
    row = one(decode([(None, orjson.dumps(doc))]))
    assert (row["metric"], row["attribute"], row["kind"]) == ("IsrShrinksPerSec", "Count",
                                                              "counter")
    assert not math.isnan(row["value"])


@pytest.mark.parametrize("raw", ["3", True, False, [3], {"Value": 3}])
def test_a_telegraf_catalog_field_that_is_not_a_number_is_quarantined_not_dropped(raw):
    """A field the catalog names is a number in every jolokia2 output; written otherwise it
    is a broken exporter, reported as the Jolokia decoder reports it (wrong_type), while the
    record's other fields stay samples. A boolean is not read as 1 or 0."""
    doc = tg({"UnderReplicatedPartitions.Value": raw, "LeaderCount.Value": 3,
              "IsrShrinksPerSec.RateUnit": "SECONDS"})
    rows = decode([(None, orjson.dumps(doc))]).to_pylist()
    assert [(r["metric"], r["value"]) for r in rows if r["reject_reason"] is None] == [
        ("LeaderCount", 3.0)]
    assert [r["reject_reason"].split(":")[0] for r in rows if r["reject_reason"]] == [
        "wrong_type"]


def test_a_telegraf_null_field_is_no_value():
    doc = tg({"UnderReplicatedPartitions.Value": None, "LeaderCount.Value": 3})
    row = one(decode([(None, orjson.dumps(doc))]))
    assert (row["metric"], row["reject_reason"]) == ("LeaderCount", None)


# ---- numbers written as text ----------------------------------------------------------

@pytest.mark.parametrize("text", ["1_000", " 7", "7\n", "\u0669", "１"])
def test_a_prometheus_value_python_reads_but_no_exporter_writes_is_quarantined(text):
    """Go's ParseFloat (Prometheus) refuses digit underscores, whitespace and digits of
    other scripts; float() takes them, and the sample would be accepted as a number the
    producer never wrote."""
    rejected = rejects(decode([adapter("kafka_server_replicamanager_underminisrpartitioncount",
                                       text)]))
    assert [r.split(":")[0] for r in rejected] == ["wrong_type"]
    kept = one(decode([adapter("kafka_server_replicamanager_underminisrpartitioncount",
                               "1e0")]))
    assert kept["value"] == 1.0 and kept["reject_reason"] is None


@pytest.mark.parametrize("field,raw", [
    ("asInt", "1_0"), ("asInt", " 10"), ("asInt", 1.7), ("asDouble", "1_0"),
    ("asDouble", "\u0661"), ("asInt", str(2**63)), ("asInt", 1e30), ("flags", True),
    ("flags", "1"), ("timeUnixNano", "-1")])
def test_an_otlp_number_no_exporter_writes_is_quarantined(field, raw):
    """OTLP JSON writes an int64 as a decimal string (or a JSON integer) and a double as a
    JSON number or "NaN"/"Infinity": a fractional asInt, an integer past its protobuf
    type's range, a boolean for the flags, or text float() merely tolerates, is
    malformed."""
    bad = {"timeUnixNano": NANOS, "attributes": [], field: raw}
    if not field.startswith("as"):
        bad["asInt"] = "3"
    doc = otlp_doc([{"name": "kafka.partition.count", "gauge": {"dataPoints": [bad]}}])
    batch = decode([(None, orjson.dumps(doc))])
    assert canonical(batch) == []
    assert [r.split(":")[0] for r in rejects(batch)] == ["wrong_type"]


@pytest.mark.parametrize("where,shape", [("resource", []), ("scopeMetrics", {}),
                                         ("metrics", {}), ("dataPoints", {})])
def test_an_otlp_message_of_the_wrong_shape_is_quarantined_not_read_as_empty(where, shape):
    """An empty list or object in the other's place is malformed, not an absent field."""
    doc = otlp_doc([{"name": "kafka.partition.count", "gauge": {"dataPoints": [point(3)]}}])
    resource = doc["resourceMetrics"][0]
    holder = {"resource": resource, "scopeMetrics": resource,
              "metrics": resource["scopeMetrics"][0],
              "dataPoints": resource["scopeMetrics"][0]["metrics"][0]["gauge"]}[where]
    holder[where] = shape
    batch = decode([(None, orjson.dumps(doc))])
    assert canonical(batch) == []
    assert [r.split(":")[0] for r in rejects(batch)] == ["wrong_type"]
    holder.pop(where)  # absent: nothing there (no samples, or no identity), not malformed
    assert "wrong_type" not in [r.split(":")[0]
                                for r in rejects(decode([(None, orjson.dumps(doc))]))]


def test_a_quantile_label_in_other_digits_names_no_percentile():
    from streaming.catalog import quantile_attribute

    assert quantile_attribute("0.99") == "99thPercentile"
    assert quantile_attribute("\uff10.\uff19\uff19") is None and quantile_attribute(" 0.99") is None


# ---- hostile records: each quarantined with its reason, never a decoder_error --------------

ADAPTER_URP = "kafka_server_replicamanager_underreplicatedpartitions"


def _adapter(**fields) -> bytes:
    doc = {"labels": {"__name__": ADAPTER_URP, "instance": "kafka-7:9404"}, "value": "1",
           "timestamp": "2024-05-01T12:00:00Z", **fields}
    return orjson.dumps(doc)


HOSTILE = [
    (_adapter(value=True), "wrong_type"), (_adapter(value=None), "wrong_type"),
    (_adapter(value=[1]), "wrong_type"), (_adapter(value=""), "wrong_type"),
    (_adapter(value="9" * 400), "non_finite_value"),  # finite text, infinite as a double
    (_adapter(timestamp=None), "missing_field"), (_adapter(timestamp=int(T0)), "wrong_type"),
    (_adapter(timestamp="0001-01-01T00:00:00Z"), "timestamp_skew"),
    (_adapter(labels={"__name__": ""}), "missing_field"),
    (_adapter(labels={"__name__": ADAPTER_URP, "instance": None}), "wrong_type"),
    (_adapter(labels={"__name__": ADAPTER_URP, "instance": ""}), "no_broker_identity"),
    (orjson.dumps(tg({"LeaderCount.Value": 1}, ts=True)), "wrong_type"),
    (orjson.dumps(tg({"LeaderCount.Value": 1}, ts="1714564800")), "bad_timestamp"),
    (orjson.dumps(tg({"LeaderCount.Value": 1}, ts="2024-05-01 12:00:00")), "bad_timestamp"),
    (orjson.dumps(tg({"LeaderCount.Value": 1}, ts=2**64 - 1)), "timestamp_skew"),
    (orjson.dumps(tg({"LeaderCount.Value": 1}, ts=None)), "wrong_type"),
    (orjson.dumps({**tg({"LeaderCount.Value": 1}), "tags": {"host": None}}), "wrong_type"),
    (orjson.dumps({**tg({"LeaderCount.Value": 1}), "name": None}), "missing_field"),
    (orjson.dumps({**tg({"LeaderCount.Value": 1}), "fields": None}), "missing_field"),
]


@pytest.mark.parametrize("value", [
    orjson.dumps([orjson.loads(_adapter()), 5]),
    orjson.dumps({"metrics": [tg({"LeaderCount.Value": 1}), None]})])
def test_a_list_record_with_one_broken_item_keeps_the_good_one(value: bytes) -> None:
    rows = decode([(None, value)]).to_pylist()
    assert [(r["metric"], r["reject_reason"]) for r in rows if r["reject_reason"] is None] in (
        [("UnderReplicatedPartitions", None)], [("LeaderCount", None)])
    assert [r["reject_reason"].split(":")[0] for r in rows if r["reject_reason"]] == [
        "wrong_type"]


@pytest.mark.parametrize("value, reason", HOSTILE)
def test_a_hostile_record_is_quarantined_with_its_reason(value: bytes, reason: str) -> None:
    rows = decode([(None, value)]).to_pylist()
    assert [r["reject_reason"].split(":")[0] for r in rows] == [reason], rows


@pytest.mark.parametrize("value", [
    {"stringValue": {"a": 1}}, {"stringValue": 5}, {"stringValue": ["x"]}, {"intValue": True},
    {"intValue": [1]}, {"intValue": {"a": 1}}, {"boolValue": "false"}, {"boolValue": 0},
    {"doubleValue": True}, {"doubleValue": [1.5]}, {"bytesValue": 5}, {"intValue": "abc"},
    {"intValue": "1.5"}, {"intValue": str(2**63)}, {"doubleValue": "zzz"}])
def test_an_otlp_attribute_value_of_the_wrong_json_type_is_quarantined(value):
    """An AnyValue holds the JSON type of its variant; anything else is malformed, not a
    label spelled as Python prints it ("{'a': 1}", "[1]") or a string read as a boolean
    ({"boolValue": "false"} as "true")."""
    doc = otlp_doc([{"name": "kafka.partition.count", "gauge": {"dataPoints": [
        {**point(3), "attributes": [{"key": "topic", "value": value}]}]}}])
    batch = decode([(None, orjson.dumps(doc))])
    assert canonical(batch) == []
    assert [r.split(":")[0] for r in rejects(batch)] == ["wrong_type"]


def test_an_otlp_attribute_value_of_null_is_its_variant_unset_not_the_text_none():
    """proto3's JSON mapping reads null as the field's default: the label is empty, as for
    an AnyValue with no variant at all."""
    doc = otlp_doc([{"name": "kafka.partition.count", "gauge": {"dataPoints": [
        {**point(3), "attributes": [{"key": "topic", "value": {"stringValue": None}},
                                    {"key": "partition", "value": {"intValue": None}}]}]}}])
    [row] = decode([(None, orjson.dumps(doc))]).to_pylist()
    assert row["reject_reason"] is None
    assert dict(row["labels"]) == {"topic": "", "partition": ""}


def _otlp_good_and(broken_metric: dict | None = None, broken_point: dict | None = None,
                   broken_resource: dict | None = None) -> bytes:
    """One collector export of two brokers: kafka-5's partition count beside one broken
    piece (a data point of a metric, a metric, or a resource of its own), and kafka-6's."""
    points = [point(40), *([broken_point] if broken_point else [])]
    metrics = [{"name": "kafka.partition.count", "gauge": {"dataPoints": points}},
               *([broken_metric] if broken_metric else [])]
    doc = otlp_doc(metrics)
    doc["resourceMetrics"] += otlp_doc(
        [{"name": "kafka.partition.count", "gauge": {"dataPoints": [point(9)]}}],
        host="kafka-6")["resourceMetrics"]
    if broken_resource:
        doc["resourceMetrics"].insert(1, broken_resource)
    return orjson.dumps(doc)


@pytest.mark.parametrize("value, where", [
    (_otlp_good_and(broken_point={**point(1), "asInt": "12abc"}),
     "kafka.partition.count (resourceMetrics[0].scopeMetrics[0].metrics[0]).dataPoints[1]: asInt"),
    (_otlp_good_and(broken_point={**point(1), "timeUnixNano": True}),
     "kafka.partition.count (resourceMetrics[0].scopeMetrics[0].metrics[0]).dataPoints[1]: "),
    (_otlp_good_and(broken_point=[1]),
     "kafka.partition.count (resourceMetrics[0].scopeMetrics[0].metrics[0]).dataPoints[1]: "),
    (_otlp_good_and(broken_metric={"name": "kafka.isr.operation.count", "sum": "x"}),
     "resourceMetrics[0].scopeMetrics[0].metrics[1]: "),
    (_otlp_good_and(broken_metric={"gauge": {"dataPoints": [point(1)]}}),
     "resourceMetrics[0].scopeMetrics[0].metrics[1]: "),
    (_otlp_good_and(broken_resource={"resource": {"attributes": 5}, "scopeMetrics": []}),
     "resourceMetrics[1]: "),
])
def test_one_broken_piece_of_an_otlp_export_keeps_the_rest(value: bytes, where: str) -> None:
    """A collector export holds every metric of its brokers: one malformed data point,
    metric or resource is quarantined, named by where it sits, and the others' samples are
    kept (a broker left without samples would go stale and page)."""
    rows = decode([(None, value)]).to_pylist()
    assert [(r["broker"], r["metric"], r["value"]) for r in rows
            if r["reject_reason"] is None] == [("5", "PartitionCount", 40.0),
                                               ("6", "PartitionCount", 9.0)]
    [bad] = [r["reject_reason"] for r in rows if r["reject_reason"] is not None]
    assert bad.startswith("wrong_type: " + where) or bad.startswith(
        "missing_field: " + where), bad


def test_the_broken_points_of_a_long_named_metric_keep_short_reasons() -> None:
    """A metric name may be as long as the message and every one of its points broken: a
    reason names it shortened, so the rejects of one record stay small."""
    from streaming.catalog import load_catalog
    from streaming.decode import otlp

    name = "m" * 1_000_000
    doc = otlp_doc([{"name": name, "gauge": {"dataPoints": [
        {**point(1), "flags": True} for _ in range(300)]}}])
    observations, _ = otlp.decode(doc, load_catalog())
    assert len(observations) == 300
    assert max(len(r.detail) for r in observations) < 700


def test_a_telegraf_timestamp_in_rfc_3339_is_read() -> None:
    """Telegraf's json_timestamp_format ("2006-01-02T15:04:05Z07:00") writes the time as
    text: an unclean election counted at that time, not the whole record quarantined."""
    at = datetime.fromtimestamp(T0, UTC)
    value = orjson.dumps(tg({"LeaderCount.Value": 1}, ts=at.isoformat()))
    [row] = decode([(None, value)]).to_pylist()
    assert row["reject_reason"] is None
    assert row["ts"] == at
