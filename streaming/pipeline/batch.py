"""The foreachBatch body: bronze and quarantine, then the after-bronze stages.

With a pending marker the open windows take in a batch while its bronze is committed, its
gauges and pages go out right after, and its Delta signals are written by the signals
writer (streaming.pipeline.signals_writer), which overlaps Spark's read of the next
batches; without one everything runs inside foreachBatch. Every step is idempotent or a
recomputation from bronze, so a batch replayed after a crash (same batch id, same
offsets) converges to the same tables.
"""

from __future__ import annotations

import logging
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
from streaming.pipeline.control import JobControl, PreviousBatchFailed
from streaming.pipeline.housekeeping import Housekeeping
from streaming.pipeline.identity_warning import DefaultedIdentity, defaulted_per_topic
from streaming.pipeline.pending import PendingBatches
from streaming.pipeline.quality_runner import QualityRunner
from streaming.pipeline.recovery import Pending, PendingMarker, pending_together
from streaming.pipeline.signal_stages import (
    PAGE_ROW_COLUMNS,
    PERSIST_ROW_COLUMNS,
    SignalStages,
    WindowRows,
)
from streaming.pipeline.signals_writer import Owed, SignalsWriter, newest_rows
from streaming.pipeline.stats import BatchHistory, BatchStats, stopwatch, summed
from streaming.pipeline.tables import open_tables
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
# batches hold in memory (their window rows and signal samples) stays bounded. The writer
# starts a round by itself once that many are queued, a batch before one would have to
# wait, so that a catch-up's batches seldom wait.
MAX_OWED_BATCHES = 8
# A batch of at least this share of source.max_offsets_per_trigger records is a catch-up's:
# the Python source splits the cap over partitions rounding each share down, and offsets
# of transaction markers or compacted records count against it without being records.
CATCHING_UP_SHARE = 0.9

Touched = tuple[list[str], list[Span]]  # the clusters and window spans a batch touched


def reads_at_cap(records: int, cap: int | None) -> bool:
    """Whether a batch of `records` read about as many as `cap` lets a batch read."""
    return cap is not None and records >= CATCHING_UP_SHARE * cap


