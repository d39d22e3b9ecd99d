"""Progress events of the streaming query: the pipeline-health series, and a line per
micro-batch for the console."""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from streaming import metric_names as metric
from streaming.exporter import Exporter
from streaming.pipeline.stats import BatchHistory, BatchStats
from streaming.runtime.lag_probe import LagProbe
from streaming.runtime.progress_events import JsonProgressListener


class ProgressListener(JsonProgressListener):
    """Prints one line per micro-batch and feeds the pipeline-health series.

    Owner: Spark's listener bus thread (via py4j), which calls its on* methods. Others: the
    job's main thread waits on `batch_committed` when it stops.
    """

    def __init__(self, history: BatchHistory, exporter: Exporter | None,
                 lag: LagProbe,
                 printer: Callable[[str], None] | None = print,
                 after_first_batch: Callable[[], Any] | None = None) -> None:
        self.history = history  # the batches' facts, taken once each
        self.after_first_batch = after_first_batch
        self.exporter = exporter
        self.lag = lag
        self.printer = printer
        self.last_end: dict[str, Any] | None = None
        self.signals_shown = -1
        # Set by every progress event, which Spark posts once the batch's offsets are
        # committed: the moment a stop interrupts no batch's work (see Job.stop).
        self.batch_committed = threading.Event()

    def onQueryStarted(self, event: Any) -> None:
        if self.exporter:
            self.exporter.pipeline(metric.PIPELINE_UP, 1)
            # The stall clock starts with the query: left at 0 until the first batch, a
            # restarted driver would read as stalled since 1970 and page at once.
            self.exporter.pipeline(metric.PIPELINE_LAST_BATCH_TIMESTAMP_SECONDS,
                                   time.time())
            # Not known until a batch or a probe answers: left at 0, a query whose broker
            # is down from the start would also page as subscribed to nothing.
            self.exporter.pipeline(metric.PIPELINE_SOURCE_PARTITIONS, math.nan)

    def onQueryProgress(self, event: Any) -> None:
        self.batch_committed.set()
        if self.after_first_batch is not None:
            first, self.after_first_batch = self.after_first_batch, None
            first()
        progress = event.progress
        duration = (progress.batchDuration or 0) / 1000.0
        stats = self.history.take(progress.batchId) or BatchStats()
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
            ex.pipeline(metric.PIPELINE_LAST_BATCH_TIMESTAMP_SECONDS, time.time())
            ex.pipeline(metric.PIPELINE_BATCH_DURATION_SECONDS, duration)
            ex.pipeline(metric.PIPELINE_INPUT_ROWS_PER_SECOND, rate)
            ex.pipeline(metric.PIPELINE_SOURCE_UP, 0 if lag is None else 1)
            self._export_source_error()
            if lag is not None:
                ex.pipeline(metric.PIPELINE_SOURCE_LAG_RECORDS, lag)
            if end:  # a batch read them: the idle probe counts them when none comes
                ex.pipeline(metric.PIPELINE_SOURCE_PARTITIONS,
                            sum(len(parts) for parts in end.values()))
            lost = offsets_lost(offsets_json(source.startOffset) if source else None,
                                end) + stats.lost_ranges
            if lost:
                ex.count(metric.PIPELINE_SOURCE_DATA_LOSS_TOTAL, lost)
            if stats.newest_event is not None:
                ex.pipeline(metric.PIPELINE_NEWEST_EVENT_TIMESTAMP_SECONDS,
                            stats.newest_event.timestamp())
            ex.count(metric.PIPELINE_BATCHES_TOTAL)
            ex.count(metric.PIPELINE_INPUT_RECORDS_TOTAL, rows)
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
        done = self.history.newest_finished
        if done.batch_id < 0 or done.batch_id == self.signals_shown:
            return ""
        self.signals_shown = done.batch_id
        return f", batch {done.batch_id} signals [{_steps(done.signal_timings)}]"

    def onQueryIdle(self, event: Any) -> None:
        if self.exporter:
            self.exporter.pipeline(metric.PIPELINE_LAST_BATCH_TIMESTAMP_SECONDS,
                                   time.time())
            # Idle may mean "no new metrics" or "broker gone": the probe tells them apart,
            # also before any batch (an empty topic at start is not an unreachable broker).
            reachable = self.lag(self.last_end or {}) is not None
            self.exporter.pipeline(metric.PIPELINE_SOURCE_UP, int(reachable))
            readable = self.lag.readable_partitions() if reachable else None
            if readable is not None:
                self.exporter.pipeline(metric.PIPELINE_SOURCE_PARTITIONS, readable)
            self._export_source_error()

    def _export_source_error(self) -> None:
        """kafka_health_pipeline_source_error{error}: 1 for the class of why the metrics
        topics cannot be read (the probe's), no series while they can."""
        from streaming.metadata.health import ERROR_CLASSES

        if self.exporter is None:  # called only with an exporter
            return
        gauge = self.exporter.gauges[metric.PIPELINE_SOURCE_ERROR]
        error = getattr(self.lag, "error", None)
        for name in ERROR_CLASSES:
            if name == error:
                gauge.labels(name).set(1)
            else:
                with contextlib.suppress(KeyError):
                    gauge.remove(name)

    def onQueryTerminated(self, event: Any) -> None:
        if self.exporter:
            self.exporter.pipeline(metric.PIPELINE_UP, 0)


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
