"""Throughput over a pre-filled topic of single-sample Jolokia messages (the worst case).

(1) raw limit: one Python process, the source's own read() (confluent-kafka consume +
    decode_record_batch) of the same records partition by partition, samples/s;
(2) the full streaming job (decode, quality, signals, incidents, headroom, Delta,
    exporter) on local[2], samples/s from the first to the last batch, and its ratio to (1);
(0) the broker's ceiling on this machine: bare consume with no decode, one process per
    partition in parallel, records/s, and the broker's own CPU per record delivered. No job
    that reads the topic can go faster than (0) on the same cores.
Messages are one Jolokia read response with one attribute each (about 160 bytes), from a
fleet model: broker-level MBeans and per-partition NumLogSegments, keyed cluster/broker.

    .venv/bin/python tests/benchmarks/bench_pipeline.py --messages 2000000
Writes tests/benchmarks/results/pipeline.json; prints the figures last.

    .venv/bin/python tests/benchmarks/bench_pipeline.py --engines --messages 1000000
runs (2) once per source.engine x delta.engine pair instead, side by side in one run, into
tests/benchmarks/results/pipeline-engines.json.

    .venv/bin/python tests/benchmarks/bench_pipeline.py --writers --messages 2000000
runs (1), then (2) with bronze written by the driver (delta.bronze_writers: driver) and by
the read tasks (read_tasks), alternating RUNS times each in one Spark session, into
tests/benchmarks/results/pipeline-writers.json: samples/s, ratio to raw, the driver's
CPU per sample (its Python plus the JVM, which on local[2] also hosts the executors'
task threads; the read tasks' Python workers are counted apart), and whether the first
round's tables (bronze, quarantine and every derived table) are equal between the modes.

    .venv/bin/python tests/benchmarks/bench_pipeline.py --caps 100000 250000 1000000 \
        --messages 5000000
runs (2) once per cap (records a batch), alternating RUNS times, in one Spark session, into
tests/benchmarks/results/pipeline-caps.json: samples/s and the driver's CPU (its Python
plus the JVM) per sample and per batch at each cap, and a least-squares split of the
driver's CPU into a cost per batch and a cost per sample over all runs, from which the
driver's own limit follows for any batch size: cap / (per batch + cap x per sample).
With --fleet BROKERS PARTITIONS the topic holds that fleet's scrapes instead (e.g. 300
brokers, 40,000 partitions: a scrape round is 129k samples, so 5 M samples span ten
one-minute windows, a live stream's density, where the default fleet's 6 brokers pack about
a hundred windows into each 250k batch), into pipeline-caps-fleet.json.

    .venv/bin/python tests/benchmarks/bench_pipeline.py --catching-up-every 2 15 \
        --messages 3000000
runs (2) once per delta.signals_every_seconds_catching_up (how often the signals writer's
round of Delta MERGEs may run while batches read up to the cap, as every batch of this
catch-up does; 2 is delta.signals_every_seconds, the interval of a live stream),
alternating RUNS times, in one Spark session, into
tests/benchmarks/results/pipeline-catching-up.json: samples/s, the driver's CPU per
sample, the seconds of the Delta signal steps, and whether the first round's tables are
equal between the values.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # this checkout's code (from a worktree: docs/performance.md)
    sys.path.insert(0, str(REPO))

import streaming  # noqa: E402, F401 - its __init__ sets mimalloc's purge delay: before pyarrow loads

# isort: split
import pyarrow as pa  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from streaming.config import SourceConfig  # noqa: E402
from streaming.decode.packing import unpack  # noqa: E402
from streaming.decode.records import DecodeContext  # noqa: E402
from streaming.simulate.formats import jolokia_single  # noqa: E402
from streaming.simulate.model import ClusterModel  # noqa: E402
from streaming.simulate.samples import broker_samples  # noqa: E402
from streaming.source.partition_reader import reader_config  # noqa: E402
from streaming.source.records import CHUNK  # noqa: E402
from streaming.source.stream import KafkaStreamReader  # noqa: E402
from streaming.testbed.kafka import create_topic, metrics_cluster  # noqa: E402
from tests.benchmarks.proctree import (  # noqa: E402
    ThreadReading,
    driver_jvm_pid,
    driver_us,
    job_cpu_seconds,
    read_threads,
    threads_between,
    tree_cpu_seconds,
    tree_rss_mb,
)

RESULTS = Path(__file__).resolve().parent / "results" / "pipeline.json"
ENGINE_RESULTS = RESULTS.with_name("pipeline-engines.json")
WRITER_RESULTS = RESULTS.with_name("pipeline-writers.json")
CAP_RESULTS = RESULTS.with_name("pipeline-caps.json")
ROUND_RESULTS = RESULTS.with_name("pipeline-catching-up.json")
# The steps of the signals writer's round (SignalStages.persist), as BatchStats times them.
ROUND_STEPS = ("broker_signals_merge", "cluster_signals", "headroom", "incidents")
PARTITIONS = 3


def bench_model() -> ClusterModel:
    """The benchmarks' fleet: 6 brokers, 180 partitions (90 replicas a broker)."""
    return ClusterModel("bench", [1, 2, 3, 4, 5, 6], {"orders": 120, "payments": 60})


