"""Wires the stages into one streaming query: source -> decode -> foreachBatch sinks.

Every step inside a micro-batch is idempotent or a recomputation from bronze, so a batch
replayed after a crash (same batch id, same offsets) converges to the same tables.

A batch's signals (broker and cluster signals, paging, headroom, incidents, compaction)
run on a thread while Spark reads the next batch, so that on two cores the driver's work
and the read tasks do not take turns. Spark commits a batch once its bronze is in, so
before handing the rest to the thread the batch's touched clusters and windows go to a
marker file in the checkpoint; a job that dies before the thread finishes recomputes them
from bronze when it starts again (a compaction it missed comes with the next one).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import logging
import operator
import os
import signal
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming import alertpush, failpoints, poison
from streaming.alertpush import opened_in_signals, push_incidents
from streaming.broker_admission import BrokerAdmission
from streaming.config import Config
from streaming.decode.packing import unpack
from streaming.decode.records import reason_category
from streaming.exporter import Exporter
from streaming.headroom.stage import HeadroomTracker
from streaming.lease import Leases
from streaming.planning_daemons import stop_planning_daemons
from streaming.progress_events import JsonProgressListener
from streaming.quality import BronzeValidator
from streaming.retention import Retention
from streaming.signals.broker import (
    SAMPLE_COLUMNS,
    SIGNAL_METRICS,
    finalize,
    prepared,
    signal_partials,
    window_starts,
)
from streaming.signals.churn import unmatched_shrinks
from streaming.signals.cluster import cluster_signals
from streaming.signals.incidents import incident_conditions, incident_runs
from streaming.signals.incremental import OpenWindows
from streaming.sinks.delta_rs import DeltaRsTable, Scope
from streaming.source.reader import read_decoded_stream

LOG = logging.getLogger("kafka_health.job")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_MICROS = (datetime.min.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
MAX_MICROS = (datetime.max.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
TABLES = ("bronze", "quarantine", "broker_signals", "cluster_signals", "incidents", "dq_results",
          "partition_headroom")
TS = pa.timestamp("us", "UTC")
PENDING_SIGNALS = "kafka_health_pending_signals.json"
Span = tuple[datetime, datetime]  # first and last window start of touched windows


def build_spark(config: Config) -> SparkSession:
    # Python workers must run this interpreter (the venv with pyarrow and this package).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(config.spark.app_name)
    if config.spark.master:
        builder = builder.master(config.spark.master)
    for key, value in spark_conf(config).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def spark_conf(config: Config) -> dict[str, str]:
    """The session's settings: ours, then `spark.conf` of the config over them."""
    defaults = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(config.spark.shuffle_partitions),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        # 1g: in local mode this heap is the executor's too; 200k-record batches (the
        # default cap) fit with room, and a larger heap with larger batches mostly raises
        # the process tree's peak RSS (docs/performance.md).
        "spark.driver.memory": "1g",
        # pyspark.daemon without pyspark's redundant zip archives on the workers' path:
        # ~0.1 s less per task (see streaming/spark_daemon.py)
        "spark.python.daemon.module": "streaming.spark_daemon",
        # A read task's result (its decoded rows, ~12 MB for a 125k-record share) goes back
        # to the driver inside the task's status message instead of through the block
        # manager (a store, a fetch over the block transfer service, a release), which it
        # would take above the 1 MB default and which costs the JVM CPU on every result.
        # Bounded by spark.rpc.message.maxSize (128 MB); larger results still take the store.
        "spark.task.maxDirectResultSize": "64m",
    }
    if urlparse(config.spark.checkpoint).scheme in ("", "file"):
        # Spark's default checkpoint file manager goes through Hadoop's FileContext, whose
        # local file system resolves symlinks and sets permissions by running `readlink` and
        # `chmod` (without Hadoop's native library): ~10 process spawns for each offset- and
        # commit-log file, serial between micro-batches. The FileSystem-based manager
        # writes the same temp file and renames it (rename(2), atomic on a local disk) with
        # 2 spawns (tests/benchmarks/bench_checkpoint_files.py times both).
        # HDFS or object stores keep Spark's own choice.
        defaults["spark.sql.streaming.checkpointFileManagerClass"] = (
            "org.apache.spark.sql.execution.streaming.checkpointing."
            "FileSystemBasedCheckpointFileManager")
    if config.source.engine == "python":
        # With the Python source the JVM only moves Arrow blobs and runs the micro-batch
        # loop, and its C2 compiler costs more than it buys: over a long catch-up it takes
        # a large share of the JVM's CPU and is still compiling at the end, so the JVM runs
        # C1 only, which also lowers produced -> gauge latency under steady load. Spark's
        # own kafka source parses and converts in the JVM and keeps C2.
        # 4 MB G1 regions: a packed blob of 10k decoded rows (~1.6 MB) is then below half a
        # region, not a humongous object allocated straight into the old generation (with
        # the 1 MB regions of a 1 GB heap such objects start G1 concurrent marking cycles
        # that cost the JVM CPU every few seconds).
        # -Xms at the heap's cap: a read task's result (~12 MB) is still humongous, and each
        # one starts a G1 concurrent cycle once the heap holds more than 45 % of its current
        # size. A lazily grown heap stays small, so the threshold is easy to pass and many
        # of those cycles go on to mark; sized at the cap from the start, few do.
        # The young generation fixed at a quarter of it: G1's own sizing grows it towards
        # 60 % and touches it all, which raises the JVM's RSS for no gain in throughput.
        memory = {**defaults, **config.spark.conf}["spark.driver.memory"]
        defaults["spark.driver.extraJavaOptions"] = (
            f"-XX:TieredStopAtLevel=1 -XX:G1HeapRegionSize=4m -Xms{memory} "
            "-XX:+UnlockExperimentalVMOptions -XX:G1NewSizePercent=25 -XX:G1MaxNewSizePercent=25")
    return {**defaults, **config.spark.conf}


