"""Decoded rows cross Spark as Arrow IPC blobs, one row per decoded chunk.

Why: everything after decoding runs on Arrow in the driver (delta-rs, the signal stages), so
Spark only has to carry a batch from the read tasks to foreachBatch. Carried as rows, each
decoded sample is converted Arrow -> Spark row in the executor and row -> Arrow again in
`toArrow()`, ~0.45 s of JVM time per 250k samples on two cores; carried as one blob per
chunk of up to 10k records the JVM moves a few dozen byte arrays instead. Each blob also
says how many Kafka records it came from, so the job counts records, not blobs.

When the read tasks write bronze and quarantine (delta.bronze_writers: read_tasks), a
chunk's row carries what the driver needs instead of its samples: the files' add actions,
a summary of the rows they hold, the partials of its gauge signal samples and its counter
signal samples (`pack_chunk`, `unpack_written`). Per chunk that is a few rows per
(cluster, broker, window), not one per sample.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming import failpoints
from streaming.config import SignalsConfig
from streaming.schemas import decoded_arrow_schema
from streaming.signals.broker import SIGNAL_METRICS
from streaming.signals.incremental import NewestSegments, chunk_parts
from streaming.sinks.task_files import TaskFile, TaskWriter

LOG = logging.getLogger("kafka_health.packing")
# `lost`: offset ranges a read task found gone (retention, a broker that lost data) and
# skipped over, with failOnDataLoss off; the driver counts them as data loss.
PACKED_DDL = ("`records` BIGINT, `decoded` BINARY, `summary` BINARY, `partials` BINARY, "
              "`segments` BINARY, `files` STRING, `lost` BIGINT")
PACKED_SCHEMA = pa.schema([("records", pa.int64()), ("decoded", pa.binary()),
                           ("summary", pa.binary()), ("partials", pa.binary()),
                           ("segments", pa.binary()), ("files", pa.string()),
                           ("lost", pa.int64())])
# What the summary of a chunk's bronze rows keeps per (cluster, broker, topic, window):
# enough for the driver's admission, touched windows, progress and identity warnings.
SUMMARY_KEYS = ["cluster", "broker", "source_topic", "window_start"]
SUMMARY_SCHEMA = pa.schema([
    pa.field("cluster", pa.string()), pa.field("broker", pa.string()),
    pa.field("source_topic", pa.string()), pa.field("window_start", pa.int64()),
    pa.field("rows", pa.int64()), pa.field("defaulted", pa.int64()),
    pa.field("newest", pa.int64()), pa.field("quarantined", pa.int64()),
])


def _ipc(table: pa.Table | pa.RecordBatch) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    return sink.getvalue()


def _binary(blob: pa.Buffer | None) -> pa.Array:
    """A one-value binary column over the blob's own buffer (no copy)."""
    if blob is None:
        return pa.nulls(1, pa.binary())
    offsets = pa.py_buffer(np.asarray([0, blob.size], dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, blob])


# What a writing read task sends besides signal samples: (summary, partials, segments,
# files' add actions as JSON).
Written = tuple[pa.Table | None, pa.Table | None, pa.Table | None, str]


def pack(decoded: pa.RecordBatch | pa.Table, records: int, written: Written | None = None,
         lost: int = 0) -> pa.RecordBatch:
    """One packed row: the decoded rows as an Arrow IPC stream and its record count. When
    the read task wrote the chunk's files, `written` is (summary, partials, segments,
    files): the summary of the rows the files hold, the partials and segments of the
    chunk's gauge signal samples (None when they could not be made or are sent in another
    row), and the files' add actions as JSON; `decoded` then carries only the signal
    samples not in partials."""
    tables = (None, None, None) if written is None else written[:3]
    return pa.RecordBatch.from_arrays(
        [pa.array([records], pa.int64()), _binary(_ipc(decoded)),
         *(_binary(None if table is None else _ipc(table)) for table in tables),
         pa.array([None if written is None else written[3]], pa.string()),
         pa.array([lost], pa.int64())],
        schema=PACKED_SCHEMA)


def lost_ranges(packed: pa.Table) -> int:
    """The offset ranges the batch's read tasks skipped as gone (see PACKED_DDL)."""
    return int(pc.sum(packed.column("lost")).as_py() or 0)


def blobs(column: pa.ChunkedArray) -> Iterator[pa.Buffer]:
    """Each value of a binary column as a slice of the column's own data buffer, no copy
    (Spark's toArrow hands over binary or large_binary, by spark.sql's large-var-types)."""
    for chunk in column.chunks:
        width = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
        _, offsets, data = chunk.buffers()
        bounds = np.frombuffer(offsets, dtype=width)[chunk.offset:chunk.offset + len(chunk) + 1]
        for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            yield data.slice(start, end - start)


