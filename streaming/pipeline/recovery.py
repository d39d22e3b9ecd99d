"""What survives the driver beside the checkpoint: the job's transaction id, and the
marker of a batch whose bronze is committed but whose signals may not be.

Spark commits a batch once foreachBatch returns, which is when its bronze is in; the
batch's signals run later on the signals thread. The marker names the clusters and
windows that batch touched, so a job that died in between recomputes them from bronze
when it starts again (docs/architecture.md, "Crash safety").
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from streaming.signals.spans import Span

LOG = logging.getLogger("kafka_health.recovery")
PENDING_SIGNALS = "kafka_health_pending_signals.json"
APP_ID = "kafka_health_app_id"


def checkpoint_app_id(checkpoint: str) -> str:
    """A stable id per checkpoint: Delta transactions keyed by it survive restarts, and a
    fresh checkpoint (batch ids from 0 again) gets a fresh id instead of skipping batches."""
    marker = Path(checkpoint) / APP_ID
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"kafka-health-{uuid.uuid4()}")
    return marker.read_text().strip()


@dataclass(frozen=True)
class Pending:
    """A batch whose signals are owed: by which job, and what it touched."""

    app_id: str
    batch_id: int
    clusters: list[str]
    spans: list[Span]


class PendingMarker:
    """The pending-signals marker file, written before Spark can commit its batch."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    @classmethod
    def beside(cls, checkpoint: str) -> PendingMarker:
        return cls(Path(checkpoint) / PENDING_SIGNALS)

    def sibling(self, name: str) -> Path:
        """Another file of the job's beside the marker (the failed batch's note)."""
        return self.path.with_name(name)

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, pending: Pending) -> None:
        """Atomically: a marker is whole or absent, never half written."""
        marker = {"app_id": pending.app_id, "batch_id": pending.batch_id,
                  "clusters": pending.clusters,
                  "spans": [[lo.isoformat(), hi.isoformat()] for lo, hi in pending.spans]}
        partial = self.path.with_name(self.path.name + ".tmp")
        partial.write_text(json.dumps(marker))
        os.replace(partial, self.path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def read(self) -> Pending | None:
        """The owed batch, or None without a marker; an unreadable marker stops the job
        with what to do about it."""
        if not self.path.exists():
            return None
        try:
            marker = json.loads(self.path.read_text())
            return Pending(
                app_id=str(marker.get("app_id")), batch_id=int(marker["batch_id"]),
                clusters=list(marker["clusters"]),
                spans=[(datetime.fromisoformat(lo), datetime.fromisoformat(hi))
                       for lo, hi in marker["spans"]])
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise RuntimeError(f"{self.path}: unreadable pending-signals marker ({err}); "
                               "delete it to skip recomputing the last batch's signals "
                               "(they are recomputed when late data touches them)") from err

    def spark_committed(self, batch_id: int) -> bool:
        """Whether Spark's commit log beside the marker holds the batch."""
        return (self.path.parent / "commits" / str(batch_id)).exists()
