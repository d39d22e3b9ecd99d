"""Bronze and quarantine files written by the read tasks and committed by the driver
(delta.bronze_writers: read_tasks): the committed table holds exactly the task's rows, a
batch id commits once, what is never committed is invisible and vacuumed, and what the
task sends the driver instead of its rows counts them right."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable

from streaming.broker_admission import BrokerAdmission
from streaming.config import SignalsConfig
from streaming.decode.packing import (
    PACKED_SCHEMA,
    pack_chunk,
    pack_chunks,
    unpack,
    unpack_written,
)
from streaming.decode.records import DecodeContext, decode_record_batch
from streaming.schemas import arrow_schema, decoded_arrow_schema
from streaming.sinks.delta_rs import DeltaRsTable
from streaming.sinks.predicates import field
from streaming.sinks.task_files import TaskWriter, read_back, statistics, write_task_files

TS = pa.timestamp("us", "UTC")
MIDNIGHT = datetime(2026, 11, 26, tzinfo=UTC)


def jolokia(mbean: str, value: float, when: datetime) -> bytes:
    return orjson.dumps({"request": {"mbean": mbean, "attribute": "Value"}, "value": value,
                         "timestamp": int(when.timestamp()), "status": 200})


def chunk(values: list[bytes], key: bytes = b"c1/1", first: int = 0) -> pa.Table:
    """Decoded rows of Jolokia records (offsets from `first`), as a read task has them."""
    n = len(values)
    records = pa.RecordBatch.from_pydict({
        "key": [key] * n, "value": values, "topic": ["m"] * n, "partition": [0] * n,
        "offset": list(range(first, first + n)), "timestamp": [MIDNIGHT] * n, "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))
    context = DecodeContext(max_skew_seconds=10 ** 9, max_ahead_seconds=None)
    return pa.Table.from_batches([decode_record_batch(records, context)])


UNDER_MIN_ISR = "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"
LOG_SIZE = "kafka.log:type=Log,name=Size,topic=t,partition=0"


def mixed() -> pa.Table:
    """Two days' rows (two date partitions), a non-signal metric and two rejects."""
    before = MIDNIGHT - timedelta(seconds=1)
    return chunk([jolokia(UNDER_MIN_ISR, 1, before), jolokia(UNDER_MIN_ISR, 2, MIDNIGHT),
                  jolokia(LOG_SIZE, 4096, MIDNIGHT), b"not json", b"\xff"])


def test_committed_task_files_hold_the_task_rows_and_prune_on_time(tmp_path: Path) -> None:
    rows = mixed()
    files = write_task_files(rows, str(tmp_path))
    assert sorted(f.partition_values.get("date") for f in files if f.table == "bronze") == [
        "2026-11-25", "2026-11-26"]
    bronze = DeltaRsTable(str(tmp_path), "bronze", "app")
    quarantine = DeltaRsTable(str(tmp_path), "quarantine", "app")
    assert bronze.add_files([f for f in files if f.table == "bronze"], 0)
    assert quarantine.add_files([f for f in files if f.table == "quarantine"], 0)
    good = rows.filter(pc.is_null(rows["reject_reason"]))
    key = ["ts", "metric", "value"]
    assert (sorted(bronze.read(columns=key).to_pylist(), key=str)
            == sorted(good.select(key).to_pylist(), key=str))
    assert quarantine.read().num_rows == 2
    # the file statistics must never make a reader skip a file holding matching rows
    newest = pc.max(good["ts"]).as_py()
    assert bronze.read(field("ts") >= pa.scalar(newest, TS)).num_rows == 2
    assert bronze.read(field("ts") > pa.scalar(newest, TS)).num_rows == 0
    # nor any other reader's filter, on any column (delta-rs bounds a column missing from
    # the statistics by null, which no row passes)
    dataset = DeltaTable(str(tmp_path / "bronze")).to_pyarrow_dataset()
    assert dataset.to_table(filter=ds.field("metric") == "UnderMinIsrPartitionCount").num_rows == 2
    assert dataset.to_table(filter=(ds.field("value") > 1.5)
                            & (ds.field("cluster") == "c1")).num_rows == 2
    assert DeltaTable(str(tmp_path / "quarantine")).to_pyarrow_dataset().to_table(
        filter=ds.field("reason").is_valid()).num_rows == 2


def test_a_chunk_without_rejects_writes_one_file_per_date_and_no_quarantine(
        tmp_path: Path) -> None:
    before = MIDNIGHT - timedelta(seconds=1)
    two_days = chunk([jolokia(UNDER_MIN_ISR, 1, before), jolokia(UNDER_MIN_ISR, 2, MIDNIGHT),
                      jolokia(LOG_SIZE, 4096, MIDNIGHT)])
    one_day = two_days.slice(1)
    key = ["ts", "metric", "value", "source_offset"]
    for rows, per_date in ((two_days, {"2026-11-25": 1, "2026-11-26": 2}),
                           (one_day, {"2026-11-26": 2})):
        root = str(tmp_path / str(len(per_date)))
        files = write_task_files(rows, root)
        assert {f.table for f in files} == {"bronze"}
        assert {f.partition_values["date"]: json.loads(f.stats)["numRecords"]
                for f in files} == per_date
        assert (sorted(read_back(files, root).select(key).to_pylist(), key=str)
                == sorted(rows.select(key).to_pylist(), key=str))


