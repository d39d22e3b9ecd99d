"""Bronze and quarantine Parquet files written by the read tasks, committed by the driver.

Why: carried to the driver, every decoded sample cost the driver Python and JVM time
(`toArrow()`, then delta-rs encoding the batch's Parquet there), which capped the job
near one machine however many executors it had. With `delta.bronze_writers: read_tasks`
(the default with delta-rs) each read task writes its own rows as Parquet files into the
tables' folders and hands the driver their Delta add actions (path, size, partition
values, statistics) instead of the rows (what else it sends: streaming.decode.packing);
the driver commits every task's files of a batch in one Delta transaction, idempotent by
the batch id like every other write (streaming.sinks.base).

A written file is invisible until that commit: Delta readers see only files in the log.
The names are random, so a task retried by Spark, or a batch replayed after a crash,
writes new files and never overwrites one a commit already references (its `ingest_ts`
would differ, so would its size). What is left uncommitted is cleaned in two ways: the
driver deletes the files of a batch it finds committed already (a replay), and the
retention's VACUUM deletes any file the log does not reference once it is older than
`delta.vacuum_retain_hours` (a task that died, a job killed between the task writes and
the commit).
"""

from __future__ import annotations

import contextlib
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streaming.config import ConfigError, DeltaConfig, SecretRef
from streaming.locations import filesystem, join
from streaming.schemas import arrow_schema, decoded_arrow_schema, table_spec

# The largest finite double: Delta's statistics are JSON, which has no infinity.
FINITE = 1.7976931348623157e308
# Columns whose every value differs: a Parquet dictionary of them (pyarrow's default for
# every column) is work for nothing. The offsets, one apart, are delta-encoded instead: a
# few bits each. For a bronze file of 100k single samples of the benchmarks' stream: 0.41-0.46
# -> 0.32 us a row to write, 635 -> 32 KB (tests/benchmarks/results/
# task-reduction-same-hour.json).
UNIQUE_COLUMNS = ("source_offset", "raw")
DELTA_ENCODED = ("source_offset",)


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The Parquet leaf columns to dictionary-encode: all but UNIQUE_COLUMNS. Parquet names
    a map's leaves `<name>.key_value.key` and `.value`; given the map's own name, pyarrow
    would encode its labels (a few distinct strings) plain, three times the bytes."""
    leaves: list[str] = []
    for column in schema:
        if column.name in UNIQUE_COLUMNS:
            continue
        if pa.types.is_map(column.type):
            leaves += [f"{column.name}.key_value.key", f"{column.name}.key_value.value"]
        else:
            leaves.append(column.name)
    return leaves


@dataclass(frozen=True)
class TaskFile:
    """One written Parquet file as the Delta add action the driver commits."""

    table: str  # bronze | quarantine
    path: str  # relative to the table's folder, as Delta's log names it
    size: int
    partition_values: dict[str, str | None]
    modification_time: int  # ms since the epoch
    stats: str  # Delta's statistics JSON

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> TaskFile:
        return TaskFile(**json.loads(text))


def quarantine_rows(rejected: pa.Table) -> pa.Table:
    """The quarantine table's columns of decoded reject rows."""
    return pa.table({
        "ingest_ts": rejected["ingest_ts"],
        "source_topic": rejected["source_topic"],
        "source_partition": rejected["source_partition"],
        "source_offset": rejected["source_offset"],
        "source_format": rejected["source_format"],
        "reason": rejected["reject_reason"],
        "raw": rejected["raw"],
    })