def fleet_model(fleet: list[int] | None) -> ClusterModel | None:
    """`--fleet BROKERS PARTITIONS` as a model (replication factor 3, one topic), or None
    for bench_model's."""
    if fleet is None:
        return None
    brokers, partitions = fleet
    return ClusterModel("fleet", list(range(1, brokers + 1)), {"orders": partitions})


def single_sample_stream(count: int, start: float, model: ClusterModel | None = None
                         ) -> Iterator[tuple[bytes, bytes]]:
    """Scrapes of `model` (bench_model's by default), one sample per message, event time
    advancing 15 s a round. Made as they are produced: held in a list, 5 M of them would
    take ~25 GB."""
    model = model or bench_model()
    ts, made = start, 0
    while True:
        for broker in model.brokers:
            for message in jolokia_single("bench", broker, ts, broker_samples(model, broker, 15.0)):
                if made == count:
                    return
                made += 1
                yield message
        ts += 15.0


def single_sample_messages(count: int, start: float, model: ClusterModel | None = None
                           ) -> list[tuple[bytes, bytes]]:
    return list(single_sample_stream(count, start, model))


def prefill(bootstrap: str, topic: str, messages: Iterable[tuple[bytes, bytes]],
            partitions: int = PARTITIONS) -> float:
    """Round-robin over `partitions`. Returns the mean message size in bytes."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "batch.num.messages": 10000, "queue.buffering.max.messages": 1000000})
    count = size = 0
    for i, (key, value) in enumerate(messages):
        count, size = count + 1, size + len(value)
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    return size / max(count, 1)


def raw_limit(bootstrap: str, topic: str, total: int) -> dict[str, float]:
    """The job's own read path without Spark: the source reader's read() of every partition
    in turn, consuming, decoding, packing and unpacking in this one process."""
    ctx = DecodeContext(topic_formats={topic: "jolokia"}, max_skew_seconds=10 ** 9)
    reader = KafkaStreamReader({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                "decode": ctx.to_json()})
    tasks = reader.partitions(reader.initialOffset(), reader.latestOffset())
    reader.stop()
    samples = 0
    started = time.perf_counter()
    for task in tasks:
        for packed in reader.read(task):
            decoded, _ = unpack(pa.Table.from_batches([packed]))
            samples += decoded.column("reject_reason").null_count
    elapsed = time.perf_counter() - started
    if samples < total:
        raise SystemExit(f"raw limit read {samples} samples of {total}")
    return {"samples": samples, "seconds": elapsed, "samples_per_s": samples / elapsed}


def _consume_partition(bootstrap: str, topic: str, partition: int, end: int,
                       ready: Any, go: Any) -> None:
    """Consume one partition to `end` with the read tasks' consumer settings, touching
    nothing but the message objects librdkafka hands over."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(reader_config({"kafka.bootstrap.servers": bootstrap}))
    consumer.assign([TopicPartition(topic, partition, 0)])
    ready.wait()
    go.wait()
    seen = 0
    while seen < end:
        seen += len(consumer.consume(num_messages=CHUNK, timeout=1.0))
    consumer.close()


