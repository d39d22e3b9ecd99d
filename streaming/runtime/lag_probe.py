"""The source-lag probe: how far the processed offsets are behind the topics' ends."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from streaming.config import Config
from streaming.kafka_client import SOURCE_NEEDS, consumer_config, security_advice
from streaming.logsetup import kafka_logger
from streaming.redact import redact_text

LOG = logging.getLogger("kafka_health.lag")


class LagProbe:
    """Records between the processed end offsets and the topics' high watermarks, and why
    the metrics topics cannot be read when they cannot (`error`)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.consumer: Any = None
        # The error class (streaming.metadata.health: unreachable, unauthorized, ...) of
        # the last probe of the broker, and of the last look at the subscribed topics.
        self._broker_error: str | None = None
        self._topics_error: str | None = None
        self._reported: list[Any] = []  # the client's errors (error_cb) since the last probe

    def __call__(self, end: dict[str, dict[str, int]]) -> int | None:
        from confluent_kafka import TopicPartition

        try:
            if self.consumer is None:
                self._client()
            elif not end:  # nothing processed yet: only whether the broker answers
                self.consumer.list_topics(timeout=5)
            total = 0
            for topic, parts in end.items():
                for partition, offset in parts.items():
                    _, high = self.consumer.get_watermark_offsets(
                        TopicPartition(topic, int(partition)), timeout=5, cached=False)
                    total += max(0, high - offset)
            self._answered()
            return total
        except Exception as err:  # lag is a diagnostic, never a reason to stop the job
            self._failed(err, "source lag unavailable")
            # A fresh client next time: librdkafka keeps stale metadata (a topic that was
            # missing for a while stays "unknown") long after the broker is healthy again.
            self.close()
            return None

    @property
    def error(self) -> str | None:
        """Why the metrics topics cannot be read, as an error class; None when they can."""
        return self._broker_error or self._topics_error

    def _failed(self, err: Exception, what: str, topics: bool = False) -> None:
        """Classify the failure (a refused login or handshake the client reported says more
        than the request's timeout), and say it with what to fix once per change of class."""
        from streaming.metadata.health import classify, kafka_error, sharpening

        if self.consumer is not None:
            with contextlib.suppress(Exception):
                self.consumer.poll(0)  # serves the error callback
        error = classify(err, self._reported)
        cause = sharpening(err, self._reported) or kafka_error(err)
        self._reported.clear()
        advice = cause and security_advice(cause.name(), cause.str(), "source", SOURCE_NEEDS)
        said = f"{cause.name()}: {redact_text(cause.str())}" if cause else str(err)
        before = self._topics_error if topics else self._broker_error
        log = LOG.warning if error != before else LOG.debug
        log("%s (%s): %s%s", what, error, said, f". To fix: {advice}" if advice else "")
        if topics:
            self._topics_error = error
        else:
            self._broker_error = error

    def _answered(self, topics: bool = False) -> None:
        before = self._topics_error if topics else self._broker_error
        if before is not None:
            LOG.warning("the metrics topics' broker %s again (it did not: %s)",
                        "lists them" if topics else "answers", before)
        if topics:
            self._topics_error = None
        else:
            self._broker_error = None

    def _client(self) -> Any:
        from confluent_kafka import Consumer

        if self.consumer is None:
            # its librdkafka lines through the job's logging: while the broker is down
            # they repeat many times a second, and this probe reports the outage itself
            self.consumer = Consumer(consumer_config("lag", {
                **self.config.source.client_config(), "logger": kafka_logger(),
                "error_cb": self._reported.append}))
            # Watermark queries on a fresh client fail with "unknown partition" until it
            # has metadata for the topic: load it first.
            self.consumer.list_topics(timeout=5)
        return self.consumer

    def readable_partitions(self) -> int | None:
        """Partitions of the subscription (source.topics, or source.subscribe_pattern
        when set) that the broker lists without an error; None when it does not answer.
        0 is a query that reads nothing with the broker up: a misspelt or missing topic,
        or one the broker refuses (an ACL)."""
        from streaming.source.offsets import subscribed_partitions

        source = self.config.source
        # the source's own subscription: the pattern when set, else the topic names
        names = [] if source.subscribe_pattern else [topic.name for topic in source.topics]
        try:
            metadata = self._client().list_topics(timeout=5)
            readable = len(subscribed_partitions(metadata, names, source.subscribe_pattern)[0])
            if readable == 0 and names:
                self._refused(names)
            elif readable:
                self._answered(topics=True)
        except Exception as err:  # as in __call__: a diagnostic, never a reason to stop
            self._failed(err, "source partitions unavailable")
            self.close()
            return None
        return readable

    def _refused(self, names: list[str]) -> None:
        """Why no named topic is readable: a broker lists no topic its ACLs hide when asked
        for all of them, so each is asked for by name, which an ACL answers with
        TOPIC_AUTHORIZATION_FAILED (and a missing topic with UNKNOWN_TOPIC_OR_PART)."""
        from confluent_kafka import KafkaError, KafkaException

        for name in names:
            topic = self.consumer.list_topics(name, timeout=5).topics.get(name)
            if topic is not None and topic.error is not None \
                    and topic.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                self._failed(KafkaException(topic.error), f"source topic {name} refused",
                             topics=True)
                return
        self._answered(topics=True)

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