def test_task_files_encode_repeated_values_by_dictionary_and_offsets_by_delta(
        tmp_path: Path) -> None:
    """Every column but the offsets is dictionary-encoded, the labels maps' keys and values
    among them (their repeated strings written plain tripled a fleet's files), and the
    offsets, one apart, are delta-encoded."""
    values = [jolokia(f"kafka.log:type=Log,name=Size,topic=orders,partition={p}", 1.0,
                      MIDNIGHT) for p in range(50)]
    files = write_task_files(chunk(values * 20), str(tmp_path))
    (bronze,) = [f for f in files if f.table == "bronze"]
    meta = pq.ParquetFile(tmp_path / "bronze" / bronze.path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings
                 for i in range(meta.num_columns)}
    dictionary = {"RLE_DICTIONARY", "PLAIN_DICTIONARY"}
    assert encodings["labels.key_value.key"] and encodings["labels.key_value.value"]
    for path, used in encodings.items():
        if path == "source_offset":
            assert "DELTA_BINARY_PACKED" in used and not dictionary & set(used), used
        else:
            assert dictionary & set(used), (path, used)


def test_statistics_bound_infinities_and_skip_nan_only_columns() -> None:
    rows = pa.table({"v": [1.0, float("inf"), float("-inf")], "w": [float("nan")] * 3,
                     "s": ["b", None, "a"], "b": pa.array([b"x", b"y", None])})
    stats = json.loads(statistics(rows))
    assert stats["minValues"] == {"v": -1.7976931348623157e308, "s": "a"}
    assert stats["maxValues"] == {"v": 1.7976931348623157e308, "s": "b"}
    assert stats["nullCount"] == {"v": 0, "w": 0, "s": 1, "b": 1}


def test_a_batch_id_commits_once_and_an_empty_batch_still_records_it(tmp_path: Path) -> None:
    bronze = DeltaRsTable(str(tmp_path), "bronze", "app")
    first = write_task_files(mixed(), str(tmp_path))
    assert bronze.add_files([f for f in first if f.table == "bronze"], 4)
    replayed = write_task_files(mixed(), str(tmp_path))  # same records, new files
    assert not bronze.add_files([f for f in replayed if f.table == "bronze"], 4)
    assert bronze.read().num_rows == 3
    assert bronze.add_files([], 5)
    assert bronze.committed(5) and bronze.read().num_rows == 3


def test_uncommitted_files_are_invisible_and_vacuumed(tmp_path: Path) -> None:
    bronze = DeltaRsTable(str(tmp_path), "bronze", "app")
    kept = [f for f in write_task_files(mixed(), str(tmp_path)) if f.table == "bronze"]
    orphans = [f for f in write_task_files(mixed(), str(tmp_path)) if f.table == "bronze"]
    bronze.add_files(kept, 0)
    assert bronze.read().num_rows == 3

    def on_disk(files: list) -> list[bool]:
        return [(tmp_path / "bronze" / f.path).exists() for f in files]

    bronze.vacuum(1, untracked=True)  # younger than the retention: kept
    assert on_disk(orphans) == [True, True]
    bronze.vacuum(0, untracked=True)
    assert on_disk(orphans) == [False, False]
    assert on_disk(kept) == [True, True] and bronze.read().num_rows == 3


def test_read_back_gives_the_decoded_rows_of_bronze_and_quarantine(tmp_path: Path) -> None:
    rows = mixed()
    back = read_back(write_task_files(rows, str(tmp_path)), str(tmp_path))
    assert back.schema == decoded_arrow_schema()
    columns = ["ts", "cluster", "broker", "metric", "value", "source_offset", "reject_reason",
               "raw"]
    assert (sorted(back.select(columns).to_pylist(), key=lambda r: r["source_offset"])
            == sorted(rows.select(columns).to_pylist(), key=lambda r: r["source_offset"]))