def consume_ceiling(bootstrap: str, topic: str, broker_pids: list[int]) -> dict[str, float]:
    """Every partition consumed at once, one process each, no decode: the most records a
    second these brokers (their processes `broker_pids`) hand to consumers on this
    machine, and their CPU per record."""
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer(reader_config({"kafka.bootstrap.servers": bootstrap}))
    ends = [probe.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in range(PARTITIONS)]
    probe.close()
    spawn = multiprocessing.get_context("spawn")
    ready, go = spawn.Barrier(PARTITIONS + 1), spawn.Event()
    workers = [spawn.Process(target=_consume_partition,
                             args=(bootstrap, topic, p, ends[p], ready, go))
               for p in range(PARTITIONS)]
    for worker in workers:
        worker.start()
    ready.wait()
    def brokers_cpu() -> float:
        return sum(tree_cpu_seconds(pid)["total"] for pid in broker_pids)

    broker_cpu = brokers_cpu()
    started = time.perf_counter()
    go.set()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    broker_cpu = brokers_cpu() - broker_cpu
    records = sum(ends)
    return {"records": records, "seconds": elapsed, "records_per_s": records / elapsed,
            "broker_cpu_seconds": broker_cpu,
            "broker_cpu_us_per_record": broker_cpu / records * 1e6}


def records_in(progress: Any) -> int:
    """Kafka records of one batch, from its offsets (Spark's numInputRows counts the packed
    blobs the source yields, one per decoded chunk). `progress` is the query's lastProgress;
    its offsets are read from the progress JSON, where they are JSON objects."""
    from streaming.runtime.progress import offsets_json

    source = json.loads(progress.json)["sources"][0]
    start, end = (value if isinstance(value, dict) else offsets_json(value) or {}
                  for value in (source.get("startOffset"), source.get("endOffset")))
    return sum(last - start.get(topic, {}).get(p, 0)
               for topic, parts in end.items() for p, last in parts.items())


def per_sample(cpu: list[dict[str, float]], samples: int) -> dict[str, float]:
    """CPU µs a sample per key between the first and the last of `cpu`'s snapshots."""
    return {kind: round((cpu[-1][kind] - cpu[0].get(kind, 0.0)) / max(samples, 1) * 1e6, 2)
            for kind in cpu[-1]}


def finished_since(query: Any, after: int | None) -> list[Any]:
    """The progress of the query's batches that ended after batch `after` (every one kept,
    with None), oldest first. lastProgress shows only the newest, so when batches ended
    within one poll the rest come from recentProgress (which converts every progress it
    keeps, so only then); without their records a run would wait for them forever."""
    newest = query.lastProgress
    if newest is None or (after is not None and newest["batchId"] <= after):
        return []
    if after is not None and newest["batchId"] == after + 1:
        return [newest]
    return [p for p in query.recentProgress if after is None or p["batchId"] > after]


def rate_figures(first_end: float, last_end: float, after_first: int,
                 cpu: list[dict[str, float]],
                 roles: list[dict[str, float]] | None = None) -> dict[str, Any]:
    """Samples/s from the first batch's end to the last's, and the process tree's CPU over
    the same span (`cpu` and `roles`: job_cpu_seconds per kind and per role at each
    batch's end). On 2 cores samples/s can be at most 2 / (CPU seconds a sample)."""
    span = max(last_end - first_end, 1e-9)
    figures = {"records_after_first_batch": after_first, "seconds": last_end - first_end,
               "samples_per_s": after_first / span,
               "cpu_us_per_sample": per_sample(cpu, after_first),
               "cores_busy": (cpu[-1]["total"] - cpu[0]["total"]) / span}
    if roles:
        figures["cpu_us_per_sample_by_role"] = per_sample(roles, after_first)
    return figures


