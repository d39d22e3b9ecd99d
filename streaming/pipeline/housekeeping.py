"""Compaction and retention of the job's tables, after a batch's signals when due."""

from __future__ import annotations

from streaming.config import DeltaConfig
from streaming.pipeline.stats import stopwatch
from streaming.pipeline.tables import compact
from streaming.retention import Retention
from streaming.sinks.base import DeltaSink


class Housekeeping:
    """Compaction every `delta.compact_every_n_batches` batches, retention at most every
    `delta.retention_every_seconds`. The caller runs it after the batch's signals, never
    beside the signals writer's MERGEs.

    Owner: the batch thread; no other thread calls it.
    """

    def __init__(self, config: DeltaConfig) -> None:
        self.compact_every = config.compact_every_n_batches
        self.retention = Retention(config)

    def compaction_due(self, batch_id: int) -> bool:
        every = self.compact_every
        return bool(every and batch_id % every == every - 1)

    def due(self, batch_id: int) -> bool:
        return self.compaction_due(batch_id) or self.retention.due()

    def run(self, batch_id: int, tables: dict[str, DeltaSink]) -> dict[str, float]:
        """What is due of the two; returns how long each took."""
        timings: dict[str, float] = {}
        if self.compaction_due(batch_id):
            with stopwatch(timings, "compact"):
                compact(tables)
        if self.retention.due():
            with stopwatch(timings, "retention"):
                self.retention.run(tables)
        return timings
