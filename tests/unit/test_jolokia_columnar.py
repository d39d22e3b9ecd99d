"""The columnar Jolokia decoder gives exactly the per-record decoder's rows, rejects included.

Both paths run on the same batch with the same ingest time and their outputs are compared
row for row and in order: over generated single-attribute read responses that vary every
field the decoder looks at (known, unknown and malformed MBeans; values at the 2**53
boundary, negative, of the wrong type; timestamps missing, null, skewed; status, target url,
record key and time) and every framing a broker may hand over (pretty-printed, padded, BOM,
NaN literals, non-ASCII, truncated, bulk arrays), and over a simulator batch large enough
for the halving of an unparseable chunk to matter.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.catalog import load_catalog
from streaming.config import IdentityConfig
from streaming.decode import jolokia_columnar
from streaming.decode.records import DecodeContext, IdentityResolver, decode_record_batch
from streaming.schemas import arrow_schema
from streaming.simulate.formats import _object_name
from streaming.simulate.model import ClusterModel
from streaming.simulate.samples import broker_samples

T0 = 1_714_564_800
INGEST = datetime.fromtimestamp(T0 + 7, UTC)
CONTEXTS = {
    "auto": DecodeContext(),
    "jolokia-topic": DecodeContext(topic_formats={"m": "jolokia"}, topic_clusters={"m": "east"}),
    "instance-map": DecodeContext(identity=IdentityConfig(
        key_pattern=None, instance_map={"http://kafka-3:8778/jolokia": "3"})),
}
MBEANS = [
    "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount",
    "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec",
    "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
    "kafka.log:type=Log,name=NumLogSegments,topic=orders,partition=7",
    "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce",
    "kafka.server:type=ReplicaManager,name=PartitionCount,broker=4",
    "kafka.server:type=ReplicaManager,name=LeaderCount,cluster=west,instance=kafka-9:8778",
    'kafka.log:type=Log,name=Size,topic="a,b",partition=0',
    "com.example:type=Unknown,name=Thing",
    "no-colon-here",
    "kafka.server:type",
]
ATTRIBUTES = ["Value", "Count", "OneMinuteRate", "99thPercentile", "Mean", "RateUnit"]
OMIT = object()
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

numbers = st.one_of(
    st.integers(-(2**63) + 1, 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -0.0, 3.5, -1, 2**53 - 1, 2**53, 2**53 + 1, -(2**53), 1e300]),
)
values = st.one_of(numbers, numbers, numbers, st.booleans(), st.text(max_size=5), st.none(),
                   st.just([1]), st.just({"Count": 1}), st.just(OMIT))
timestamps = st.one_of(
    st.integers(T0 - 3000, T0 + 3000), st.floats(T0 - 1000.0, T0 + 1000.0),
    st.just(OMIT), st.none(), st.booleans(), st.just("1714564800"), st.just(10**17),
)
statuses = st.sampled_from([200, 200, 200, 404, OMIT, None, 200.0])
targets = st.sampled_from([OMIT, {"url": "http://kafka-3:8778/jolokia"}, {"url": 5},
                           "http://x", {"url": None}, None])
GOOD_TARGETS = [OMIT, {"url": "http://kafka-3:8778/jolokia"}]
framings = st.sampled_from(["plain"] * 8 + ["indent", "pad", "bom", "nan", "inf", "utf8",
                                             "truncate", "array", "two", "empty"])


def put(doc: dict, key: str, value: object) -> None:
    if value is not OMIT:
        doc[key] = value


@st.composite
def message(draw) -> tuple[bytes | None, bytes, datetime | None]:
    """Half of them well-formed reads (most fields taken from their good choices), so that
    batches mix records the columnar path keeps with records it hands back."""
    good = draw(st.booleans())
    request: dict = {"mbean": draw(st.sampled_from(MBEANS[:8] if good else MBEANS)),
                     "type": "read"}
    put(request, "attribute", draw(st.sampled_from(ATTRIBUTES[:5] if good
                                                   else [*ATTRIBUTES, OMIT])))
    put(request, "target", draw(st.sampled_from(GOOD_TARGETS) if good else targets))
    doc: dict = {"request": request}
    put(doc, "value", draw(numbers if good else values))
    put(doc, "timestamp", draw(st.one_of(st.integers(T0 - 600, T0 + 600), st.just(OMIT))
                               if good else timestamps))
    put(doc, "status", 200 if good else draw(statuses))
    raw = orjson.dumps(doc)
    framing = "plain" if good else draw(framings)
    if framing == "indent":
        raw = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    elif framing == "pad":
        raw = b" " + raw + b" "
    elif framing == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif framing in ("nan", "inf"):
        raw = raw[:-1] + (b',"x":NaN}' if framing == "nan" else b',"x":-Infinity}')
    elif framing == "utf8":
        raw = raw[:-1] + ',"note":"caf\u00e9"}'.encode()
    elif framing == "truncate":
        raw = raw[:draw(st.integers(0, len(raw) - 1))]
    elif framing == "array":
        raw = b"[" + raw + b"]"
    elif framing == "two":
        raw = raw + raw
    elif framing == "empty":
        raw = b"{}"
    key = draw(st.sampled_from([b"east/3", b"5", None, b"a/b/c", b"prod/"]))
    when = draw(st.sampled_from([datetime.fromtimestamp(T0, UTC), None,
                                 datetime.fromtimestamp(T0 + 0.123457, UTC)]))
    return key, raw, when


def records(messages: list[tuple[bytes | None, bytes, datetime | None]],
            topics: list[str] | None = None) -> pa.RecordBatch:
    n = len(messages)
    return pa.RecordBatch.from_pydict({
        "key": [m[0] for m in messages], "value": [m[1] for m in messages],
        "topic": topics or ["m"] * n, "partition": [0] * n, "offset": list(range(n)),
        "timestamp": [m[2] for m in messages], "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))


def both(batch: pa.RecordBatch, ctx: DecodeContext) -> tuple[list[dict], list[dict]]:
    catalog = load_catalog()
    fast = decode_record_batch(batch, ctx, catalog, columnar=True, ingest=INGEST)
    slow = decode_record_batch(batch, ctx, catalog, columnar=False, ingest=INGEST)
    assert fast.schema == slow.schema
    return fast.to_pylist(), slow.to_pylist()


@pytest.mark.parametrize("name", sorted(CONTEXTS))
@SETTINGS
@given(st.lists(message(), min_size=1, max_size=40))
def test_generated_batches_decode_identically(name, messages):
    fast, slow = both(records(messages), CONTEXTS[name])
    assert fast == slow


def fleet_messages(count: int) -> list[tuple[bytes | None, bytes, datetime | None]]:
    """Single-attribute scrapes of a simulated 4-broker cluster, as the benchmarks send."""
    catalog = load_catalog()
    model = ClusterModel("sim", [1, 2, 3, 4], {"orders": 30})
    when = datetime.fromtimestamp(T0, UTC)
    out = []
    while len(out) < count:
        for broker in model.brokers:
            for sample in broker_samples(model, broker, 15.0):
                mbean, attribute = _object_name(catalog, sample)
                body = {"request": {"mbean": mbean, "attribute": attribute, "type": "read"},
                        "value": sample.value, "timestamp": T0, "status": 200}
                out.append((f"sim/{broker}".encode(), orjson.dumps(body), when))
    return out[:count]


def test_a_few_bad_records_in_a_large_batch_cost_only_themselves():
    rng = random.Random(7)
    messages = fleet_messages(6000)
    bad = sorted(rng.sample(range(len(messages)), 6))
    for i in bad:
        key, raw, when = messages[i]
        messages[i] = (key, raw[: len(raw) // 2] + b"}", when)  # parse error, still framed
    messages[100] = (b"sim/1", messages[100][1].replace(b'"status":200', b'"status":404'), None)
    batch = records(messages)
    fast, slow = both(batch, CONTEXTS["auto"])
    assert fast == slow
    rejected = {row["source_offset"]: row["reject_reason"] for row in fast
                if row["reject_reason"] is not None}
    assert sorted(rejected) == sorted({*bad, 100})  # the failed read is quarantined too
    assert rejected[100].startswith("source_error: Jolokia status 404")
    resolver = IdentityResolver(IdentityConfig(), {})
    split = jolokia_columnar.decode(batch, {"m"}, 10 << 20, resolver, load_catalog(), INGEST,
                                    900.0)
    # Each unparseable record costs itself, not its chunk; the 404 is handed back too.
    assert sorted(split.rest.tolist()) == sorted([*bad, 100])


@pytest.mark.parametrize("where", [0, 99, 199])
def test_a_nan_literal_in_a_large_chunk_is_found_wherever_it_sits(where):
    """A large chunk is scanned for NaN/Infinity literals by a vectorized search (strict
    JSON has none, Arrow's reader accepts them): found at either end or in the middle, the
    record goes to the per-record decoder, and nothing else does."""
    messages = fleet_messages(200)
    key, raw, when = messages[where]
    messages[where] = (key, raw[:-1] + b',"x":NaN}', when)
    messages[(where + 50) % 200] = (key, raw.replace(b'"value":', b'"value":-Infinity,"v":'),
                                    when)
    batch = records(messages)
    fast, slow = both(batch, CONTEXTS["auto"])
    assert fast == slow
    resolver = IdentityResolver(IdentityConfig(), {})
    split = jolokia_columnar.decode(batch, {"m"}, 10 << 20, resolver, load_catalog(), INGEST,
                                    900.0)
    assert sorted(split.rest.tolist()) == sorted([where, (where + 50) % 200])


def test_other_formats_and_topics_keep_their_order_among_columnar_rows():
    jolokia_rows = fleet_messages(30)
    prometheus = (b"sim/2", orjson.dumps({"labels": {"__name__": "kafka_server_x", "instance":
                                          "kafka-2:9404"}, "value": 1.0,
                                          "timestamp": T0 * 1000}),
                  datetime.fromtimestamp(T0, UTC))
    messages = jolokia_rows[:10] + [prometheus] + jolokia_rows[10:20] + [prometheus]
    topics = ["m"] * 10 + ["p"] + ["m"] * 10 + ["p"]
    ctx = DecodeContext(topic_formats={"p": "prometheus"})
    fast, slow = both(records(messages, topics), ctx)
    assert fast == slow
    assert [row["source_offset"] for row in fast] == sorted(row["source_offset"] for row in fast)


def test_label_limits_apply_to_names_already_decoded_under_other_limits():
    """The catalog's answers for an MBean are reused batch after batch; a decode under
    tighter label limits must still reject the labels those limits forbid."""
    batch = records(fleet_messages(300))
    fast, slow = both(batch, CONTEXTS["auto"])
    assert fast == slow and not any(row["reject_reason"] for row in fast)
    tight = DecodeContext(max_label_chars=3)  # "orders" (a topic label) is longer
    fast, slow = both(batch, tight)
    assert fast == slow
    rejected = [row for row in fast if row["reject_reason"]]
    assert rejected and all(row["reject_reason"].startswith("label_too_long")
                            for row in rejected)
    assert len(rejected) == sum(row["metric"] == "NumLogSegments" for row in both(
        batch, CONTEXTS["auto"])[0])


def _read(value: bytes = b"1", ts: bytes = b"%d" % T0, status: bytes = b"200",
          mbean: bytes = b"kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount",
          attribute: bytes = b'"Value"', target: bytes = b"", extra: bytes = b"") -> bytes:
    return (b'{"request":{"mbean":"' + mbean + b'","attribute":' + attribute
            + b',"type":"read"' + target + b'},"value":' + value + b',"timestamp":' + ts
            + b',"status":' + status + extra + b"}")


# Single-attribute reads a producer could send, each one a line of JSON within the columnar
# path's framing: both decoders must give the same rows, rejects and their reasons included.
HOSTILE_READS = {
    "bool value": _read(b"true"), "false value": _read(b"false"),
    "text value": _read(b'"1"'), "null value": _read(b"null"), "list value": _read(b"[1]"),
    "object value": _read(b'{"Value":1}'), "past int64": _read(b"9223372036854775808"),
    "past uint64": _read(b"18446744073709551616"), "1e308": _read(b"1e308"),
    "underflow": _read(b"1e-400"), "minus zero": _read(b"-0"), "2**53+1": _read(b"9007199254740993"),
    "bool time": _read(ts=b"true"), "text time": _read(ts=b'"1714564800"'),
    "ms time": _read(ts=b"%d" % (T0 * 1000)), "zero time": _read(ts=b"0"),
    "negative time": _read(ts=b"-1"), "huge time": _read(ts=b"1e300"),
    "fraction time": _read(ts=b"1714564800.9999999999"), "null time": _read(ts=b"null"),
    "text status": _read(status=b'"200"'), "float status": _read(status=b"200.0"),
    "2e2 status": _read(status=b"2e2"), "fractional status": _read(status=b"200.5"),
    "bool status": _read(status=b"true"), "null status": _read(status=b"null"),
    "number attribute": _read(attribute=b"5"), "null attribute": _read(attribute=b"null"),
    "empty attribute": _read(attribute=b'""'), "list attribute": _read(attribute=b'["Value"]'),
    "number mbean after a text one": _read(mbean=b'","mbean":5,"x":"'),
    "empty mbean": _read(mbean=b""), "empty key": _read(mbean=b"kafka.server:=x"),
    "empty property value": _read(
        mbean=b"kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount,topic="),
    "escaped NUL": _read(mbean=b"kafka.server:type=ReplicaManager,name=X\\u0000"),
    "lone surrogate": _read(mbean=b"kafka.server:type=ReplicaManager,name=X\\ud800"),
    "surrogate pair": _read(mbean=b"kafka.server:type=ReplicaManager,name=X\\ud83d\\ude00"),
    "raw tab": _read(mbean=b"kafka.server:type=Replica\tManager,name=X"),
    "number url": _read(target=b',"target":{"url":5}'),
    "empty url": _read(target=b',"target":{"url":""}'),
    "text target": _read(target=b',"target":"http://kafka-3:8778/jolokia"'),
    "duplicate value": _read(extra=b',"value":2'),
    "duplicate status": _read(status=b"404", extra=b',"status":200'),
    "duplicate request": _read(extra=b',"request":{"mbean":"kafka.server:type=ReplicaManager,'
                                     b'name=IsrShrinksPerSec","attribute":"Count"}'),
    "escaped key": _read().replace(b'"value"', b'"val\\u0075e"'),
    "leading zero": _read(b"01"), "trailing comma": _read(extra=b","),
    "NaN in a string": _read(extra=b',"x":"NaN"'),
    "deep nesting": _read(extra=b',"x":' + b"[" * 800 + b"]" * 800),
    "two documents": _read() + _read(),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_READS))
def test_hostile_single_reads_decode_identically(name):
    good = fleet_messages(3)
    when = datetime.fromtimestamp(T0, UTC)
    for key in (b"east/3", None):
        for messages in ([(key, HOSTILE_READS[name], when)],
                         [*good, (key, HOSTILE_READS[name], when), *good]):
            for ctx in CONTEXTS.values():
                fast, slow = both(records(messages), ctx)
                assert fast == slow


@pytest.mark.parametrize("value", [b"-0", b"-0.0", b"-0e0", b"0", b"0.0"])
def test_a_zero_keeps_the_sign_the_per_record_decoder_gives_it(value):
    """-0 (a JSON integer) is 0 to orjson and -0.0 to Arrow's reader; -0.0 (a float) is
    -0.0 to both. Equality cannot tell the two zeros apart, so the signs are compared."""
    fast, slow = both(records([(b"east/3", _read(value), datetime.fromtimestamp(T0, UTC))]),
                      CONTEXTS["auto"])
    assert fast == slow
    assert [math.copysign(1.0, row["value"]) for row in fast] == [
        math.copysign(1.0, row["value"]) for row in slow]
