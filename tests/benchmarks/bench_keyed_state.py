"""What the driver would cost with the replicas' segments held as keyed state on the
executors: a measurement for the scale-out design, not a mode of the job.

The driver's CPU a sample is about proportional to the rows the read tasks send it, and
most of those are NumLogSegments, the newest value of each partition replica and window
(bench_driver_rows.py, results/driver-rows.json). A read task cannot sum them per broker:
a replica's samples of one window can sit in several tasks and several batches, and only
the newest counts. A shuffle by (cluster, broker) into a keyed state can sum them, so the
driver would receive one sum per broker and window. This measures the Spark side of that design
against today's, over one pre-filled topic on a standalone cluster of 2 single-core
executors, one query after the other in one driver process:

- `collect`: today's read (the project's source, its read tasks decoding and writing the
  batch's Parquet files) and a foreachBatch that only takes the packed rows to the driver
  and unpacks them (`unpack_written`): what today's driver pays before its own stages.
- `keyed`: the same read, its segment rows exploded on the executors, shuffled by
  (cluster, broker) into `transformWithStateInPandas`, which keeps each broker's newest
  value per replica and window (RocksDB state store) and emits per touched window the
  sum; the chunks' other parts pass through unchanged. The same foreachBatch.
- `full`: today's whole job (`bench_scaleout.run_on`), for the stages the driver adds.

Every query's driver CPU (its Python, its JVM, the source's planner) is counted per sample
from the first batch's end to the last (tests/benchmarks/proctree). The keyed query's
output is checked against the collect query's: the same per (cluster, broker, window) sum
of the newest value per replica.

    .venv/bin/python tests/benchmarks/bench_keyed_state.py --messages 4000000 --cap 500000
Writes tests/benchmarks/results/keyed-state.json. `--rounds N` runs the three queries N
times in turn (the first round of the keyed query pays the JIT of Spark's stateful code in
the driver's JVM; the warm-up before it is a collect query). Needs protobuf in the venv,
which Spark's Python state server speaks and the job itself does not need:
`.venv/bin/pip install 'protobuf>=6.33,<7'`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from streaming.decode.packing import unpack_written  # noqa: E402
from streaming.signals.incremental import SEGMENT_SCHEMA, newest_segments  # noqa: E402
from streaming.testbed.kafka import create_topic, free_port, metrics_cluster  # noqa: E402
from tests.benchmarks.bench_pipeline import (  # noqa: E402
    fleet_model,
    prefill,
    rate_figures,
    single_sample_stream,
)
from tests.benchmarks.bench_scaleout import run_on  # noqa: E402
from tests.benchmarks.proctree import driver_us, job_cpu_seconds  # noqa: E402
from tests.spark_cluster import StandaloneCluster, driver_ui_conf  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "keyed-state.json"
# Windows a broker's state keeps behind its newest one: the held windows' horizon is a
# few windows, so a bound of this order keeps the state's size what the job would hold.
HELD_WINDOWS = 10
EXPLODED_DDL = ("kind STRING, cluster STRING, broker STRING, window_start BIGINT, "
                "labels_key STRING, value DOUBLE, ts_us BIGINT, source_offset BIGINT, "
                "replicas BIGINT, records BIGINT, decoded BINARY, summary BINARY, "
                "partials BINARY, files STRING, lost BIGINT")
BLOB_COLUMNS = ("records", "decoded", "summary", "partials", "files", "lost")


def exploded_schema() -> pa.Schema:
    """EXPLODED_DDL as Arrow (built by hand: the executors have no session to parse it)."""
    types = {"STRING": pa.string(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(),
             "BINARY": pa.binary()}
    return pa.schema([(name, types[kind]) for name, kind in
                      (column.split() for column in EXPLODED_DDL.split(", "))])


def explode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow over packed rows: one `blob` row per packed row without its segments,
    one `seg` row per segment row the blob held (its cluster and broker the shuffle key)."""
    schema = exploded_schema()
    for batch in batches:
        packed = pa.Table.from_batches([batch])
        n = packed.num_rows
        blob = {name: pa.nulls(n, schema.field(name).type) for name in schema.names}
        blob.update({name: packed[name] for name in BLOB_COLUMNS})
        blob["kind"] = pa.repeat(pa.scalar("blob"), n)
        yield from pa.table(blob, schema=schema).to_batches()
        for value in packed["segments"].drop_null().to_pylist():
            seg = pa.ipc.open_stream(value).read_all()
            rows = {name: pa.nulls(seg.num_rows, schema.field(name).type) for name in schema.names}
            rows.update({"kind": pa.repeat(pa.scalar("seg"), seg.num_rows),
                         "cluster": seg["cluster"], "broker": seg["broker"],
                         "window_start": pc.cast(seg["window_start"], pa.int64()),
                         "labels_key": seg["labels_key"], "value": seg["value"],
                         "ts_us": seg["ts_us"], "source_offset": seg["source_offset"]})
            yield from pa.table(rows, schema=schema).to_batches()


