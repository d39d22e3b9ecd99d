"""Times no sample can have: past Python's datetime range, at its edges, or far from now.

A Kafka record timestamp is whatever the producer wrote. Such a record must end in
quarantine with `timestamp_out_of_range`, never as an exception out of decoding (which
would stop the job on every replay), and the job's own time arithmetic (the newest event,
the touched windows) must survive a table that already holds one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pyarrow as pa
import pytest

from streaming.config import Config, ConfigError, load_config
from streaming.decode.records import DecodeContext, decode_record_batch, reason_category
from streaming.schemas import arrow_schema
from streaming.signals.spans import newest_event, touched_spans

BEYOND_DATETIME_MS = 253402300800000 + 10**9  # 10000-01-12: datetime cannot hold it
YEAR_9999_MS = int(datetime(9999, 12, 31, 23, 59, 50, tzinfo=UTC).timestamp() * 1000)
YEAR_1938_MS = int(datetime(1938, 1, 1, tzinfo=UTC).timestamp() * 1000)
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
US = pa.timestamp("us", tz="UTC")
UMI = "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"


def jolokia(ts: float | None = None) -> bytes:
    entry = {"request": {"mbean": UMI, "type": "read"}, "value": {"Value": 1}, "status": 200}
    if ts is not None:
        entry["timestamp"] = ts
    return orjson.dumps(entry)


def jolokia_attribute() -> bytes:
    """The single-attribute layout, which the columnar decoder takes."""
    return orjson.dumps({"request": {"mbean": UMI, "attribute": "Value", "type": "read"},
                         "value": 1, "status": 200})


def prometheus(when: str) -> bytes:
    return orjson.dumps({"timestamp": when, "value": "1", "labels": {"instance": "kafka-1:9404"},
                         "name": "kafka_server_replicamanager_underminisrpartitioncount"})


def records(values: list[bytes], millis: int | None) -> pa.RecordBatch:
    n = len(values)
    stamps = pa.array([millis * 1000 if millis is not None else None] * n, pa.int64()).cast(US)
    return pa.RecordBatch.from_pydict({
        "key": [b"prod/1"] * n, "value": values, "topic": ["kafka-metrics"] * n,
        "partition": [0] * n, "offset": list(range(n)), "timestamp": stamps,
        "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))


def configured() -> DecodeContext:
    return DecodeContext.from_config(Config())


def decoded(batch: pa.RecordBatch, ctx: DecodeContext, columnar: bool) -> list[dict]:
    return decode_record_batch(batch, ctx, columnar=columnar, ingest=NOW).to_pylist()


def categories(rows: list[dict]) -> list[str | None]:
    return [reason_category(r["reject_reason"]) if r["reject_reason"] else None for r in rows]


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize("ctx", [DecodeContext(), configured()], ids=["bare", "configured"])
@pytest.mark.parametrize("millis", [BEYOND_DATETIME_MS, YEAR_9999_MS, YEAR_1938_MS],
                         ids=["past-datetime-max", "year-9999", "year-1938"])
def test_record_timestamps_no_sample_can_have_are_quarantined_not_raised(
        millis: int, ctx: DecodeContext, columnar: bool) -> None:
    values = [jolokia(), jolokia_attribute(), prometheus("2026-03-01T12:00:00Z")]
    rows = decoded(records(values, millis), ctx, columnar)
    assert categories(rows) == ["timestamp_out_of_range"] * 3
    assert all(r["ts"] is None for r in rows)


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize(("ctx", "reason"), [
    (DecodeContext(max_skew_seconds=float("inf")), "timestamp_out_of_range"),
    (configured(), "timestamp_skew"),
], ids=["no-skew-limit", "configured"])
def test_sample_times_no_sample_can_have_are_quarantined_not_raised(
        ctx: DecodeContext, reason: str, columnar: bool) -> None:
    """Records without a time of their own, whose samples carry impossible ones."""
    values = [jolokia(BEYOND_DATETIME_MS / 1000), jolokia(YEAR_9999_MS / 1000),
              jolokia(YEAR_1938_MS / 1000), jolokia(1e300), prometheus("9999-12-31T23:59:59Z")]
    rows = decoded(records(values, None), ctx, columnar)
    assert categories(rows) == [reason] * len(values)


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize(("offset", "kept"), [
    (timedelta(minutes=9), True), (timedelta(minutes=11), False),
    (-timedelta(days=6), True), (-timedelta(days=8), False),
])
def test_wall_clock_window_quarantines_records_far_from_now(
        offset: timedelta, kept: bool, columnar: bool) -> None:
    millis = int((NOW + offset).timestamp() * 1000)
    rows = decoded(records([jolokia(), jolokia_attribute()], millis), configured(), columnar)
    assert categories(rows) == ([None, None] if kept else ["timestamp_out_of_range"] * 2)


def test_wall_clock_window_is_configurable_in_both_directions() -> None:
    config = load_config(None, environ={
        "KAFKA_HEALTH__QUALITY__MAX_AHEAD_OF_WALL_CLOCK_SECONDS": "60",
        "KAFKA_HEALTH__QUALITY__MAX_BEHIND_WALL_CLOCK_SECONDS": "null",
    })
    ctx = DecodeContext.from_config(config)
    ahead = int((NOW + timedelta(minutes=2)).timestamp() * 1000)
    behind = int((NOW - timedelta(days=400)).timestamp() * 1000)
    assert categories(decoded(records([jolokia()], ahead), ctx, False)) == [
        "timestamp_out_of_range"]
    assert categories(decoded(records([jolokia()], behind), ctx, False)) == [None]
    assert DecodeContext.from_json(ctx.to_json()) == ctx
    with pytest.raises(ConfigError, match="max_ahead_of_wall_clock_seconds"):
        load_config(None, environ={"KAFKA_HEALTH__QUALITY__MAX_AHEAD_OF_WALL_CLOCK_SECONDS": "-1"})


def test_newest_event_and_touched_spans_survive_unrepresentable_times() -> None:
    ts = pa.chunked_array([pa.array([YEAR_9999_MS * 1000, BEYOND_DATETIME_MS * 1000,
                                     int(NOW.timestamp() * 1e6)], pa.int64()).cast(US)])
    bronze = pa.table({"ts": ts})
    assert newest_event(bronze) is None
    spans = touched_spans(ts, 60, 300)
    assert spans == [(NOW, NOW + timedelta(minutes=1))]
    assert newest_event(bronze.slice(2)) == NOW
    assert newest_event(bronze.slice(0, 0)) is None


def test_a_create_time_past_what_microseconds_hold_is_quarantined_not_fatal_to_the_read():
    from confluent_kafka import TIMESTAMP_CREATE_TIME, Message

    from streaming.source.ranges import KafkaRange
    from streaming.source.records import records_batch

    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    messages = [Message(topic="kafka-metrics", partition=0, offset=offset, key=b"prod/1",
                        value=jolokia_attribute(), timestamp=(TIMESTAMP_CREATE_TIME, millis))
                for offset, millis in enumerate((now_ms, 10**16, 2**63 - 1))]
    batch, position = records_batch(messages, KafkaRange("kafka-metrics", 0, 0, 3), 0)
    assert position == 3 and batch.num_rows == 3
    decoded = decode_record_batch(batch, configured())
    reasons = [reason_category(r) if r else None
               for r in decoded.column("reject_reason").to_pylist()]
    assert reasons == [None, "timestamp_out_of_range", "timestamp_out_of_range"]