@contextmanager
def stopwatch(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - started


@dataclass
class BatchStats:
    batch_id: int = -1
    records: int = 0  # Kafka records (Spark's numInputRows counts packed blobs)
    bronze_rows: int = 0
    quarantined: int = 0
    finished_at: float = 0.0
    newest_event: datetime | None = None
    timings: dict[str, float] = field(default_factory=dict)  # read, bronze, quarantine
    signal_timings: dict[str, float] = field(default_factory=dict)  # the deferred steps


class Handoff:
    """The foreachBatch thread's go-ahead to the deferred steps: bronze is committed (with
    the touched windows and the batch's facts), or the batch failed before it was."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.cancelled = False
        self.touched: tuple[list[str], list[Span]] | None = None
        self.facts = BatchStats()

    def release(self, touched: tuple[list[str], list[Span]] | None, facts: BatchStats) -> None:
        self.touched, self.facts = touched, facts
        self.ready.set()

    def cancel(self) -> None:
        """A no-op once released: the steps of a committed batch run to their end."""
        if not self.ready.is_set():
            self.cancelled = True
            self.ready.set()

    def wait(self) -> bool:
        """Whether to go on: True once released, False once cancelled."""
        self.ready.wait()
        return not self.cancelled


class PreviousBatchFailed(RuntimeError):
    """This batch fails because the previous batch's deferred steps did: not its data."""


class DefaultedIdentity:
    """Samples whose cluster is identity.default_cluster for want of any in their data
    (the decoders' `cluster_defaulted`): counted on the exporter every batch, and a warning
    naming the topic at most once per `warn_every_seconds` per topic. Without it a
    shipper's labels the identity settings miss merge every cluster into one, silently."""

    def __init__(self, default_cluster: str = "default", warn_every_seconds: float = 300.0
                 ) -> None:
        self.default_cluster = default_cluster
        self.warn_every_seconds = warn_every_seconds
        self.warned: dict[str, float] = {}  # topic -> when last warned

    def __call__(self, bronze: pa.Table, exporter: Exporter | None,
                 now: float | None = None) -> int:
        if "cluster_defaulted" not in bronze.column_names or not bronze.num_rows:
            return 0
        flags = bronze["cluster_defaulted"]
        total = int(pc.sum(flags).as_py() or 0)  # one pass over a bit column
        if not total:
            return 0
        if exporter is not None:
            exporter.count("kafka_health_pipeline_identity_defaulted_samples_total", total,
                           field="cluster")
        now = time.monotonic() if now is None else now
        per_topic = (bronze.select(["source_topic", "cluster_defaulted"]).filter(flags)
                     .group_by("source_topic").aggregate([([], "count_all")]))
        for topic, count in zip(per_topic["source_topic"].to_pylist(),
                                per_topic["count_all"].to_pylist(), strict=True):
            last = self.warned.get(topic)
            if last is not None and now - last < self.warn_every_seconds:
                continue
            self.warned[topic] = now
            LOG.warning(
                "topic %r: %d samples in this batch name no cluster (field cluster defaulted "
                "to %r): no identity.cluster_labels label, no `cluster` record header or key "
                "group, no source.topics cluster; set one, or every such cluster merges into "
                "one (warned at most every %.0f s per topic; counted on "
                "kafka_health_pipeline_identity_defaulted_samples_total)",
                topic, count, self.default_cluster, self.warn_every_seconds)
        return total


class BatchProcessor:
    """The foreachBatch body: bronze + quarantine, then recompute the touched windows.

    With `pending` (a marker file's path) the recomputation is deferred to a thread that
    overlaps the next batch's read; without it everything runs inside foreachBatch.
    """

    def __init__(self, config: Config, exporter: Exporter | None,
                 app_id: str = "kafka-health", pending: Path | None = None,
                 failed_batch: Path | None = None) -> None:
        self.config = config
        self.exporter = exporter
        self.pending = pending
        # The failed batch's note (streaming.poison), beside the pending marker by default.
        self.failures = poison.FailureLog(failed_batch or (
            pending.with_name(poison.FAILED_BATCH) if pending is not None else None))
        self.attempt: tuple[int, pa.Table] | None = None  # the running batch's decoded rows
        self.stats = BatchStats()  # the newest batch whose every step is done
        # What each recent batch read and wrote, for the listener (which runs after the
        # batch, possibly after the next one has begun); a few are kept, the listener pops.
        self.facts: dict[int, BatchStats] = {}
        self.timings: dict[str, float] = {}  # the running deferred steps'
        self.deferred: threading.Thread | None = None
        self.handoff: Handoff | None = None  # the running deferred steps' go-ahead
        self.deferred_error: BaseException | None = None
        self.finished: deque[BatchStats] = deque(maxlen=64)  # newest last, for benchmarks
        self.push_failures_seen = alertpush.STATS.failures
        self.validator = BronzeValidator(config.quality.validate_every_n_batches,
                                         config.quality.sample_rows)
        self.defaulted = DefaultedIdentity(config.identity.default_cluster)
        self.admission = BrokerAdmission(config.quality.max_brokers_per_cluster,
                                         config.quality.max_clusters)
        self.retention = Retention(config.delta)
        self.set_app_id(app_id)

    def set_app_id(self, app_id: str) -> None:
        """Transactions are keyed by the query id, so a new checkpoint never skips batches."""
        self.app_id = app_id
        self.tables = {name: DeltaRsTable(self.config.delta.path, name, app_id)
                       for name in TABLES}
        # Poison records leave bronze and enter quarantine in transactions of their own: the
        # failed attempt may have committed the batch's own already.
        self.poison_tables = {name: DeltaRsTable(self.config.delta.path, name,
                                                 f"{app_id}:poison")
                              for name in ("bronze", "quarantine")}
        for table in self.tables.values():
            table.ensure()
        self.headroom = HeadroomTracker(self.config.clusters,
                                        self.tables["partition_headroom"].read)
        self.open_windows = OpenWindows(self.config.signals)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self.process(batch, batch_id)
        except BaseException as err:
            if self.handoff is not None:
                self.handoff.cancel()
            self.wait_deferred()
            self.open_windows.clear()  # the batch may have been absorbed: never count it twice
            attempt, self.attempt = self.attempt, None
            if (isinstance(err, Exception) and not isinstance(err, PreviousBatchFailed)
                    and attempt is not None and attempt[0] == batch_id):
                self.failures.record(self.app_id, batch_id, poison.offset_ranges(attempt[1]),
                                     err)
            raise
        self.attempt = None

    def process(self, batch: DataFrame, batch_id: int) -> None:
        timings: dict[str, float] = {}
        with stopwatch(timings, "read+decode"):
            decoded, records = unpack(batch.toArrow())
        self.attempt = (batch_id, decoded)
        # The previous batch's signals first: they must not see this batch's bronze.
        self.finish_deferred()
        good = pc.is_null(decoded["reject_reason"])
        bronze = decoded.filter(good)
        rejected = decoded.filter(pc.invert(good))
        failure = self.failures.failed(self.app_id, batch_id)
        if failure is not None:
            bronze = self.cull(bronze, failure, batch_id)
        bronze, refused = self.admission(bronze)  # before anything holds their state
        if refused.num_rows:
            rejected = pa.concat_tables([rejected, refused])
        handoff = None
        if self.pending is not None:
            # The held windows absorb the batch on the deferred thread while this one writes
            # bronze (delta-rs leaves the GIL while it encodes and writes), on a core the
            # read tasks are not using then. Nothing leaves the process until the handoff.
            self.handoff = handoff = Handoff()
            thread = threading.Thread(
                target=self.run_deferred, args=(bronze, batch_id, handoff),
                name=f"kafka-health-signals-{batch_id}", daemon=True)
            thread.start()
            self.deferred = thread  # once started: joining an unstarted thread raises
        with stopwatch(timings, "bronze"):
            appended = self.tables["bronze"].append(bronze, batch_id)
        failpoints.hit("bronze_committed")
        if appended:  # a replayed batch was counted the first time
            self.defaulted(bronze, self.exporter)
        if rejected.num_rows:
            self.quarantine(self.tables["quarantine"], rejected, batch_id)
        facts = BatchStats(
            batch_id=batch_id, records=records, bronze_rows=bronze.num_rows,
            quarantined=rejected.num_rows,
            newest_event=newest_event(bronze),
            timings=timings,
        )
        self.facts[batch_id] = facts
        for old in [b for b in list(self.facts) if b < batch_id - 16]:
            self.facts.pop(old, None)  # the listener pops them from its own thread
        if bronze.num_rows and self.validator.due(batch_id):  # before Spark's commit: once
            with stopwatch(timings, "quality"):
                self.check_quality(bronze, batch_id)
        touched = self.touched(bronze) if bronze.num_rows else None
        if handoff is None:
            self.after_bronze(bronze, touched, facts, self.absorb(bronze, batch_id))
            return
        if touched is not None:
            self.mark_pending(batch_id, *touched)
        handoff.release(touched, facts)

    def quarantine(self, table: DeltaRsTable, rejected: pa.Table, batch_id: int) -> None:
        """Decoded-schema reject rows into a quarantine table, once per batch id, counted
        by reason category."""
        quarantine = pa.table({
            "ingest_ts": rejected["ingest_ts"],
            "source_topic": rejected["source_topic"],
            "source_partition": rejected["source_partition"],
            "source_offset": rejected["source_offset"],
            "source_format": rejected["source_format"],
            "reason": rejected["reject_reason"],
            "raw": rejected["raw"],
        })
        if table.append(quarantine, batch_id) and self.exporter:
            for reason in rejected["reject_reason"].to_pylist():
                self.exporter.count("kafka_health_pipeline_quarantined_records_total",
                                    reason=reason_category(reason))

    def cull(self, rows: pa.Table, failure: poison.Failure, batch_id: int) -> pa.Table:
        """The batch's samples without its poison records, which go to quarantine and
        leave bronze (the failed attempt may have committed them): see streaming.poison."""

        def fails(subset: pa.Table) -> bool:
            try:
                self.trial(subset)
            except Exception as err:  # the recorded failure again, or not this one
                return type(err).__name__ == failure.error
            return False

        if not rows.num_rows or not fails(rows):
            LOG.warning("batch %d failed before (%s, %d time(s)) but its samples pass the "
                        "driver stages in a trial: processing it as usual", batch_id,
                        failure.error, failure.count)
            return rows
        records = poison.isolate(rows, fails)
        LOG.error("batch %d: %d poison record(s) fail the driver stages (%s): quarantined as "
                  "%s (the quarantine table has their topic, partition and offset), the "
                  "rest of the batch goes on", batch_id, records.num_rows, failure.error,
                  poison.REASON)
        self.quarantine(self.poison_tables["quarantine"],
                        poison.rejects(rows, records, failure.error), batch_id)
        if self.tables["bronze"].committed(batch_id):
            self.poison_tables["bronze"].delete_rows(records, batch_id)
        return poison.without(rows, records)

    def trial(self, rows: pa.Table) -> None:
        """The driver stages that compute from a batch's samples, on `rows` alone and on
        copies (admission, headroom, an exporter of its own): nothing is written and nothing
        the job holds changes. Raises what they raise."""
        failpoints.poisoned(rows)
        kept, _ = copy.deepcopy(self.admission)(rows)
        own = kept.filter(pc.is_in(kept["metric"], pa.array(SIGNAL_METRICS)))
        spans = self.touched(own)[1] if own.num_rows else []
        if not spans:
            return
        cfg = self.config.signals
        signals = self.signal_windows(own.select(SAMPLE_COLUMNS))[2]
        scratch = Exporter(config=self.exporter.config if self.exporter is not None else None)
        scratch.update_brokers(signals.to_pylist())
        cluster_rows = cluster_signals(signals, since=spans[0][0])
        scratch.update_clusters(cluster_rows.to_pylist())
        scratch.update_headroom(HeadroomTracker(
            self.config.clusters, self.tables["partition_headroom"].read).evaluate(
                signals.to_pylist()))
        scratch.update_churn(unmatched_shrinks(signals.to_pylist(),
                                               cfg.isr_churn_match_seconds))
        incident_runs(incident_conditions(signals, cluster_rows, cfg))

    def signal_windows(self, samples: pa.Table) -> tuple[pa.Table, pa.Table, pa.Table]:
        """(partials, segments, broker signal rows) of signal samples."""
        partials, segments = signal_partials(prepared(samples, self.config.signals),
                                             self.config.signals)
        return partials, segments, finalize(partials, segments)

    def absorb(self, bronze: pa.Table, batch_id: int) -> pa.Table | None:
        """The batch into the held windows: broker_signals rows of the windows it touched,
        or None when they are to be recomputed from bronze. Only memory changes here, so it
        may run before the batch's bronze is committed (a failed batch clears the windows)."""
        self.timings = {}
        self.open_windows.begin(batch_id)
        return self.held_rows(bronze)

    def held_rows(self, bronze: pa.Table) -> pa.Table | None:
        if not (self.config.signals.incremental and bronze.num_rows):
            return None
        with stopwatch(self.timings, "broker_signals"):
            try:
                own = bronze.filter(pc.is_in(bronze["metric"], pa.array(SIGNAL_METRICS)))
                return self.open_windows.update(own.select(SAMPLE_COLUMNS))
            except Exception:  # held windows only save work: bronze stays the authority
                LOG.exception("held signal windows failed; recomputing from bronze")
                self.open_windows.clear()
                return None

    def after_bronze(self, bronze: pa.Table, touched: tuple[list[str], list[Span]] | None,
                     facts: BatchStats, held: pa.Table | None) -> None:
        """Everything a batch does once its bronze is committed; `held` is what absorb()
        answered for it."""
        batch_id = facts.batch_id
        timings = self.timings
        failpoints.poisoned(bronze)
        if touched is not None:
            self.signals_for(*touched, batch_id, held)
        every = self.config.delta.compact_every_n_batches
        if every and batch_id % every == every - 1:
            with stopwatch(timings, "compact"):
                self.compact()
        if self.retention.due():  # after paging and the merges: never ahead of them
            with stopwatch(timings, "retention"):
                self.retention.run(self.tables)
        self.stats = dataclasses.replace(facts, finished_at=time.time(), signal_timings=timings)
        self.finished.append(self.stats)
        # Spark has committed the batches before this one: the note of a failed one is
        # spent (its own replay, after a crash before Spark's commit, still culls it).
        self.failures.clear_through(batch_id - 1)
        LOG.debug("batch %d timings: %s", batch_id, ", ".join(
            f"{k} {v:.2f}s" for k, v in {**facts.timings, **timings}.items()))

    def run_deferred(self, bronze: pa.Table, batch_id: int, handoff: Handoff) -> None:
        held = self.absorb(bronze, batch_id)  # a failure in it means: recompute from bronze
        try:
            if not handoff.wait():
                return  # the batch failed before its bronze was committed: nothing to do
            failpoints.hit("signals_deferred", ready=lambda: self.spark_committed(batch_id))
            self.after_bronze(bronze, handoff.touched, handoff.facts, held)
            self.clear_pending()
        except BaseException as err:  # the next batch (or the job's watch loop) raises it
            self.open_windows.clear()
            self.deferred_error = err
            if isinstance(err, Exception):  # recover() looks for poison records in bronze
                self.failures.record(self.app_id, batch_id, poison.offset_ranges(bronze), err)
            LOG.exception("batch %d: signals failed after its bronze was committed; they are "
                          "recomputed from bronze when the job starts again", batch_id)

    def wait_deferred(self) -> None:
        """Wait for the running deferred steps, if any (their error stays recorded); safe
        from two threads at once (Job.stop and a late foreachBatch)."""
        thread = self.deferred
        if thread is not None:
            thread.join()

    def spark_committed(self, batch_id: int) -> bool:
        """Whether Spark's commit log holds the batch (a local checkpoint's)."""
        return (self.pending is not None
                and (self.pending.parent / "commits" / str(batch_id)).exists())

    def finish_deferred(self) -> None:
        """Wait for the previous batch's deferred steps; their failure fails this batch (the
        marker stays, so the restarted job recomputes them)."""
        self.wait_deferred()
        if self.deferred_error is not None:
            raise PreviousBatchFailed("the previous batch's signals failed (see the log above); its "
                               "bronze is committed and its signals are recomputed from "
                               "bronze when the job starts again") from self.deferred_error

    def mark_pending(self, batch_id: int, clusters: list[str], spans: list[Span]) -> None:
        """Written before Spark can commit the batch: what to recompute if the job dies."""
        assert self.pending is not None
        marker = {"app_id": self.app_id, "batch_id": batch_id, "clusters": clusters,
                  "spans": [[lo.isoformat(), hi.isoformat()] for lo, hi in spans]}
        partial = self.pending.with_name(self.pending.name + ".tmp")
        partial.write_text(json.dumps(marker))
        os.replace(partial, self.pending)

    def clear_pending(self) -> None:
        """The marker is always the finishing batch's: the next one writes its own only
        after joining this thread."""
        if self.pending is not None:
            self.pending.unlink(missing_ok=True)

    def recover(self) -> int | None:
        """Recompute the signals of a batch whose bronze was committed when the job died
        before they were; returns its batch id, None when nothing was pending."""
        if self.pending is None or not self.pending.exists():
            return None
        try:
            marker = json.loads(self.pending.read_text())
            batch_id, clusters = int(marker["batch_id"]), list(marker["clusters"])
            spans = [(datetime.fromisoformat(lo), datetime.fromisoformat(hi))
                     for lo, hi in marker["spans"]]
        except (ValueError, KeyError, TypeError) as err:
            raise RuntimeError(f"{self.pending}: unreadable pending-signals marker ({err}); "
                               "delete it to skip recomputing the last batch's signals "
                               "(they are recomputed when late data touches them)") from err
        if marker.get("app_id") != self.app_id:
            self.pending.unlink()
            return None
        LOG.warning("batch %d: bronze was committed but the job stopped before its signals; "
                    "recomputing them from bronze", batch_id)
        self.timings = {}
        self.open_windows.clear()
        # Spark replays the batch if it had not committed it: seen, so a replay forgets the
        # windows held from this recomputation (bronze already holds the batch's samples).
        self.open_windows.begin(batch_id)
        failure = self.failures.failed(self.app_id, batch_id)
        if failure is not None:  # its signals failed: look for poison among its samples
            self.cull(self.tables["bronze"].read(*poison.in_ranges(failure.ranges)),
                      failure, batch_id)
        try:
            self.signals_for(clusters, spans, batch_id)
        except Exception as err:
            if failure is not None:
                self.failures.record(self.app_id, batch_id, failure.ranges, err)
            raise
        self.clear_pending()
        return batch_id

    def compact(self) -> None:
        """Small files from one commit per batch would slow every later read: compact them
        (today's partition for bronze). Idempotent, so a replay after a crash is harmless."""
        today = [("date", "=", datetime.now(UTC).strftime("%Y-%m-%d"))]
        for table in self.tables.values():
            try:
                table.compact(today)
            except Exception as err:  # maintenance must never stop the stream
                LOG.warning("compaction of %s failed: %s", table.name, err)

    def check_quality(self, bronze: pa.Table, batch_id: int) -> None:
        """Validate a sample; a failing suite is reported, never a reason to stop the job."""
        try:
            results = self.validator.validate(bronze, batch_id)
        except Exception as err:  # GX problems must not take the pipeline down
            LOG.warning("data quality validation failed to run: %s", err)
            return
        if self.tables["dq_results"].append(results, batch_id) and self.exporter:
            failed = sum(1 for ok in results["success"].to_pylist() if not ok)
            if failed:
                self.exporter.count("kafka_health_pipeline_dq_failures_total", failed)

    def touched(self, bronze: pa.Table) -> tuple[list[str], list[Span]]:
        """The clusters and window spans a batch's samples touched."""
        cfg = self.config.signals
        return (pc.unique(bronze["cluster"]).to_pylist(),
                touched_spans(bronze["ts"], cfg.window_seconds, cfg.counter_lookback_seconds))

    def update_signals(self, bronze: pa.Table, batch_id: int) -> None:
        self.signals_for(*self.touched(bronze), batch_id, self.held_rows(bronze))

    def signals_for(self, clusters: list[str], spans: list[Span], batch_id: int,
                    held: pa.Table | None = None) -> None:
        """Signals, headroom and incidents of the touched windows: `held` (the rows the held
        windows answered for the batch) or, without it, recomputed from bronze."""
        cfg = self.config.signals
        first, last = spans[0][0], spans[-1][1]
        timings = self.timings
        broker_rows, recomputed = held, None
        if broker_rows is None:
            recomputed = self.recompute(clusters, spans)
            if recomputed is None:
                return
            broker_rows = recomputed[-1]
        exporter = self.exporter
        push = self.config.alert_push
        if exporter is not None:
            exporter.begin_batch()
        if exporter is not None or push.urls():
            # Paging first, even before the MERGE: gauges and the direct push must not wait
            # for the rest of the batch. A crash before the commit replays the batch, which
            # pushes the same alert again (same labels, so Alertmanager deduplicates it).
            # The gauges go first: they decide which clusters are held, so may page.
            with stopwatch(timings, "page"):
                rows = broker_rows.to_pylist()
                if exporter is not None:
                    exporter.update_brokers(rows)
                    exporter.update_staleness(
                        cfg.stale_after_intervals * cfg.scrape_interval_seconds)
                if push.urls():
                    push_incidents(push, opened_in_signals(
                        rows, cfg.window_seconds + cfg.watermark_seconds), self.may_page)
        with stopwatch(timings, "broker_signals_merge"):
            self.tables["broker_signals"].upsert(broker_rows, batch_id)
        failpoints.hit("broker_signals_committed")
        if cfg.incremental and recomputed is not None:
            with stopwatch(timings, "seed"):
                self.seed_open_windows(recomputed, spans, clusters)
        with stopwatch(timings, "cluster_signals"):
            cluster_rows = self.update_cluster_signals(clusters, first, last, batch_id)
        if exporter is not None:
            exporter.update_clusters(cluster_rows.to_pylist())
        with stopwatch(timings, "headroom"):
            headroom_rows = self.headroom.evaluate(broker_rows.to_pylist())
            if headroom_rows:
                self.tables["partition_headroom"].upsert(pa.Table.from_pylist(headroom_rows),
                                                         batch_id)
        if exporter is not None:
            exporter.update_headroom(headroom_rows)
        with stopwatch(timings, "incidents"):
            self.update_incidents(clusters, first, last, batch_id)
        failpoints.hit("incidents_committed")
        if exporter is not None:
            failures = alertpush.STATS.failures
            if failures > self.push_failures_seen:
                exporter.count("kafka_health_pipeline_alert_push_failures_total",
                               failures - self.push_failures_seen)
            self.push_failures_seen = failures
            open_now = self.tables["incidents"].read(
                ds.field("resolved_at").is_null(), ds.field("cluster").isin(clusters),
                columns=["cluster", "kind"])
            exporter.update_open_incidents(clusters, open_now.to_pylist())

    def update_cluster_signals(self, clusters: list[str], first: datetime, last: datetime,
                               batch_id: int) -> pa.Table:
        """cluster_signals of the windows first..last, upserted. The stored broker rows of
        the incident horizon before them are read too: they tell which broker was the
        controller, whose missing numbers make a window's controller count unknown."""
        lookback = timedelta(seconds=self.config.signals.incident_horizon_seconds)
        stored = self.tables["broker_signals"].read(
            (ds.field("window_start") >= pa.scalar(first - lookback, TS))
            & (ds.field("window_start") <= pa.scalar(last, TS)),
            ds.field("cluster").isin(clusters),
        )
        cluster_rows = cluster_signals(stored, since=first)
        self.tables["cluster_signals"].upsert(cluster_rows, batch_id)
        return cluster_rows

    def recompute(self, clusters: list[str], spans: list[tuple[datetime, datetime]]
                  ) -> tuple[pa.Table, pa.Table, pa.Table, pa.Table] | None:
        """The touched windows from bronze, the authority: (slice, partials, segments, rows),
        or None when the slice holds no signal samples."""
        cfg = self.config.signals
        width = timedelta(seconds=cfg.window_seconds)
        lookback = timedelta(seconds=cfg.counter_lookback_seconds)
        read_from, read_to = spans[0][0] - lookback, spans[-1][1] + width
        dates = sorted({(read_from + timedelta(days=d)).strftime("%Y-%m-%d")
                        for d in range((read_to - read_from).days + 2)})
        in_spans = ds.field("date").isin(dates) & _any(
            (ds.field("ts") >= pa.scalar(lo - lookback, TS))
            & (ds.field("ts") < pa.scalar(hi + width, TS)) for lo, hi in spans)
        # Before the first touched window of a span only counters matter (the previous Count
        # of each series, for the first increase): the look-back is most of the slice otherwise.
        needed = _any((ds.field("ts") >= pa.scalar(lo, TS))
                      & (ds.field("ts") < pa.scalar(hi + width, TS)) for lo, hi in spans) | (
            ds.field("kind") == "counter")
        signal_rows = (ds.field("cluster").isin(clusters) & ds.field("metric").isin(SIGNAL_METRICS)
                       & needed)
        with stopwatch(self.timings, "slice"):
            samples = self.tables["bronze"].read(in_spans, signal_rows, columns=SAMPLE_COLUMNS)
        if samples.num_rows == 0:
            return None
        with stopwatch(self.timings, "broker_signals"):
            partials, segments, signals = self.signal_windows(samples)
            rows = signals.filter(functools.reduce(pc.or_, (
                pc.and_(pc.greater_equal(signals["window_start"], pa.scalar(lo, TS)),
                        pc.less_equal(signals["window_start"], pa.scalar(hi, TS)))
                for lo, hi in spans)))
        return samples, partials, segments, rows

    def seed_open_windows(self, recomputed: tuple[pa.Table, pa.Table, pa.Table, pa.Table],
                          spans: list[tuple[datetime, datetime]], clusters: list[str]) -> None:
        """Hold what was just recomputed, for the clusters whose newest window it reached."""
        samples, partials, segments, _ = recomputed
        later = self.tables["broker_signals"].read(
            ds.field("window_start") > pa.scalar(spans[-1][1], TS),
            ds.field("cluster").isin(clusters), columns=["cluster"])
        try:
            self.open_windows.seed(samples, partials, segments, spans, clusters,
                                   set(later["cluster"].to_pylist()))
        except Exception:  # the next batch recomputes instead
            LOG.exception("holding the recomputed signal windows failed")
            self.open_windows.clear()

    def update_incidents(self, clusters: list[str], first: datetime, last: datetime,
                         batch_id: int) -> None:
        """Recompute incidents over a bounded horizon and reconcile them with the table."""
        cfg = self.config.signals
        horizon = first - timedelta(seconds=cfg.incident_horizon_seconds)
        in_horizon = ((ds.field("window_start") >= pa.scalar(horizon, TS))
                      & (ds.field("window_start") <= pa.scalar(last, TS)))
        of_clusters = ds.field("cluster").isin(clusters)
        broker_rows = self.tables["broker_signals"].read(in_horizon, of_clusters)
        cluster_rows = self.tables["cluster_signals"].read(in_horizon, of_clusters)
        if broker_rows.num_rows == 0:
            return
        if self.exporter is not None:
            self.exporter.update_churn(
                unmatched_shrinks(broker_rows.to_pylist(), cfg.isr_churn_match_seconds))
        computed = incident_runs(incident_conditions(broker_rows, cluster_rows, cfg))
        earlier = self.tables["incidents"].read(
            (ds.field("started_at") < pa.scalar(horizon, TS))
            & (ds.field("resolved_at").is_null()
               | (ds.field("resolved_at") >= pa.scalar(horizon, TS))),
            of_clusters)
        incidents = anchor_incidents(computed, earlier, horizon)
        self.tables["incidents"].upsert(incidents, batch_id, owned=Scope(
            ds.field("started_at") >= pa.scalar(horizon, TS), of_clusters))
        if self.config.alert_push.urls():
            push_incidents(self.config.alert_push, incidents.to_pylist(), self.may_page)

    def may_page(self, cluster: str) -> bool:
        """Whether the direct push may page for this cluster: one named under `clusters:`
        or whose series the exporter holds (its admission bounds how many a bad record can
        make up). Without an exporter, any: the push's own cap bounds those."""
        return (cluster in self.config.clusters or self.exporter is None
                or self.exporter.holds(cluster))


def _micros_to_datetime(micros: int) -> datetime | None:
    """A UTC datetime, or None for a time Python's datetime cannot hold."""
    try:
        return EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        return None


def newest_event(bronze: pa.Table) -> datetime | None:
    """The newest sample time of a batch (None without one Python can represent): progress
    reporting must not fail a batch whose bronze is already committed."""
    if not bronze.num_rows:
        return None
    newest = pc.max(bronze["ts"].cast(pa.int64())).as_py()
    return None if newest is None else _micros_to_datetime(newest)


def touched_spans(ts: pa.ChunkedArray, window_seconds: int, lookback_seconds: int
                  ) -> list[tuple[datetime, datetime]]:
    """The windows a batch touched, as [first, last] window-start spans to recompute.

    Each span also covers the window after its last one (its first counter delta depends
    on the previous sample). Windows closer than the counter look-back share a span;
    farther ones get their own, so one late scrape from hours ago re-reads its own
    windows, not every sample in between. Windows whose span would leave Python's datetime
    range are left out (decoding quarantines such times; this keeps a bronze table written
    before that from failing every batch).
    """
    width = window_seconds * 1_000_000
    starts = np.unique(window_starts(ts, window_seconds).to_numpy())
    representable = (starts >= MIN_MICROS) & (starts <= MAX_MICROS - 2 * width)
    if not representable.all():
        LOG.warning("%d windows outside the datetime range skipped", int((~representable).sum()))
        starts = starts[representable]
    join_gap = lookback_seconds * 1_000_000 + 2 * width
    spans: list[list[int]] = []
    for start in starts.tolist():
        if spans and start - spans[-1][1] <= join_gap:
            spans[-1][1] = start
        else:
            spans.append([start, start])

    def moment(micros: int) -> datetime:
        return EPOCH + timedelta(microseconds=micros)

    return [(moment(lo), moment(hi + width)) for lo, hi in spans]


def _any(conditions: Iterable[ds.Expression]) -> ds.Expression:
    """OR of dataset expressions (the spans are few)."""
    return functools.reduce(operator.or_, conditions)


def anchor_incidents(computed: pa.Table, earlier: pa.Table, horizon: datetime) -> pa.Table:
    """Runs that continue an incident started before the horizon keep its id and start.

    `earlier` holds incidents that started before the horizon and were open (or resolved
    inside it) when last written. The first recomputed run of the same series continues
    it when it starts before that resolution; an open one with no continuing run is closed
    at the horizon, the earliest time the recomputation can vouch for.
    """
    if earlier.num_rows == 0:
        return computed
    rows = computed.to_pylist()
    first_run: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["started_at"]):
        first_run.setdefault((row["cluster"], row["broker"], row["kind"]), row)
    for previous in earlier.to_pylist():
        key = (previous["cluster"], previous["broker"], previous["kind"])
        run = first_run.get(key)
        resolved = previous["resolved_at"]
        if run is not None and (resolved is None or run["started_at"] <= resolved):
            run["incident_id"] = previous["incident_id"]
            run["started_at"] = previous["started_at"]
            run["peak_value"] = max(run["peak_value"] or 0.0, previous["peak_value"] or 0.0)
        elif resolved is None:
            rows.append({**previous, "resolved_at": horizon})
    return pa.Table.from_pylist(rows, schema=computed.schema)


