"""The decode stage: Kafka records -> decoded rows, inside Spark's Python workers."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame

from streaming.decode.packing import PACKED_DDL
from streaming.decode.records import DecodeContext


def decode_stage(records: DataFrame, ctx: DecodeContext) -> DataFrame:
    """mapInArrow over the records: decoding scales with the executors, never the driver.
    The output is packed as the Python source's is, so the job reads one layout."""

    def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from streaming.decode.packing import pack
        from streaming.decode.records import decode_record_batch

        for batch in batches:
            yield pack(decode_record_batch(batch, ctx), batch.num_rows)

    return records.mapInArrow(decode_batches, PACKED_DDL)
