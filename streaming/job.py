"""The always-on query and its lifecycle: start, watch, stop after the current batch."""

from __future__ import annotations

import functools
import logging
import signal
import time
from collections.abc import Callable
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming.clients.service import ClientsService
from streaming.config import Config
from streaming.exporter import Exporter
from streaming.lease import Leases
from streaming.metadata.service import MetadataService
from streaming.pipeline.batch import BatchProcessor
from streaming.pipeline.catalog_tables import CatalogTables
from streaming.pipeline.control import JobControl
from streaming.pipeline.recovery import PendingMarker, checkpoint_app_id
from streaming.pipeline.tables_owner import (
    checkpoint_batches,
    claim_tables,
    renew_if_logs_lost,
    rewind_to_tables,
)
from streaming.runtime.failure import own_cause
from streaming.runtime.lag_probe import LagProbe
from streaming.runtime.planning_daemons import stop_planning_daemons
from streaming.runtime.progress import ProgressListener
from streaming.runtime.spark_session import build_spark
from streaming.source.reader import read_decoded_stream

LOG = logging.getLogger("kafka_health.job")
# Spark's status message while a trigger asks its sources for new offsets (MicroBatchExecution).
PLANNING_STATUS = "Getting offsets from"


class Job:
    """The always-on query and its lifecycle: start, wait, stop after the current batch.

    Owner: the main thread (run_until_stopped, stop, the signal handlers). Others may
    call request_stop() (a timer's thread); the batches hear of a stop, and report the
    signals writer's failure, through `control`, which the job owns.
    """

    def __init__(self, config: Config, spark: SparkSession | None = None,
                 exporter: Exporter | None = None,
                 printer: Callable[[str], None] | None = print) -> None:
        self.config = config
        self.exporter = exporter
        self.printer = printer
        self.query: StreamingQuery | None = None
        self.listener: ProgressListener | None = None
        # One writer per checkpoint and per Delta root: taken in start(), before any write.
        self.leases = Leases([config.spark.checkpoint, config.delta.path],
                             config.spark.lease_timeout_seconds)
        # The app id and the markers live beside the checkpoint, on its store: the same
        # object store as the tables when it is remote (delta.storage_options).
        storage = config.delta.storage()
        # The Admin API pollers (metadata.clusters): their board of causes is read by the
        # incidents stage; they poll from start() to stop().
        self.metadata = MetadataService(config, exporter)
        # The durability probe and the consumer-group pollers (probe, consumer_groups):
        # clients of the watched clusters, from start() to stop().
        self.clients = ClientsService(config, exporter)
        self.control = JobControl()
        self.processor = BatchProcessor(
            config, exporter, checkpoint_app_id(config.spark.checkpoint, storage),
            pending=PendingMarker.beside(config.spark.checkpoint, storage),
            causes=self.metadata.board if self.metadata.enabled else None,
            control=self.control)
        # After the processor: its data-quality suite is built on a thread of its own while
        # the session's JVM starts (streaming/quality.py)
        self.spark = spark or build_spark(config)
        # delta.catalog: the tables' names in Spark's catalog, from start() to stop()
        self.catalog = CatalogTables(config.delta.catalog, self.spark)

    def start(self) -> StreamingQuery:
        self.leases.acquire()  # LeaseHeld, naming the other job, while one runs
        try:
            self._claim_tables()
            # Before the query, so its first batches may already find causes; under the
            # lease, since the pollers write the metadata tables.
            self.metadata.start(self.processor.app_id, self.config.delta.storage())
            self.clients.start(self.processor.app_id, self.config.delta.storage())
            self.catalog.follow(self.processor.tables)
            return self._start()
        except BaseException:
            self.catalog.stop()
            self.clients.stop()
            self.metadata.stop()
            self.leases.release()
            raise

    def _claim_tables(self) -> None:
        """A checkpoint whose logs were deleted takes a new app id; CheckpointReplaced when
        another checkpoint wrote the tables (this one new, or another job's), before any of
        this checkpoint is changed; then one ahead of its tables is cut back to them."""
        config, storage = self.config, self.config.delta.storage()
        # Listed, not read (source.offsets.last_checkpointed_offsets): a remote log that cannot be
        # read must stop the start, not pass for an empty one (which renews the app id)
        is_new = not checkpoint_batches(config.spark.checkpoint, "offsets", storage)
        renewed = renew_if_logs_lost(
            config.spark.checkpoint, self.processor.app_id, self.processor.tables["bronze"],
            storage) if is_new else None
        if renewed is not None:
            self.processor.set_app_id(renewed)
        claim_tables(config.delta.path, config.spark.checkpoint, self.processor.app_id,
                     is_new, config.source.starting_offsets,
                     config.spark.accept_new_checkpoint, storage)
        if not is_new:
            rewind_to_tables(config.spark.checkpoint, self.processor.tables["bronze"], storage)

    def _start(self) -> StreamingQuery:
        self.processor.recover()
        self.control.reset()  # an earlier run's stop and signals failure, recovered just now
        decoded = read_decoded_stream(self.spark, self.config)
        self.lag = LagProbe(self.config)
        # A batch has run, so the query is planned: Spark's planning daemons only hold memory.
        self.listener = ProgressListener(
            self.processor.history, self.exporter, self.lag, self.printer,
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

    def stop(self) -> None:
        """Stop at the end of the batch in flight, or after `spark.stop_timeout_seconds` in
        any case.

        Stopping mid-trigger cancels the batch's Spark job: the batch fails and runs again
        at the next start. The default leaves time for the last batch's signals within
        Kubernetes' default 30 s grace period.
        """
        query = self.query
        jvm_alive = self._while_jvm_lives(lambda: self._stop_query(query))
        self.processor.wait_for_writer()  # the last batch's signals
        self.processor.quality.wait()  # its results are written
        if self.listener is not None:
            listener, self.listener = self.listener, None
            if jvm_alive:
                self._while_jvm_lives(lambda: self.spark.streams.removeListener(listener))
            self.lag.close()
        self.catalog.stop()
        self.clients.stop()  # their writes are under the lease too
        self.metadata.stop()
        self.leases.release()

    def _stop_query(self, query: StreamingQuery | None) -> None:
        if query is not None and query.isActive:
            self._await_batch_end(query, self.config.spark.stop_timeout_seconds)
            self.control.begin_stop()
            query.stop()

    def _while_jvm_lives(self, call: Callable[[], Any]) -> bool:
        """Run a call into the driver JVM during stop(); False when the JVM had stopped.

        A signal sent to the whole process group or cgroup (systemd's default
        KillMode=control-group) reaches the JVM too, which then stops its SparkContext at
        once: the batch in flight is lost as in any stop mid-batch, and the rest of the
        stop (the last batch's signals, the lease) is Python's and still runs."""
        try:
            call()
        except (Py4JError, OSError) as err:
            self.control.begin_stop()
            text = str(err).strip()
            LOG.warning("the Spark driver JVM stopped before the job (%s): the batch in flight "
                        "runs again at the next start. Send the stop signal to this process "
                        "only (systemd: KillMode=mixed) to let it finish its batch.",
                        text.splitlines()[0] if text else type(err).__name__)
            return False
        return True

    def _await_batch_end(self, query: StreamingQuery, timeout: float) -> None:
        """Until no batch is in flight or a batch has committed since the call. With
        batches back to back the query is never seen between triggers (the next one starts
        within microseconds), but a progress event comes right after each commit. A
        trigger still asking the source for offsets has no batch yet: during an outage of
        the metrics Kafka it waits out the client's timeouts there, and is not waited on."""
        assert self.listener is not None  # _start adds it before it starts the query
        committed = self.listener.batch_committed
        committed.clear()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = query.status
            if (not status.get("isTriggerActive")
                    or str(status.get("message", "")).startswith(PLANNING_STATUS)
                    or committed.wait(0.1)):
                return
        LOG.warning("stopping mid-batch after %.0f s: the batch runs again at the next start",
                    timeout)

    def install_signal_handlers(self) -> None:
        def handle(signum: int, frame: Any) -> None:
            LOG.info("signal %d: stopping after the current batch", signum)
            # a batch failing from here on was stopped (the same signal may have reached the
            # driver JVM), not failed by its data: it is not noted as a failed attempt
            self.control.begin_stop()
            self.control.request_stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    def run_until_stopped(self, poll: float = 0.5) -> int:
        """Block until a signal or the query ends; returns the process exit code."""
        query = self.query or self.start()
        while not self.control.stop_requested:
            if self.leases.lost is not None:
                LOG.error("stopping: %s", self.leases.lost)
                self.stop()
                return 1
            if self.control.signals_error is not None:
                LOG.error("stopping: a batch's signals failed: %s", self.control.signals_error)
                self.stop()
                return 1
            if not query.isActive:
                # said before the stop, which a failing disk may not get through
                error = query.exception()
                if error is not None:
                    cause = own_cause(str(error))
                    if cause:  # Spark's text is a trace that would bury it
                        LOG.debug("streaming query failed: %s", error)
                        LOG.error("the query stopped: %s", cause)
                    else:
                        LOG.error("streaming query failed: %s", error)
                self.stop()  # waits for the last batch's signals
                if error is not None:
                    return 1
                return 1 if self.control.signals_error is not None else 0
            self.control.wait_for_stop_request(poll)
        self.stop()
        if self.control.signals_error is not None:
            LOG.error("the last batch's signals failed: %s", self.control.signals_error)
            return 1
        return 0

    def request_stop(self) -> None:
        self.control.request_stop()
