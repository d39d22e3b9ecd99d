"""The go-ahead between the foreachBatch thread and the signals thread of one batch."""

from __future__ import annotations

import threading

from streaming.pipeline.stats import BatchStats
from streaming.signals.spans import Span


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