def full_job(bootstrap: str, topic: str, total: int, cap: int,
             environ: dict[str, str] | None = None,
             observe: Callable[[], Any] | None = None,
             trigger_seconds: float = 0.0, spark: Any = None,
             keep: Path | None = None) -> dict[str, Any]:
    """The job in this process until `total` records are processed. `environ` adds config
    overrides (e.g. spark.master); `observe` runs once at the end while the query is still
    up, its result stored under "observed". `spark` is a session to run in and leave
    running (the engine comparison's, which has every engine's jars); without it the job
    builds its own and stops it at the end.

    `trigger_seconds` 0 (Spark's default trigger: the next batch as soon as one ends) lifts
    the job's rate limit, `cap` records per trigger: with the job's 1 s trigger a batch that
    ends early waits for the next second, so cap/s is a ceiling whatever the job's speed
    (250k/s with a 250k cap, exactly the target this measures; batches of the second half
    of a 5 M catch-up took 0.8 s and idled 0.2 s).

    With `keep`, the job's Delta tables are written under `keep` and left there."""
    from streaming.config import load_config
    from streaming.exporter import Exporter
    from streaming.job import Job

    work = keep or Path(tempfile.mkdtemp(prefix="kh-bench-"))
    config = load_config(None, environ={
        "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA_HEALTH__SOURCE__TOPICS": json.dumps([{"name": topic, "format": "jolokia"}]),
                "KAFKA_HEALTH__SOURCE__MAX_OFFSETS_PER_TRIGGER": str(cap),
        "KAFKA_HEALTH__SPARK__TRIGGER_SECONDS": str(trigger_seconds),
        "KAFKA_HEALTH__SPARK__CHECKPOINT": str(work / "checkpoint"),
        "KAFKA_HEALTH__DELTA__PATH": str(work / "delta"),
        "KAFKA_HEALTH__QUALITY__MAX_TIMESTAMP_SKEW_SECONDS": str(10 ** 9),
        # the fleet model's event time runs 15 s a scrape round from an hour ago: a few
        # million samples reach hours ahead of the wall clock, which the job would
        # quarantine as timestamp_out_of_range and so never compute signals from
        "KAFKA_HEALTH__QUALITY__MAX_AHEAD_OF_WALL_CLOCK_SECONDS": str(10 ** 9),
        **(environ or {}),
    })
    job = Job(config, spark=spark, exporter=Exporter(), printer=print)
    job.start()
    try:
        batches = []
        durations: list[dict[str, int]] = []  # Spark's durationMs of each batch
        cpu: list[dict[str, float]] = []  # process tree CPU seconds at each batch's end
        roles: list[dict[str, float]] = []  # the same per role (driver, executors, ...)
        # the driver JVM's threads at the first batch's end and at the latest one's
        first_threads: ThreadReading | None = None
        last_threads: ThreadReading | None = None
        jvm_pid = driver_jvm_pid(os.getpid())
        # the job's process tree without the broker, sampled every second: MB per kind at
        # the sample whose total was largest
        rss_peak: dict[str, float] = {"total": 0.0}
        rss_at = 0.0
        while sum(rows for _, rows in batches) < total:
            if time.time() - rss_at >= 1.0:
                rss_at = time.time()
                rss = tree_rss_mb(os.getpid())
                rss["total"] -= rss.pop("broker", 0.0)
                rss_peak = max(rss_peak, rss, key=lambda sample: sample["total"])
            ended = finished_since(job.query, batches[-1][0][0] if batches else None)
            if ended:
                at = time.time()
                batches += [((p["batchId"], at), records_in(p)) for p in ended]
                durations += [dict(p["durationMs"]) for p in ended]
                kinds, by_role = job_cpu_seconds(os.getpid())
                cpu.append(kinds)
                roles.append(by_role)
                last_threads = read_threads(jvm_pid) if jvm_pid is not None else None
                first_threads = first_threads or last_threads
            if not job.query.isActive:
                raise SystemExit(f"query stopped: {job.query.exception()}")
            time.sleep(0.2)
        observed = observe() if observe is not None else None
    finally:
        job.stop()  # waits for the last batch's signals
        if spark is None:
            job.spark.stop()
    first_end, last_end = batches[0][0][1], batches[-1][0][1]
    measured = [{**done.timings, **done.signal_timings} for done in job.processor.history.finished
                if batches[0][0][0] < done.batch_id <= batches[-1][0][0]]
    after_first = sum(rows for _, rows in batches[1:])
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    result: dict[str, Any] = {
        "batches": len(batches), **rate_figures(first_end, last_end, after_first, cpu, roles),
        "peak_rss_mb_without_broker": {kind: round(mb) for kind, mb in rss_peak.items()},
        # seconds per step summed over the measured batches (all but the first); the
        # signal steps overlap the next batch's read, so they do not add up to the time
        "step_seconds": {name: round(sum(s.get(name, 0.0) for s in measured), 2)
                         for name in dict.fromkeys(k for s in measured for k in s)},
        # Spark's own durations of the measured batches, summed: addBatch is foreachBatch
        # (the read tasks run inside it, in toArrow); triggerExecution less addBatch is the
        # micro-batch loop's planning and logs, when no read task runs
        "spark_duration_seconds": {name: round(sum(d.get(name, 0) for d in durations[1:])
                                               / 1000, 2)
                                   for name in dict.fromkeys(k for d in durations for k in d)}}
    if first_threads is not None and last_threads is not None and after_first:
        # where the driver JVM's CPU a sample goes, per thread group, largest first: the
        # micro-batch loop, the scheduler, the RPC and task results, the JIT, the GC, ...
        by_thread = threads_between(first_threads, last_threads)
        result["driver_jvm_cpu_us_per_sample_by_thread"] = {
            group: round(seconds / after_first * 1e6, 3)
            for group, seconds in sorted(by_thread.items(), key=lambda item: -item[1])
            if seconds / after_first * 1e6 >= 0.0005}
    if observed is not None:
        result["observed"] = observed
    return result


