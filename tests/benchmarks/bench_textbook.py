"""A textbook PySpark job against ours, over the same pre-filled topic, side by side in one run.

The textbook job is what a data engineer would write with Spark's own pieces: Spark's kafka
source, `from_json` with an explicit schema of the Jolokia read response, a windowed
`groupBy` per cluster and broker (the project's default signals.window_seconds and
watermark_seconds), and a `foreachBatch` MERGE into a Delta table with delta-spark. It
computes two signals per window: the max of UnderMinIsrPartitionCount and the ISR-shrink
counter's increase, as max - min of IsrShrinksPerSec's Count.

Over N single-sample Jolokia messages (bench_pipeline's prefill and stream, 3 partitions):
(1) the textbook job's samples/s, from the end of its first batch to the end of its last,
    maxOffsetsPerTrigger = --cap;
(2) our job's samples/s, bench_pipeline.full_job (the shipped engines: python source,
    delta-rs), the same cap and the same measure;
(3) produced -> Delta latency of each, after its catch-up: marker samples at 20 a second
    for 30 s with event time = now, each timed from its produce() to the first read of the
    job's table (delta-rs, every 0.1 s) whose row of the marker's window shows it: the
    textbook's MERGE target, our broker_signals. p50 and p95.
Both run with Spark's default trigger (the next batch as soon as one ends), so neither
waits on a clock.

    .venv/bin/python tests/benchmarks/bench_textbook.py --messages 1000000
Writes tests/benchmarks/results/textbook.json; prints the figures last.

What the textbook job leaves out that ours does: it writes no bronze and computes 2 of our
broker signals (no cluster signals, headroom or data-quality results); a record that does
not parse becomes nulls that its filter drops unseen, where ours quarantines it with a
reason; max - min is wrong across a broker restart (the counter starts again from 0) and
misses the increase between two windows, where ours carries each counter's last sample
across windows and restarts; it opens no incidents and pages nobody; a sample behind its
watermark is dropped, where ours recomputes that window from bronze; its MERGE is not tied
to the batch that made it, so a replayed batch is merged again (harmless for these
whole-window values), where ours skips a write Delta already holds.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, Producer, TopicPartition

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from streaming.config import SignalsConfig  # noqa: E402
from streaming.testbed.kafka import create_topic, metrics_cluster  # noqa: E402
from tests.benchmarks.bench_pipeline import (  # noqa: E402
    PARTITIONS,
    finished_since,
    full_job,
    prefill,
    rate_figures,
    records_in,
    single_sample_stream,
)
from tests.benchmarks.proctree import job_cpu_seconds  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "textbook.json"
UNDER_MIN_ISR = "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"
ISR_SHRINKS = "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec"
MARKER_RATE = 20.0  # markers a second: few enough not to load either job
MARKER_SECONDS = 30.0
SETTLE_SECONDS = 30.0  # after the last marker, how long a marker may take to show
POLL_SECONDS = 0.1
SCRAPE_SECONDS = 15.0  # single_sample_stream's event time step between rounds


# ---- the textbook job ----

def start_textbook(spark: Any, bootstrap: str, topic: str, cap: int, table: str,
                   checkpoint: str, signals: SignalsConfig) -> Any:
    """The textbook query, started: Kafka -> from_json -> windowed groupBy -> MERGE."""
    from delta.tables import DeltaTable
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F  # noqa: N812 - pyspark's own alias
    from pyspark.sql.types import (
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    # A Jolokia read response of one attribute (what jolokia_single produces):
    # {"request": {"mbean", "attribute", "type"}, "value", "timestamp" (epoch s), "status"}
    read_response = StructType([
        StructField("request", StructType([
            StructField("mbean", StringType()),
            StructField("attribute", StringType()),
            StructField("type", StringType()),
        ])),
        StructField("value", DoubleType()),
        StructField("timestamp", LongType()),
        StructField("status", IntegerType()),
    ])
    records = (spark.readStream.format("kafka")
               .option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", topic)
               .option("startingOffsets", "earliest")
               .option("maxOffsetsPerTrigger", str(cap))
               .load())
    key = F.split(F.col("key").cast("string"), "/")  # the shipper's key: cluster/broker
    read = F.from_json(F.col("value").cast("string"), read_response)
    parsed = records.select(key.getItem(0).alias("cluster"), key.getItem(1).alias("broker"),
                            read.alias("r"))
    mbean, attribute = F.col("r.request.mbean"), F.col("r.request.attribute")
    gauge = (mbean == UNDER_MIN_ISR) & (attribute == "Value")
    counter = (mbean == ISR_SHRINKS) & (attribute == "Count")
    samples = (parsed.where((F.col("r.status") == 200) & (gauge | counter))
               .select("cluster", "broker",
                       F.timestamp_seconds("r.timestamp").alias("event_time"),
                       gauge.alias("is_gauge"), F.col("r.value").alias("value")))
    windows = (samples
               .withWatermark("event_time", f"{signals.watermark_seconds} seconds")
               .groupBy("cluster", "broker",
                        F.window("event_time", f"{signals.window_seconds} seconds"))
               .agg(F.count("*").alias("samples"),
                    F.max(F.when(F.col("is_gauge"), F.col("value"))).alias("under_min_isr_max"),
                    # The counter's increase as max - min within the window: not
                    # restart-safe (a broker that restarts counts from 0 again, so the
                    # window shows its whole old count as the increase) and blind to the
                    # increase between a window's last sample and the next one's first.
                    # Ours carries each counter's previous sample instead, one reason the
                    # jobs differ.
                    (F.max(F.when(~F.col("is_gauge"), F.col("value")))
                     - F.min(F.when(~F.col("is_gauge"), F.col("value"))))
                    .alias("isr_shrinks_increase"))
               .select("cluster", "broker", F.col("window.start").alias("window_start"),
                       F.col("window.end").alias("window_end"), "samples",
                       "under_min_isr_max", "isr_shrinks_increase"))
    DeltaTable.createIfNotExists(spark).location(table).addColumns(windows.schema).execute()

    def merge(batch: DataFrame, batch_id: int) -> None:
        (DeltaTable.forPath(batch.sparkSession, table).alias("t")
         .merge(batch.alias("s"), "t.cluster = s.cluster AND t.broker = s.broker "
                                  "AND t.window_start = s.window_start")
         .whenMatchedUpdateAll()
         .whenNotMatchedInsertAll()
         .execute())

    # update: every batch emits the windows it changed, with their values so far
    return (windows.writeStream.outputMode("update")
            .option("checkpointLocation", checkpoint)
            .foreachBatch(merge)
            .start())


def textbook_job(conn: Any, bootstrap: str, topic: str, total: int, cap: int,
                 work: str) -> dict[str, Any]:
    """The textbook query until `total` records are processed, timed as full_job times
    ours; then, still running, it waits for the parent's latency markers until told to stop.

    The session is build_spark's for a config with source.engine spark and delta.engine
    delta-spark: the spark-sql-kafka and delta-spark jars from the Maven cache
    (session_jars), Delta's extension, and the settings ours runs with where they apply
    (local[2], 2 shuffle partitions, UTC, 1 GB, the checkpoint file manager), so the two
    figures compare the jobs, not session tuning."""
    from streaming.config import load_config
    from streaming.runtime.spark_session import build_spark

    config = load_config(None, environ={
        "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA_HEALTH__SOURCE__ENGINE": "spark",
        "KAFKA_HEALTH__DELTA__ENGINE": "delta-spark",
        "KAFKA_HEALTH__SPARK__CHECKPOINT": str(Path(work) / "checkpoint"),
        "KAFKA_HEALTH__DELTA__PATH": str(Path(work) / "delta"),
    })
    spark = build_spark(config)
    try:
        query = start_textbook(spark, bootstrap, topic, cap, str(Path(work) / "delta" / "signals"),
                               config.spark.checkpoint, config.signals)
        batches: list[tuple[int, float, int]] = []  # (batch id, noticed at, records)
        cpu: list[dict[str, float]] = []
        durations: list[dict[str, int]] = []
        while sum(rows for _, _, rows in batches) < total:
            for progress in finished_since(query, batches[-1][0] if batches else None):
                batches.append((progress["batchId"], time.time(), records_in(progress)))
                cpu.append(job_cpu_seconds(os.getpid())[0])
                durations.append(dict(json.loads(progress.json)["durationMs"]))
            if not query.isActive:
                raise SystemExit(f"textbook query stopped: {query.exception()}")
            time.sleep(0.2)
        conn.send(("caught_up", None))
        conn.recv()  # the parent has measured the markers
        # Stopped mid-batch, the query interrupts that batch's MERGE, and Spark's stream
        # thread then dies of a StackOverflowError while classifying the error: stop it
        # between triggers.
        idle_by = time.time() + 30
        while query.status["isTriggerActive"] and time.time() < idle_by:
            time.sleep(0.05)
        query.stop()
    finally:
        spark.stop()
    first_end, last_end = batches[0][1], batches[-1][1]
    after_first = sum(rows for _, _, rows in batches[1:])
    return {
        "batches": len(batches), **rate_figures(first_end, last_end, after_first, cpu),
        # Spark's own per-phase milliseconds, summed over the measured batches
        "duration_ms": {name: sum(d.get(name, 0) for d in durations[1:])
                        for name in dict.fromkeys(k for d in durations[1:] for k in d)},
    }


# ---- each job in a process of its own ----

def textbook_child(conn: Any, bootstrap: str, topic: str, total: int, cap: int, work: str) -> None:
    try:
        conn.send(("done", textbook_job(conn, bootstrap, topic, total, cap, work)))
    except BaseException:
        conn.send(("error", traceback.format_exc()))


def ours_child(conn: Any, bootstrap: str, topic: str, total: int, cap: int, work: str) -> None:
    def hold() -> None:  # full_job's observe: runs once caught up, the query still up
        conn.send(("caught_up", None))
        conn.recv()

    try:
        conn.send(("done", full_job(bootstrap, topic, total, cap, observe=hold,
                                    environ={"KAFKA_HEALTH__DELTA__PATH": work})))
    except BaseException:
        conn.send(("error", traceback.format_exc()))


def receive(conn: Any, process: Any, expected: str) -> Any:
    while not conn.poll(1.0):
        if not process.is_alive():
            raise SystemExit(f"the job's process exited (code {process.exitcode}) before "
                             f"{expected!r}")
    kind, payload = conn.recv()
    if kind == "error":
        raise SystemExit(f"the job's process failed:\n{payload}")
    if kind != expected:
        raise SystemExit(f"the job's process said {kind!r}, expected {expected!r}")
    return payload


def run_job(name: str, target: Any, bootstrap: str, topic: str, cap: int, table: str,
            work: str, window_seconds: int) -> dict[str, Any]:
    """One job in a spawned process until it has caught up with the whole topic, then its
    latency markers from this process, then its figures.

    A process per job because a JVM takes its jars and JVM options only when it starts:
    the textbook needs spark-sql-kafka and delta-spark, and ours runs as shipped (C1-only
    JVM, python source, delta-rs), so neither can run in the other's session. The markers
    are produced and the tables read from this process, the same way for both jobs, so
    neither job's process does the measuring."""
    total = topic_records(bootstrap, topic)
    spawn = multiprocessing.get_context("spawn")
    parent_end, child_end = spawn.Pipe()
    process = spawn.Process(target=target, args=(child_end, bootstrap, topic, total, cap, work),
                            name=f"bench-{name}")
    process.start()
    try:
        receive(parent_end, process, "caught_up")
        latency = marker_latency(bootstrap, topic, table, f"marker-{name}", window_seconds)
        parent_end.send("stop")
        result = receive(parent_end, process, "done")
        process.join(120)
    finally:
        if process.is_alive():
            process.terminate()  # its JVM exits with it (pyspark's gateway watches stdin)
            process.join(30)
    return {"records_in_topic": total, **result, "latency": latency}


