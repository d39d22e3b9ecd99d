"""Jolokia read responses in their three shapes, and ObjectName parsing."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pyarrow as pa
import pytest

from streaming.catalog import load_catalog, parse_object_name
from streaming.decode.records import DecodeContext, decode_record_batch
from streaming.schemas import arrow_schema

NOW = datetime.now(UTC).replace(microsecond=0)


def records(*values: bytes, key: bytes | None = b"prod/7") -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict({
        "key": [key] * n, "value": list(values), "topic": ["m"] * n, "partition": [0] * n,
        "offset": list(range(n)), "timestamp": [NOW] * n, "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))


def decode(*docs) -> list[dict]:
    values = [d if isinstance(d, bytes) else orjson.dumps(d) for d in docs]
    return decode_record_batch(records(*values), DecodeContext()).to_pylist()


def test_object_name_with_quoted_values():
    domain, props = parse_object_name('kafka.log:type=Log,name=Size,topic="a,b",partition=0')
    assert domain == "kafka.log"
    assert props == {"type": "Log", "name": "Size", "topic": "a,b", "partition": "0"}
    with pytest.raises(ValueError):
        parse_object_name("no-colon-here")
    with pytest.raises(ValueError, match="given twice"):  # which would win is a guess
        parse_object_name("kafka.server:type=ReplicaManager,name=LeaderCount,"
                          "name=UnderMinIsrPartitionCount")
    for empty_key in ("kafka.server:=x", "kafka.server:type=ReplicaManager, =x",
                      "kafka.log:type=Log,name=Size,=0"):
        with pytest.raises(ValueError, match="empty key"):
            parse_object_name(empty_key)


def test_an_mbean_with_an_empty_key_is_rejected_alone() -> None:
    """JMX has no ObjectName with an empty key; one in a pattern read's answer is a
    producer's error, rejected as bad_mbean while its neighbours' samples are kept."""
    ts = int(NOW.timestamp())
    rows = decode([{"request": {"mbean": "kafka.log:type=Log,name=NumLogSegments,*",
                                "type": "read"},
                    "value": {"kafka.log:type=Log,name=NumLogSegments,topic=a,partition=0":
                              {"Value": 3},
                              "kafka.log:type=Log,name=NumLogSegments,=a,partition=1":
                              {"Value": 4}},
                    "timestamp": ts, "status": 200}])
    kept = [r for r in rows if r["reject_reason"] is None]
    assert [(r["metric"], r["value"]) for r in kept] == [("NumLogSegments", 3.0)]
    assert [r["reject_reason"].split(":")[0] for r in rows if r["reject_reason"]] == ["bad_mbean"]


def test_three_response_shapes_decode_to_canonical_samples():
    ts = int(NOW.timestamp())
    rows = decode([
        {"request": {"mbean": "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount",
                     "type": "read"}, "value": {"Value": 2}, "timestamp": ts, "status": 200},
        {"request": {"mbean": "java.lang:type=OperatingSystem",
                     "attribute": "OpenFileDescriptorCount", "type": "read"},
         "value": 1234, "timestamp": ts, "status": 200},
        {"request": {"mbean": "kafka.server:type=ReplicaManager,name=*", "type": "read"},
         "value": {"kafka.server:name=IsrShrinksPerSec,type=ReplicaManager":
                   {"Count": 5, "OneMinuteRate": 0.1, "RateUnit": "SECONDS"}},
         "timestamp": ts, "status": 200},
        {"request": {"mbean": "kafka.server:type=Nope", "type": "read"}, "error": "x",
         "status": 404},
    ])
    by_metric = {(r["metric"], r["attribute"]): r for r in rows}
    assert by_metric[("UnderMinIsrPartitionCount", "Value")]["value"] == 2.0
    assert by_metric[("OpenFileDescriptorCount", "Value")]["value"] == 1234.0
    assert by_metric[("IsrShrinksPerSec", "Count")]["kind"] == "counter"
    assert by_metric[("IsrShrinksPerSec", "OneMinuteRate")]["kind"] == "gauge"
    assert len(rows) == 4  # RateUnit is not a number; the 404 entry has nothing to read
    assert {(r["cluster"], r["broker"]) for r in rows} == {("prod", "7")}
    assert all(r["ts"] == NOW for r in rows)


def test_unknown_mbean_is_kept_with_its_raw_name():
    rows = decode({"request": {"mbean": "kafka.server:type=Custom,name=Thing", "type": "read"},
                   "value": {"Value": 1}, "timestamp": int(NOW.timestamp()), "status": 200})
    assert rows[0]["metric"] is None
    assert dict(rows[0]["labels"])["raw_name"] == "kafka.server:type=Custom,name=Thing"


def test_bad_samples_are_quarantined_once_per_record_and_good_ones_kept():
    ts = int(NOW.timestamp())
    rows = decode(
        b"\x00\x01 not json",
        [{"request": {"mbean": "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec",
                      "type": "read"}, "value": {"Count": -3}, "timestamp": ts, "status": 200},
         {"request": {"mbean": "kafka.server:type=ReplicaManager,name=LeaderCount",
                      "type": "read"}, "value": {"Value": 10}, "timestamp": ts, "status": 200}],
        {"request": {"mbean": "kafka.server:type=ReplicaManager,name=LeaderCount",
                     "type": "read"}, "value": {"Value": 1}, "timestamp": ts + 10**6,
         "status": 200},
    )
    rejects = [r for r in rows if r["reject_reason"]]
    good = [r for r in rows if not r["reject_reason"]]
    assert [r["reject_reason"].split(":")[0] for r in rejects] == [
        "not_json", "negative_counter", "timestamp_skew"]
    assert [r["source_offset"] for r in rejects] == [0, 1, 2]
    assert rejects[0]["raw"] == b"\x00\x01 not json"
    assert [(r["metric"], r["value"]) for r in good] == [("LeaderCount", 10.0)]
    assert catalog_has_every_simulated_metric()


def catalog_has_every_simulated_metric() -> bool:
    from streaming.simulate.model import ClusterModel
    from streaming.simulate.samples import broker_samples

    model = ClusterModel("c", [1, 2, 3], {"t": 3})
    names = {s.metric for s in broker_samples(model, 1, 15)}
    return names <= set(load_catalog().metrics)


def test_a_record_that_read_nothing_is_quarantined_with_the_reason():
    """Every record lands in bronze or quarantine: a read that failed at the agent (the
    broker's JMX unreachable, an MBean this broker version lacks) and a response with no
    numeric attribute would otherwise vanish between the topic and the tables."""
    ts = int(NOW.timestamp())
    not_found = {"request": {"mbean": "kafka.server:type=Nope", "type": "read"},
                 "error_type": "javax.management.InstanceNotFoundException",
                 "error": "javax.management.InstanceNotFoundException : kafka.server:type=Nope",
                 "status": 404}
    units_only = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec",
                              "type": "read"}, "value": {"RateUnit": "SECONDS"},
                  "timestamp": ts, "status": 200}
    good = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=LeaderCount",
                        "type": "read"}, "value": {"Value": 3}, "timestamp": ts, "status": 200}
    rows = decode(not_found, [not_found, not_found], units_only, [], [not_found, good])
    reasons = {r["source_offset"]: r["reject_reason"] for r in rows if r["reject_reason"]}
    assert reasons[0] == reasons[1] == (
        "source_error: Jolokia status 404 reading kafka.server:type=Nope: "
        "javax.management.InstanceNotFoundException : kafka.server:type=Nope")
    assert reasons[2] == "no_samples: a jolokia record with no numeric sample in it"
    assert reasons[3].startswith("unknown_format")  # an empty bulk names no format
    assert 4 not in reasons  # a bulk read keeps its good entries; the failed one is skipped
    assert [(r["source_offset"], r["metric"]) for r in rows if not r["reject_reason"]] == [
        (4, "LeaderCount")]
    assert len(rows) == 5


@pytest.mark.parametrize("malformed", [
    "kafka.server:type=ReplicaManager,name",  # a key without a value
    'kafka.server:type=ReplicaManager,name="UnderMinIsrPartitionCount',  # unterminated quote
    "no-colon-here",
])
def test_one_malformed_object_name_in_a_bulk_read_costs_only_its_own_entry(malformed):
    """The good entries of the read become samples; the bad one is reported once, as a
    quarantine row of the record (bad_mbean), as a failed entry would be skipped."""
    ts = int(NOW.timestamp())
    good = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=LeaderCount",
                        "type": "read"}, "value": {"Value": 3}, "timestamp": ts, "status": 200}
    bad = {"request": {"mbean": malformed, "type": "read"}, "value": {"Value": 1, "Count": 2},
           "timestamp": ts, "status": 200}
    pattern = {"request": {"mbean": "kafka.server:type=ReplicaManager,*", "type": "read"},
               "value": {malformed: {"Value": 1},
                         "kafka.server:type=ReplicaManager,name=PartitionCount": {"Value": 9}},
               "timestamp": ts, "status": 200}
    rows = decode([good, bad], [bad, good], pattern)
    samples = [(r["source_offset"], r["metric"], r["value"]) for r in rows
               if not r["reject_reason"]]
    assert samples == [(0, "LeaderCount", 3.0), (1, "LeaderCount", 3.0),
                       (2, "PartitionCount", 9.0)]
    rejects = [(r["source_offset"], r["reject_reason"]) for r in rows if r["reject_reason"]]
    assert [offset for offset, _ in rejects] == [0, 1, 2]
    assert all(reason.startswith("bad_mbean: ") and "more rejected" not in reason
               for _, reason in rejects), rejects


@pytest.mark.parametrize("request_field", [None, "read", ["kafka.server:type=Nope"], 7])
def test_a_failed_entry_whose_request_is_not_an_object_costs_only_its_own_entry(request_field):
    """A failed entry is skipped whatever its request holds; the bulk read's good entries
    stay samples, and a record of failed entries alone is still quarantined as the source's
    error."""
    ts = int(NOW.timestamp())
    good = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=LeaderCount",
                        "type": "read"}, "value": {"Value": 3}, "timestamp": ts, "status": 200}
    failed = {"request": request_field, "error": "refused", "status": 403}
    rows = decode([good, failed], [failed], [failed, "not an entry"])
    assert [(r["source_offset"], r["metric"]) for r in rows if not r["reject_reason"]] == [
        (0, "LeaderCount")]
    reasons = {r["source_offset"]: r["reject_reason"] for r in rows if r["reject_reason"]}
    assert sorted(reasons) == [1, 2]
    assert reasons[1].startswith("source_error: Jolokia status 403")


PROXY = "service:jmx:rmi:///jndi/rmi://kafka-{}:9999/jmxrmi"


def proxied(broker: int | None, value: object, status: int = 200) -> dict:
    """One entry of a bulk read through a Jolokia proxy, `broker` its target (None: the
    proxy's own JVM)."""
    request: dict = {"mbean": "kafka.server:type=ReplicaManager,name=LeaderCount",
                     "attribute": "Value", "type": "read"}
    if broker is not None:
        request["target"] = {"url": PROXY.format(broker)}
    entry = {"request": request, "timestamp": int(NOW.timestamp()), "status": status}
    if status == 200:
        entry["value"] = value
    else:
        entry["error"] = "refused"
    return entry


@pytest.mark.parametrize("entries, brokers", [
    ([proxied(1, 11), proxied(2, 22)], ["1", "2"]),
    ([proxied(2, 22), proxied(1, 11)], ["2", "1"]),
    ([proxied(1, 11), proxied(1, 12)], ["1", "1"]),
    # the failed read of another target names nothing about the one that was read
    ([proxied(1, 11), proxied(2, None, status=404)], ["1"]),
    # an entry without a target is the proxy's own JVM: no broker from the others' targets
    ([proxied(1, 11), proxied(None, 33)], ["1", None]),
])
def test_a_bulk_read_of_several_targets_gives_each_sample_its_own_targets_broker(
        entries: list[dict], brokers: list[str | None]) -> None:
    """A Jolokia proxy's bulk read names a target per entry; each entry's samples are that
    target's, not the last entry's (which would put one broker's values on another)."""
    batch = decode_record_batch(records(orjson.dumps(entries), key=None), DecodeContext())
    rows = batch.to_pylist()
    got = [(r["value"], r["broker"]) for r in rows if r["reject_reason"] is None]
    values = [e["value"] for e in entries if e["status"] == 200]
    assert got == [(float(v), b) for v, b in zip(values, brokers, strict=True) if b is not None]
    rejected = [r["reject_reason"] for r in rows if r["reject_reason"] is not None]
    assert rejected == ([] if None not in brokers else
                        ["no_broker_identity: LeaderCount"])


@pytest.mark.parametrize("attribute", [{"attribute": "Value"}, {"attribute": ["Value"]}, {}])
def test_a_pattern_read_of_named_attributes_decodes_each_mbean(attribute: dict) -> None:
    """A pattern read answers {ObjectName: {attribute: value}} whether or not the request
    names its attributes; read as one scalar of the pattern it gave no sample, silently in
    a bulk read."""
    ts = int(NOW.timestamp())
    pattern = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=*", "type": "read",
                           **attribute},
               "value": {"kafka.server:type=ReplicaManager,name=LeaderCount": {"Value": 3},
                         "kafka.server:type=ReplicaManager,name=PartitionCount": {"Value": 9}},
               "timestamp": ts, "status": 200}
    rows = decode(pattern, [pattern])
    assert [(r["source_offset"], r["metric"], r["value"]) for r in rows] == [
        (0, "LeaderCount", 3.0), (0, "PartitionCount", 9.0),
        (1, "LeaderCount", 3.0), (1, "PartitionCount", 9.0)]