def _each(column: pa.ChunkedArray) -> list[pa.Table]:
    return [pa.ipc.open_stream(blob).read_all() for blob in blobs(column.drop_null())]


def _tables(column: pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
    tables = _each(column)
    return pa.concat_tables(tables) if tables else schema.empty_table()


def unpack(packed: pa.Table) -> tuple[pa.Table, int]:
    """The decoded rows of every blob (in blob order) and the Kafka records they came from."""
    return (_tables(packed.column("decoded"), decoded_arrow_schema()),
            int(pc.sum(packed.column("records")).as_py() or 0))


def summarize(decoded: pa.Table, window_seconds: int) -> pa.Table:
    """Per (cluster, broker, topic, window) of the good rows: rows, defaulted clusters,
    newest sample time; plus one row per reject reason category (cluster and broker null,
    `quarantined` its count, the category in `source_topic`)."""
    good = pc.is_null(decoded["reject_reason"])
    rows = decoded.filter(good)
    width = window_seconds * 1_000_000
    micros = pc.cast(rows["ts"], pa.int64())
    keyed = pa.table({
        "cluster": rows["cluster"], "broker": rows["broker"],
        "source_topic": rows["source_topic"],
        "window_start": pc.multiply(pc.divide(micros, width), width),
        "defaulted": pc.cast(pc.fill_null(rows["cluster_defaulted"], False), pa.int64()),
        "newest": micros})
    grouped = keyed.group_by(SUMMARY_KEYS, use_threads=False).aggregate(
        [([], "count_all"), ("defaulted", "sum"), ("newest", "max")])
    good_part = pa.table({
        **{k: grouped[k] for k in SUMMARY_KEYS}, "rows": grouped["count_all"],
        "defaulted": grouped["defaulted_sum"], "newest": grouped["newest_max"],
        "quarantined": pa.repeat(pa.scalar(0, pa.int64()), grouped.num_rows)})
    reasons = decoded.filter(pc.invert(good))["reject_reason"]
    categories = pc.list_element(pc.split_pattern(reasons, ":", max_splits=1), 0)
    counted = pa.table({"category": categories}).group_by("category", use_threads=False
                                                          ).aggregate([([], "count_all")])
    n = counted.num_rows
    rejects = pa.table({
        "cluster": pa.nulls(n, pa.string()), "broker": pa.nulls(n, pa.string()),
        "source_topic": counted["category"], "window_start": pa.nulls(n, pa.int64()),
        "rows": pa.repeat(pa.scalar(0, pa.int64()), n),
        "defaulted": pa.repeat(pa.scalar(0, pa.int64()), n),
        "newest": pa.nulls(n, pa.int64()), "quarantined": counted["count_all"]})
    return pa.concat_tables([good_part.cast(SUMMARY_SCHEMA), rejects.cast(SUMMARY_SCHEMA)])


def signal_rows(decoded: pa.Table) -> pa.Table:
    """The good rows the driver's signal stages read (the held windows, paging): the
    signal metrics' samples, without the raw payload."""
    wanted = pc.and_(pc.is_null(decoded["reject_reason"]),
                     pc.fill_null(pc.is_in(decoded["metric"], pa.array(SIGNAL_METRICS)), False))
    # the payload column dropped before the filter, which copies every column it keeps
    # (none is made when every row is wanted, as on a fleet whose shipper sends only these)
    rows = decoded.drop_columns(["raw"])
    if pc.sum(wanted).as_py() != decoded.num_rows:
        rows = rows.filter(wanted)
    return rows.add_column(decoded.schema.get_field_index("raw"), decoded.schema.field("raw"),
                           pa.nulls(rows.num_rows, pa.binary()))


@dataclass
class WrittenBatch:
    """A batch whose read tasks wrote its files: what reaches the driver."""

    records: int
    rows: pa.Table  # the signal samples not in partials (the counters), decoded schema
    summary: pa.Table  # SUMMARY_SCHEMA, every chunk's
    partials: list[pa.Table]  # per chunk: the partials of its gauge signal samples
    segments: list[pa.Table]  # per chunk: its NumLogSegments partials
    files: list[TaskFile]

    @property
    def kept(self) -> pa.Table:
        """The summary rows of bronze rows (not of quarantine reasons)."""
        return self.summary.filter(pc.is_valid(self.summary["cluster"]))


def unpack_written(packed: pa.Table) -> WrittenBatch | None:
    """The batch as the read tasks wrote it, or None when they did not (the driver writes)."""
    files = packed.column("files")
    if files.null_count == len(files):
        return None
    return WrittenBatch(
        records=int(pc.sum(packed.column("records")).as_py() or 0),
        rows=_tables(packed.column("decoded"), decoded_arrow_schema()),
        summary=_tables(packed.column("summary"), SUMMARY_SCHEMA),
        partials=_each(packed.column("partials")), segments=_each(packed.column("segments")),
        files=[TaskFile.from_json(item) for text in files.drop_null().to_pylist()
               for item in json.loads(text)])


def _written(decoded: pa.RecordBatch | pa.Table, writer: TaskWriter, signals: SignalsConfig
             ) -> tuple[pa.Table, Written]:
    """A writing read task's work on decoded rows: their files written, and what the driver
    needs of them (the signal samples not in partials, and `Written`)."""
    if isinstance(decoded, pa.RecordBatch):
        decoded = pa.Table.from_batches([decoded])
    files = writer.write(decoded)
    samples = signal_rows(decoded)
    partials: pa.Table | None = None
    segments: pa.Table | None = None
    try:
        failpoints.poisoned(samples)
        samples, partials, segments = chunk_parts(samples, signals)
    except Exception:  # the driver reduces them, and finds a poison record if one fails it
        LOG.exception("a read task could not reduce its signal samples to partials: they "
                      "go to the driver whole")
    return samples, (summarize(decoded, signals.window_seconds), partials, segments,
                     json.dumps([f.to_json() for f in files]))


def pack_chunk(decoded: pa.RecordBatch | pa.Table, records: int, writer: TaskWriter,
               signals: SignalsConfig) -> pa.RecordBatch:
    """A writing read task's output for decoded rows: its files' add actions, the summary,
    the partials and segments of its gauge signal samples and its counter signal samples."""
    samples, written = _written(decoded, writer, signals)
    return pack(samples, records, written)


# Decoded rows a read task gathers before it writes and reduces them: the partials' and
# the summary's fixed cost per call is a third of their cost at 10k rows (one decoded
# chunk) and a few % at 100k, and fewer, larger files suit Delta's readers. The bound
# keeps a task's memory at about 100k decoded rows (tens of MB).
GATHER_ROWS = 100_000


def gathered(chunks: Iterable[tuple[pa.RecordBatch | pa.Table, int]], gather_rows: int
              ) -> Iterator[tuple[pa.Table, int]]:
    """The chunks concatenated up to at least `gather_rows` decoded rows (the last fewer),
    with their Kafka records."""
    held: list[pa.Table] = []
    held_records = 0
    for decoded, records in chunks:
        held.append(pa.Table.from_batches([decoded]) if isinstance(decoded, pa.RecordBatch)
                    else decoded)
        held_records += records
        if sum(t.num_rows for t in held) >= gather_rows:
            yield pa.concat_tables(held), held_records
            held, held_records = [], 0
    if held:
        yield pa.concat_tables(held), held_records


def segments_fold(gather_rows: int = GATHER_ROWS) -> NewestSegments:
    """Where a task folds its gathered chunks' segment rows: reduced again every two
    gathered chunks' worth, so a task's memory follows the distinct replicas and windows."""
    return NewestSegments(bound=2 * gather_rows)


def pack_chunks(chunks: Iterable[tuple[pa.RecordBatch | pa.Table, int]],
                writer: TaskWriter | None, signals: SignalsConfig,
                gather_rows: int = GATHER_ROWS) -> Iterator[pa.RecordBatch]:
    """pack_chunk over a task's decoded chunks ((rows, Kafka records) each); when the task
    writes, chunks are gathered up to `gather_rows` decoded rows first, and the segments of
    all of them go in one last row (no records, no files), reduced to the newest sample of
    each replica and window. Why: on a large fleet nearly every sample is a replica's
    NumLogSegments, and a scrape round (every replica once) is larger than a gathered
    chunk, so a chunk cannot reduce them; the task's share of a batch that spans several
    scrape rounds can, which the driver would otherwise do alone."""
    if writer is None:
        for decoded, records in chunks:
            yield pack(decoded, records)
        return
    segments = segments_fold(gather_rows)
    for decoded, records in gathered(chunks, gather_rows):
        samples, (summary, partials, chunk_segments, files) = _written(decoded, writer, signals)
        if chunk_segments is not None:
            segments.add(chunk_segments)
        yield pack(samples, records, (summary, partials, None, files))
    if not segments.empty:
        yield pack(decoded_arrow_schema().empty_table(), 0,
                   (None, None, segments.table(), "[]"))
