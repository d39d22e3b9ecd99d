"""The durability probe's book of writes: what was sent, acked, failed and read back, and
the per-window figures and losses that follow from it. Pure: no clients, no clock.

How a loss is found, two ways:
- An offset holds another record: an acked record's offset, learnt from its delivery
  report, is later acked for or read with a record sent after it. A log's offsets are
  never reused, so the log was truncated there (an unclean election) and every acked
  record from that offset on is gone, whether or not it had been read before.
- A later record is read and an earlier one is not: the probe's producer is idempotent, so
  within a partition the records keep their send order, and a consumer reads them in that
  order. A record not read yet with nothing read after it is only late, never lost.

Attribution: a write counts for the broker that led its partition when it was sent (the
broker that acked it, or failed to), in the window of its send. A loss and a duplicate
count when they are found (a write is judged lost only once something after it is read),
for the broker that acked the record, in the window open then: window rows are final once
written, and the loss rows name each record.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

# A write's leader when the producer knew none (partition without a leader, no metadata).
NO_LEADER = "none"
# Why a write failed, as a bounded label: librdkafka's error names folded into classes.
ERROR_CLASSES = {
    "NOT_ENOUGH_REPLICAS": "not_enough_replicas",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": "not_enough_replicas",
    "_MSG_TIMED_OUT": "timeout",
    "REQUEST_TIMED_OUT": "timeout",
    "_TIMED_OUT": "timeout",
    "NOT_LEADER_OR_FOLLOWER": "not_leader",
    "NOT_LEADER_FOR_PARTITION": "not_leader",
    "LEADER_NOT_AVAILABLE": "not_leader",
    "_TRANSPORT": "unreachable",
    "_ALL_BROKERS_DOWN": "unreachable",
    "_QUEUE_FULL": "queue_full",
    "TOPIC_AUTHORIZATION_FAILED": "unauthorized",
    "CLUSTER_AUTHORIZATION_FAILED": "unauthorized",
    "_UNKNOWN_PARTITION": "unknown_partition",
    # the producer's sequence numbers unknown to the leader: after an unclean election
    "OUT_OF_ORDER_SEQUENCE_NUMBER": "out_of_order_sequence",
    "_FATAL": "out_of_order_sequence",
    "UNKNOWN_PRODUCER_ID": "out_of_order_sequence",
    # writes a broken producer still held, failed when it was replaced
    "_PURGE_QUEUE": "producer_reset",
    "_PURGE_INFLIGHT": "producer_reset",
    "UNKNOWN_TOPIC_OR_PART": "unknown_partition",
}
OTHER_ERROR = "other"
# How long a record acked and not read yet is remembered: beyond it, nothing read after it
# came, so it can no longer be judged (it is counted as `undecided`, never as lost).
UNDECIDED_AFTER_SECONDS = 600.0


def error_class(name: str) -> str:
    """The bounded class of a librdkafka error name (KafkaError.name())."""
    return ERROR_CLASSES.get(name, OTHER_ERROR)


@dataclass
class _Write:
    partition: int
    sequence: int
    leader: str
    sent_at: float
    window: float
    acked_at: float | None = None
    offset: int | None = None
    read: bool = False


@dataclass
class ProbeWindow:
    """One broker's writes in one window (the `probe_windows` table's row)."""

    cluster: str
    broker: str
    window_start: datetime
    window_seconds: float
    attempted: int = 0
    acked: int = 0
    failed: int = 0
    failed_by_class: dict[str, int] = field(default_factory=dict)
    ack_p50_ms: float | None = None
    ack_p99_ms: float | None = None
    read_p99_ms: float | None = None
    lost: int = 0
    duplicates: int = 0
    undecided: int = 0

    @property
    def availability(self) -> float | None:
        """Acked over the writes that ended (acked or failed); None with none."""
        ended = self.acked + self.failed
        return None if ended == 0 else self.acked / ended


@dataclass(frozen=True)
class Loss:
    """An acked record the probe could not read back (the `probe_losses` table's row)."""

    cluster: str
    broker: str
    topic: str
    partition: int
    offset: int
    sequence: int
    sent_at: datetime
    acked_at: datetime
    found_at: datetime
    found_after_offset: int


@dataclass
class _Tally:
    attempted: int = 0
    acked: int = 0
    failed_by_class: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    ack_ms: list[float] = field(default_factory=list)
    read_ms: list[float] = field(default_factory=list)
    lost: int = 0
    duplicates: int = 0
    undecided: int = 0


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile: a value that was measured, not an interpolation."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class ProbeLedger:
    """The probe thread's state (it alone calls every method): `sent`, `acked`, `failed` and
    `read` as events happen, `close(now)` for the windows that ended and the losses found."""

    def __init__(self, cluster: str, topic: str, window_seconds: float,
                 settle_seconds: float) -> None:
        if window_seconds <= 0 or settle_seconds < 0:
            raise ValueError("window_seconds must be > 0 and settle_seconds >= 0")
        self.cluster = cluster
        self.topic = topic
        self.window_seconds = window_seconds
        # A window is closed this long after its end: every write sent in it has had its
        # delivery report (the producer's delivery timeout) and its read-back.
        self.settle_seconds = settle_seconds
        self._writes: dict[tuple[int, int], _Write] = {}
        self._newest_read: dict[int, int] = {}  # partition -> highest sequence read
        # partition -> offset -> the acked write there, kept UNDECIDED_AFTER_SECONDS: what a
        # truncation found later took away
        self._log: dict[int, dict[int, _Write]] = defaultdict(dict)
        self._read_offsets: dict[tuple[int, int], int] = {}  # (partition, seq) -> offset
        self._tallies: dict[tuple[str, float], _Tally] = defaultdict(_Tally)
        self._losses: list[Loss] = []
        self._closed_before = -math.inf

    def _window(self, at: float) -> float:
        return math.floor(at / self.window_seconds) * self.window_seconds

    def _tally(self, broker: str, at: float) -> _Tally:
        """The tally of the window a finding at `at` counts in: the open window, or the
        first one not closed yet (a finding is never added to a window already written)."""
        window = max(self._window(at), self._closed_before)
        return self._tallies[(broker, window)]

    # --- events -----------------------------------------------------------------------

    def sent(self, partition: int, sequence: int, leader: str, at: float) -> None:
        window = max(self._window(at), self._closed_before)
        self._writes[(partition, sequence)] = _Write(partition, sequence, leader, at, window)
        self._tallies[(leader, window)].attempted += 1

    def acked(self, partition: int, sequence: int, offset: int, at: float) -> None:
        write = self._writes.get((partition, sequence))
        if write is None or write.acked_at is not None:
            return
        write.acked_at, write.offset = at, offset
        self._check_offset(partition, offset, sequence, at)
        self._log[partition][offset] = write
        if write.window >= self._closed_before:
            tally = self._tallies[(write.leader, write.window)]
            tally.acked += 1
            tally.ack_ms.append((at - write.sent_at) * 1000)
        if write.read:
            self._forget(write)
        elif self._newest_read.get(partition, -1) > sequence:
            # the consumer already read past it: the delivery report came after the read
            # of a later record, and this one was not among what was read
            self._lose(write, at, self._read_offsets.get(
                (partition, self._newest_read[partition]), offset))

    def failed(self, partition: int, sequence: int, error_name: str, at: float) -> None:
        write = self._writes.pop((partition, sequence), None)
        if write is None:
            return
        if write.window >= self._closed_before:
            self._tallies[(write.leader, write.window)].failed_by_class[
                error_class(error_name)] += 1

    def read(self, partition: int, sequence: int, offset: int, at: float) -> None:
        """A record of this run read back at `offset` (records of other runs are not
        passed here)."""
        seen = self._read_offsets.get((partition, sequence))
        if seen is not None:
            if seen != offset:  # the same write twice in the log
                write = self._writes.get((partition, sequence))
                self._tally(write.leader if write else NO_LEADER, at).duplicates += 1
            return
        self._read_offsets[(partition, sequence)] = offset
        self._check_offset(partition, offset, sequence, at)
        write = self._writes.get((partition, sequence))
        if write is not None:
            write.read = True
            if write.window >= self._closed_before:
                self._tallies[(write.leader, write.window)].read_ms.append(
                    (at - write.sent_at) * 1000)
            if write.acked_at is not None:
                self._forget(write)
        if sequence > self._newest_read.get(partition, -1):
            self._newest_read[partition] = sequence
            for earlier in [w for w in self._writes.values()
                            if w.partition == partition and w.sequence < sequence
                            and w.acked_at is not None and not w.read]:
                self._lose(earlier, at, offset)

    # --- findings ---------------------------------------------------------------------

    def _check_offset(self, partition: int, offset: int, sequence: int, at: float) -> None:
        """`sequence` is at `offset` now: an earlier write acked at that offset or after
        it was truncated away."""
        held = self._log[partition]
        if offset in held and held[offset].sequence != sequence:
            for gone in sorted(o for o, w in held.items()
                               if o >= offset and w.sequence < sequence):
                self._lose(held.pop(gone), at, offset)

    def _forget(self, write: _Write) -> None:
        self._writes.pop((write.partition, write.sequence), None)

    def _lose(self, write: _Write, at: float, after_offset: int) -> None:
        assert write.acked_at is not None and write.offset is not None
        self._forget(write)
        self._log[write.partition].pop(write.offset, None)
        self._tally(write.leader, at).lost += 1
        self._losses.append(Loss(self.cluster, write.leader, self.topic, write.partition,
                                 write.offset, write.sequence, _at(write.sent_at),
                                 _at(write.acked_at), _at(at), after_offset))

    def close(self, now: float) -> tuple[list[ProbeWindow], list[Loss]]:
        """The windows settled by `now` (each returned once) and the losses found since
        the last call."""
        closing = self._window(now - self.settle_seconds)  # windows before it are settled
        for write in [w for w in self._writes.values()
                      if w.acked_at is not None and now - w.acked_at > UNDECIDED_AFTER_SECONDS]:
            self._forget(write)
            self._tally(write.leader, now).undecided += 1
        for held in self._log.values():
            for offset in [o for o, w in held.items()
                           if w.acked_at is not None
                           and now - w.acked_at > UNDECIDED_AFTER_SECONDS]:
                del held[offset]
        rows: list[ProbeWindow] = []
        for key in sorted(k for k in self._tallies if k[1] < closing):
            broker, window = key
            tally = self._tallies.pop(key)
            failed = sum(tally.failed_by_class.values())
            rows.append(ProbeWindow(
                self.cluster, broker, _at(window), self.window_seconds, tally.attempted,
                tally.acked, failed, dict(tally.failed_by_class),
                _percentile(tally.ack_ms, 0.5), _percentile(tally.ack_ms, 0.99),
                _percentile(tally.read_ms, 0.99), tally.lost, tally.duplicates,
                tally.undecided))
        self._closed_before = max(self._closed_before, closing)
        # reads of sequences long past are kept only while a duplicate of them could come
        horizon = {p: s - 10_000 for p, s in self._newest_read.items()}
        for key in [k for k in self._read_offsets if k[1] < horizon.get(k[0], -1)]:
            del self._read_offsets[key]
        losses, self._losses = self._losses, []
        return rows, losses

    @property
    def pending(self) -> int:
        """Writes not yet settled (sent and not failed, or acked and not read)."""
        return len(self._writes)
