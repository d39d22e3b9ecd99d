"""The foreachBatch body: bronze and quarantine, then the after-bronze stages.

With a pending marker the held windows absorb a batch while its bronze is committed, its
gauges and pages go out right after, and its Delta signals are written by the signals
writer (streaming.pipeline.signals_writer), which overlaps Spark's read of the next
batches; without one everything runs inside foreachBatch. Every step is idempotent or a
recomputation from bronze, so a batch replayed after a crash (same batch id, same
offsets) converges to the same tables.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from streaming import failpoints, poison
from streaming import metric_names as metric
from streaming.broker_admission import BrokerAdmission
from streaming.config import Config
from streaming.decode.packing import WrittenBatch, lost_ranges, unpack, unpack_written
from streaming.decode.records import reason_category
from streaming.exporter import Exporter
from streaming.metadata.board import CauseBoard
from streaming.paging import AlertPusher
from streaming.pipeline.identity_warning import DefaultedIdentity, defaulted_per_topic
from streaming.pipeline.recovery import Pending, PendingMarker, owed_together
from streaming.pipeline.signal_stages import (
    PAGE_ROW_COLUMNS,
    PERSIST_ROW_COLUMNS,
    SignalStages,
)
from streaming.pipeline.signals_writer import Owed, SignalsWriter, newest_rows
from streaming.pipeline.stats import BatchStats, stopwatch
from streaming.pipeline.tables import compact, open_tables
from streaming.quality import BronzeValidator
from streaming.retention import Retention
from streaming.signals.broker import BROKER_KEYS
from streaming.signals.spans import Span, micros_to_datetime, newest_event
from streaming.sinks.base import DeltaSink
from streaming.sinks.engines import open_table
from streaming.sinks.task_files import (
    delete_task_files,
    quarantine_rows,
    read_back,
    read_task_files,
)

LOG = logging.getLogger("kafka_health.batch")
# How many batches the signals writer may owe before a batch waits for it: what the queued
# batches hold in memory (their held rows and signal samples) stays bounded. The writer
# starts a round by itself once that many are queued, a batch before one would have to
# wait, so that a catch-up's batches seldom wait.
MAX_OWED_BATCHES = 8
# A batch of at least this share of source.max_offsets_per_trigger records is a catch-up's:
# the Python source splits the cap over partitions rounding each share down, and offsets
# of transaction markers or compacted records count against it without being records.
CATCHING_UP_SHARE = 0.9


def reads_at_cap(records: int, cap: int | None) -> bool:
    """Whether a batch of `records` read about as many as `cap` lets a batch read."""
    return cap is not None and records >= CATCHING_UP_SHARE * cap


class PreviousBatchFailed(RuntimeError):
    """This batch fails because an earlier batch's Delta signals did: not its data."""


