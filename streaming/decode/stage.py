"""The decode stage: Kafka records -> decoded rows, inside Spark's Python workers."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame

from streaming.decode.records import DecodeContext
from streaming.schemas import decoded_spark_ddl


def decode_stage(records: DataFrame, ctx: DecodeContext) -> DataFrame:
    """mapInArrow over the records: decoding scales with the executors, never the driver."""

    def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from streaming.decode.records import decode_record_batch

        for batch in batches:
            yield decode_record_batch(batch, ctx)

    return records.mapInArrow(decode_batches, decoded_spark_ddl())