ENGINE_PAIRS = [(source, sink) for source in ("python", "spark")
                for sink in ("delta-rs", "delta-spark")]


def engine_pairs(bootstrap: str, topic: str, total: int, cap: int,
                 trigger_seconds: float) -> dict[str, Any]:
    """The full job once per source.engine x delta.engine pair over the same topic, in one
    Spark session built with every pair's jars (a JVM takes spark.jars only at its start),
    so the pairs differ by their engines alone. The pairs run one after another; the order
    is fixed, python x delta-rs first, so a warm-up advantage goes to the baseline."""
    every = {"KAFKA_HEALTH__SOURCE__ENGINE": "spark", "KAFKA_HEALTH__DELTA__ENGINE": "delta-spark"}
    with job_session(bootstrap, every) as spark:
        return {f"{source} x {sink}": full_job(
                    bootstrap, topic, total, cap, trigger_seconds=trigger_seconds, spark=spark,
                    environ={"KAFKA_HEALTH__SOURCE__ENGINE": source,
                             "KAFKA_HEALTH__DELTA__ENGINE": sink})
                for source, sink in ENGINE_PAIRS}


@dataclass
class Topic:
    """The benchmark topic, pre-filled, and the raw consume+decode limit over it."""

    broker: Any  # the metrics cluster
    name: str
    message_bytes: float
    raw: dict[str, float]


@contextmanager
def prefilled_topic(messages: int, model: ClusterModel | None = None) -> Iterator[Topic]:
    """A metrics cluster whose topic holds `messages` single-sample messages from an hour
    ago on (the fleet `model`'s scrapes, by default bench_model's), and their raw limit."""
    with metrics_cluster() as broker:
        topic = "bench-metrics"
        create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
        size = prefill(broker.bootstrap, topic,
                       single_sample_stream(messages, time.time() - 3600, model))
        yield Topic(broker, topic, size, raw_limit(broker.bootstrap, topic, messages))


