"""The decode stage: Kafka records -> decoded rows, inside Spark's Python workers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame

from streaming.config import SignalsConfig
from streaming.decode.packing import PACKED_DDL
from streaming.decode.records import DecodeContext
from streaming.sinks.task_files import TaskWriter


def decode_stage(records: DataFrame, ctx: DecodeContext, writer: TaskWriter | None = None,
                 signals: SignalsConfig | None = None) -> DataFrame:
    """mapInArrow over the records: decoding scales with the executors, never the driver.
    The output is packed as the Python source's is, so the job reads one layout; with a
    `writer` the tasks write the bronze and quarantine files too."""

    def decode_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from streaming.decode.packing import pack_chunks
        from streaming.decode.records import decoded_chunks

        # mypy reads config/model.py's Field(default, ...) as a field without a default
        yield from pack_chunks(decoded_chunks(batches, ctx), writer,
                               signals or SignalsConfig())  # type: ignore[call-arg]

    return records.mapInArrow(decode_batches, PACKED_DDL)
