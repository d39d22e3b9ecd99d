"""One thread per watched cluster that polls its Admin API every `interval_seconds`.

Why a thread per cluster: a cluster that does not answer costs its poll the request
timeout, and must not delay the others. Why never raise: the metadata view adds to the
metrics pipeline; a cluster that is down, unreachable or refuses the describes is
reported (`health`, and through `on_poll` on the exporter's gauges) and polled again.

Why a poll retries: a broker that is down or frozen is when the cause matters most, and
it is then that a client waits on it (a request sent to it, or to the broker it last
learnt was the controller) until the request times out. A poll that failed so is tried
again at once, within its deadline, with a new client that bootstraps from any broker,
the configured ones and every one the cluster listed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from streaming.logsetup import kafka_logger
from streaming.metadata.admin import fetch_snapshot
from streaming.metadata.health import (
    MISCONFIGURED,
    TIMEOUT,
    UNREACHABLE,
    PollerHealth,
    classify,
    describe,
    kafka_error,
    sharpening,
)
from streaming.metadata.model import BrokerInfo, ClusterSnapshot, with_down_brokers

LOG = logging.getLogger("kafka_health.metadata")
# Attempts per poll at most: each with a new client, so a broker that stopped answering
# holds up one of them, not the poll.
ATTEMPTS = 3
# What a new client may try again: a broker that did not answer; a refusal (credentials,
# ACLs) or settings the client rejects would fail the same way through any broker.
_RETRIED = (UNREACHABLE, TIMEOUT)


@dataclass(frozen=True)
class PollerSettings:
    """How often and how patiently to poll (the keys of the job's `metadata` section)."""

    interval_seconds: float = 30.0
    # Each Admin API request's timeout; a poll makes 3 or more, and retries one that timed
    # out within its deadline (`deadline_seconds`), so keep it well under the interval.
    timeout_seconds: float = 10.0
    # Topics per DescribeConfigs request.
    describe_configs_batch: int = 500

    def __post_init__(self) -> None:
        if not self.interval_seconds > 0 or not self.timeout_seconds > 0:
            raise ValueError("interval_seconds and timeout_seconds must be > 0")
        if self.describe_configs_batch < 1:
            raise ValueError("describe_configs_batch must be >= 1")

    @property
    def deadline_seconds(self) -> float:
        """How long one poll may take, its retries included: the interval, so the next
        poll starts on time; at least a request timeout per attempt, so each retry after
        a request timed out gets a whole timeout too. A frozen broker that is not yet
        fenced may be the one a new client asks again (KRaft names a random live broker
        for controller-bound requests), so the last attempt must not be starved."""
        return max(self.interval_seconds, ATTEMPTS * self.timeout_seconds)


@dataclass(frozen=True)
class PollResult:
    """One attempt: the snapshot when it succeeded (None when it failed), the previous
    successful snapshot (None on the first), and the health after it."""

    cluster: str
    polled_at: datetime
    snapshot: ClusterSnapshot | None
    previous: ClusterSnapshot | None
    health: PollerHealth


class MetadataPoller:
    """Polls one cluster; `start()` runs it on its own daemon thread, `poll_once()` runs
    one attempt on the caller's.

    `client_config` is a plain librdkafka dict (bootstrap.servers, security.protocol,
    sasl.*, ssl.*, secrets resolved): the same settings the metrics source uses. It is
    handed to the client and nowhere else: never logged, never part of any state. Its
    bootstrap servers are extended with every broker the cluster has listed.
    `on_poll` is called on the poller's thread after every attempt; what it raises is
    logged and swallowed.
    """

    def __init__(self, cluster: str, client_config: Mapping[str, Any],
                 settings: PollerSettings | None = None,
                 on_poll: Callable[[PollResult], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 admin_factory: Callable[[dict[str, Any]], Any] = AdminClient) -> None:
        self.cluster = cluster
        self.settings = settings or PollerSettings()
        self._client_config = dict(client_config)
        self._on_poll = on_poll
        self._clock = clock
        self._admin_factory = admin_factory
        self._admin: Any = None
        self._reported: list[KafkaError] = []  # client errors since the attempt began
        self._known: dict[int, BrokerInfo] = {}  # every broker seen, with its rack
        self._endpoints: dict[int, str] = {}  # broker -> host:port, as last listed
        self._lock = threading.Lock()
        self._snapshot: ClusterSnapshot | None = None
        self._health = PollerHealth(cluster)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- state ------------------------------------------------------------------------

    @property
    def snapshot(self) -> ClusterSnapshot | None:
        """The newest successful snapshot (None until the first success)."""
        with self._lock:
            return self._snapshot

    @property
    def health(self) -> PollerHealth:
        with self._lock:
            return self._health

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> MetadataPoller:
        """Poll now, then every interval, until `stop()`."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"kafka-health-metadata-{self.cluster}")
            self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the attempt in progress (it ends within its request timeouts)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout if timeout is not None
                        else self.settings.deadline_seconds + self.settings.timeout_seconds + 10)
        self._thread = None
        self._admin = None

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll_once()
            self._stop.wait(max(0.0, self.settings.interval_seconds
                                - (time.monotonic() - started)))

    # --- one attempt ------------------------------------------------------------------

    def _bootstrap(self) -> str:
        """The configured bootstrap servers, then every broker the cluster listed that they
        do not name: a client reaches the cluster while any broker it knows answers, even
        when the configured ones are the brokers that are down."""
        configured = [s.strip() for s in
                      str(self._client_config.get("bootstrap.servers", "")).split(",")
                      if s.strip()]
        learnt = [e for _, e in sorted(self._endpoints.items()) if e not in configured]
        return ",".join(configured + learnt)

    def _client(self) -> Any:
        if self._admin is None:
            timeout_ms = max(1000, int(self.settings.timeout_seconds * 1000))
            config = {
                # A broker that accepts the connection and never answers (frozen, a dead
                # host behind a live port) is given up within one request timeout, not
                # librdkafka's default 30 s, so the client tries another meanwhile.
                "socket.connection.setup.timeout.ms": timeout_ms,
                **self._client_config,
                "bootstrap.servers": self._bootstrap(),
                "logger": kafka_logger(), "error_cb": self._reported.append}
            self._admin = self._admin_factory(config)
        return self._admin

    def _drain_client_errors(self) -> None:
        """Serve the client's callbacks, so errors it saw (a refused connection, a failed
        SASL handshake) are known when classifying a request that merely timed out."""
        if self._admin is not None:
            try:
                self._admin.poll(0)
            except Exception:  # a client being torn down; the errors are a nicety
                LOG.debug("metadata %s: serving client callbacks failed", self.cluster,
                          exc_info=True)

    def _attempt(self, polled_at: datetime, deadline: float) -> ClusterSnapshot:
        """One try with the current client; raises what failed."""
        self._reported.clear()
        try:
            admin = self._client()
        except Exception as exc:
            raise _ClientError(exc) from exc
        return fetch_snapshot(admin, self.cluster, polled_at, self.settings.timeout_seconds,
                              self.settings.describe_configs_batch, deadline)

    def _fetch(self, polled_at: datetime) -> ClusterSnapshot:
        """A snapshot within the poll's deadline: a try that failed for want of an answer
        is made again with a new client while attempts and time are left. Raises what
        the last try failed with."""
        deadline = time.monotonic() + self.settings.deadline_seconds
        attempt = 1
        while True:
            try:
                return self._attempt(polled_at, deadline)
            except Exception as exc:
                self._drain_client_errors()
                if (isinstance(exc, _ClientError) or attempt >= ATTEMPTS
                        or self._stop.is_set() or time.monotonic() >= deadline
                        or classify(exc, self._reported) not in _RETRIED):
                    raise
                # A new client: the one that failed waits on the broker it chose.
                self._admin = None
                LOG.debug("metadata %s: attempt %d failed (%s), trying again through "
                          "another broker", self.cluster, attempt, describe(exc))
                attempt += 1

    def poll_once(self) -> PollResult:
        """One poll, retried within its deadline; never raises. Returns what it found
        (also passed to on_poll)."""
        polled_at = datetime.fromtimestamp(self._clock(), UTC)
        previous = self.snapshot
        try:
            fetched = self._fetch(polled_at)
        except Exception as exc:
            health = self._failed(exc, polled_at)
            result = PollResult(self.cluster, polled_at, None, previous, health)
        else:
            self._known.update(fetched.brokers)
            self._endpoints = {b.id: b.endpoint for b in fetched.brokers.values()
                               if b.endpoint is not None}
            snapshot = with_down_brokers(fetched, self._known)
            health = self._succeeded(polled_at)
            with self._lock:
                self._snapshot = snapshot
            result = PollResult(self.cluster, polled_at, snapshot, previous, health)
        if self._on_poll is not None:
            try:
                self._on_poll(result)
            except Exception:
                LOG.exception("metadata %s: handling the poll's result failed", self.cluster)
        return result

    def _succeeded(self, at: datetime) -> PollerHealth:
        with self._lock:
            before = self._health
            self._health = replace(before, up=True, error=None, error_code=None,
                                   last_attempt_at=at, last_success_at=at,
                                   consecutive_failures=0, polls=before.polls + 1)
        if before.up is False:
            LOG.info("metadata %s: the Admin API answers again after %d failed poll(s)",
                     self.cluster, before.consecutive_failures)
        return self._health

    def _failed(self, exc: Exception, at: datetime) -> PollerHealth:
        cause = exc.__cause__ if isinstance(exc, _ClientError) else exc
        assert cause is not None
        error = MISCONFIGURED if isinstance(exc, _ClientError) else classify(cause,
                                                                             self._reported)
        # Built again next time, whatever failed: a client keeps sending controller-bound
        # requests to the broker it last learnt was the controller, and while that broker
        # is down it waits (and reconnects in a tight loop) until its metadata refreshes,
        # minutes later. A new client learns a live one from its first Metadata response.
        self._admin = None
        sharper = None if isinstance(exc, _ClientError) else sharpening(cause, self._reported)
        kafka = sharper or kafka_error(cause)
        with self._lock:
            before = self._health
            self._health = replace(before, up=False, error=error,
                                   error_code=None if kafka is None else kafka.name(),
                                   last_attempt_at=at,
                                   consecutive_failures=before.consecutive_failures + 1,
                                   polls=before.polls + 1, failures=before.failures + 1)
        # Once per change of state, not every 30 s: the gauges carry the ongoing state.
        log = LOG.warning if before.up is not False or before.error != error else LOG.debug
        account = describe(cause, client_settings=isinstance(exc, _ClientError))
        if sharper is not None:
            account = f"{describe(sharper)} (the request: {account})"
        log("metadata %s: poll failed (%s): %s", self.cluster, error, account)
        return self._health


class _ClientError(Exception):
    """The AdminClient could not be built (its settings): the poll is `misconfigured`."""