def segment_sums_processor() -> Any:
    """The keyed stage: per (cluster, broker), the newest value of each replica and window
    held as one Arrow IPC value; per batch the sums of the windows it touched."""
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import BinaryType, StructField, StructType

    class SegmentSums(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.held = handle.getValueState(
                "held", StructType([StructField("ipc", BinaryType())]))

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
                            ) -> Iterator[pd.DataFrame]:
            frame = pd.concat(list(rows), ignore_index=True)
            blobs = frame[frame["kind"] == "blob"]
            if len(blobs):
                yield plain(blobs)
            segs = frame[frame["kind"] == "seg"]
            if segs.empty:
                return
            # integers as such again: in a frame with the blob rows they came as floats
            segs = segs.astype({"window_start": "int64", "ts_us": "int64",
                                "source_offset": "int64"})
            new = pa.Table.from_pandas(segs[list(SEGMENT_SCHEMA.names)], preserve_index=False)
            new = new.set_column(2, "window_start", pc.cast(new["window_start"],
                                                             SEGMENT_SCHEMA.field(2).type))
            held = self.held.get() if self.held.exists() else None
            tables = [new] if held is None else [pa.ipc.open_stream(held[0]).read_all(), new]
            newest = newest_segments(tables)
            touched = newest.filter(pc.is_in(newest["window_start"],
                                             pc.unique(new["window_start"])))
            starts = pc.cast(newest["window_start"], pa.int64())
            kept = newest.filter(pc.greater_equal(
                starts, pc.max(starts).as_py() - HELD_WINDOWS * window_us(starts)))
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, kept.schema) as writer:
                writer.write(kept)
            self.held.update((sink.getvalue().to_pybytes(),))
            sums = touched.group_by("window_start", use_threads=False).aggregate(
                [("value", "sum"), ([], "count_all")])
            out = pd.DataFrame({"kind": "sum", "cluster": key[0], "broker": key[1],
                                "window_start": pc.cast(sums["window_start"],
                                                        pa.int64()).to_numpy(),
                                "value": sums["value_sum"].to_numpy(),
                                "replicas": sums["count_all"].to_numpy()})
            yield plain(out.reindex(columns=exploded_schema().names))

        def close(self) -> None:
            pass

    return SegmentSums()


def plain(frame: pd.DataFrame) -> pd.DataFrame:
    """The text and binary columns as Python objects, None for missing: otherwise pandas 3
    turns them into Arrow-backed strings on the way out (an all-missing column too), in
    several chunks after a concat, which Spark's serializer of a stateful processor's
    output refuses (it wants one Arrow array a column)."""
    schema = exploded_schema()
    objects = [name for name in frame.columns
               if pa.types.is_string(schema.field(name).type)
               or pa.types.is_binary(schema.field(name).type)]
    plain_frame = frame.astype({name: object for name in objects})
    for name in objects:
        plain_frame[name] = plain_frame[name].where(plain_frame[name].notna(), None)
    return plain_frame


def window_us(starts: pa.Array | pa.ChunkedArray) -> int:
    """The window width the starts (µs) step by; 60 s when they are all one window."""
    distinct = sorted(pc.unique(starts).to_pylist())
    steps = [b - a for a, b in zip(distinct, distinct[1:], strict=False)]
    return min(steps) if steps else 60_000_000