@contextmanager
def job_session(bootstrap: str, environ: dict[str, str] | None = None) -> Iterator[Any]:
    """One Spark session for several runs of the job, built as the job builds its own
    from the configuration `environ` gives (a JVM takes spark.jars only at its start)."""
    from streaming.config import load_config
    from streaming.runtime.spark_session import build_spark

    spark = build_spark(load_config(None, environ={
        "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": bootstrap, **(environ or {})}))
    try:
        yield spark
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--cap", type=int, default=SourceConfig().max_offsets_per_trigger,
                        help="records per micro-batch (source.max_offsets_per_trigger; "
                             "default: the job's)")
    parser.add_argument("--trigger-seconds", type=float, default=0.0,
                        help="spark.trigger_seconds; 0 (default) runs batches back to back so "
                             "that cap/trigger, the job's rate limit, does not cap the figure")
    parser.add_argument("--engines", action="store_true",
                        help="instead of the default job: the job once per source.engine x "
                             "delta.engine pair (python/spark x delta-rs/delta-spark) in one "
                             "session; writes results/pipeline-engines.json")
    parser.add_argument("--writers", action="store_true",
                        help="instead of the default job: the job with bronze written by the "
                             "driver and by the read tasks, alternating, in one session; "
                             "writes results/pipeline-writers.json")
    parser.add_argument("--caps", type=int, nargs="+", metavar="CAP",
                        help="instead of the default job: the job once per cap (records a "
                             "batch), alternating, in one session, and the driver's CPU split "
                             "into a cost per batch and per sample; writes "
                             "results/pipeline-caps.json")
    parser.add_argument("--catching-up-every", type=float, nargs="+", metavar="SECONDS",
                        help="instead of the default job: the job once per "
                             "delta.signals_every_seconds_catching_up, alternating, in one "
                             "session; writes results/pipeline-catching-up.json")
    parser.add_argument("--rounds", type=int, default=2,
                        help="with --writers, --caps or --catching-up-every: runs of each "
                             "variant, alternating")
    parser.add_argument("--fleet", type=int, nargs=2, metavar=("BROKERS", "PARTITIONS"),
                        help="with --caps: the scrapes of a fleet of this many brokers and "
                             "partitions (replication factor 3) instead of the 6-broker one")
    args = parser.parse_args()
    if args.engines:
        compare_engines(args)
        return
    if args.writers:
        compare_writers(args)
        return
    if args.caps:
        compare_caps(args)
        return
    if args.catching_up_every:
        compare_signal_rounds(args)
        return
    with prefilled_topic(args.messages) as topic:
        broker, size, raw = topic.broker, topic.message_bytes, topic.raw
        ceiling = consume_ceiling(broker.bootstrap, topic.name,
                                  [node.pid for node in broker.nodes if node.pid is not None])
        job = full_job(broker.bootstrap, topic.name, args.messages, args.cap,
                       trigger_seconds=args.trigger_seconds)
    result = {"messages": args.messages, "message_bytes_avg": size, "ceiling": ceiling,
              "raw": raw, "job": job,
              "ratio": job["samples_per_s"] / raw["samples_per_s"], "cap": args.cap,
              "trigger_seconds": args.trigger_seconds}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(f"broker ceiling: bare consume of {PARTITIONS} partitions in parallel "
          f"{ceiling['records_per_s']:,.0f} records/s, broker CPU "
          f"{ceiling['broker_cpu_us_per_record']:.2f} us a record")
    print(f"{args.messages} single-sample Jolokia messages, {size:.0f} B each: raw consume+decode "
          f"{raw['samples_per_s']:,.0f} samples/s; full job on local[2] "
          f"{job['samples_per_s']:,.0f} samples/s over {job['batches']} batches "
          f"({result['ratio']:.0%} of raw); the job's process tree used "
          f"{job['cpu_us_per_sample']['total']:.2f} CPU us a sample, {job['cores_busy']:.2f} "
          f"of {os.cpu_count()} cores")


def compare_engines(args: argparse.Namespace) -> None:
    with prefilled_topic(args.messages) as topic:
        size, raw = topic.message_bytes, topic.raw
        pairs = engine_pairs(topic.broker.bootstrap, topic.name, args.messages, args.cap,
                             args.trigger_seconds)
    result = {"messages": args.messages, "message_bytes_avg": size, "cap": args.cap,
              "raw": raw, "pairs": pairs}
    ENGINE_RESULTS.write_text(json.dumps(result, indent=2))
    print(f"{args.messages} single-sample Jolokia messages, {size:.0f} B each, "
          f"{args.cap} a batch; raw consume+decode {raw['samples_per_s']:,.0f} samples/s")
    for name, job in pairs.items():
        steps = sorted(job["step_seconds"].items(), key=lambda kv: -kv[1])[:3]
        print(f"  {name:24} {job['samples_per_s']:>9,.0f} samples/s "
              f"({job['samples_per_s'] / raw['samples_per_s']:.0%} of raw), "
              f"{job['cpu_us_per_sample']['total']:.2f} CPU us a sample; slowest steps "
              + ", ".join(f"{k} {v:.1f}s" for k, v in steps))


def driver_cpu(job: dict[str, Any]) -> float:
    """CPU µs a sample of the driver (proctree.driver_us; on local[N] the executors' task
    threads run in its JVM too, so this is an upper bound)."""
    return driver_us(job["cpu_us_per_sample_by_role"])


