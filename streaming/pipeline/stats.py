"""What a batch did and how long each step took, for progress lines and benchmarks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime


@contextmanager
def stopwatch(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - started


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