def test_the_driver_gets_signal_samples_files_and_a_summary_that_counts_right(
        tmp_path: Path) -> None:
    rows, other = mixed(), chunk([jolokia(LOG_SIZE, 1, MIDNIGHT), b"{"], b"c2/7")
    writer = TaskWriter(str(tmp_path), {}, {})
    signals = SignalsConfig()
    packed = pa.Table.from_batches([pack_chunk(rows, 5, writer, signals),
                                    pack_chunk(other, 2, writer, signals)])
    assert packed.schema == PACKED_SCHEMA
    batch = unpack_written(packed)
    assert batch is not None and batch.records == 7
    # the gauge signal samples arrive as partials, one row per (cluster, broker, window)
    assert batch.rows.num_rows == 0
    assert [p.num_rows for p in batch.partials] == [2, 0]
    assert sorted(v for p in batch.partials for v in p["under_min_isr_last"].to_pylist()) == [
        1.0, 2.0]
    kept = batch.kept
    assert int(pc.sum(kept["rows"]).as_py()) == 4
    midnight = int(MIDNIGHT.timestamp() * 1e6)
    windows = {(c, w): n for c, w, n in zip(kept["cluster"].to_pylist(),
                                             kept["window_start"].to_pylist(),
                                             kept["rows"].to_pylist(), strict=True)}
    assert windows == {("c1", midnight - 60_000_000): 1, ("c1", midnight): 2, ("c2", midnight): 1}
    assert pc.max(kept["newest"]).as_py() == midnight
    rejects = batch.summary.filter(pc.is_null(batch.summary["cluster"]))
    assert int(pc.sum(rejects["quarantined"]).as_py()) == 3
    assert all(":" not in c for c in rejects["source_topic"].to_pylist())
    assert read_back(batch.files, str(tmp_path)).num_rows == 7
    # the driver's own layout still unpacks when nothing was written
    plain = pa.Table.from_batches(list(pack_chunks([(rows, 5)], None, signals)))
    assert unpack_written(plain) is None and unpack(plain)[0].num_rows == rows.num_rows


def test_admits_answers_what_admission_would_do_without_remembering() -> None:
    admission = BrokerAdmission(max_per_cluster=2, max_clusters=2)

    def named(pairs: list[tuple[str, str]]) -> pa.Table:
        return pa.table({"cluster": [c for c, _ in pairs], "broker": [b for _, b in pairs]})

    assert admission.admits(named([("a", "1"), ("a", "2"), ("b", "1")]))
    assert admission.known == {}
    assert not admission.admits(named([("a", "1"), ("a", "2"), ("a", "3")]))
    assert not admission.admits(named([("a", "1"), ("b", "1"), ("c", "1")]))
    admission(named([("a", "1"), ("a", "2")]))
    assert admission.admits(named([("a", "2"), ("b", "9")]))
    assert not admission.admits(named([("a", "3")]))


def test_a_chunk_that_cannot_be_reduced_goes_to_the_driver_whole(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """A task whose reduction raises (here the tests' poison value) must not fail the
    task, which would fail every replay of the batch: its signal samples go whole, and
    the driver's stages (and their poison isolation) take them."""
    monkeypatch.setenv("KAFKA_HEALTH_POISON_VALUE", "2")
    writer = TaskWriter(str(tmp_path), {}, {})
    batch = unpack_written(pa.Table.from_batches([pack_chunk(mixed(), 5, writer,
                                                             SignalsConfig())]))
    assert batch is not None and batch.partials == [] and batch.segments == []
    assert sorted(batch.rows["value"].to_pylist()) == [1.0, 2.0]
    assert int(pc.sum(batch.kept["rows"]).as_py()) == 3


def test_a_task_gathers_its_chunks_before_it_writes_and_reduces(tmp_path: Path) -> None:
    writer, signals = TaskWriter(str(tmp_path), {}, {}), SignalsConfig()
    chunks = [(mixed(), 5) for _ in range(5)]
    packed = list(pack_chunks(chunks, writer, signals, gather_rows=8))
    assert len(packed) == 3  # 5 rows a chunk: 10, 10, then the last 5
    batch = unpack_written(pa.Table.from_batches(packed))
    assert batch is not None and batch.records == 25
    assert int(pc.sum(batch.kept["rows"]).as_py()) == 15
    assert len(list(pack_chunks(chunks, None, signals))) == 5  # the driver writes: as read


SEGMENTS = "kafka.log:type=Log,name=NumLogSegments,topic=t,partition={}"


def test_a_task_sends_each_replicas_newest_segments_once_per_window(tmp_path: Path) -> None:
    """A scrape round per chunk, three rounds of two replicas (two rounds in the first
    window): the driver gets one segments table, each replica's newest value per window."""
    writer, signals = TaskWriter(str(tmp_path), {}, {}), SignalsConfig()
    times = [MIDNIGHT, MIDNIGHT + timedelta(seconds=20), MIDNIGHT + timedelta(seconds=70)]
    rounds = [(chunk([jolokia(SEGMENTS.format(p), 10.0 * r + p, at) for p in (0, 1)],
                     first=2 * r), 2) for r, at in enumerate(times)]
    packed = pa.Table.from_batches(list(pack_chunks(rounds, writer, signals, gather_rows=2)))
    batch = unpack_written(packed)
    assert batch is not None and batch.records == 6
    assert int(pc.sum(batch.kept["rows"]).as_py()) == 6
    assert len(batch.segments) == 1
    midnight = int(MIDNIGHT.timestamp() * 1e6)
    sent = batch.segments[0]
    got = sorted(zip(pc.cast(sent["window_start"], pa.int64()).to_pylist(),
                     sent["value"].to_pylist(), strict=True))
    assert got == [(midnight, 10.0), (midnight, 11.0), (midnight + 60_000_000, 20.0),
                   (midnight + 60_000_000, 21.0)]
    assert read_back(batch.files, str(tmp_path)).num_rows == 6