def compare_writers(args: argparse.Namespace) -> None:
    runs: list[dict[str, Any]] = []
    kept = Path(tempfile.mkdtemp(prefix="kh-bench-writers-"))
    with prefilled_topic(args.messages) as topic, job_session(topic.broker.bootstrap) as spark:
        size, raw = topic.message_bytes, topic.raw
        for round_ in range(args.rounds):
            for writers in ("driver", "read_tasks"):
                job = full_job(topic.broker.bootstrap, topic.name, args.messages, args.cap,
                               trigger_seconds=args.trigger_seconds, spark=spark,
                               environ={"KAFKA_HEALTH__DELTA__BRONZE_WRITERS": writers},
                               keep=kept / writers if round_ == 0 else None)
                runs.append({"writers": writers, **job})
                print(f"  {writers:10} {job['samples_per_s']:>9,.0f} samples/s "
                      f"({job['samples_per_s'] / raw['samples_per_s']:.0%} of raw), "
                      f"driver {driver_cpu(job):.2f} CPU us a sample", flush=True)

    def best(writers: str) -> dict[str, Any]:
        return max((r for r in runs if r["writers"] == writers), key=lambda r: r["samples_per_s"])

    summary = {writers: {"samples_per_s": best(writers)["samples_per_s"],
                         "ratio_to_raw": best(writers)["samples_per_s"] / raw["samples_per_s"],
                         "driver_cpu_us_per_sample": min(
                             driver_cpu(r) for r in runs if r["writers"] == writers)}
               for writers in ("driver", "read_tasks")}
    summary["speedup"] = (summary["read_tasks"]["samples_per_s"]
                          / summary["driver"]["samples_per_s"])
    tables = same_tables(kept / "read_tasks" / "delta", kept / "driver" / "delta")
    shutil.rmtree(kept, ignore_errors=True)
    result = {"messages": args.messages, "message_bytes_avg": size, "cap": args.cap,
              "raw": raw, "summary": summary, "tables": tables, "runs": runs}
    WRITER_RESULTS.write_text(json.dumps(result, indent=2))
    print(f"{args.messages} single-sample Jolokia messages, {size:.0f} B each, {args.cap} a "
          f"batch; raw consume+decode {raw['samples_per_s']:,.0f} samples/s")
    print(json.dumps(summary, indent=2))
    print(f"tables of the first round, read tasks writing against the driver writing: "
          f"{'equal' if tables['equal'] else 'DIFFERENT: ' + tables['difference']} "
          f"({', '.join(f'{k} {v:,}' for k, v in tables['rows'].items())} rows)")


