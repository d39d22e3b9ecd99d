"""The signals writer: a thread that writes committed batches' Delta signals in batch
order, while the foreachBatch thread goes on with the next batches.

A batch's gauges and pages go out on the foreachBatch thread as soon as its bronze is in
(SignalStages.page). Its Delta signals (four MERGEs and the reads they need: about 0.5 s
a batch on two cores whatever the batch's size) follow here, so the next batch's read,
bronze and gauges never wait for them. The thread takes every batch queued since its last
round as one group and writes the group's rows in one round of MERGEs (the newest row of
each window wins): a writer that falls behind does less per batch, not more, and the
batches it owes are named in the pending marker until they are written.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from streaming.pipeline.recovery import Pending
from streaming.pipeline.stats import BatchStats


@dataclass
class Owed:
    """A batch whose bronze is committed and whose Delta signals are not written yet."""

    pending: Pending  # its batch id, clusters and window spans
    window_rows: pa.Table  # the broker_signals rows the open windows answered for it
    samples: pa.Table  # what the held windows absorbed (poison checks, a failure's offsets)
    facts: BatchStats
    timings: dict[str, float] = field(default_factory=dict)  # its own steps so far


def newest_rows(tables: list[pa.Table], keys: tuple[str, ...]) -> pa.Table:
    """The rows of several batches' tables, oldest batch first, with the last row of each
    key: a held window's row of a later batch holds everything the earlier one did."""
    if len(tables) == 1:
        return tables[0]
    rows = pa.concat_tables(tables)
    indexed = rows.select(list(keys)).append_column("row", pa.array(np.arange(rows.num_rows)))
    last = indexed.group_by(list(keys), use_threads=False).aggregate([("row", "max")])
    return rows.take(pa.array(np.sort(last["row_max"].to_numpy())))


class SignalsWriter:
    """Runs `write(group)` on its own thread for groups of submitted batches, in order, a
    round at most every `every` seconds, or every `catching_up_every` while the newest
    batch submitted was one of a catch-up; sooner while someone waits for it, or once
    `group` batches are queued (so that a caller that bounds the batches it owes seldom
    has to wait for a round).

    When `write` raises, `failed(owed, error)` gets the group and every batch queued
    behind it, and the writer writes nothing more: those batches stay owed until the job
    recovers them from bronze (BatchProcessor.recover).

    Owner: its own thread (`kafka-health-signals`), which runs `write` and `failed`. Others
    may call submit() (the micro-batch thread), wait() (any thread) and reset() (the main
    thread, before a run); its queue and flags are guarded by one condition."""

    def __init__(self, write: Callable[[list[Owed]], None],
                 failed: Callable[[list[Owed], BaseException], None], every: float = 0.0,
                 catching_up_every: float | None = None, group: int | None = None) -> None:
        self._write = write
        self._failed = failed
        self._group = group
        self._every = every
        self._catching_up_every = every if catching_up_every is None else catching_up_every
        self._catching_up = False  # whether the newest batch submitted was a catch-up's
        self._last_round = -math.inf  # time.monotonic() when the last round began
        self._waiters = 0
        self._queue: list[Owed] = []
        self._busy = False
        self._stopped = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, owed: Owed, catching_up: bool = False) -> None:
        """Queue a batch; `catching_up`: it read as much as a batch may (the job is behind
        the stream), so the next round may wait `catching_up_every`. A batch that is not
        shortens the wait again at once."""
        with self._changed:
            self._queue.append(owed)
            self._catching_up = catching_up
            self._changed.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kafka-health-signals",
                                                daemon=True)
                self._thread.start()

    def wait(self) -> None:
        """Until every submitted batch is written, or the writer has failed."""
        with self._changed:
            self._waiters += 1
            self._changed.notify_all()
            try:
                while self._busy or (self._queue and not self._stopped):
                    self._changed.wait()
            finally:
                self._waiters -= 1

    def reset(self) -> None:
        """Forget a failure and whatever it left queued (recovered from the marker)."""
        self.wait()
        with self._changed:
            self._queue.clear()
            self._stopped = False

    def _run(self) -> None:
        while True:
            with self._changed:
                while True:
                    every = self._catching_up_every if self._catching_up else self._every
                    early = self._last_round + every - time.monotonic()
                    full = self._group is not None and len(self._queue) >= self._group
                    if self._queue and not self._stopped and (early <= 0 or self._waiters
                                                              or full):
                        break
                    self._changed.wait(early if self._queue and early > 0 else None)
                group, self._queue = self._queue, []
                self._busy = True
                self._last_round = time.monotonic()
            try:
                self._write(group)
            except BaseException as err:  # the next batch (or the job's watch loop) raises it
                with self._changed:
                    self._stopped = True
                    left, self._queue = self._queue, []
                self._failed(group + left, err)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()