class ProgressListener(JsonProgressListener):
    """Prints one line per micro-batch and feeds the pipeline-health series."""

    def __init__(self, processor: BatchProcessor, exporter: Exporter | None,
                 lag: Callable[[dict[str, Any]], int | None],
                 printer: Callable[[str], None] | None = print,
                 after_first_batch: Callable[[], Any] | None = None) -> None:
        self.processor = processor
        self.after_first_batch = after_first_batch
        self.exporter = exporter
        self.lag = lag
        self.printer = printer
        self.last_end: dict[str, Any] | None = None
        self.signals_shown = -1

    def onQueryStarted(self, event: Any) -> None:
        if self.exporter:
            self.exporter.pipeline("kafka_health_pipeline_up", 1)
            # The stall clock starts with the query: left at 0 until the first batch, a
            # restarted driver would read as stalled since 1970 and page at once.
            self.exporter.pipeline("kafka_health_pipeline_last_batch_timestamp_seconds",
                                   time.time())

    def onQueryProgress(self, event: Any) -> None:
        if self.after_first_batch is not None:
            first, self.after_first_batch = self.after_first_batch, None
            first()
        progress = event.progress
        duration = (progress.batchDuration or 0) / 1000.0
        stats = self.processor.facts.pop(progress.batchId, None) or BatchStats()
        # Spark counts the packed blobs as input rows; the processor counted Kafka records.
        rows = stats.records
        rate = rows / duration if duration > 0 else 0.0
        source = progress.sources[0] if progress.sources else None
        end = offsets_json(source.endOffset) if source is not None else None
        if end is not None:
            self.last_end = end
        lag = self.lag(end) if end else None
        if self.exporter:
            ex = self.exporter
            ex.pipeline("kafka_health_pipeline_last_batch_timestamp_seconds", time.time())
            ex.pipeline("kafka_health_pipeline_batch_duration_seconds", duration)
            ex.pipeline("kafka_health_pipeline_input_rows_per_second", rate)
            ex.pipeline("kafka_health_pipeline_source_up", 0 if lag is None else 1)
            if lag is not None:
                ex.pipeline("kafka_health_pipeline_source_lag_records", lag)
            lost = offsets_lost(offsets_json(source.startOffset) if source else None, end)
            if lost:
                ex.count("kafka_health_pipeline_source_data_loss_total", lost)
            if stats.newest_event is not None:
                ex.pipeline("kafka_health_pipeline_newest_event_timestamp_seconds",
                            stats.newest_event.timestamp())
            ex.count("kafka_health_pipeline_batches_total")
            ex.count("kafka_health_pipeline_input_records_total", rows)
        if self.printer and rows:
            newest = stats.newest_event.strftime("%H:%M:%SZ") if stats.newest_event else "-"
            self.printer(
                f"batch {progress.batchId}: {rows} records -> {stats.bronze_rows} samples, "
                f"{stats.quarantined} quarantined, {rate:,.0f} records/s, {duration:.2f}s, "
                f"newest event {newest}, source lag {lag if lag is not None else '?'} ["
                + _steps(stats.timings) + "]" + self.signals_line()
            )

    def signals_line(self) -> str:
        """The deferred steps of the newest batch that finished them (they overlap the next
        batch, so a batch's line shows an earlier batch's)."""
        done = self.processor.stats
        if done.batch_id < 0 or done.batch_id == self.signals_shown:
            return ""
        self.signals_shown = done.batch_id
        return f", batch {done.batch_id} signals [{_steps(done.signal_timings)}]"

    def onQueryIdle(self, event: Any) -> None:
        if self.exporter:
            self.exporter.pipeline("kafka_health_pipeline_last_batch_timestamp_seconds",
                                   time.time())
            # Idle may mean "no new metrics" or "broker gone": the probe tells them apart,
            # also before any batch (an empty topic at start is not an unreachable broker).
            reachable = self.lag(self.last_end or {}) is not None
            self.exporter.pipeline("kafka_health_pipeline_source_up", int(reachable))

    def onQueryTerminated(self, event: Any) -> None:
        if self.exporter:
            self.exporter.pipeline("kafka_health_pipeline_up", 0)


