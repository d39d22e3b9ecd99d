"""The durability probe of one watched cluster: acks=all writes through every broker's
partitions, read back, on one thread.

Why one thread: the producer's delivery reports are served by the thread that polls it,
and the consumer is read by the thread that consumes; with both on the probe's thread, the
ledger (streaming/clients/probe_ledger.py) has one owner and needs no lock. `on_close` is
called on that thread with what each `close` returned, every second, also when nothing
closed (the probe's health goes with it).

Why these producer settings: idempotent with acks=all, as a producer that must not lose
or duplicate writes is configured; a delivery timeout of `timeout_seconds` (librdkafka's
default is 5 minutes) so a write that cannot be made durable is reported within seconds;
and few retries (librdkafka's default is unbounded), so the report carries the broker's
own error (NOT_ENOUGH_REPLICAS) rather than the delivery timeout that ends the retrying.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.clients.probe_ledger import NO_LEADER, Loss, ProbeLedger, ProbeWindow
from streaming.clients.probe_topic import DEFAULT_TOPIC, ProbeTopic, ensure_probe_topic
from streaming.common.background import BackgroundLoop
from streaming.kafka_client import consumer_config
from streaming.logsetup import kafka_logger

LOG = logging.getLogger("kafka_health.clients")
# Retries of a failed write: enough for a leader change, few enough that the broker's error
# is reported before the delivery timeout.
RETRIES = 2
# Seconds before a failed check of the probe topic is made again.
RECHECK_SECONDS = 5.0
OnClose = Callable[[list[ProbeWindow], list[Loss]], None]


@dataclass(frozen=True)
class ProbeSettings:
    """How the probe writes (the keys of the job's `probe` section)."""

    topic: str = DEFAULT_TOPIC
    # Seconds between two records on a partition: each broker's partitions get one write
    # per interval.
    interval_seconds: float = 5.0
    window_seconds: float = 60.0
    # A write not acked within it fails (librdkafka's delivery timeout).
    timeout_seconds: float = 10.0
    replication_factor: int = 3
    retention_ms: int = 3_600_000
    # Seconds between checks that every broker leads a partition of the probe topic.
    topic_check_seconds: float = 60.0

    def __post_init__(self) -> None:
        if min(self.interval_seconds, self.window_seconds, self.timeout_seconds,
               self.topic_check_seconds) <= 0:
            raise ValueError("the probe's intervals, window and timeout must be > 0")
        if self.replication_factor < 1:
            raise ValueError("probe.replication_factor must be >= 1")


def _message(run: str, sequence: int, sent_at: float) -> bytes:
    return json.dumps({"run": run, "seq": sequence, "sent_ms": int(sent_at * 1000)},
                      separators=(",", ":")).encode()


def _parse(value: bytes | None, run: str) -> int | None:
    """The sequence of a record this run wrote; None for anything else in the topic."""
    try:
        body = json.loads(value or b"")
        return int(body["seq"]) if body.get("run") == run else None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


class DurabilityProbe(BackgroundLoop):
    """`start()` the probe thread, `stop()` to end it (the pending writes are flushed
    within the timeout). `ledger` and the clients belong to the probe thread."""

    def __init__(self, cluster: str, client_config: Mapping[str, Any],
                 settings: ProbeSettings | None = None, on_close: OnClose | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(f"probe-{cluster}")
        self.cluster = cluster
        self.settings = settings or ProbeSettings()
        self._client_config = dict(client_config)
        self.on_close = on_close
        self._clock = clock
        self.run_id = uuid.uuid4().hex[:12]
        self.ledger = ProbeLedger(cluster, self.settings.topic, self.settings.window_seconds,
                                  self.settings.timeout_seconds + 2 * self.settings.interval_seconds)
        self._sequence: dict[int, int] = {}
        self._topic: ProbeTopic | None = None
        self._leaders: dict[int, int] = {}
        self.error: str | None = None  # the last setup error, for the status and logs
        self._fatal: KafkaError | None = None  # the producer's fatal error, once it had one

    @property
    def up(self) -> bool:
        """Whether the probe writes and reads now: its topic checked, no setup error since
        (on the probe thread, as the state it reads)."""
        return self._topic is not None and self.error is None

    # --- clients ------------------------------------------------------------------------

    def _common(self) -> dict[str, Any]:
        return {**self._client_config, "logger": kafka_logger()}

    def _producer(self) -> Producer:
        timeout_ms = int(self.settings.timeout_seconds * 1000)
        self._fatal = None
        return Producer({**self._common(), "enable.idempotence": True, "acks": "all",
                         "linger.ms": 0, "delivery.timeout.ms": timeout_ms,
                         "request.timeout.ms": max(1000, timeout_ms // 2),
                         "retries": RETRIES, "retry.backoff.ms": 200,
                         "error_cb": self._client_error})

    def _client_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = error

    def _replaced(self, producer: Producer) -> Producer:
        """A new producer for one whose idempotence state is broken for good: after an
        unclean election the new leader does not know the producer's sequence numbers
        (OUT_OF_ORDER_SEQUENCE_NUMBER), a fatal error for librdkafka's idempotent
        producer. The writes it still held fail (their reports are served first)."""
        LOG.warning("probe %s: the idempotent producer failed for good (%s); its pending "
                    "writes fail and a new producer takes over", self.cluster,
                    self._fatal.str() if self._fatal else "fatal error")
        with contextlib.suppress(KafkaException):  # the fatal error, raised once more
            producer.purge()
            producer.poll(0)
            producer.flush(0)
        return self._producer()

    def _consumer(self) -> Consumer:
        # No group membership: partitions are assigned, nothing is committed.
        return Consumer(consumer_config("probe", self._common()))

    # --- the thread ---------------------------------------------------------------------

    @property
    def join_seconds(self) -> float:
        return self.settings.timeout_seconds + 30  # the pending writes' flush, the close

    def _run(self) -> None:
        """The probe's loop. An error nothing else handles is said with its traceback and
        the probe starts over with new clients after a pause: a probe that died would be a
        blind spot that looks like a quiet cluster (its up series says 0 meanwhile)."""
        while not self._stop.is_set():
            admin = AdminClient(self._common())
            producer = self._producer()
            consumer = self._consumer()
            try:
                self._loop(admin, producer, consumer)
            except Exception as exc:
                LOG.exception("probe %s: unexpected error; starting over in %g s",
                              self.cluster, RECHECK_SECONDS)
                self.error = f"unexpected error: {type(exc).__name__}"
                self._topic = None  # assigned anew to the new consumer
                self._close(self._clock())
                self._stop.wait(RECHECK_SECONDS)
            finally:
                with contextlib.suppress(KafkaException):
                    producer.flush(self.settings.timeout_seconds if self._stop.is_set() else 0)
                consumer.close()

    def _loop(self, admin: Any, producer: Producer, consumer: Consumer) -> None:
        next_check = next_send = next_close = 0.0
        while not self._stop.is_set():
            now = self._clock()
            if now >= next_check:
                checked = self._check_topic(admin, consumer)
                next_check = now + (self.settings.topic_check_seconds if checked
                                    else RECHECK_SECONDS)
            if self._topic is not None and now >= next_send:
                self._refresh_leaders(producer)
                self._send_round(producer, now)
                next_send = now + self.settings.interval_seconds
            try:
                producer.poll(0)
            except KafkaException as exc:  # the client raises its fatal error from poll too
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is None or not error.fatal():
                    raise
                self._fatal = error
            if self._fatal is not None:
                producer = self._replaced(producer)
            self._read(consumer)
            if now >= next_close:
                self._close(self._clock())
                next_close = now + 1.0

    def _check_topic(self, admin: Any, consumer: Consumer) -> bool:
        """Ensure the topic; assign partitions new to the consumer. False when it failed
        (said once per distinct error, tried again in a few seconds)."""
        try:
            topic = ensure_probe_topic(admin, self.settings.topic,
                                       self.settings.replication_factor,
                                       self.settings.retention_ms,
                                       self.settings.timeout_seconds)
            new = sorted(set(topic.preferred) - set(self._topic.preferred if self._topic
                                                    else {}))
            if new:
                consumer.incremental_assign([TopicPartition(self.settings.topic, p, offset)
                                             for p, offset in self._read_from(consumer, new)])
        except Exception as exc:
            if self.error != str(exc):
                LOG.warning("probe %s: the probe topic %s could not be checked: %s",
                            self.cluster, self.settings.topic, exc)
            self.error = str(exc)
            return False
        self.error = None
        self._topic = topic
        self._leaders = dict(topic.leaders)
        return True

    def _read_from(self, consumer: Consumer, partitions: list[int]) -> list[tuple[int, int]]:
        """Where to read each new partition from: its log end now, before this run writes
        to it (records of earlier runs are not ours). Resolved here, not left to the
        consumer's first fetch, which would come after the first writes and skip them."""
        starts = []
        for partition in partitions:
            _, end = consumer.get_watermark_offsets(
                TopicPartition(self.settings.topic, partition),
                timeout=self.settings.timeout_seconds)
            starts.append((partition, end))
        return starts

    def _refresh_leaders(self, producer: Producer) -> None:
        """The leaders the producer's metadata names now, to attribute each write to."""
        try:
            meta = producer.list_topics(self.settings.topic,
                                        timeout=min(1.0, self.settings.interval_seconds))
        except Exception:  # keep the last known leaders
            return
        found = meta.topics.get(self.settings.topic)
        if found is not None and found.error is None:
            self._leaders = {p: part.leader for p, part in found.partitions.items()}

    def _send_round(self, producer: Producer, now: float) -> None:
        assert self._topic is not None
        for partition in sorted(self._topic.preferred):
            sequence = self._sequence.get(partition, 0)
            self._sequence[partition] = sequence + 1
            leader = self._leaders.get(partition, -1)
            self.ledger.sent(partition, sequence, str(leader) if leader >= 0 else NO_LEADER,
                             now)
            try:
                producer.produce(self.settings.topic, _message(self.run_id, sequence, now),
                                 partition=partition,
                                 on_delivery=self._delivered(partition, sequence))
            except BufferError:
                self.ledger.failed(partition, sequence, "_QUEUE_FULL", now)
            except Exception as exc:  # a record the client refuses outright
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) \
                    else None
                self.ledger.failed(partition, sequence,
                                   error.name() if error else type(exc).__name__, now)

    def _delivered(self, partition: int, sequence: int) -> Callable[[Any, Any], None]:
        def report(err: KafkaError | None, msg: Any) -> None:
            self.delivered(partition, sequence, None if err is None else err.name(),
                           msg.offset() if err is None else None)
        return report

    def delivered(self, partition: int, sequence: int, error: str | None,
                  offset: int | None) -> None:
        """A write's delivery report (on the probe thread): acked at `offset` when `error`
        is None. A subclass may observe the reports here."""
        at = self._clock()
        if error is None and offset is not None:
            self.ledger.acked(partition, sequence, offset, at)
        else:
            self.ledger.failed(partition, sequence, error or "_UNKNOWN", at)

    def _read(self, consumer: Consumer) -> None:
        for msg in consumer.consume(num_messages=500, timeout=0.05):
            if msg.error() is not None:
                continue  # partition EOF and transient fetch errors: the client goes on
            sequence = _parse(msg.value(), self.run_id)
            if sequence is not None:
                self.ledger.read(msg.partition(), sequence, msg.offset(), self._clock())

    def _close(self, now: float) -> None:
        rows, losses = self.ledger.close(now)
        for loss in losses:
            LOG.error("probe %s: an acked record was lost: partition %d offset %d "
                      "(sequence %d, acked by broker %s at %s)", self.cluster, loss.partition,
                      loss.offset, loss.sequence, loss.broker, loss.acked_at.isoformat())
        if self.on_close is not None:  # also with nothing closed: the probe's health
            try:
                self.on_close(rows, losses)
            except Exception:
                LOG.exception("probe %s: handling its windows failed", self.cluster)
