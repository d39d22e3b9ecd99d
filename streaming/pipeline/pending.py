"""The batches whose bronze is committed and whose Delta signals are not written yet, and
the pending marker that names them beside the checkpoint (streaming.pipeline.recovery)."""

from __future__ import annotations

import threading

from streaming.pipeline.control import JobControl
from streaming.pipeline.recovery import Pending, PendingMarker, pending_together


class PendingBatches:
    """The pending batches, oldest first, kept equal to the marker on every change.

    Owner: none alone; every method takes the ledger's lock. The batch thread adds a
    batch before Spark can commit it; the signals writer removes the batches it wrote and
    reports its failure here; the job's main thread clears it at a start. Once the writer
    has failed, no batch is added, so that the marker's newest batch is the one the
    failure's note names.
    """

    def __init__(self, marker: PendingMarker, control: JobControl) -> None:
        self.marker = marker
        self._control = control
        self._batches: list[Pending] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._batches)

    def add(self, pending: Pending) -> None:
        """Written before Spark can commit the batch: what to recompute if the job dies.
        PreviousBatchFailed once the signals writer has failed."""
        with self._lock:
            self._control.raise_if_signals_failed()
            self.marker.write(pending_together([*self._batches, pending]))
            self._batches.append(pending)

    def remove(self, batch_ids: list[int]) -> None:
        """These batches' signals are written: the marker names only the rest."""
        with self._lock:
            rest = [p for p in self._batches if p.batch_id not in batch_ids]
            if rest:
                self.marker.write(pending_together(rest))
            elif self._batches or self.marker.exists():
                self.marker.clear()
            self._batches = rest

    def clear(self) -> None:
        """Nothing is pending: recovered, or the marker was another job's."""
        with self._lock:
            self._batches = []
            self.marker.clear()

    def forget(self) -> None:
        """Drop the batches held in memory and leave the marker, which names them."""
        with self._lock:
            self._batches = []

    def writer_failed(self, error: BaseException) -> int | None:
        """The signals writer failed with `error`: reported to the job, and no batch is
        added from now on. Returns the newest pending batch's id (None: none)."""
        with self._lock:
            self._control.report_signals_failure(error)
            return self._batches[-1].batch_id if self._batches else None