def _timestamp_text(micros: int, round_up: bool) -> str:
    """A Delta statistics timestamp: milliseconds, so a minimum is floored and a maximum
    ceiled (truncating a maximum would let a reader skip the file's newest rows)."""
    millis = (-(-micros // 1000) if round_up else micros // 1000)
    moment = datetime.fromtimestamp(millis / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def _bounds(values: pa.ChunkedArray) -> tuple[object, object] | None:
    """A column's (min, max) as Delta's statistics JSON holds them; None when it has no
    value to bound (all null, or a double column of NaN only)."""
    kind = values.type
    if pa.types.is_timestamp(kind):
        lo, hi = pc.min_max(pc.cast(values, pa.int64())).values()
        if not lo.is_valid:
            return None
        unit = {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 0.001}[kind.unit]
        return (_timestamp_text(math.floor(lo.as_py() * unit), False),
                _timestamp_text(math.ceil(hi.as_py() * unit), True))
    lo, hi = pc.min_max(values).values()  # NaN is skipped unless there is nothing else
    if not lo.is_valid or (pa.types.is_floating(kind) and math.isnan(lo.as_py())):
        return None
    if pa.types.is_floating(kind):  # an infinity is bounded by the largest finite double
        return (max(lo.as_py(), -FINITE), min(hi.as_py(), FINITE))
    return lo.as_py(), hi.as_py()


def statistics(rows: pa.Table) -> str:
    """Delta's per-file statistics: numRecords, and the null count, min and max of every
    column but the nested ones (labels), strings whole. delta-rs's reader turns a column
    missing from them into a bound of null that no row passes, so a filter on it would
    skip the file: every column a filter may name must be there."""
    low: dict[str, object] = {}
    high: dict[str, object] = {}
    nulls: dict[str, int] = {}
    for column in rows.schema:
        if pa.types.is_nested(column.type):
            continue
        values = rows[column.name]
        nulls[column.name] = values.null_count
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            continue  # raw payloads: nothing filters on them, and JSON cannot hold bytes
        bounds = _bounds(values)
        if bounds is not None:
            low[column.name], high[column.name] = bounds
    return json.dumps({"numRecords": rows.num_rows, "minValues": low, "maxValues": high,
                       "nullCount": nulls}, separators=(",", ":"))


def _write(rows: pa.Table, root: str, table: str, partition: dict[str, str | None],
           storage: Mapping[str, str] | None) -> TaskFile:
    folder = "/".join(f"{k}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}"
                      for k, v in partition.items())
    relative = "/".join(p for p in (folder, f"part-{uuid.uuid4().hex}-task.snappy.parquet")
                        if p)
    fs, path = filesystem(join(root, table, relative), storage)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as sink:
        pq.write_table(
            rows, sink, compression="snappy",
            use_dictionary=dictionary_columns(rows.schema),
            column_encoding={c: "DELTA_BINARY_PACKED" for c in DELTA_ENCODED
                             if c in rows.column_names})
    info = fs.get_file_info(path)
    mtime = info.mtime
    return TaskFile(table=table, path=relative, size=int(info.size),
                    partition_values=partition,
                    modification_time=int((mtime.timestamp() if mtime else 0) * 1000),
                    stats=statistics(rows))


def write_task_files(decoded: pa.Table, root: str,
                     storage: Mapping[str, str] | None = None) -> list[TaskFile]:
    """Write a chunk's bronze rows (one file per date partition) and its reject rows (one
    quarantine file) under the tables' folders at `root`; nothing is committed."""
    files: list[TaskFile] = []
    has_rejects = decoded["reject_reason"].null_count < decoded.num_rows
    good = pc.is_null(decoded["reject_reason"]) if has_rejects else None
    bronze_schema = arrow_schema("bronze")
    bronze = decoded.select(bronze_schema.names).cast(bronze_schema)
    if good is not None:  # filters copy every column: only when there is a reject
        bronze = bronze.filter(good)
    partition_by = table_spec("bronze").get("partition_by") or []
    if bronze.num_rows:
        (column,) = partition_by  # bronze is partitioned by date alone
        dates = pc.unique(bronze[column]).to_pylist()
        for value in dates:
            part = bronze if len(dates) == 1 else bronze.filter(
                pc.is_null(bronze[column]) if value is None
                else pc.fill_null(pc.equal(bronze[column], value), False))
            files.append(_write(part.drop_columns(partition_by), root, "bronze",
                                {column: value}, storage))
    if good is not None:
        schema = arrow_schema("quarantine")
        rejected = quarantine_rows(decoded.filter(pc.invert(good)))
        files.append(_write(rejected.select(schema.names).cast(schema), root, "quarantine", {},
                            storage))
    return files


def read_task_files(files: Iterable[TaskFile], root: str, table: str,
                    storage: Mapping[str, str] | None = None,
                    enough: int | None = None) -> pa.Table:
    """The rows of a batch's files of `table`, with the partition columns put back, in the
    table's schema (the driver's fallback when it must handle a batch's rows itself); with
    `enough`, files are read only until they hold that many rows (a quality sample)."""
    schema = arrow_schema(table)
    parts: list[pa.Table] = []
    for item in files:
        if item.table != table:
            continue
        if enough is not None and sum(p.num_rows for p in parts) >= enough:
            break
        fs, path = filesystem(join(root, table, item.path), storage)
        rows = pq.read_table(path, filesystem=fs)
        for name, value in item.partition_values.items():
            rows = rows.append_column(name, pa.array([value] * rows.num_rows, pa.string()))
        parts.append(rows.select(schema.names).cast(schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def read_back(files: Iterable[TaskFile], root: str,
              storage: Mapping[str, str] | None = None) -> pa.Table:
    """A batch's rows as decoded rows again, from its tasks' bronze and quarantine files
    (`cluster_defaulted` is not stored: null)."""
    schema = decoded_arrow_schema()
    files = list(files)
    bronze = read_task_files(files, root, "bronze", storage)
    rejects = read_task_files(files, root, "quarantine", storage)
    as_decoded = [
        pa.table({f.name: bronze[f.name] if f.name in bronze.column_names
                  else pa.nulls(bronze.num_rows, f.type) for f in schema}, schema=schema),
        pa.table({f.name: (rejects["reason"] if f.name == "reject_reason"
                           else rejects[f.name] if f.name in rejects.column_names
                           else pa.nulls(rejects.num_rows, f.type)) for f in schema},
                 schema=schema)]
    return pa.concat_tables(as_decoded)


def delete_task_files(files: Iterable[TaskFile], root: str,
                      storage: Mapping[str, str] | None = None) -> None:
    """Remove uncommitted files (a replayed batch's, or those the driver rewrote)."""
    for item in files:
        fs, path = filesystem(join(root, item.table, item.path), storage)
        with contextlib.suppress(FileNotFoundError):
            fs.delete_file(path)


@dataclass(frozen=True)
class TaskWriter:
    """Where the read tasks write (`delta.path`) and with which storage options; secrets
    travel as references (file or environment variable), read in the task, so their values
    never sit in Spark's plan, options or logs."""

    root: str
    storage_options: dict[str, str]
    storage_secrets: dict[str, dict[str, str | None]]  # key -> {"file": ..., "env": ...}

    @staticmethod
    def from_config(delta: DeltaConfig) -> TaskWriter:
        return TaskWriter(delta.path, dict(delta.storage_options),
                          {k: {"file": ref.file, "env": ref.env}
                           for k, ref in delta.storage_secrets.items()})

    def storage(self) -> dict[str, str] | None:
        options = dict(self.storage_options)
        for key, ref in self.storage_secrets.items():
            try:
                options[key] = SecretRef(**ref).read(f"delta.storage_secrets.{key}")
            except ConfigError as err:  # on an executor: say where it must be readable
                raise ConfigError(
                    f"{err}: the read tasks write bronze and quarantine "
                    "(delta.bronze_writers: read_tasks, the default with delta-rs), so every "
                    "executor reads delta.storage_secrets itself: mount the same file on "
                    "each, or set the variable there (e.g. spark.executorEnv.<NAME>), or set "
                    "delta.bronze_writers: driver") from err
        return options or None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> TaskWriter:
        return TaskWriter(**json.loads(text))

    def write(self, decoded: pa.Table) -> list[TaskFile]:
        return write_task_files(decoded, self.root, self.storage())
