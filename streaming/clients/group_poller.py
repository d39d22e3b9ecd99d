"""One thread per watched cluster that reads its consumer groups every `interval_seconds`
(streaming/clients/groups.py), judges them (group_status.py) and hands the result on.

Why a thread of its own, beside the metadata poller's: a cluster with thousands of groups
costs its read seconds, which must delay neither the metadata polls nor another cluster.
Why never raise: a cluster that refuses or does not answer is reported (`on_poll` with
`up` false, the log once per change of reason) and read again next interval.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import AdminClient

from streaming.clients.group_status import GroupEvaluator, PartitionStatus, RetentionLoss
from streaming.clients.groups import GroupPoll, GroupSettings, read_groups
from streaming.common.background import BackgroundLoop
from streaming.logsetup import kafka_logger
from streaming.metadata.health import describe

LOG = logging.getLogger("kafka_health.clients")


@dataclass(frozen=True)
class GroupsRead:
    """One poll of one cluster: what it read and judged, or why it failed."""

    cluster: str
    at: float
    poll: GroupPoll | None = None
    statuses: tuple[PartitionStatus, ...] = ()
    losses: tuple[RetentionLoss, ...] = ()
    error: str | None = None

    @property
    def up(self) -> bool:
        return self.error is None


class GroupPoller(BackgroundLoop):
    """`start()` the thread, `stop()` returns once the read in progress has ended. The
    evaluator and the topics' cleanup policies belong to the thread."""

    def __init__(self, cluster: str, client_config: Mapping[str, Any], settings: GroupSettings,
                 interval_seconds: float, timeout_seconds: float,
                 on_poll: Callable[[GroupsRead], None],
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(f"groups-{cluster}")
        self.cluster = cluster
        self.settings = settings
        self.interval_seconds = interval_seconds
        self.timeout_seconds = timeout_seconds
        self._client_config = dict(client_config)
        self._on_poll = on_poll
        self._clock = clock
        self._evaluator = GroupEvaluator(cluster, window=settings.window_polls)
        self._policies: dict[str, str] = {}
        self._said: str | None = None

    @property
    def join_seconds(self) -> float:
        return 3 * self.timeout_seconds + 10  # a read makes three rounds of requests

    def poll_once(self, admin: Any) -> GroupsRead:
        now = self._clock()
        try:
            poll = read_groups(admin, self.settings, self.timeout_seconds, self._policies)
        except Exception as exc:  # noqa: BLE001 - reported, read again next interval
            return GroupsRead(self.cluster, now, error=describe(exc))
        statuses, losses = self._evaluator.evaluate(poll.offsets, poll.states, poll.compacted,
                                                    now)
        return GroupsRead(self.cluster, now, poll, tuple(statuses), tuple(losses))

    def _say(self, read: GroupsRead) -> None:
        """One log line per change: failing (with why), working again, partitions left out."""
        said = read.error or ("left out" if read.poll and read.poll.left_out else None)
        if said == self._said:
            return
        if read.error:
            LOG.warning("consumer groups of %s: cannot read them (%s); the group series say "
                        "kafka_health_consumer_groups_up 0 until a read succeeds",
                        self.cluster, read.error)
        elif read.poll and read.poll.left_out:
            LOG.warning("consumer groups of %s: %d group-partitions over "
                        "consumer_groups.max_partitions (%d) are not judged", self.cluster,
                        read.poll.left_out, self.settings.max_partitions)
        elif self._said is not None:
            LOG.info("consumer groups of %s: read again", self.cluster)
        self._said = said

    def _admin(self) -> Any:
        return AdminClient({**self._client_config, "logger": kafka_logger()})

    def _run(self) -> None:
        """Poll every interval with one client for the poller's life. Why not a new client
        after a failure, as the metadata poller makes: a read that timed out leaves its
        group-listing requests pending in the client, and librdkafka aborts the process
        when a client is destroyed while one of those completes (confluent-kafka-python
        issues 1640 and 2129); the client reconnects to any broker it knows by itself."""
        admin = self._admin()
        while not self._stop.is_set():
            started = time.monotonic()
            read = self.poll_once(admin)
            self._say(read)
            try:
                self._on_poll(read)
            except Exception:  # noqa: BLE001 - a failed write is retried with the next poll
                LOG.exception("consumer groups of %s: handling a poll failed", self.cluster)
            self._stop.wait(max(0.0, self.interval_seconds - (time.monotonic() - started)))
