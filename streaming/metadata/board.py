"""The newest causes per cluster, handed from the poller threads to the signals writer.

The signals writer fills each incident's `cause` and compares the two views of under min
ISR on every batch, once a second; a poll takes seconds and may hang for its request
timeouts. So the pollers publish what the pipeline needs, already ranked, and the
pipeline only reads the newest published view: it never waits for a poll and never ranks
50k partitions per batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from streaming.identity import CLUSTER_WIDE
from streaming.metadata.causes import OFFLINE, UNDER_MIN_ISR, Cause, rank_causes
from streaming.metadata.model import ClusterSnapshot

# The leader label of offline partitions, which have none.
NO_LEADER = "none"
# Incident kind (streaming.signals.incidents) -> the cause kind that explains it, and the
# broker label of such an incident: the leader that reports it, or "*" cluster-wide.
INCIDENT_KINDS = {"under_min_isr": UNDER_MIN_ISR, "offline_partitions": OFFLINE}


def leader_label(leader: int | None) -> str:
    """A cause's leader as the gauge labels it and incidents name brokers: "1", or "none"."""
    return NO_LEADER if leader is None else str(leader)


@dataclass(frozen=True)
class CauseView:
    """What one successful poll says the pipeline needs: per (leader label, kind), the
    brokers to blame (Cause.blame), and how many partitions are under min ISR in all."""

    cluster: str
    polled_at: datetime
    blame: Mapping[tuple[str, str], str] = field(default_factory=dict)
    under_min_isr: int = 0


def cause_view(snapshot: ClusterSnapshot, top_n: int = 3) -> CauseView:
    """The view of a snapshot: ranked once, on the poller's thread."""
    causes: list[Cause] = rank_causes(snapshot, top_n)
    blame = {(leader_label(c.leader), c.kind): c.blame for c in causes if c.blame is not None}
    under = sum(c.partitions for c in causes if c.kind == UNDER_MIN_ISR)
    return CauseView(snapshot.cluster, snapshot.polled_at, blame, under)


class CauseBoard:
    """`publish` from any poller thread; `view` and `cause` from the signals writer. A view
    older than `max_age_seconds` names no cause: a poller that stopped answering must not
    blame brokers for a fault that came after its last success."""

    def __init__(self, max_age_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self.max_age_seconds = max_age_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._views: dict[str, CauseView] = {}

    def publish(self, view: CauseView) -> None:
        with self._lock:
            self._views[view.cluster] = view

    def view(self, cluster: str) -> CauseView | None:
        """The newest view of the cluster, whatever its age (None before the first poll)."""
        with self._lock:
            return self._views.get(cluster)

    def fresh(self, cluster: str) -> CauseView | None:
        """The newest view while it is younger than max_age_seconds."""
        view = self.view(cluster)
        if view is None or self.clock() - view.polled_at.timestamp() > self.max_age_seconds:
            return None
        return view

    def cause(self, cluster: str, kind: str, broker: str | None) -> str | None:
        """The brokers behind an incident of `kind` reported by `broker` (the leader, or
        "*" for a cluster-wide one), from a fresh view; None for other kinds or when the
        view shows nothing matching."""
        wanted = INCIDENT_KINDS.get(kind)
        if wanted is None:
            return None
        view = self.fresh(cluster)
        if view is None:
            return None
        leader = NO_LEADER if wanted == OFFLINE else str(broker)
        if wanted != OFFLINE and broker == CLUSTER_WIDE:
            return None
        return view.blame.get((leader, wanted))
