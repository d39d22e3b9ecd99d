"""What survives the driver beside the checkpoint: the job's transaction id, and the
marker of the batches whose bronze is committed but whose signals may not be.

Spark commits a batch once foreachBatch returns, which is when its bronze is in; the
batch's Delta signals are written later by the signals writer, which may fall a few
batches behind. The marker names the clusters and windows those batches touched, so a
job that died in between recomputes them from bronze when it starts again
(docs/architecture.md, "Crash safety").
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from streaming import locations
from streaming.signals.spans import Span

LOG = logging.getLogger("kafka_health.recovery")
PENDING_SIGNALS = "kafka_health_pending_signals.json"
APP_ID = "kafka_health_app_id"


def checkpoint_app_id(checkpoint: str, storage_options: Mapping[str, str] | None = None
                      ) -> str:
    """A stable id per checkpoint: Delta transactions keyed by it survive restarts, and a
    fresh checkpoint (batch ids from 0 again) gets a fresh id instead of skipping batches.
    It lives in the checkpoint, local or on an object store, so a driver restarted on
    another machine finds it."""
    return locations.read_or_create_text(locations.join(checkpoint, APP_ID),
                                         _new_app_id(), storage_options)


def renew_app_id(checkpoint: str, storage_options: Mapping[str, str] | None = None) -> str:
    """A new id for a checkpoint whose batch ids start from 0 again under its old one."""
    app_id = _new_app_id()
    locations.write_text(locations.join(checkpoint, APP_ID), app_id, storage_options)
    return app_id


def _new_app_id() -> str:
    return f"kafka-health-{uuid.uuid4()}"


@dataclass(frozen=True)
class Pending:
    """Batches whose signals are owed: by which job, the newest of them, and what they
    touched."""

    app_id: str
    batch_id: int
    clusters: list[str]
    spans: list[Span]


def pending_together(batches: list[Pending]) -> Pending:
    """One marker for several pending batches: the newest batch id (every write of the
    recomputation is a transaction of that id), every cluster, and the spans with the
    overlapping ones joined (spans far apart stay apart, so a recomputation reads only
    what was touched)."""
    spans: list[list] = []
    for lo, hi in sorted(span for pending in batches for span in pending.spans):
        if spans and lo <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], hi)
        else:
            spans.append([lo, hi])
    return Pending(batches[-1].app_id, max(p.batch_id for p in batches),
                   sorted({c for pending in batches for c in pending.clusters}),
                   [(lo, hi) for lo, hi in spans])


class PendingMarker:
    """The pending-signals marker file beside the checkpoint, local or on an object store,
    written before Spark can commit its batch."""

    def __init__(self, location: Path | str,
                 storage_options: Mapping[str, str] | None = None) -> None:
        self.location = str(location)
        self.storage_options = dict(storage_options or {})

    @classmethod
    def beside(cls, checkpoint: str, storage_options: Mapping[str, str] | None = None
               ) -> PendingMarker:
        return cls(locations.join(checkpoint, PENDING_SIGNALS), storage_options)

    def sibling(self, name: str) -> str:
        """Another file of the job's beside the marker (the failed batch's note)."""
        return locations.join(locations.parent(self.location), name)

    def exists(self) -> bool:
        return locations.exists(self.location, self.storage_options)

    def write(self, pending: Pending) -> None:
        """Whole or absent, never half written (locations.write_text)."""
        marker = {"app_id": pending.app_id, "batch_id": pending.batch_id,
                  "clusters": pending.clusters,
                  "spans": [[lo.isoformat(), hi.isoformat()] for lo, hi in pending.spans]}
        locations.write_text(self.location, json.dumps(marker), self.storage_options)

    def clear(self) -> None:
        locations.delete(self.location, self.storage_options)

    def read(self) -> Pending | None:
        """The owed batch, or None without a marker; an unreadable marker stops the job
        with what to do about it."""
        text = locations.read_text(self.location, self.storage_options)
        if text is None:
            return None
        try:
            marker = json.loads(text)
            return Pending(
                app_id=str(marker.get("app_id")), batch_id=int(marker["batch_id"]),
                clusters=list(marker["clusters"]),
                spans=[(datetime.fromisoformat(lo), datetime.fromisoformat(hi))
                       for lo, hi in marker["spans"]])
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise RuntimeError(f"{self.location}: unreadable pending-signals marker ({err}); "
                               "delete it to skip recomputing the last batch's signals "
                               "(they are recomputed when late data touches them)") from err

    def spark_committed(self, batch_id: int) -> bool:
        """Whether Spark's commit log beside the marker holds the batch."""
        commits = locations.join(locations.parent(self.location), "commits", str(batch_id))
        return locations.exists(commits, self.storage_options)
