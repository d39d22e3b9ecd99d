"""The data-quality check of a due batch's sample of bronze, on a thread of its own.

Why a thread: reading the sample back and validating it takes 0.4-0.7 s, and on the
batch's own path it delayed that batch's paging and the next batch's start by as much (the
p95 of produced -> gauge at 10k samples/s). A job that dies mid-check loses that one
sample's results; a replayed batch checks its sample again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pyarrow as pa

from streaming import metric_names as metric
from streaming.config import QualityConfig
from streaming.exporter import Exporter
from streaming.quality import BronzeValidator
from streaming.sinks.base import DeltaSink

LOG = logging.getLogger("kafka_health.batch")


class QualityRunner:
    """At most one check runs: a due batch first waits for the one before, so dq_results
    gets its batch ids in order. A failing suite is counted, never a reason to stop.

    Owner: the batch thread, which starts checks; the job's main thread may wait() for the
    running one (Job.stop: its results are written). The check's own thread writes
    dq_results and counts failures, and touches nothing else. The running thread is
    replaced under the runner's lock.
    """

    def __init__(self, config: QualityConfig, exporter: Exporter | None) -> None:
        self.exporter = exporter
        self.validator = BronzeValidator(config.validate_every_n_batches, config.sample_rows)
        self._running: threading.Thread | None = None
        self._lock = threading.Lock()

    def due(self, batch_id: int) -> bool:
        return self.validator.due(batch_id)

    def start(self, sample: Callable[[], pa.Table | None], batch_id: int,
              results: DeltaSink) -> None:
        """Check what `sample()` reads (None: nothing to check) into `results`."""
        with self._lock:
            self._join()
            self._running = threading.Thread(
                target=self._run, args=(sample, batch_id, results),
                name=f"kafka-health-quality-{batch_id}", daemon=True)
            self._running.start()

    def wait(self) -> None:
        """Until the running check, if any, has ended."""
        with self._lock:
            self._join()

    def _join(self) -> None:
        if self._running is not None:
            self._running.join()

    def _run(self, sample: Callable[[], pa.Table | None], batch_id: int,
             results: DeltaSink) -> None:
        started = time.perf_counter()
        try:
            rows = sample()
            if rows is not None:
                self._check(rows, batch_id, results)
        except Exception:  # a sample that cannot be read or recorded: reported, never fatal
            LOG.exception("batch %d: the data-quality check failed", batch_id)
        LOG.debug("batch %d: quality check %.2fs", batch_id, time.perf_counter() - started)

    def _check(self, bronze: pa.Table, batch_id: int, results: DeltaSink) -> None:
        try:
            checked = self.validator.validate(bronze, batch_id)
        except Exception as err:  # GX problems must not take the pipeline down
            LOG.warning("data quality validation failed to run: %s", err)
            return
        if results.append(checked, batch_id) and self.exporter:
            failed = sum(1 for ok in checked["success"].to_pylist() if not ok)
            if failed:
                self.exporter.count(metric.PIPELINE_DQ_FAILURES_TOTAL, failed)
