"""Kafka messages to Arrow, on the executors: the kafka_records batch of a consume()'s
messages (Spark's kafka source's columns, with `headers` as with includeHeaders), and how
many records the next consume() may take. Plain functions; the read loop
(streaming.source.partition_reader) owns the consumer.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pyarrow as pa

from streaming.schemas import arrow_schema
from streaming.source.ranges import KafkaRange

CHUNK = 10_000
# The values a chunk of records should hold at most (chunk_records); decoding slices it
# further (streaming.decode.records.DECODE_BYTES).
CHUNK_BYTES = 16 * 1024 * 1024
# A range's first consume(), before any of its records' sizes is known: CHUNK_BYTES of
# records at the broker's default message.max.bytes (1 MiB).
FIRST_CHUNK = 16
RECORDS = arrow_schema("kafka_records", optional=True)  # with Spark's `headers`
_HEADERS = RECORDS.field("headers").type
_MILLIS = pa.timestamp("ms", tz="UTC")
LATEST_MICROS_AS_MILLIS = np.iinfo(np.int64).max // 1000
_MICROS = pa.timestamp("us", tz="UTC")


def binary_column(items: list[bytes | None]) -> pa.Array:
    """A binary column of message keys or values from one join and their lengths: Arrow's
    builder copies item by item (0.25 µs a 170-byte value, against 0.07). A null (a
    tombstone, a record without a key) or a chunk past 2 GiB takes the builder."""
    try:
        data = b"".join(items)  # type: ignore[arg-type]
    except TypeError:
        return pa.array(items, pa.binary())
    if len(data) >= 2**31:
        return pa.array(items, pa.binary())
    offsets = np.zeros(len(items) + 1, dtype=np.int32)
    # the join above took every item, so none is None
    np.cumsum(np.fromiter(map(len, cast(list[bytes], items)), dtype=np.int32, count=len(items)),
              out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(items),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def headers_column(messages: list[Any]) -> pa.Array:
    """Each message's headers as Spark's kafka source gives them (includeHeaders): a list of
    {key, value} structs, null for a message without any."""
    headers = [m.headers() for m in messages]
    if not any(headers):
        return pa.nulls(len(headers), _HEADERS)
    return pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in headers],
                    _HEADERS)


def chunk_records(batch: pa.RecordBatch) -> int:
    """How many records the next consume() may take, from the sizes of this batch's: CHUNK
    of small ones, fewer of large ones, so that a chunk's values stay near CHUNK_BYTES
    (10,000 records of 1 MB, the broker's default limit, would be 10 GB in the worker)."""
    average = batch.column("value").nbytes / max(batch.num_rows, 1)
    return max(1, min(CHUNK, int(CHUNK_BYTES // max(average, 1.0))))


def records_batch(messages: list[Any], want: KafkaRange, position: int
                  ) -> tuple[pa.RecordBatch | None, int]:
    """The kafka_records batch of the messages in `want` from `position` on, and the next
    position. Built column by column: one list comprehension per accessor and Arrow for the
    timestamps (a loop of appends and a datetime per message cost more than the read).
    Messages outside the range (left from an earlier range on this consumer) are dropped."""
    from confluent_kafka import KafkaError

    failed = [m for m in messages if m.error() is not None]
    for message in failed:
        if message.error().code() != KafkaError._PARTITION_EOF:
            raise RuntimeError(f"Kafka read error: {message.error()}")
    if failed:
        messages = [m for m in messages if m.error() is None]
    offsets = np.asarray([m.offset() for m in messages], dtype=np.int64)
    inside = ((offsets >= position) & (offsets < want.end)
              & (np.asarray([m.partition() for m in messages], dtype=np.int64) == want.partition)
              & np.asarray([m.topic() == want.topic for m in messages], dtype=bool))
    if not inside.all():
        messages = [m for m, keep in zip(messages, inside.tolist(), strict=True) if keep]
        offsets = offsets[inside]
    if not messages:
        return None, position
    n = len(messages)
    stamps = np.asarray([m.timestamp() for m in messages], dtype=np.int64).reshape(n, 2)
    # A producer's CreateTime may be any long: one past what microseconds can hold is
    # clamped to the largest that fits (year 294247), so that the decoder quarantines it
    # as timestamp_out_of_range instead of the cast failing the task on every replay.
    kinds, millis = stamps[:, 0], np.minimum(stamps[:, 1], LATEST_MICROS_AS_MILLIS)
    return pa.RecordBatch.from_arrays([
        binary_column([m.key() for m in messages]),
        binary_column([m.value() for m in messages]),
        pa.array([want.topic] * n, pa.string()),
        pa.array(np.full(n, want.partition, dtype=np.int32)),
        pa.array(offsets),
        pa.array(millis, mask=millis < 0).cast(_MILLIS).cast(_MICROS),
        pa.array(np.where(kinds == 1, 0, np.where(kinds == 2, 1, -1)).astype(np.int32)),
        headers_column(messages),
    ], schema=RECORDS), int(offsets.max()) + 1