class Collected:
    """What a foreachBatch saw: each batch's packed rows unpacked as today's driver does.
    The segment partials (collect) or sums (keyed) are only kept, for the check after the
    query, so that neither query's driver pays for the check."""

    def __init__(self, keyed: bool) -> None:
        self.keyed = keyed
        self.rows_to_driver = 0
        self.segment_rows = 0
        self.kept: list[pa.Table] = []

    def __call__(self, batch: Any, batch_id: int) -> None:
        table = batch.toArrow()
        self.rows_to_driver += table.num_rows
        if self.keyed:
            self.kept.append(table.filter(pc.equal(table["kind"], "sum")))
            blobs = table.filter(pc.equal(table["kind"], "blob"))
            table = blobs.append_column("segments", pa.nulls(blobs.num_rows, pa.binary()))
        written = unpack_written(table.select(["records", "decoded", "summary", "partials",
                                               "segments", "files", "lost"]))
        if written is not None and written.segments:
            self.segment_rows += sum(t.num_rows for t in written.segments)
            self.kept.extend(written.segments)

    def sums(self) -> dict[tuple[str, str, int], tuple[float, int]]:
        """Per (cluster, broker, window): the sum of its replicas' newest values and their
        number, as the keyed stage last emitted it or as the driver would hold it."""
        if self.keyed:
            return {(row["cluster"], row["broker"], row["window_start"]):
                    (row["value"], row["replicas"])
                    for table in self.kept for row in table.select(
                        ["cluster", "broker", "window_start", "value", "replicas"]).to_pylist()}
        held = newest_segments(self.kept)
        grouped = pa.table({"c": held["cluster"], "b": held["broker"],
                            "w": pc.cast(held["window_start"], pa.int64()),
                            "v": held["value"]}).group_by(["c", "b", "w"], use_threads=False
                                                           ).aggregate([("v", "sum"),
                                                                        ([], "count_all")])
        return {(c, b, w): (v, n) for c, b, w, v, n in zip(
            *(grouped[name].to_pylist() for name in ("c", "b", "w", "v_sum", "count_all")),
            strict=True)}


def run_query(master: str, bootstrap: str, topic: str, total: int, cap: int, keyed: bool,
              work: Path) -> dict[str, Any]:
    """One query over the topic until `total` records are read; its rate and CPU figures."""
    from streaming.config import load_config
    from streaming.runtime.spark_session import build_spark
    from streaming.source.reader import read_decoded_stream
    from tests.benchmarks.bench_pipeline import finished_since, records_in

    conf = {**driver_ui_conf(free_port()),
            "spark.sql.streaming.stateStore.providerClass":
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}
    config = load_config(None, environ={
        "KAFKA_HEALTH__SPARK__MASTER": master,
        "KAFKA_HEALTH__SPARK__CONF": json.dumps(conf),
        "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA_HEALTH__SOURCE__TOPICS": json.dumps([{"name": topic, "format": "jolokia"}]),
        "KAFKA_HEALTH__SOURCE__MAX_OFFSETS_PER_TRIGGER": str(cap),
        "KAFKA_HEALTH__SPARK__CHECKPOINT": str(work / "checkpoint"),
        "KAFKA_HEALTH__DELTA__PATH": str(work / "delta"),
        "KAFKA_HEALTH__QUALITY__MAX_TIMESTAMP_SKEW_SECONDS": str(10 ** 9),
        "KAFKA_HEALTH__QUALITY__MAX_AHEAD_OF_WALL_CLOCK_SECONDS": str(10 ** 9),
    })
    spark = build_spark(config)
    stream = read_decoded_stream(spark, config)
    if keyed:
        stream = stream.mapInArrow(explode, EXPLODED_DDL).groupBy(
            "cluster", "broker").transformWithStateInPandas(
            segment_sums_processor(), EXPLODED_DDL, "Append", "None")
    collected = Collected(keyed)
    query = (stream.writeStream.foreachBatch(collected)
             .option("checkpointLocation", str(work / "query-checkpoint"))
             .trigger(processingTime="0 seconds").start())
    batches: list[tuple[int, float, int]] = []
    roles: list[dict[str, float]] = []
    cpu: list[dict[str, float]] = []
    try:
        while sum(records for _, _, records in batches) < total:
            ended = finished_since(query, batches[-1][0] if batches else None)
            if ended:
                at = time.time()
                batches += [(p["batchId"], at, records_in(p)) for p in ended]
                kinds, by_role = job_cpu_seconds(os.getpid())
                cpu.append(kinds)
                roles.append(by_role)
            if not query.isActive:
                raise SystemExit(f"query stopped: {query.exception()}")
            time.sleep(0.2)
    finally:
        query.stop()
        spark.stop()
    after_first = sum(records for _, _, records in batches[1:])
    figures = rate_figures(batches[0][1], batches[-1][1], after_first, cpu, roles)
    return {"batches": len(batches), **figures,
            "driver_us_per_sample": round(driver_us(figures["cpu_us_per_sample_by_role"]), 2),
            "rows_to_driver": collected.rows_to_driver,
            "segment_rows_to_driver": collected.segment_rows,
            "sums": collected.sums()}


