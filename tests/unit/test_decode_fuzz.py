"""Bad input never stops decoding: property tests over every decoder.

- arbitrary bytes never raise out of decode_record_batch and give exactly one reject row
- mutated valid messages (keys dropped, values replaced by arbitrary JSON, bytes truncated
  or flipped) never raise; such a record gives at most one reject row, and when it gives no
  row at all it really held no observations (nothing is lost silently)
- good records in the same batch decode exactly as they do alone
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.catalog import load_catalog
from streaming.decode.common import DecodeError, Observation
from streaming.decode.records import DECODERS, DecodeContext, decode_record_batch
from streaming.schemas import arrow_schema
from streaming.simulate.formats import ENCODERS
from streaming.simulate.model import ClusterModel
from streaming.simulate.samples import broker_samples

T0 = 1_714_564_800.0
CTX = DecodeContext()
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def records(values: list[bytes], keys: list[bytes | None] | None = None) -> pa.RecordBatch:
    n = len(values)
    when = datetime.fromtimestamp(T0, UTC)
    return pa.RecordBatch.from_pydict({
        "key": keys or [None] * n, "value": values, "topic": ["m"] * n,
        "partition": [0] * n, "offset": list(range(n)), "timestamp": [when] * n,
        "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))


def rows_by_offset(batch: pa.RecordBatch) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for row in batch.to_pylist():
        out.setdefault(row["source_offset"], []).append(row)
    return out


def stable(rows: list[dict]) -> list[tuple]:
    return [(r["ts"], r["cluster"], r["broker"], r["metric"], r["attribute"],
             tuple(r["labels"] or ()), r["value"], r["kind"], r["reject_reason"], r["raw"])
            for r in rows]


def valid_messages(fmt: str) -> list[tuple[bytes | None, bytes]]:
    model = ClusterModel("fuzz", [1, 2, 3], {"t": 3})
    model.broker_down(3)
    samples = broker_samples(model, 1, 15.0)
    return ENCODERS[fmt]("fuzz", 1, T0, samples)


FORMATS = ["jolokia", "jolokia-single", "prometheus-strimzi", "prometheus-namelabel", "otlp",
           "otlp-javaagent", "telegraf", "telegraf-batch"]
MESSAGES = {fmt: valid_messages(fmt) for fmt in FORMATS}

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["NaN", "+Inf", "-Inf", "Infinity", "", "0", "1e400", "-5",
                     "2024-05-01T12:00:00Z", "AGGREGATION_TEMPORALITY_DELTA"]),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=10), children, max_size=4)),
    max_leaves=12,
)


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, (*prefix, i))


def mutate(doc, path, op, replacement):
    doc = copy.deepcopy(doc)
    if not path:
        return replacement
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "replace":
        parent[last] = replacement
    else:  # wrap: a value where a list or object was expected, or the reverse
        parent[last] = [parent[last]]
    return doc


@st.composite
def mutated_message(draw, fmt):
    messages = MESSAGES[fmt]
    key, raw = messages[draw(st.integers(0, len(messages) - 1))]
    how = draw(st.sampled_from(["json", "json", "json", "truncate", "flip"]))
    if how == "truncate":
        return key, raw[: draw(st.integers(0, max(0, len(raw) - 1)))]
    if how == "flip":
        i = draw(st.integers(0, len(raw) - 1))
        return key, raw[:i] + bytes([raw[i] ^ draw(st.integers(1, 255))]) + raw[i + 1:]
    doc = orjson.loads(raw)
    all_paths = list(paths(doc))
    path = all_paths[draw(st.integers(0, len(all_paths) - 1))]
    op = draw(st.sampled_from(["delete", "replace", "wrap"]))
    if op == "delete" and not path:
        op = "replace"
    return key, orjson.dumps(mutate(doc, path, op, draw(json_values)))


def decoded_alone(key, value) -> list[tuple]:
    return stable(decode_record_batch(records([value], [key]), CTX).to_pylist())


def observations_of(value: bytes) -> int | None:
    """How many observations a decoder finds in a record, None when it is rejected."""
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    for module in DECODERS.values():
        if module.looks_like(doc):
            try:
                return len(module.decode(doc, load_catalog())[0])
            except DecodeError:
                return None
    return None


@FUZZ
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=5))
def test_arbitrary_bytes_never_raise_and_reject_once(values):
    batch = decode_record_batch(records(values), CTX)
    assert batch.schema == decode_record_batch(records([b"x"]), CTX).schema
    by_offset = rows_by_offset(batch)
    for offset, value in enumerate(values):
        rows = by_offset.get(offset, [])
        bad = [r for r in rows if r["reject_reason"] is not None]
        assert len(bad) <= 1
        if not [r for r in rows if r["reject_reason"] is None]:
            # a record that yields no sample is either rejected once or genuinely empty
            assert len(bad) == 1 or observations_of(value) == 0
        for r in bad:
            assert r["raw"] == value and r["source_offset"] == offset


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.data())
def test_mutated_messages_never_raise_and_leave_good_records_alone(fmt, data):
    good_key, good = MESSAGES[fmt][0]
    bad_key, bad = data.draw(mutated_message(fmt))
    batch = decode_record_batch(records([good, bad, good], [good_key, bad_key, good_key]), CTX)
    by_offset = rows_by_offset(batch)
    alone = decoded_alone(good_key, good)
    assert alone and all(r[8] is None for r in alone)
    assert stable(by_offset[0]) == alone
    assert stable(by_offset[2]) == alone
    mutated_rows = by_offset.get(1, [])
    rejected = [r for r in mutated_rows if r["reject_reason"] is not None]
    assert len(rejected) <= 1
    if rejected:
        assert rejected[0]["raw"] == bad
        reason = rejected[0]["reject_reason"]
        # a decoder bug is caught as decoder_error; structural damage must be named instead
        assert not reason.startswith("decoder_error"), reason
    if not mutated_rows:
        assert observations_of(bad) == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_decoders_raise_only_decode_error_on_wrong_shapes(fmt):
    catalog = load_catalog()
    module = DECODERS[fmt.split("-")[0]]
    for doc in (None, 1, "x", [], [1], {}, {"metrics": 5}, {"resourceMetrics": {}},
                {"labels": [], "value": 1}, {"fields": [], "name": 1},
                [{"request": 1, "value": 2}]):
        try:
            result = module.decode(doc, catalog)
        except DecodeError as err:
            assert err.reason
        else:
            observations, hints = result
            assert isinstance(hints, dict)
            assert all(isinstance(o, Observation) or hasattr(o, "reason") for o in observations)
