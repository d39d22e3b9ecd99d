"""Bounds per record: samples per record, labels per sample, label key/value length.

One hostile record must cost bounded memory in the Python worker: a 10 MB Telegraf record
expanded to 850k samples (+1 GB RSS), and a bigger one would kill the worker on every
replay of its batch. Decoding stops as soon as a record passes the cap.
"""

from __future__ import annotations

import dataclasses

import orjson
import pyarrow as pa
import pytest

from streaming.catalog import load_catalog
from streaming.config import Config
from streaming.decode.records import DecodeContext, decode_record_batch, reason_category
from streaming.schemas import arrow_schema

STAMP = 1772366400
UMI = "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"
UMI_PROM = "kafka_server_replicamanager_underminisrpartitioncount"


def records(values: list[bytes]) -> pa.RecordBatch:
    n = len(values)
    stamp = pa.array([STAMP * 1_000_000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return pa.RecordBatch.from_pydict({
        "key": [b"prod/1"] * n, "value": values, "topic": ["kafka-metrics"] * n,
        "partition": [0] * n, "offset": list(range(n)), "timestamp": stamp,
        "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))


def categories(batch: pa.RecordBatch) -> list[str | None]:
    return [reason_category(r) if r else None for r in batch.column("reject_reason").to_pylist()]


def ctx(**limits: int) -> DecodeContext:
    return DecodeContext(max_skew_seconds=1e12, **limits)


def configured() -> DecodeContext:
    """The configured limits, at any wall clock (the records' times are fixed)."""
    return dataclasses.replace(DecodeContext.from_config(Config()), max_ahead_seconds=None,
                               max_behind_seconds=None)


def telegraf(fields: int) -> bytes:
    return orjson.dumps({"name": "kafka_custom", "tags": {"host": "kafka-1"},
                         "fields": {f"F{i}.Value": i for i in range(fields)},
                         "timestamp": STAMP})


def jolokia_pattern(mbeans: int) -> bytes:
    value = {f"kafka.log:type=Log,name=Size,topic=t{i},partition=0": {"Value": i}
             for i in range(mbeans)}
    return orjson.dumps({"request": {"mbean": "kafka.log:type=Log,name=Size,*", "type": "read"},
                         "value": value, "status": 200, "timestamp": STAMP})


def prometheus_sample(labels: dict[str, str] | None = None) -> dict[str, object]:
    return {"timestamp": "2026-03-01T12:00:00Z", "value": "1", "name": UMI_PROM,
            "labels": {"instance": "kafka-1:9404", **(labels or {})}}


def otlp(points: int) -> bytes:
    data = [{"asInt": str(i), "timeUnixNano": str(STAMP * 10**9),
             "attributes": [{"key": "n", "value": {"stringValue": str(i)}}]}
            for i in range(points)]
    return orjson.dumps({"resourceMetrics": [{
        "resource": {"attributes": [{"key": "host.name", "value": {"stringValue": "kafka-1"}}]},
        "scopeMetrics": [{"metrics": [{"name": "custom", "gauge": {"dataPoints": data}}]}]}]})


OVER_CAP = {
    "telegraf": telegraf(101),
    "telegraf-batch": orjson.dumps({"metrics": [orjson.loads(telegraf(60))] * 2}),
    "jolokia-pattern": jolokia_pattern(101),
    "jolokia-bulk": orjson.dumps([orjson.loads(jolokia_pattern(60))] * 2),
    "prometheus-array": orjson.dumps([prometheus_sample()] * 101),
    "otlp": otlp(101),
}


@pytest.mark.parametrize("name", list(OVER_CAP))
def test_record_over_the_sample_cap_is_quarantined_in_every_decoder(name: str) -> None:
    out = decode_record_batch(records([OVER_CAP[name]]), ctx(max_samples_per_record=100))
    assert categories(out) == ["too_many_samples"]
    assert out.column("raw").to_pylist() == [OVER_CAP[name]]


def test_record_at_the_sample_cap_is_kept() -> None:
    out = decode_record_batch(records([telegraf(100)]), ctx(max_samples_per_record=100))
    assert categories(out) == [None] * 100


def test_decoding_stops_as_soon_as_a_record_passes_the_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory: the decoder must not materialise every sample and count them after."""
    catalog = load_catalog()
    looked_up = 0
    original = catalog.from_telegraf

    def counting(name: str, field: str):  # noqa: ANN202 - the catalog's own signature
        nonlocal looked_up
        looked_up += 1
        return original(name, field)

    monkeypatch.setattr(catalog, "from_telegraf", counting)
    out = decode_record_batch(records([telegraf(200_000)]), ctx(max_samples_per_record=1000),
                              catalog)
    assert categories(out) == ["too_many_samples"]
    assert looked_up <= 1001


def test_default_cap_keeps_a_large_broker_bulk_read() -> None:
    """A broker with 4,000 partitions read with per-partition MBeans: tens of thousands."""
    out = decode_record_batch(records([jolokia_pattern(40_000)]),
                              configured())
    assert categories(out)[0] is None and len(out) == 40_000


@pytest.mark.parametrize("labels, reason", [
    ({f"l{i}": "v" for i in range(63)}, None),  # and `instance`: 64
    ({f"l{i}": "v" for i in range(64)}, "too_many_labels"),
    ({"path": "v" * 1024}, None),
    ({"path": "v" * 1025}, "label_too_long"),
    ({"k" * 1025: "v"}, "label_too_long"),
], ids=["64-labels", "65-labels", "value-at-limit", "long-value", "long-key"])
def test_labels_per_sample_and_label_length_are_bounded(
        labels: dict[str, str], reason: str | None) -> None:
    """The bad sample is quarantined once; its record's good sample stays in bronze."""
    value = orjson.dumps([prometheus_sample(labels), prometheus_sample()])
    out = decode_record_batch(records([value]), configured())
    got = categories(out)
    if reason is None:
        assert got == [None, None]
    else:
        assert sorted(got, key=str) == sorted([None, reason], key=str)


@pytest.mark.parametrize("columnar", [True, False])
def test_label_bounds_hold_in_the_columnar_jolokia_decoder(columnar: bool) -> None:
    props = ",".join(f"p{i}=v" for i in range(70))
    value = orjson.dumps({"request": {"mbean": f"kafka.server:type=Custom,{props}",
                                      "attribute": "Value", "type": "read"},
                          "value": 1, "status": 200, "timestamp": STAMP})
    plain = orjson.dumps({"request": {"mbean": UMI, "attribute": "Value", "type": "read"},
                          "value": 1, "status": 200, "timestamp": STAMP})
    out = decode_record_batch(records([value, plain]), ctx(), columnar=columnar)
    assert categories(out) == ["too_many_labels", None]


def test_limits_are_configured_under_quality() -> None:
    config = Config()
    config.quality.max_samples_per_record = 7
    config.quality.max_labels_per_sample = 5
    config.quality.max_label_chars = 300
    built = DecodeContext.from_config(config)
    assert (built.max_samples_per_record, built.max_labels_per_sample,
            built.max_label_chars) == (7, 5, 300)
    assert DecodeContext.from_json(built.to_json()) == built



def test_a_read_task_decodes_its_records_in_slices_bounded_by_their_bytes():
    """A chunk of large records is decoded a few MB of values at a time (what a decode
    holds grows with its input's bytes); a record larger than the bound alone; and the
    slices give the rows the whole chunk gives, with every record counted once."""
    from streaming.decode.records import DECODE_BYTES, by_value_bytes, decoded_chunks

    values = [b"x" * 10, b"y" * 25, None, b"z" * 5, b"w" * 40, b"v" * 1]
    batch = pa.RecordBatch.from_pydict({"value": values}, schema=pa.schema(
        [("value", pa.binary())]))
    slices = list(by_value_bytes(batch, limit=30))
    assert [s.column("value").to_pylist() for s in slices] == [
        [b"x" * 10], [b"y" * 25, None, b"z" * 5], [b"w" * 40], [b"v" * 1]]
    assert list(by_value_bytes(batch, limit=81)) == [batch]

    def jolokia(padding: int) -> bytes:
        return orjson.dumps({"request": {"mbean": UMI, "attribute": "Value", "type": "read"},
                             "value": 1, "status": 200, "timestamp": STAMP,
                             "padding": "p" * padding})

    big, small = jolokia(DECODE_BYTES * 4 // 10), jolokia(0)
    chunk = records([small, big, small, big, big, small])
    pieces = list(decoded_chunks([chunk], DecodeContext()))
    assert [n for _, n in pieces] == [4, 2]  # small big small big | big small
    whole = pa.Table.from_batches([decode_record_batch(chunk, DecodeContext())])
    sliced = pa.Table.from_batches([p for p, _ in pieces])
    assert sliced.drop_columns(["ingest_ts"]).equals(whole.drop_columns(["ingest_ts"]))
    assert sliced["reject_reason"].to_pylist() == [None] * 6


def test_a_record_whose_samples_repeat_long_labels_is_quarantined_before_arrow() -> None:
    """64 long tags shared by thousands of Telegraf fields are each within the label
    bounds, yet gigabytes of rows from a record of kilobytes: the record is refused whole,
    and the next record is decoded."""
    tags = {f"{i:02d}" + "k" * 1000: "v" * 1000 for i in range(62)} | {"host": "kafka-1"}
    hostile = orjson.dumps({"name": "kafka_custom", "tags": tags, "timestamp": STAMP,
                            "fields": {f"F{i}.Value": i for i in range(5000)}})
    out = decode_record_batch(records([hostile, telegraf(3)]), configured())
    assert categories(out) == ["too_many_label_chars", None, None, None]
    assert out.column("raw").to_pylist()[0] == hostile
    assert out.nbytes < 4 * len(hostile)


def test_real_records_whose_samples_share_long_labels_are_kept() -> None:
    """What shippers do write: a pattern read of unknown MBeans with long names (each
    name a label of its timer's twenty numeric attributes), a Telegraf metric with long
    tags and twenty fields."""
    timer = {f"{p}thPercentile": 1.5 for p in (50, 75, 95, 98, 99, 999)} | {
        a: 2 for a in ("Count", "Min", "Max", "Mean", "StdDev", "MeanRate", "OneMinuteRate",
                       "FiveMinuteRate", "FifteenMinuteRate")} | {"RateUnit": "SECONDS"}
    names = [f"kafka.custom:type=Timer,client-id={'c' * 900}{i}" for i in range(200)]
    pattern = orjson.dumps({"request": {"mbean": "kafka.custom:*", "type": "read"},
                            "value": dict.fromkeys(names, timer), "status": 200,
                            "timestamp": STAMP})
    tags = {f"tag{i}": "v" * 1000 for i in range(60)} | {"host": "kafka-1"}
    wide = orjson.dumps({"name": "kafka_custom", "tags": tags, "timestamp": STAMP,
                         "fields": {f"F{i}.Value": i for i in range(20)}})
    out = decode_record_batch(records([pattern, wide]), configured())
    assert categories(out) == [None] * (200 * 15 + 20)


def test_tags_over_the_label_bounds_refuse_their_metric_once() -> None:
    """Every field of a Telegraf metric carries its tags: tags over the bounds refuse the
    metric once, before a sample is built, and the batch's other metrics are kept."""
    many = {f"t{i}": "v" for i in range(20_000)} | {"host": "kafka-1"}
    hostile = {"name": "kafka_custom", "tags": many, "timestamp": STAMP,
               "fields": {f"F{i}.Value": i for i in range(20_000)}}
    value = orjson.dumps({"metrics": [hostile, orjson.loads(telegraf(2))]})
    out = decode_record_batch(records([value]), configured())
    reasons = out.column("reject_reason").to_pylist()
    assert categories(out) == [None, None, "too_many_labels"]
    assert "more rejected" not in reasons[2]


def test_a_long_object_name_is_parsed_once_for_all_its_attributes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A name too long to cache, with thousands of attributes: parsed per attribute, a
    1 MB record took minutes."""
    from streaming.decode import jolokia

    parsed: list[str] = []
    original = jolokia.parse_object_name

    def counting(object_name: str):  # noqa: ANN202 - parse_object_name's own signature
        parsed.append(object_name)
        return original(object_name)

    monkeypatch.setattr(jolokia, "parse_object_name", counting)
    name = "kafka.custom:type=Custom,client-id=" + "c" * 5000
    value = orjson.dumps({"request": {"mbean": name, "type": "read"}, "status": 200,
                          "timestamp": STAMP, "value": {f"A{i}": i for i in range(500)}})
    out = decode_record_batch(records([value]), configured(), columnar=False)
    assert categories(out) == ["label_too_long"]
    assert parsed == [name]
