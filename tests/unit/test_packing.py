"""Decoded batches survive the packed crossing of Spark exactly, with their record counts."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pyarrow as pa

from streaming.decode.packing import PACKED_SCHEMA, pack, unpack
from streaming.decode.records import DecodeContext, decode_record_batch
from streaming.schemas import arrow_schema, decoded_arrow_schema


def decoded(values: list[bytes]) -> pa.RecordBatch:
    n = len(values)
    records = pa.RecordBatch.from_pydict({
        "key": [b"c/1"] * n, "value": values, "topic": ["m"] * n, "partition": [0] * n,
        "offset": list(range(n)), "timestamp": [datetime(2024, 5, 1, tzinfo=UTC)] * n,
        "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))
    return decode_record_batch(records, DecodeContext())


def test_blobs_unpack_to_the_same_rows_in_order_and_count_records() -> None:
    read = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=PartitionCount",
                        "attribute": "Value"}, "value": 7, "timestamp": 1714521600,
            "status": 200}
    first = decoded([orjson.dumps(read), b"not json"])
    second = decoded([orjson.dumps({**read, "value": 8})] * 3)
    packed = pa.Table.from_batches([pack(first, 2), pack(second, 3)])
    assert packed.schema == PACKED_SCHEMA
    rows, records = unpack(packed)
    assert records == 5
    assert rows.schema == decoded_arrow_schema()
    assert rows.to_pylist() == first.to_pylist() + second.to_pylist()


def test_an_empty_batch_unpacks_to_an_empty_table() -> None:
    rows, records = unpack(PACKED_SCHEMA.empty_table())
    assert (rows.num_rows, records) == (0, 0)
    assert rows.schema == decoded_arrow_schema()
