"""Decoded rows cross Spark as Arrow IPC blobs, one row per decoded chunk.

Why: everything after decoding runs on Arrow in the driver (delta-rs, the signal stages), so
Spark only has to carry a batch from the read tasks to foreachBatch. Carried as rows, each
decoded sample is converted Arrow -> Spark row in the executor and row -> Arrow again in
`toArrow()`, ~0.45 s of JVM time per 250k samples on two cores; carried as one blob per
chunk of up to 10k records the JVM moves a few dozen byte arrays instead. Each blob also
says how many Kafka records it came from, so the job counts records, not blobs.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.schemas import decoded_arrow_schema

PACKED_DDL = "`records` BIGINT, `decoded` BINARY"
PACKED_SCHEMA = pa.schema([("records", pa.int64()), ("decoded", pa.binary())])


def pack(decoded: pa.RecordBatch, records: int) -> pa.RecordBatch:
    """One packed row: the decoded batch as an Arrow IPC stream and its record count."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, decoded.schema) as writer:
        writer.write_batch(decoded)
    blob = sink.getvalue()
    offsets = pa.py_buffer(np.asarray([0, blob.size], dtype=np.int32).tobytes())
    return pa.RecordBatch.from_arrays(
        [pa.array([records], pa.int64()),
         pa.Array.from_buffers(pa.binary(), 1, [None, offsets, blob])],  # no copy of the blob
        schema=PACKED_SCHEMA)


def blobs(column: pa.ChunkedArray) -> Iterator[pa.Buffer]:
    """Each value of a binary column as a slice of the column's own data buffer, no copy
    (Spark's toArrow hands over binary or large_binary, by spark.sql's large-var-types)."""
    for chunk in column.chunks:
        width = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
        _, offsets, data = chunk.buffers()
        bounds = np.frombuffer(offsets, dtype=width)[chunk.offset:chunk.offset + len(chunk) + 1]
        for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            yield data.slice(start, end - start)


def unpack(packed: pa.Table) -> tuple[pa.Table, int]:
    """The decoded rows of every blob (in blob order) and the Kafka records they came from."""
    schema = decoded_arrow_schema()
    tables = [pa.ipc.open_stream(blob).read_all() for blob in blobs(packed.column("decoded"))]
    decoded = pa.concat_tables(tables) if tables else schema.empty_table()
    return decoded, int(pc.sum(packed.column("records")).as_py() or 0)