def alternating(rounds: int, runs: dict[str, Callable[[], dict[str, Any]]]
                ) -> dict[str, list[dict[str, Any]]]:
    """Each run `rounds` times, in turn, so that the machine's drift falls on all alike."""
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            results[name].append(run())
            print(f"{name}: {results[name][-1]['samples_per_s']:,.0f} samples/s, "
                  f"driver {driver_us(results[name][-1]['cpu_us_per_sample_by_role']):.2f} µs "
                  "a sample", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=4_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--cap", type=int, default=500_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--skip-full", action="store_true",
                        help="without today's whole job (its stages' cost on the driver)")
    parser.add_argument("--out", help="the result file's name in tests/benchmarks/results/")
    args = parser.parse_args()
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        raise SystemExit("transformWithStateInPandas needs protobuf: "
                         ".venv/bin/pip install 'protobuf>=6.33,<7'") from None
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    work = Path(tempfile.mkdtemp(prefix="kh-keyed-"))
    with metrics_cluster() as broker, StandaloneCluster(work / "cluster") as cluster:
        topic = "bench-keyed"
        create_topic(broker.bootstrap, topic, partitions=args.partitions)
        size = prefill(broker.bootstrap, topic, single_sample_stream(
            args.messages, time.time() - 3600, fleet_model(None)), partitions=args.partitions)
        cluster.start(workers=2)
        count = iter(range(10 ** 6))

        def query(keyed: bool) -> Callable[[], dict[str, Any]]:
            return lambda: run_query(cluster.url, broker.bootstrap, topic, args.messages,
                                     args.cap, keyed, work / f"run-{next(count)}")

        runs = {"collect": query(False), "keyed": query(True)}
        if not args.skip_full:
            runs["full"] = lambda: run_on(cluster, 2, broker.bootstrap, topic, args.messages,
                                          args.cap, "read_tasks")
        query(False)()  # the driver's JVM warmed up, unmeasured
        results = alternating(args.rounds, runs)
    shutil.rmtree(work, ignore_errors=True)
    check = [agreement(c["sums"], k["sums"])
             for c, k in zip(results["collect"], results["keyed"], strict=True)]
    for run in results["collect"] + results["keyed"]:
        run["sum_windows"] = len(run.pop("sums"))
    out = RESULTS.with_name(args.out or RESULTS.name)
    out.write_text(json.dumps({
        "messages": args.messages, "message_bytes_avg": round(size, 1),
        "partitions": args.partitions, "cap": args.cap,
        "cluster": "Spark standalone on loopback, 2 workers of 1 core and 1 GB; driver here",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "sums_agree": check, **results}, indent=2, default=str))
    print(json.dumps({"sums_agree": check, "driver_us_per_sample": {
        name: [round(driver_us(r["cpu_us_per_sample_by_role"]), 2) for r in runs_]
        for name, runs_ in results.items()}}, indent=2))


def agreement(want: dict[Any, tuple[float, int]], got: dict[Any, tuple[float, int]]
              ) -> dict[str, Any]:
    """Whether the keyed stage's last sums equal the driver's over the same windows."""
    differ = [key for key, (value, replicas) in want.items()
              if key in got and (abs(got[key][0] - value) > 1e-6 or got[key][1] != replicas)]
    return {"windows": len(want), "in_both": sum(key in got for key in want),
            "differ": len(differ), "examples": [str(k) for k in differ[:3]]}


if __name__ == "__main__":
    main()