class BatchProcessor:
    """The foreachBatch body: bronze + quarantine, then recompute the touched windows.

    With `pending` (the marker of owed signals) the Delta signals are written by the
    signals writer while the next batches run; without it everything runs inside
    foreachBatch.
    """

    def __init__(self, config: Config, exporter: Exporter | None,
                 app_id: str = "kafka-health", pending: PendingMarker | None = None,
                 failed_batch: str | None = None, causes: CauseBoard | None = None) -> None:
        self.config = config
        self.exporter = exporter
        self.pending = pending
        self.causes = causes  # the Admin API's causes, read by the incidents stage
        # The direct push to Alertmanager: its back-off and stats outlive a new checkpoint.
        self.pusher = AlertPusher(config.alert_push)
        # The failed batch's note (streaming.poison), beside the pending marker by default.
        self.failures = poison.FailureLog(
            failed_batch or (pending.sibling(poison.FAILED_BATCH) if pending is not None
                             else None),
            pending.storage_options if pending is not None else None)
        self.attempt: tuple[int, pa.Table] | None = None  # the running batch's decoded rows
        self.stats = BatchStats()  # the newest batch whose every step is done
        # What each recent batch read and wrote, for the listener (which runs after the
        # batch, possibly after the next one has begun); a few are kept, the listener pops.
        self.facts: dict[int, BatchStats] = {}
        # The held windows absorb a batch on this thread while its bronze is committed
        # (delta-rs leaves the GIL while it encodes and writes).
        self.absorber = ThreadPoolExecutor(1, thread_name_prefix="kafka-health-absorb")
        self.writer = SignalsWriter(self.write_signals, self.signals_failed,
                                    config.delta.signals_every_seconds,
                                    config.delta.signals_every_seconds_catching_up,
                                    group=MAX_OWED_BATCHES)
        self.catching_up = False  # the newest batch read up to the source's cap
        self.owed: list[Pending] = []  # what the pending marker names, oldest first
        self.owed_lock = threading.Lock()  # the marker's writes, from either thread
        self._deferred_error: BaseException | None = None
        self.finished: deque[BatchStats] = deque(maxlen=64)  # newest last, for benchmarks
        # Set by Job.stop before it stops the query: a batch that fails then was cancelled by
        # the stop (its Spark job), not by its data, so it is not noted as a failed attempt.
        self.stopping = False
        self.validator = BronzeValidator(config.quality.validate_every_n_batches,
                                         config.quality.sample_rows)
        self.quality: threading.Thread | None = None  # the running quality check, if any
        self.defaulted = DefaultedIdentity(config.identity.default_cluster)
        self.admission = BrokerAdmission(config.quality.max_brokers_per_cluster,
                                         config.quality.max_clusters)
        self.retention = Retention(config.delta)
        self.set_app_id(app_id)

    def set_app_id(self, app_id: str) -> None:
        """Transactions are keyed by the query id, so a new checkpoint never skips batches."""
        self.app_id = app_id
        delta = self.config.delta
        storage = delta.storage()
        self.tables = open_tables(delta.path, app_id, storage, delta.engine,
                                  delta.log_retention_minutes)
        # Poison records leave bronze and enter quarantine in transactions of their own: the
        # failed attempt may have committed the batch's own already.
        self.poison_tables = {name: open_table(delta.engine, delta.path, name,
                                               f"{app_id}:poison", storage,
                                               delta.log_retention_minutes)
                              for name in ("bronze", "quarantine")}
        self.stages = SignalStages(self.config, self.exporter, self.tables, self.pusher,
                                   self.causes)

    @property
    def deferred_error(self) -> BaseException | None:
        """Why the signals writer stopped, if it did: the next batch fails for it."""
        return self._deferred_error

    @deferred_error.setter
    def deferred_error(self, error: BaseException | None) -> None:
        self._deferred_error = error
        if error is None:  # recovered: what the failure left queued is owed in the marker
            self.writer.reset()
            with self.owed_lock:
                self.owed.clear()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self.process(batch, batch_id)
        except BaseException as err:
            self.wait_deferred()
            self.stages.open_windows.clear()  # the batch may have been absorbed: never count it twice
            attempt, self.attempt = self.attempt, None
            if self.stopping:
                LOG.info("batch %d: cancelled by the stop; it runs again at the next start",
                         batch_id)
            elif (isinstance(err, Exception) and not isinstance(err, PreviousBatchFailed)
                    and attempt is not None and attempt[0] == batch_id):
                self.failures.record(self.app_id, batch_id, poison.offset_ranges(attempt[1]),
                                     err)
            raise
        self.attempt = None

    def process(self, batch: DataFrame, batch_id: int) -> None:
        timings: dict[str, float] = {}
        with stopwatch(timings, "read+decode"):
            packed = batch.toArrow()
            written = unpack_written(packed)
            if written is None:
                decoded, records = unpack(packed)
        if written is not None:
            self.process_written(written, batch_id, timings)
        else:
            self.process_rows(decoded, records, batch_id, timings)
        if batch_id in self.facts:  # for the listener's data-loss count
            self.facts[batch_id].lost_ranges = lost_ranges(packed)

    def process_rows(self, decoded: pa.Table, records: int, batch_id: int,
                     timings: dict[str, float]) -> None:
        """A batch whose decoded rows are all here: the driver writes bronze and quarantine."""
        self.attempt = (batch_id, decoded)
        self.raise_if_signals_failed()
        good = pc.is_null(decoded["reject_reason"])
        bronze = decoded.filter(good)
        rejected = decoded.filter(pc.invert(good))
        failure = self.failures.failed(self.app_id, batch_id)
        if failure is not None:
            bronze = self.cull(bronze, failure, batch_id)
        bronze, refused = self.admission(bronze)  # before anything holds their state
        if refused.num_rows:
            rejected = pa.concat_tables([rejected, refused])
        absorbing = self.start_absorb(bronze, batch_id)
        try:
            with stopwatch(timings, "bronze"):
                appended = self.tables["bronze"].append(bronze, batch_id)
            failpoints.hit("bronze_committed")
            if appended:  # a replayed batch was counted the first time
                self.defaulted(bronze, self.exporter)
            if rejected.num_rows:
                self.quarantine(self.tables["quarantine"], rejected, batch_id)
        finally:
            held = self.absorbed(absorbing)
        facts = BatchStats(
            batch_id=batch_id, records=records, bronze_rows=bronze.num_rows,
            quarantined=rejected.num_rows,
            newest_event=newest_event(bronze),
            timings=timings,
        )
        touched = self.stages.touched(bronze) if bronze.num_rows else None
        self.conclude(bronze, facts, touched, held, lambda: bronze)

    def process_written(self, written: WrittenBatch, batch_id: int,
                        timings: dict[str, float]) -> None:
        """A batch whose read tasks wrote its bronze and quarantine files: commit them, and
        go on with the signal samples and the summary they sent. When the driver must sift
        the rows itself (a batch that failed before, or one naming brokers or clusters past
        the caps), it reads the files back, writes the batch as the driver does, and
        deletes the tasks' files, which no commit references."""
        delta = self.config.delta
        storage = delta.storage()  # secret files read once a batch
        self.attempt = (batch_id, written.rows)
        self.raise_if_signals_failed()
        kept = written.kept
        if (self.failures.failed(self.app_id, batch_id) is not None
                or not self.admission.admits(kept)):
            with stopwatch(timings, "read back"):
                decoded = read_back(written.files, delta.path, storage)
            replayed = self.tables["bronze"].committed(batch_id)
            self.process_rows(decoded, written.records, batch_id, timings)
            delete_task_files(written.files, delta.path, storage)
            if not replayed:  # the files carry no per-row flag: the summary counts them
                self.defaulted.report(defaulted_per_topic(kept), self.exporter)
            return
        self.admission(kept)
        failpoints.hit("task_files_written")  # written by the tasks, not committed yet
        absorbing = self.start_absorb(written.rows, batch_id, written)
        bronze_files = [f for f in written.files if f.table == "bronze"]
        rejects = written.summary.filter(pc.is_null(written.summary["cluster"]))
        try:
            with stopwatch(timings, "bronze"):
                appended = self.tables["bronze"].add_files(bronze_files, batch_id)
            if not appended:  # a replay: the first attempt's files are the committed ones
                delete_task_files(bronze_files, delta.path, storage)
            failpoints.hit("bronze_committed")
            if appended:
                self.defaulted.report(defaulted_per_topic(kept), self.exporter)
            quarantine_files = [f for f in written.files if f.table == "quarantine"]
            if quarantine_files:
                if self.tables["quarantine"].add_files(quarantine_files, batch_id):
                    self.count_quarantined(rejects)
                else:
                    delete_task_files(quarantine_files, delta.path, storage)
        finally:
            held = self.absorbed(absorbing)
        bronze_rows = int(pc.sum(kept["rows"]).as_py() or 0)
        newest = pc.max(kept["newest"]).as_py() if kept.num_rows else None
        facts = BatchStats(
            batch_id=batch_id, records=written.records, bronze_rows=bronze_rows,
            quarantined=int(pc.sum(rejects["quarantined"]).as_py() or 0),
            newest_event=None if newest is None else micros_to_datetime(newest),
            timings=timings,
        )
        touched = self.stages.touched_windows(kept) if bronze_rows else None
        self.conclude(written.rows, facts, touched, held, lambda: read_task_files(
            bronze_files, delta.path, "bronze", storage,
            enough=self.config.quality.sample_rows) if appended else None, written)

    def start_absorb(self, rows: pa.Table, batch_id: int, written: WrittenBatch | None = None
                     ) -> Future | None:
        """With a pending marker, the held windows absorb the batch's signal samples on the
        absorber's thread while this one commits bronze, on a core the read tasks are not
        using then. Only memory changes there: a batch that fails clears the windows."""
        if self.pending is None:
            return None
        return self.absorber.submit(self.absorb, rows, batch_id, written)

    def absorbed(self, absorbing: Future | None) -> pa.Table | None:
        """What start_absorb's held windows answered (None: recompute from bronze)."""
        if absorbing is None:
            return None
        try:
            return absorbing.result()
        except Exception:  # held windows only save work: bronze stays the authority
            LOG.exception("held signal windows failed; recomputing from bronze")
            self.stages.open_windows.clear()
            return None

    def conclude(self, rows: pa.Table, facts: BatchStats,
                 touched: tuple[list[str], list[Span]] | None, held: pa.Table | None,
                 quality_rows: Callable[[], pa.Table | None],
                 written: WrittenBatch | None = None) -> None:
        """Once bronze is committed: the facts for the listener, the quality check started
        on its own thread, then the after-bronze stages: here, or (with a pending marker
        and rows from the held windows) the gauges here and the Delta signals on the
        signals writer."""
        batch_id = facts.batch_id
        self.facts[batch_id] = facts
        for old in [b for b in list(self.facts) if b < batch_id - 16]:
            self.facts.pop(old, None)  # the listener pops them from its own thread
        if facts.bronze_rows and self.validator.due(batch_id):
            self.start_quality(quality_rows, batch_id)
        if self.pending is None:
            self.after_bronze(rows, touched, facts, self.absorb(rows, batch_id, written))
            return
        absorb_timings = self.stages.timings
        if held is None or touched is None:
            # A recomputation from bronze (or nothing to signal): after every owed batch's
            # signals, in order, here; it reseeds the held windows this thread absorbs into.
            self.wait_deferred()
            self.raise_if_signals_failed()
            if touched is not None:
                self.owe(Pending(self.app_id, batch_id, *touched))
            self.after_bronze(rows, touched, facts, None)
            self.settle([batch_id])
            return
        pending = Pending(self.app_id, batch_id, *touched)
        self.owe(pending)
        self.stages.page(held.select(PAGE_ROW_COLUMNS).to_pylist(), absorb_timings)
        self.writer.submit(Owed(pending, held, rows, facts, absorb_timings),
                           self.is_catching_up(facts))
        if len(self.owed) > MAX_OWED_BATCHES:
            self.wait_deferred()
        if self.housekeeping_due(batch_id):  # never beside the writer's MERGEs
            self.wait_deferred()
            self.raise_if_signals_failed()
            self.housekeeping(batch_id, absorb_timings)

    def is_catching_up(self, facts: BatchStats) -> bool:
        """Whether the batch read about as many records as a batch may: the job is behind
        the stream. Logged when that changes, with what it means for the Delta signals."""
        catching_up = reads_at_cap(facts.records, self.config.source.max_offsets_per_trigger)
        if catching_up and not self.catching_up:
            LOG.info("batch %d read %d records, the source's cap: catching up; the Delta "
                     "signals are written at most every %g s until it has", facts.batch_id,
                     facts.records, self.config.delta.signals_every_seconds_catching_up)
        elif self.catching_up and not catching_up:
            LOG.info("batch %d: caught up with the stream; the Delta signals are written at "
                     "most every %g s", facts.batch_id, self.config.delta.signals_every_seconds)
        self.catching_up = catching_up
        return catching_up

    def write_signals(self, group: list[Owed]) -> None:
        """The signals writer's round: the Delta signals of a group of batches, in one
        round of writes whose transaction id is the group's newest batch id."""
        newest = group[-1].pending.batch_id
        timings: dict[str, float] = {}
        failpoints.hit("signals_deferred", ready=lambda: self.pending is not None
                       and self.pending.spark_committed(newest))
        for owed in group:
            failpoints.poisoned(owed.samples)
        together = owed_together([owed.pending for owed in group])
        held = newest_rows([owed.held for owed in group], BROKER_KEYS)
        self.stages.persist(together.clusters, together.spans, newest, held,
                            held.select(PERSIST_ROW_COLUMNS).to_pylist(), timings)
        self.settle([owed.pending.batch_id for owed in group])
        if len(group) > 1:
            LOG.debug("batches %d-%d: signals written together", group[0].pending.batch_id,
                      newest)
        for owed in group[:-1]:
            self.finished_batch(owed.facts, owed.timings)
        self.finished_batch(group[-1].facts, {**group[-1].timings, **timings})

    def signals_failed(self, group: list[Owed], err: BaseException) -> None:
        """The writer stopped: the batches it owes stay in the marker; the note of a failure
        names the marker's batch id and every owed batch's offsets, for recover()."""
        with self.owed_lock:
            self._deferred_error = err
            newest = self.owed[-1].batch_id if self.owed else group[-1].pending.batch_id
        if isinstance(err, Exception):  # recover() looks for poison records in bronze
            self.failures.record(self.app_id, newest, poison.offset_ranges(
                pa.concat_tables([owed.samples for owed in group], promote_options="default")),
                err)
        LOG.error("batch %d: signals failed after its bronze was committed; they are "
                  "recomputed from bronze when the job starts again", newest, exc_info=err)

    def count_quarantined(self, rejects: pa.Table) -> None:
        """Count a batch's quarantined records by reason category (summary rows)."""
        if self.exporter is None:
            return
        for category, count in zip(rejects["source_topic"].to_pylist(),
                                   rejects["quarantined"].to_pylist(), strict=True):
            self.exporter.count(metric.PIPELINE_QUARANTINED_RECORDS_TOTAL, count,
                                reason=category)

    def quarantine(self, table: DeltaSink, rejected: pa.Table, batch_id: int) -> None:
        """Decoded-schema reject rows into a quarantine table, once per batch id, counted
        by reason category."""
        if table.append(quarantine_rows(rejected), batch_id) and self.exporter:
            for reason in rejected["reject_reason"].to_pylist():
                self.exporter.count(metric.PIPELINE_QUARANTINED_RECORDS_TOTAL,
                                    reason=reason_category(reason))

    def cull(self, rows: pa.Table, failure: poison.Failure, batch_id: int) -> pa.Table:
        """The batch's samples without its poison records, which go to quarantine and
        leave bronze (the failed attempt may have committed them): see streaming.poison."""

        def fails(subset: pa.Table) -> bool:
            try:
                self.stages.trial(subset, self.admission)
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

    def absorb(self, bronze: pa.Table, batch_id: int, written: WrittenBatch | None = None
               ) -> pa.Table | None:
        """The batch into the held windows: broker_signals rows of the windows it touched,
        or None when they are to be recomputed from bronze. Only memory changes here, so it
        may run before the batch's bronze is committed (a failed batch clears the windows).
        `written`: the read tasks wrote the batch, and `bronze` is the signal samples they
        did not reduce to partials (the counters)."""
        self.stages.timings = {}
        self.stages.open_windows.begin(batch_id)
        if written is not None:
            return self.stages.held_from_parts(written.rows, written.partials,
                                               written.segments)
        return self.stages.held_rows(bronze)

    def after_bronze(self, bronze: pa.Table, touched: tuple[list[str], list[Span]] | None,
                     facts: BatchStats, held: pa.Table | None) -> None:
        """Everything a batch does once its bronze is committed, in this thread; `held` is
        what absorb() answered for it."""
        batch_id = facts.batch_id
        timings = self.stages.timings
        failpoints.poisoned(bronze)
        if touched is not None:
            self.stages.signals_for(*touched, batch_id, held)
        self.housekeeping(batch_id, timings)
        self.finished_batch(facts, timings)

    def housekeeping_due(self, batch_id: int) -> bool:
        every = self.config.delta.compact_every_n_batches
        return bool(every and batch_id % every == every - 1) or self.retention.due()

    def housekeeping(self, batch_id: int, timings: dict[str, float]) -> None:
        """Compaction and retention, when due: after the batch's signals, never ahead."""
        every = self.config.delta.compact_every_n_batches
        if every and batch_id % every == every - 1:
            with stopwatch(timings, "compact"):
                compact(self.tables)
        if self.retention.due():
            with stopwatch(timings, "retention"):
                self.retention.run(self.tables)

    def finished_batch(self, facts: BatchStats, timings: dict[str, float]) -> None:
        self.stats = dataclasses.replace(facts, finished_at=time.time(), signal_timings=timings)
        self.finished.append(self.stats)
        # Spark has committed the batches before this one: the note of a failed one is
        # spent (its own replay, after a crash before Spark's commit, still culls it).
        self.failures.clear_through(facts.batch_id - 1)
        LOG.debug("batch %d timings: %s", facts.batch_id, ", ".join(
            f"{k} {v:.2f}s" for k, v in {**facts.timings, **timings}.items()))

    def wait_deferred(self) -> None:
        """Until the signals writer has written every batch it was given, or failed; safe
        from two threads at once (Job.stop and a late foreachBatch)."""
        self.writer.wait()

    def raise_if_signals_failed(self) -> None:
        """An earlier batch's signals failed: this batch fails too (the marker stays, so
        the restarted job recomputes them)."""
        if self.deferred_error is not None:
            raise PreviousBatchFailed(
                "the previous batch's signals failed (see the log above); its bronze is "
                "committed and its signals are recomputed from bronze when the job starts "
                "again") from self.deferred_error

    def owe(self, pending: Pending) -> None:
        """Written before Spark can commit the batch: what to recompute if the job dies.
        Refused once the writer has failed, so that the marker's newest batch is the one
        the failure's note names."""
        assert self.pending is not None
        with self.owed_lock:
            self.raise_if_signals_failed()
            self.pending.write(owed_together([*self.owed, pending]))
            self.owed.append(pending)

    def settle(self, batch_ids: list[int]) -> None:
        """These batches' signals are written: the marker names only the rest."""
        if self.pending is None:
            return
        with self.owed_lock:
            rest = [p for p in self.owed if p.batch_id not in batch_ids]
            if rest:
                self.pending.write(owed_together(rest))
            elif self.owed or self.pending.exists():
                self.pending.clear()
            self.owed = rest

    def clear_pending(self) -> None:
        """Nothing is owed: recovered, or the marker was another job's."""
        with self.owed_lock:
            self.owed = []
            if self.pending is not None:
                self.pending.clear()

    def recover(self) -> int | None:
        """Recompute the signals of the batches whose bronze was committed when the job died
        before they were; returns the newest one's id, None when nothing was pending."""
        owed = self.pending.read() if self.pending is not None else None
        if owed is None:
            return None
        if owed.app_id != self.app_id:
            # Recomputing under this query is not safe: the writes' transaction version is
            # the batch id, and another query's ids would mark this one's batches as done.
            LOG.warning("the pending-signals marker names batch %d of another query (a new "
                        "checkpoint): dropped; the signals of its %d window span(s) are "
                        "recomputed from bronze only where new samples touch them",
                        owed.batch_id, len(owed.spans))
            self.clear_pending()
            return None
        batch_id = owed.batch_id
        LOG.warning("batch %d: bronze was committed but the job stopped before its signals; "
                    "recomputing them from bronze", batch_id)
        self.stages.timings = {}
        self.stages.open_windows.clear()
        # Spark replays the batch if it had not committed it: seen, so a replay forgets the
        # windows held from this recomputation (bronze already holds the batch's samples).
        self.stages.open_windows.begin(batch_id)
        failure = self.failures.failed(self.app_id, batch_id)
        if failure is not None:  # its signals failed: look for poison among its samples
            self.cull(self.tables["bronze"].read(*poison.in_ranges(failure.ranges)),
                      failure, batch_id)
        try:
            self.stages.signals_for(owed.clusters, owed.spans, batch_id)
        except Exception as err:
            if failure is not None:
                self.failures.record(self.app_id, batch_id, failure.ranges, err)
            raise
        self.clear_pending()
        return batch_id

    def start_quality(self, quality_rows: Callable[[], pa.Table | None], batch_id: int) -> None:
        """The quality check of a due batch, on a thread of its own. Why: reading the sample
        back and validating it takes 0.4-0.7 s, and on the batch's own path it delayed that
        batch's paging and the next batch's start by as much (the p95 of produced -> gauge
        at 10k samples/s). At most one runs: a due batch first waits for the one before, so
        dq_results gets its batch ids in order. A job that dies mid-check loses that one
        sample's results; a replayed batch checks its sample again."""
        self.wait_quality()
        self.quality = threading.Thread(target=self.run_quality, args=(quality_rows, batch_id),
                                        name=f"kafka-health-quality-{batch_id}", daemon=True)
        self.quality.start()

    def run_quality(self, quality_rows: Callable[[], pa.Table | None], batch_id: int) -> None:
        started = time.perf_counter()
        try:
            sample = quality_rows()
            if sample is not None:
                self.check_quality(sample, batch_id)
        except Exception:  # a sample that cannot be read or recorded: reported, never fatal
            LOG.exception("batch %d: the data-quality check failed", batch_id)
        LOG.debug("batch %d: quality check %.2fs", batch_id, time.perf_counter() - started)

    def wait_quality(self) -> None:
        """Wait for the running quality check, if any (Job.stop: its results are written)."""
        thread = self.quality
        if thread is not None:
            thread.join()

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
                self.exporter.count(metric.PIPELINE_DQ_FAILURES_TOTAL, failed)