def driver_cost_split(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Least squares of the driver's CPU seconds over the runs against (batches, samples):
    its cost per batch (Spark's streaming machinery, the per-window stages, the Delta
    commits) and per sample (the rows the read tasks send: counter samples, segment
    partials), and the driver's limit at each cap that follows from them."""
    import numpy as np

    timed = np.array([[r["batches"] - 1, r["records_after_first_batch"]] for r in runs], float)
    seconds = np.array([driver_cpu(r) * r["records_after_first_batch"] / 1e6 for r in runs])
    (per_batch, per_sample), *_ = np.linalg.lstsq(timed, seconds, rcond=None)
    predicted = timed @ np.array([per_batch, per_sample])
    return {"per_batch_seconds": float(per_batch), "per_sample_us": float(per_sample * 1e6),
            "max_relative_residual": float(np.max(np.abs(predicted - seconds) / seconds))}


def compare_caps(args: argparse.Namespace) -> None:
    model = fleet_model(args.fleet)
    runs: list[dict[str, Any]] = []
    with prefilled_topic(args.messages, model) as topic, \
            job_session(topic.broker.bootstrap) as spark:
        size, raw = topic.message_bytes, topic.raw
        for _ in range(args.rounds):
            for cap in args.caps:
                job = full_job(topic.broker.bootstrap, topic.name, args.messages, cap,
                               trigger_seconds=args.trigger_seconds, spark=spark)
                timed = job["batches"] - 1
                driver_seconds = driver_cpu(job) * job["records_after_first_batch"] / 1e6
                runs.append({"cap": cap, **job,
                             "driver_cpu_us_per_sample": round(driver_cpu(job), 2),
                             "driver_cpu_seconds_per_batch": driver_seconds / timed})
                print(f"  cap {cap:>9,} {job['samples_per_s']:>9,.0f} samples/s "
                      f"({job['samples_per_s'] / raw['samples_per_s']:.0%} of raw), "
                      f"driver {driver_cpu(job):.2f} CPU us a sample, "
                      f"{driver_seconds / timed:.3f} s a batch", flush=True)
    split = driver_cost_split(runs)
    limits = {str(cap): cap / (split["per_batch_seconds"] + cap * split["per_sample_us"] / 1e6)
              for cap in args.caps}
    result = {"messages": args.messages, "message_bytes_avg": size,
              "fleet": {"brokers": 6, "partitions": 180} if args.fleet is None else {
                  "brokers": args.fleet[0], "partitions": args.fleet[1]},
              "raw": raw, "driver_cost": split, "driver_limit_samples_per_s": limits,
              "runs": runs}
    out = CAP_RESULTS if args.fleet is None else CAP_RESULTS.with_name(
        "pipeline-caps-fleet.json")
    out.write_text(json.dumps(result, indent=2))
    print(f"{args.messages} single-sample Jolokia messages, {size:.0f} B each; raw "
          f"consume+decode {raw['samples_per_s']:,.0f} samples/s")
    print(f"driver CPU = {split['per_batch_seconds']:.3f} s a batch + "
          f"{split['per_sample_us']:.2f} us a sample (largest residual "
          f"{split['max_relative_residual']:.0%}); the driver's limit by cap: "
          + ", ".join(f"{int(c):,}: {v:,.0f} samples/s" for c, v in limits.items()))


def compare_signal_rounds(args: argparse.Namespace) -> None:
    """The job once per delta.signals_every_seconds_catching_up, alternating: what a longer
    round of the Delta signals saves the driver over a catch-up, and that the tables come
    out the same (the first round's runs are kept and compared with the first value's)."""
    runs: list[dict[str, Any]] = []
    kept = Path(tempfile.mkdtemp(prefix="kh-bench-rounds-"))
    with prefilled_topic(args.messages) as topic, job_session(topic.broker.bootstrap) as spark:
        size, raw = topic.message_bytes, topic.raw
        for round_ in range(args.rounds):
            for every in args.catching_up_every:
                job = full_job(topic.broker.bootstrap, topic.name, args.messages, args.cap,
                               trigger_seconds=args.trigger_seconds, spark=spark,
                               environ={"KAFKA_HEALTH__DELTA__SIGNALS_EVERY_SECONDS_CATCHING_UP":
                                        str(every)},
                               keep=kept / str(every) if round_ == 0 else None)
                delta_seconds = sum(job["step_seconds"].get(step, 0.0) for step in ROUND_STEPS)
                runs.append({"signals_every_seconds_catching_up": every, **job,
                             "driver_cpu_us_per_sample": round(driver_cpu(job), 2),
                             "round_steps_seconds": round(delta_seconds, 2)})
                print(f"  every {every:>5} s {job['samples_per_s']:>9,.0f} samples/s "
                      f"({job['samples_per_s'] / raw['samples_per_s']:.0%} of raw), driver "
                      f"{driver_cpu(job):.2f} CPU us a sample (Python "
                      f"{job['cpu_us_per_sample_by_role'].get('driver-python', 0.0):.2f}), "
                      f"Delta signal steps {delta_seconds:.2f} s", flush=True)
    first = str(args.catching_up_every[0])
    tables = {str(every): same_tables(kept / str(every) / "delta", kept / first / "delta")
              for every in args.catching_up_every[1:]}
    shutil.rmtree(kept, ignore_errors=True)
    result = {"messages": args.messages, "message_bytes_avg": size, "cap": args.cap,
              "raw": raw, "round_steps": list(ROUND_STEPS), "tables_against_" + first: tables,
              "runs": runs}
    ROUND_RESULTS.write_text(json.dumps(result, indent=2))
    print(f"{args.messages} single-sample Jolokia messages, {size:.0f} B each, {args.cap} a "
          f"batch; raw consume+decode {raw['samples_per_s']:,.0f} samples/s")
    for every, same in tables.items():
        print(f"tables of the first round, every {every} s against every {first} s: "
              f"{'equal' if same['equal'] else 'DIFFERENT: ' + same['difference']}")


def same_tables(got: Path, want: Path) -> dict[str, Any]:
    """Whether two runs' tables agree as the engine matrix test compares them (every table
    derived from the input, volatile columns aside), and each table's rows in `want`."""
    from tests.integration.helpers import COMPARED_TABLES, assert_same_tables, count

    rows = {name: count(want, name) for name in COMPARED_TABLES}
    try:
        assert_same_tables(got, want)
    except AssertionError as err:
        return {"equal": False, "difference": str(err)[:2000], "rows": rows}
    return {"equal": True, "difference": None, "rows": rows}


if __name__ == "__main__":
    main()
