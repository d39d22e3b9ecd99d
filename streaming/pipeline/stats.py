"""What a batch did and how long each step took, for progress lines and benchmarks."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

# The facts of batches this many ids older than the newest are dropped: the listener takes
# each batch's after the batch, at most a few batches late.
FACTS_KEPT = 16
FINISHED_KEPT = 64


@contextmanager
def stopwatch(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - started


def summed(*parts: dict[str, float]) -> dict[str, float]:
    """Several steps' timings as one; a step measured in two parts counts both."""
    total: dict[str, float] = {}
    for part in parts:
        for name, seconds in part.items():
            total[name] = total.get(name, 0.0) + seconds
    return total


@dataclass
class BatchStats:
    batch_id: int = -1
    records: int = 0  # Kafka records (Spark's numInputRows counts packed blobs)
    bronze_rows: int = 0
    quarantined: int = 0
    lost_ranges: int = 0  # offset ranges the read tasks skipped as gone
    finished_at: float = 0.0
    newest_event: datetime | None = None
    timings: dict[str, float] = field(default_factory=dict)  # read, bronze, quarantine
    signal_timings: dict[str, float] = field(default_factory=dict)  # the deferred steps


class BatchHistory:
    """What recent batches read and wrote: each batch's facts until the progress listener
    takes them, and the batches whose every step is done (the newest for the listener's
    line, the last few for benchmarks).

    Owner: none alone; every method takes its lock. The batch thread publishes a batch's
    facts once its bronze is committed; the batch thread or the signals writer records a
    batch finished; the progress listener (Spark's listener bus) takes a batch's facts,
    which it may do after the next batch has begun, and reads the newest finished.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: dict[int, BatchStats] = {}
        self._newest = BatchStats()
        self._finished: deque[BatchStats] = deque(maxlen=FINISHED_KEPT)

    def publish(self, facts: BatchStats) -> None:
        with self._lock:
            self._facts[facts.batch_id] = facts
            for old in [b for b in self._facts if b < facts.batch_id - FACTS_KEPT]:
                del self._facts[old]

    def take(self, batch_id: int) -> BatchStats | None:
        """The batch's facts, once: None when never published or taken already."""
        with self._lock:
            return self._facts.pop(batch_id, None)

    def finish(self, facts: BatchStats, signal_timings: dict[str, float]) -> BatchStats:
        done = dataclasses.replace(facts, finished_at=time.time(), signal_timings=signal_timings)
        with self._lock:
            self._newest = done
            self._finished.append(done)
        return done

    @property
    def newest_finished(self) -> BatchStats:
        """The newest batch whose every step is done (batch id -1: none yet)."""
        with self._lock:
            return self._newest

    @property
    def finished(self) -> list[BatchStats]:
        """The last batches whose every step is done, newest last."""
        with self._lock:
            return list(self._finished)