def _steps(timings: dict[str, float]) -> str:
    return " ".join(f"{name} {seconds:.2f}s" for name, seconds in timings.items())


def offsets_json(text: str | None) -> dict[str, Any] | None:
    """A source offset from a progress event; None when absent or not a JSON object."""
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def offsets_lost(start: dict[str, dict[str, int]] | None, end: dict[str, dict[str, int]] | None
                 ) -> int:
    """Topic-partitions whose end went below their start, or vanished, within one batch.

    The source only plans such a batch when failOnDataLoss is off (it stops otherwise),
    so this counts the data loss it skipped over.
    """
    if not start or end is None:
        return 0
    return sum(1 for topic, parts in start.items() for p, begin in parts.items()
               if end.get(topic, {}).get(p, -1) < begin)


class LagProbe:
    """Records between the processed end offsets and the topics' high watermarks."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.consumer: Any = None

    def __call__(self, end: dict[str, dict[str, int]]) -> int | None:
        from confluent_kafka import Consumer, TopicPartition

        try:
            if self.consumer is None:
                conf = self.config.source.client_config()
                conf.update({"group.id": "kafka-health-lag", "enable.auto.commit": False})
                self.consumer = Consumer(conf)
                # Watermark queries on a fresh client fail with "unknown partition" until
                # it has metadata for the topic: load it first.
                self.consumer.list_topics(timeout=5)
            elif not end:  # nothing processed yet: only whether the broker answers
                self.consumer.list_topics(timeout=5)
            total = 0
            for topic, parts in end.items():
                for partition, offset in parts.items():
                    _, high = self.consumer.get_watermark_offsets(
                        TopicPartition(topic, int(partition)), timeout=5, cached=False)
                    total += max(0, high - offset)
            return total
        except Exception as err:  # lag is a diagnostic, never a reason to stop the job
            LOG.warning("source lag unavailable: %s", err)
            # A fresh client next time: librdkafka keeps stale metadata (a topic that was
            # missing for a while stays "unknown") long after the broker is healthy again.
            self.close()
            return None

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None


def checkpoint_app_id(checkpoint: str) -> str:
    """A stable id per checkpoint: Delta transactions keyed by it survive restarts, and a
    fresh checkpoint (batch ids from 0 again) gets a fresh id instead of skipping batches."""
    marker = Path(checkpoint) / "kafka_health_app_id"
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"kafka-health-{uuid.uuid4()}")
    return marker.read_text().strip()


class Job:
    """The always-on query and its lifecycle: start, wait, stop after the current batch."""

    def __init__(self, config: Config, spark: SparkSession | None = None,
                 exporter: Exporter | None = None,
                 printer: Callable[[str], None] | None = print) -> None:
        self.config = config
        self.spark = spark or build_spark(config)
        self.exporter = exporter
        self.printer = printer
        self.query: StreamingQuery | None = None
        self.listener: ProgressListener | None = None
        # One writer per checkpoint and per Delta root: taken in start(), before any write.
        self.leases = Leases([config.spark.checkpoint, config.delta.path],
                             config.spark.lease_timeout_seconds)
        self.processor = BatchProcessor(config, exporter,
                                        checkpoint_app_id(config.spark.checkpoint),
                                        pending=Path(config.spark.checkpoint) / PENDING_SIGNALS)
        self._stop = threading.Event()

    def start(self) -> StreamingQuery:
        self.leases.acquire()  # LeaseHeld, naming the other job, while one runs
        try:
            return self._start()
        except BaseException:
            self.leases.release()
            raise

    def _start(self) -> StreamingQuery:
        self.processor.recover()
        self.processor.deferred_error = None  # an earlier run's, recovered just now
        decoded = read_decoded_stream(self.spark, self.config)
        self.lag = LagProbe(self.config)
        # A batch has run, so the query is planned: Spark's planning daemons only hold memory.
        self.listener = ProgressListener(
            self.processor, self.exporter, self.lag, self.printer,
            after_first_batch=functools.partial(stop_planning_daemons, self.spark))
        self.spark.streams.addListener(self.listener)
        self.query = (
            decoded.writeStream.queryName("kafka_health")
            .foreachBatch(self.processor)
            .option("checkpointLocation", self.config.spark.checkpoint)
            .trigger(processingTime=f"{self.config.spark.trigger_seconds} seconds")
            .start()
        )
        return self.query

    def stop(self, timeout: float = 60.0) -> None:
        """Stop between batches: interrupting an active trigger can crash the JVM."""
        query = self.query
        if query is not None and query.isActive:
            deadline = time.monotonic() + timeout
            while query.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.1)
            query.stop()
        self.processor.wait_deferred()  # the last batch's signals
        if self.listener is not None:
            self.spark.streams.removeListener(self.listener)
            self.listener = None
            self.lag.close()
        self.leases.release()

    def install_signal_handlers(self) -> None:
        def handle(signum: int, frame: Any) -> None:
            LOG.info("signal %d: stopping after the current batch", signum)
            self._stop.set()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    def run_until_stopped(self, poll: float = 0.5) -> int:
        """Block until a signal or the query ends; returns the process exit code."""
        query = self.query or self.start()
        while not self._stop.is_set():
            if self.leases.lost is not None:
                LOG.error("stopping: %s", self.leases.lost)
                self.stop()
                return 1
            if self.processor.deferred_error is not None:
                LOG.error("stopping: a batch's signals failed: %s", self.processor.deferred_error)
                self.stop()
                return 1
            if not query.isActive:
                self.stop()  # waits for the last batch's signals
                error = query.exception()
                if error is not None:
                    LOG.error("streaming query failed: %s", error)
                    return 1
                return 1 if self.processor.deferred_error is not None else 0
            self._stop.wait(poll)
        self.stop()
        if self.processor.deferred_error is not None:
            LOG.error("the last batch's signals failed: %s", self.processor.deferred_error)
            return 1
        return 0

    def request_stop(self) -> None:
        self._stop.set()