class BatchProcessor:
    """The foreachBatch body: a batch's bronze and quarantine (its poison records removed,
    its brokers admitted), then its signals, here or on the signals writer.

    With `pending` (the marker of owed signals) the Delta signals are written by the
    signals writer while the next batches run; without it everything runs inside
    foreachBatch.

    Owner: Spark's micro-batch thread, which calls it. Others may call: the absorber
    thread update_open_windows() (submitted by this thread); the signals writer
    write_signals() and signals_failed(); the job's main thread set_app_id() and recover()
    before the query starts, wait_for_writer() and quality.wait() once it has stopped; the
    progress listener reads `history`. What crosses threads lives in collaborators with
    locks of their own: `pending`, `history`, `quality`, `failures`, and `control`, which
    the job owns.
    """

    def __init__(self, config: Config, exporter: Exporter | None,
                 app_id: str = "kafka-health", pending: PendingMarker | None = None,
                 failed_batch: str | None = None, causes: CauseBoard | None = None,
                 control: JobControl | None = None) -> None:
        self.config = config
        self.exporter = exporter
        self.causes = causes  # the Admin API's causes, read by the incidents stage
        # The direct push to Alertmanager: its back-off and stats outlive a new checkpoint.
        self.pusher = AlertPusher(config.alert_push)
        self.control = control or JobControl()
        self.pending = None if pending is None else PendingBatches(pending, self.control)
        # The failed batch's note (streaming.poison), beside the pending marker by default.
        self.failures = poison.FailureLog(
            failed_batch or (pending.sibling(poison.FAILED_BATCH) if pending is not None
                             else None),
            pending.storage_options if pending is not None else None)
        self.attempt: tuple[int, pa.Table] | None = None  # the running batch's decoded rows
        self.history = BatchHistory()
        # The open windows take in a batch on this thread while its bronze is committed
        # (delta-rs leaves the GIL while it encodes and writes).
        self.absorber = ThreadPoolExecutor(1, thread_name_prefix="kafka-health-absorb")
        self.writer = SignalsWriter(self.write_signals, self.signals_failed,
                                    config.delta.signals_every_seconds,
                                    config.delta.signals_every_seconds_catching_up,
                                    group=MAX_OWED_BATCHES)
        self.catching_up = False  # the newest batch read up to the source's cap
        self.quality = QualityRunner(config.quality, exporter)
        self.defaulted = DefaultedIdentity(config.identity.default_cluster)
        self.admission = BrokerAdmission(config.quality.max_brokers_per_cluster,
                                         config.quality.max_clusters)
        self.housekeeping = Housekeeping(config.delta)
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

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self.process(batch, batch_id)
        except BaseException as err:
            self.wait_for_writer()
            self.stages.open_windows.clear()  # the batch may have been taken in: never count it twice
            attempt, self.attempt = self.attempt, None
            if self.control.stopping:
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
        facts = BatchStats(batch_id=batch_id, lost_ranges=lost_ranges(packed), timings=timings)
        if written is not None:
            self.process_written(written, facts)
        else:
            self.process_rows(decoded, records, facts)

    def process_rows(self, decoded: pa.Table, records: int, facts: BatchStats) -> None:
        """A batch whose decoded rows are all here: the driver writes bronze and quarantine.
        `facts`: what is known of the batch so far (its id, timings, lost ranges)."""
        batch_id = facts.batch_id
        self.attempt = (batch_id, decoded)
        self.control.raise_if_signals_failed()
        good = pc.is_null(decoded["reject_reason"])
        bronze = decoded.filter(good)
        rejected = decoded.filter(pc.invert(good))
        failure = self.failures.failed(self.app_id, batch_id)
        if failure is not None:
            bronze = self.remove_poison(bronze, failure, batch_id)
        bronze, refused = self.admission(bronze)  # before anything holds their state
        if refused.num_rows:
            rejected = pa.concat_tables([rejected, refused])
        updating = self.start_window_update(bronze, batch_id)
        try:
            with stopwatch(facts.timings, "bronze"):
                appended = self.tables["bronze"].append(bronze, batch_id)
            failpoints.hit("bronze_committed")
            if appended:  # a replayed batch was counted the first time
                self.defaulted(bronze, self.exporter)
            if rejected.num_rows:
                self.quarantine(self.tables["quarantine"], rejected, batch_id)
        finally:
            window_rows = self.updated_window_rows(updating)
        facts.records, facts.bronze_rows = records, bronze.num_rows
        facts.quarantined, facts.newest_event = rejected.num_rows, newest_event(bronze)
        touched = self.stages.touched(bronze) if bronze.num_rows else None
        self.after_bronze(bronze, facts, touched, window_rows, lambda: bronze)

    def process_written(self, written: WrittenBatch, facts: BatchStats) -> None:
        """A batch whose read tasks wrote its bronze and quarantine files: commit them, and
        go on with the signal samples and the summary they sent. When the driver must sift
        the rows itself (a batch that failed before, or one naming brokers or clusters past
        the caps), it reads the files back, writes the batch as the driver does, and
        deletes the tasks' files, which no commit references."""
        batch_id = facts.batch_id
        delta = self.config.delta
        storage = delta.storage()  # secret files read once a batch
        self.attempt = (batch_id, written.rows)
        self.control.raise_if_signals_failed()
        kept = written.kept
        if (self.failures.failed(self.app_id, batch_id) is not None
                or not self.admission.admits(kept)):
            with stopwatch(facts.timings, "read back"):
                decoded = read_back(written.files, delta.path, storage)
            replayed = self.tables["bronze"].committed(batch_id)
            self.process_rows(decoded, written.records, facts)
            delete_task_files(written.files, delta.path, storage)
            if not replayed:  # the files carry no per-row flag: the summary counts them
                self.defaulted.report(defaulted_per_topic(kept), self.exporter)
            return
        self.admission(kept)
        failpoints.hit("task_files_written")  # written by the tasks, not committed yet
        updating = self.start_window_update(written.rows, batch_id, written)
        bronze_files = [f for f in written.files if f.table == "bronze"]
        rejects = written.summary.filter(pc.is_null(written.summary["cluster"]))
        try:
            with stopwatch(facts.timings, "bronze"):
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
            window_rows = self.updated_window_rows(updating)
        bronze_rows = int(pc.sum(kept["rows"]).as_py() or 0)
        newest = pc.max(kept["newest"]).as_py() if kept.num_rows else None
        facts.records, facts.bronze_rows = written.records, bronze_rows
        facts.quarantined = int(pc.sum(rejects["quarantined"]).as_py() or 0)
        facts.newest_event = None if newest is None else micros_to_datetime(newest)
        touched = self.stages.touched_windows(kept) if bronze_rows else None
        self.after_bronze(written.rows, facts, touched, window_rows, lambda: read_task_files(
            bronze_files, delta.path, "bronze", storage,
            enough=self.config.quality.sample_rows) if appended else None, written)

    def start_window_update(self, rows: pa.Table, batch_id: int,
                            written: WrittenBatch | None = None) -> Future | None:
        """With a pending marker, the open windows take in the batch's signal samples on the
        absorber's thread while this one commits bronze, on a core the read tasks are not
        using then. Only memory changes there: a batch that fails clears the windows."""
        if self.pending is None:
            return None
        return self.absorber.submit(self.update_open_windows, rows, batch_id, written)

    def updated_window_rows(self, updating: Future | None) -> WindowRows:
        """What start_window_update's open windows answered (rows None: recompute from
        bronze)."""
        if updating is None:
            return WindowRows(None, {})
        try:
            return updating.result()
        except Exception:  # open windows only save work: bronze stays the authority
            LOG.exception("held signal windows failed; recomputing from bronze")
            self.stages.open_windows.clear()
            return WindowRows(None, {})

    def update_open_windows(self, bronze: pa.Table, batch_id: int,
                            written: WrittenBatch | None = None) -> WindowRows:
        """The batch into the open windows: broker_signals rows of the windows it touched,
        or None when they are to be recomputed from bronze. Only memory changes here, so it
        may run before the batch's bronze is committed (a failed batch clears the windows).
        `written`: the read tasks wrote the batch, and `bronze` is the signal samples they
        did not reduce to partials (the counters)."""
        self.stages.open_windows.begin(batch_id)
        if written is not None:
            return self.stages.open_window_rows_from_parts(written.rows, written.partials,
                                                           written.segments)
        return self.stages.open_window_rows(bronze)

    def after_bronze(self, rows: pa.Table, facts: BatchStats, touched: Touched | None,
                     window_rows: WindowRows,
                     quality_sample: Callable[[], pa.Table | None],
                     written: WrittenBatch | None = None) -> None:
        """Once bronze is committed: the facts for the listener, the quality check started
        on its own thread, then the signals: all of them here, or (with a pending marker
        and rows from the open windows) the gauges here and the Delta signals on the
        signals writer."""
        batch_id = facts.batch_id
        self.history.publish(facts)
        if facts.bronze_rows and self.quality.due(batch_id):
            self.quality.start(quality_sample, batch_id, self.tables["dq_results"])
        if self.pending is None:
            self.signals_here(rows, facts, touched,
                              self.update_open_windows(rows, batch_id, written))
            return
        if window_rows.rows is None or touched is None:
            # A recomputation from bronze (or nothing to signal): after every pending batch's
            # signals, in order, here; it reseeds the open windows the absorber updates.
            self.wait_for_writer()
            self.control.raise_if_signals_failed()
            if touched is not None:
                self.pending.add(Pending(self.app_id, batch_id, *touched))
            self.signals_here(rows, facts, touched, WindowRows(None, window_rows.timings))
            self.pending.remove([batch_id])
            return
        pending = Pending(self.app_id, batch_id, *touched)
        self.pending.add(pending)
        paged = self.stages.page(window_rows.rows.select(PAGE_ROW_COLUMNS).to_pylist())
        self.writer.submit(Owed(pending, window_rows.rows, rows, facts,
                                summed(window_rows.timings, paged)),
                           self.is_catching_up(facts))
        if len(self.pending) > MAX_OWED_BATCHES:
            self.wait_for_writer()
        if self.housekeeping.due(batch_id):  # never beside the writer's MERGEs
            self.wait_for_writer()
            self.control.raise_if_signals_failed()
            self.housekeeping.run(batch_id, self.tables)

    def signals_here(self, bronze: pa.Table, facts: BatchStats, touched: Touched | None,
                     window_rows: WindowRows) -> None:
        """A batch's signals and housekeeping on this thread, once its bronze is
        committed; `window_rows` is what update_open_windows() answered for it."""
        batch_id = facts.batch_id
        failpoints.poisoned(bronze)
        timings = dict(window_rows.timings)
        if touched is not None:
            timings = summed(timings, self.stages.signals_for(*touched, batch_id,
                                                              window_rows.rows))
        timings = summed(timings, self.housekeeping.run(batch_id, self.tables))
        self.record_finished(facts, timings)

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
        assert self.pending is not None  # only batches with a marker reach the writer
        marker = self.pending.marker
        newest = group[-1].pending.batch_id
        failpoints.hit("signals_deferred", ready=lambda: marker.spark_committed(newest))
        for owed in group:
            failpoints.poisoned(owed.samples)
        together = pending_together([owed.pending for owed in group])
        rows = newest_rows([owed.window_rows for owed in group], BROKER_KEYS)
        timings = self.stages.persist(together.clusters, together.spans, newest, rows,
                                      rows.select(PERSIST_ROW_COLUMNS).to_pylist())
        self.pending.remove([owed.pending.batch_id for owed in group])
        if len(group) > 1:
            LOG.debug("batches %d-%d: signals written together", group[0].pending.batch_id,
                      newest)
        for owed in group[:-1]:
            self.record_finished(owed.facts, owed.timings)
        self.record_finished(group[-1].facts, {**group[-1].timings, **timings})

    def signals_failed(self, group: list[Owed], err: BaseException) -> None:
        """The writer stopped: the batches it owes stay in the marker; the note of a failure
        names the marker's batch id and every pending batch's offsets, for recover()."""
        assert self.pending is not None
        newest = self.pending.writer_failed(err)
        if newest is None:
            newest = group[-1].pending.batch_id
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

    def remove_poison(self, rows: pa.Table, failure: poison.Failure, batch_id: int
                      ) -> pa.Table:
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

    def record_finished(self, facts: BatchStats, timings: dict[str, float]) -> None:
        """Every step of the batch is done; `timings`: those after its bronze."""
        self.history.finish(facts, timings)
        # Spark has committed the batches before this one: the note of a failed one is
        # spent (its own replay, after a crash before Spark's commit, still sifts it).
        self.failures.clear_through(facts.batch_id - 1)
        LOG.debug("batch %d timings: %s", facts.batch_id, ", ".join(
            f"{k} {v:.2f}s" for k, v in {**facts.timings, **timings}.items()))

    def wait_for_writer(self) -> None:
        """Until the signals writer has written every batch it was given, or failed; safe
        from two threads at once (Job.stop and a late foreachBatch)."""
        self.writer.wait()

    def recover(self) -> int | None:
        """Before a run: recompute the signals of the batches whose bronze was committed
        when the job died before they were; returns the newest one's id, None when nothing
        was pending. What an earlier run of this processor left queued on the writer or in
        memory is owed in the marker, and dropped."""
        if self.pending is None:
            return None
        self.writer.reset()
        self.pending.forget()
        owed = self.pending.marker.read()
        if owed is None:
            return None
        if owed.app_id != self.app_id:
            # Recomputing under this query is not safe: the writes' transaction version is
            # the batch id, and another query's ids would mark this one's batches as done.
            LOG.warning("the pending-signals marker names batch %d of another query (a new "
                        "checkpoint): dropped; the signals of its %d window span(s) are "
                        "recomputed from bronze only where new samples touch them",
                        owed.batch_id, len(owed.spans))
            self.pending.clear()
            return None
        batch_id = owed.batch_id
        LOG.warning("batch %d: bronze was committed but the job stopped before its signals; "
                    "recomputing them from bronze", batch_id)
        self.stages.open_windows.clear()
        # Spark replays the batch if it had not committed it: seen, so a replay forgets the
        # windows held from this recomputation (bronze already holds the batch's samples).
        self.stages.open_windows.begin(batch_id)
        failure = self.failures.failed(self.app_id, batch_id)
        if failure is not None:  # its signals failed: look for poison among its samples
            self.remove_poison(self.tables["bronze"].read(*poison.in_ranges(failure.ranges)),
                               failure, batch_id)
        try:
            self.stages.signals_for(owed.clusters, owed.spans, batch_id)
        except Exception as err:
            if failure is not None:
                self.failures.record(self.app_id, batch_id, failure.ranges, err)
            raise
        self.pending.clear()
        return batch_id