# ---- measuring ----

def topic_records(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-textbook"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
                   for p in range(PARTITIONS))
    finally:
        consumer.close()


def marker_latency(bootstrap: str, topic: str, table: str, cluster: str,
                   window_seconds: int) -> dict[str, Any]:
    """Markers at MARKER_RATE a second for MARKER_SECONDS, broker 1 of `cluster`, event
    time = now: marker k is UnderMinIsrPartitionCount = k. It shows when the table's row of
    its window has under_min_isr_max >= k: the markers share a key, so Kafka keeps them in
    order and no job can merge a later one without k."""
    from deltalake import DeltaTable

    sent: list[tuple[int, float, int]] = []  # (k, produced at, its window's start)
    shown: dict[int, float] = {}

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        started = time.time()
        k = 0
        while time.time() < started + MARKER_SECONDS:
            k += 1
            now = time.time()
            body = orjson.dumps({"request": {"mbean": UNDER_MIN_ISR, "attribute": "Value",
                                             "type": "read"},
                                 "value": float(k), "timestamp": int(now), "status": 200})
            producer.produce(topic, key=f"{cluster}/1".encode(), value=body)
            sent.append((k, now, int(now) - int(now) % window_seconds))
            producer.poll(0)
            ahead = started + k / MARKER_RATE - time.time()
            if ahead > 0:
                time.sleep(ahead)
        producer.flush(30)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    delta = DeltaTable(table)
    settle_until = math.inf
    while time.time() < settle_until:
        if not producer.is_alive() and settle_until == math.inf:
            settle_until = time.time() + SETTLE_SECONDS
        delta.update_incremental()
        at = time.time()  # the version just loaded holds every MERGE committed before now
        # filtered here, not by the scan: with deltalake 1.6.6 and pyarrow 26 the scan's
        # filter on this delta-spark table fails (no "equal" kernel for string and
        # string_view)
        rows = delta.to_pyarrow_table(columns=["cluster", "window_start", "under_min_isr_max"])
        rows = rows.filter(pc.equal(pc.cast(rows["cluster"], pa.string()), cluster))
        starts = pc.cast(rows["window_start"], pa.int64()).to_pylist()  # microseconds
        window_max = {start // 1_000_000: value for start, value in zip(
            starts, rows["under_min_isr_max"].to_pylist(), strict=True)
            if start is not None and value is not None}
        for k, _, window in sent[len(shown):]:  # in order: k shows only after k - 1
            if window_max.get(window, -1.0) < k:
                break
            shown[k] = at
        if not producer.is_alive() and len(shown) == len(sent):
            break
        time.sleep(POLL_SECONDS)
    latencies = sorted(shown[k] - produced for k, produced, _ in sent if k in shown)
    return {
        "markers": len(sent), "markers_shown": len(shown),
        "p50_s": round(statistics.median(latencies), 2) if latencies else None,
        "p95_s": (round(latencies[max(0, int(len(latencies) * 0.95 + 0.5) - 1)], 2)
                  if latencies else None),
        "max_s": round(latencies[-1], 2) if latencies else None,
    }


