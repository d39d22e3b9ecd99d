"""Consumer groups judged from their committed offsets over time: lag in records and in
time, a status per partition, and records lost to retention. Pure: the offsets come in,
polled by streaming/clients/groups.py.

The status, decided per partition over the last `window` polls (the manner of Burrow's
evaluation, on polled offsets instead of the offsets topic):
- `error`: the committed offset is below the log start offset: the records between were
  deleted before the group read them (loss to retention).
- `ok`: the lag was 0 at some poll of the window, or the committed offset moves and the
  lag did not grow at every step.
- `warning`: the committed offset moves, but the lag grew at every step of a full window:
  the group falls behind.
- `stalled`: the committed offset did not move over a full window while there was lag,
  and the group has members: consumers are there and do not progress.
- `stopped`: the same with no member in the group: nobody consumes.
A partition with fewer than two polls is `ok` unless it is `error`.

Lag in time: how long ago the oldest unread record was written, from the log end offsets
seen at earlier polls (the time the log end passed the committed offset, interpolated);
when the committed offset is older than every poll remembered, the age of the oldest poll
is a lower bound and is given as is.

Loss to retention: a committed offset C below the log start L means L - C records were
deleted unread; while C stays, L may grow, and the loss is the largest L - C seen. A group
with no committed offset, and a topic that is only compacted (its log start does not move
by retention), never counts a loss.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime

STATUSES = ("ok", "warning", "stalled", "stopped", "error")
# Group states (Kafka's) with members that should be consuming.
ACTIVE_STATES = frozenset({"STABLE", "PREPARING_REBALANCING", "COMPLETING_REBALANCING"})


@dataclass(frozen=True)
class PartitionOffsets:
    """One group's partition at one poll; `committed` None when the group committed none."""

    group: str
    topic: str
    partition: int
    committed: int | None
    log_start: int
    log_end: int


@dataclass(frozen=True)
class PartitionStatus:
    cluster: str
    group: str
    topic: str
    partition: int
    at: datetime
    committed: int
    log_start: int
    log_end: int
    lag_records: int
    lag_seconds: float | None
    status: str
    lost_to_retention: int  # the loss of the episode under way (0 when none)


@dataclass(frozen=True)
class RetentionLoss:
    """Records deleted before a group read them, on one partition, for one committed
    offset (an episode: it grows while the committed offset stays)."""

    cluster: str
    group: str
    topic: str
    partition: int
    committed: int
    log_start: int
    lost: int
    first_seen: datetime
    last_seen: datetime


@dataclass
class _History:
    polls: deque[tuple[float, int, int]] = field(default_factory=deque)  # at, committed, end
    ends: deque[tuple[float, int]] = field(default_factory=deque)
    loss: RetentionLoss | None = None


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class GroupEvaluator:
    """Owned by one poller thread: `evaluate` after each poll of one cluster."""

    def __init__(self, cluster: str, window: int = 10, end_history: int = 120) -> None:
        if window < 2:
            raise ValueError("window must be >= 2 polls")
        self.cluster = cluster
        self.window = window
        self.end_history = end_history
        self._history: dict[tuple[str, str, int], _History] = {}

    def evaluate(self, offsets: list[PartitionOffsets], group_states: dict[str, str],
                 compacted_topics: set[str], now: float
                 ) -> tuple[list[PartitionStatus], list[RetentionLoss]]:
        """Every committed partition's status now, and the loss episodes that grew."""
        statuses: list[PartitionStatus] = []
        losses: list[RetentionLoss] = []
        seen: set[tuple[str, str, int]] = set()
        for row in offsets:
            key = (row.group, row.topic, row.partition)
            seen.add(key)
            history = self._history.setdefault(key, _History())
            history.ends.append((now, row.log_end))
            while len(history.ends) > self.end_history:
                history.ends.popleft()
            if row.committed is None or row.committed < 0:
                continue  # no committed offset: nothing to judge
            history.polls.append((now, row.committed, row.log_end))
            while len(history.polls) > self.window:
                history.polls.popleft()
            lost = 0
            if row.committed < row.log_start and row.topic not in compacted_topics:
                lost = self._loss(history, row, now, losses)
            else:
                history.loss = None
            status = "error" if lost else self._status(history, group_states.get(row.group))
            statuses.append(PartitionStatus(
                self.cluster, row.group, row.topic, row.partition, _at(now), row.committed,
                row.log_start, row.log_end, max(0, row.log_end - row.committed),
                self._lag_seconds(history, row.committed, now), status, lost))
        for key in set(self._history) - seen:  # partitions or groups that are gone
            del self._history[key]
        return statuses, losses

    def _loss(self, history: _History, row: PartitionOffsets, now: float,
              grown: list[RetentionLoss]) -> int:
        assert row.committed is not None
        lost = row.log_start - row.committed
        episode = history.loss
        if episode is None or episode.committed != row.committed:
            episode = RetentionLoss(self.cluster, row.group, row.topic, row.partition,
                                    row.committed, row.log_start, lost, _at(now), _at(now))
        elif lost > episode.lost:
            episode = RetentionLoss(self.cluster, row.group, row.topic, row.partition,
                                    row.committed, row.log_start, lost, episode.first_seen,
                                    _at(now))
        else:
            return episode.lost
        history.loss = episode
        grown.append(episode)
        return episode.lost

    def _status(self, history: _History, state: str | None) -> str:
        polls = list(history.polls)
        lags = [max(0, end - committed) for _, committed, end in polls]
        if len(polls) < 2 or min(lags) == 0:
            return "ok"
        moved = polls[-1][1] != polls[0][1]
        full = len(polls) >= self.window
        if moved:
            growing = all(b > a for a, b in zip(lags, lags[1:], strict=False))
            return "warning" if full and growing else "ok"
        if not full:
            return "ok"
        return "stalled" if (state or "").upper() in ACTIVE_STATES else "stopped"

    @staticmethod
    def _lag_seconds(history: _History, committed: int, now: float) -> float | None:
        ends = list(history.ends)
        if not ends or ends[-1][1] <= committed:
            return 0.0
        for (t0, e0), (t1, e1) in zip(ends, ends[1:], strict=False):
            if e0 <= committed < e1:  # the log end passed the committed offset in between
                passed = t0 + (t1 - t0) * (committed + 1 - e0) / (e1 - e0)
                return max(0.0, now - min(passed, t1))
        return now - ends[0][0]  # older than every poll remembered: a lower bound
