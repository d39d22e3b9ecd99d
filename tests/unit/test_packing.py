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


def test_the_spark_engine_decode_stage_packs_what_the_python_source_would(spark) -> None:
    """engine "spark" (Spark's own kafka source) decodes in a mapInArrow stage; its output
    must unpack to the decoder's rows with the records counted, as the job expects."""
    from streaming.decode.stage import decode_stage
    from streaming.schemas import spark_ddl

    read = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=LeaderCount",
                        "attribute": "Value"}, "value": 12, "timestamp": 1714521600,
            "status": 200}
    values = [orjson.dumps({**read, "value": i}) for i in range(50)] + [b"\xff garbage"]
    records = pa.table({
        "key": [b"c/1"] * 51, "value": values, "topic": ["m"] * 51, "partition": [0] * 51,
        "offset": list(range(51)), "timestamp": [datetime(2024, 5, 1, tzinfo=UTC)] * 51,
        "timestampType": [0] * 51,
    }, schema=arrow_schema("kafka_records"))
    frame = spark.createDataFrame(records.to_pandas(), schema=spark_ddl("kafka_records"))
    rows, counted = unpack(decode_stage(frame, DecodeContext()).toArrow())
    expected = decode_record_batch(records.to_batches()[0], DecodeContext())
    assert counted == 51
    drop = ["ingest_ts"]
    got = sorted(rows.drop_columns(drop).to_pylist(), key=lambda r: r["source_offset"])
    assert got == pa.Table.from_batches([expected]).drop_columns(drop).to_pylist()
    assert sum(r["reject_reason"] is not None for r in got) == 1


def test_blobs_of_sliced_and_large_binary_columns_unpack_the_same() -> None:
    """Spark may hand the blobs over as large_binary, and a table slice starts mid-buffer:
    the zero-copy read of the blobs must honour both."""
    read = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=PartitionCount",
                        "attribute": "Value"}, "value": 1, "timestamp": 1714521600,
            "status": 200}
    parts = [decoded([orjson.dumps({**read, "value": i})] * (i + 1)) for i in range(4)]
    packed = pa.Table.from_batches([pack(part, part.num_rows) for part in parts]).combine_chunks()
    wide = packed.cast(pa.schema([pa.field(f.name, pa.large_binary()) if f.type == pa.binary()
                                  else f for f in PACKED_SCHEMA]))
    for table in (packed.slice(1, 2), wide.slice(1, 2)):
        rows, records = unpack(table)
        assert records == 2 + 3
        assert rows.to_pylist() == parts[1].to_pylist() + parts[2].to_pylist()