def messages_per_round() -> int:
    """Messages single_sample_stream makes per scrape round (event time steps after it)."""
    for i, (_, value) in enumerate(single_sample_stream(10 ** 6, 0.0)):
        if orjson.loads(value)["timestamp"]:
            return i
    raise AssertionError("single_sample_stream never advanced its event time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--cap", type=int, default=250_000,
                        help="records per micro-batch, both jobs (maxOffsetsPerTrigger)")
    args = parser.parse_args()
    signals = SignalsConfig()
    # The pre-filled event times end a window before now (bench_pipeline starts them an hour
    # back, which a large topic runs past): the markers, at now, must be ahead of both
    # jobs' watermarks, or the textbook job drops them as late.
    span = math.ceil(args.messages / messages_per_round()) * SCRAPE_SECONDS
    start = time.time() - span - signals.window_seconds
    work = Path(tempfile.mkdtemp(prefix="kh-textbook-"))
    load_before = os.getloadavg()  # other work on the same cores shows here, not in the figures
    try:
        with metrics_cluster() as broker:
            topic = "bench-metrics"
            create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
            size = prefill(broker.bootstrap, topic, single_sample_stream(args.messages, start))
            # Ours first: the broker's consume path is then warm for the textbook job
            ours = run_job("ours", ours_child, broker.bootstrap, topic, args.cap,
                           str(work / "ours" / "broker_signals"), str(work / "ours"),
                           signals.window_seconds)
            textbook = run_job("textbook", textbook_child, broker.bootstrap, topic, args.cap,
                               str(work / "textbook" / "delta" / "signals"),
                               str(work / "textbook"), signals.window_seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "benchmark": "textbook", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "messages": args.messages, "cap": args.cap, "message_bytes_avg": round(size, 1),
        "window_seconds": signals.window_seconds, "watermark_seconds": signals.watermark_seconds,
        "markers": {"rate_per_s": MARKER_RATE, "seconds": MARKER_SECONDS,
                    "poll_s": POLL_SECONDS},
        "cpu_note": "each job's own process tree (Python, JVM, Python workers), not the broker",
        # 1, 5 and 15 min load averages when the run began and ended
        "load_average": {"before": [round(x, 1) for x in load_before],
                         "after": [round(x, 1) for x in os.getloadavg()]},
        "order": ["ours", "textbook"],
        "ours": ours, "textbook": textbook,
        "textbook_to_ours": textbook["samples_per_s"] / ours["samples_per_s"],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(f"{args.messages} single-sample Jolokia messages, {size:.0f} B each, {args.cap} a "
          f"batch, {signals.window_seconds} s windows; each job in its own process on local[2]")
    print(f"{'':28}{'ours':>14}{'textbook':>14}")
    rows = [("samples/s", lambda r: f"{r['samples_per_s']:,.0f}"),
            ("CPU us a sample", lambda r: f"{r['cpu_us_per_sample']['total']:.2f}"),
            ("cores busy", lambda r: f"{r['cores_busy']:.2f}"),
            ("batches", lambda r: str(r["batches"])),
            ("produced -> Delta p50 s", lambda r: str(r["latency"]["p50_s"])),
            ("produced -> Delta p95 s", lambda r: str(r["latency"]["p95_s"])),
            ("markers shown", lambda r: f"{r['latency']['markers_shown']}/{r['latency']['markers']}")]
    for label, cell in rows:
        print(f"{label:28}{cell(ours):>14}{cell(textbook):>14}")
    print(f"textbook / ours samples/s: {result['textbook_to_ours']:.2f}")


if __name__ == "__main__":
    main()
