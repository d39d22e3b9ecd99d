"""The source-lag probe: how far the processed offsets are behind the topics' ends."""

from __future__ import annotations

import logging
from typing import Any

from streaming.config import Config
from streaming.logsetup import kafka_logger

LOG = logging.getLogger("kafka_health.lag")


class LagProbe:
    """Records between the processed end offsets and the topics' high watermarks."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.consumer: Any = None

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
            return total
        except Exception as err:  # lag is a diagnostic, never a reason to stop the job
            LOG.warning("source lag unavailable: %s", err)
            # A fresh client next time: librdkafka keeps stale metadata (a topic that was
            # missing for a while stays "unknown") long after the broker is healthy again.
            self.close()
            return None

    def _client(self) -> Any:
        from confluent_kafka import Consumer

        if self.consumer is None:
            conf = self.config.source.client_config()
            # its librdkafka lines through the job's logging: while the broker is down
            # they repeat many times a second, and this probe reports the outage itself
            conf.update({"group.id": "kafka-health-lag", "enable.auto.commit": False,
                         "logger": kafka_logger()})
            self.consumer = Consumer(conf)
            # Watermark queries on a fresh client fail with "unknown partition" until it
            # has metadata for the topic: load it first.
            self.consumer.list_topics(timeout=5)
        return self.consumer

    def readable_partitions(self) -> int | None:
        """Partitions of the subscription (source.topics, or source.subscribe_pattern
        when set) that the broker lists without an error; None when it does not answer.
        0 is a query that reads nothing with the broker up: a misspelt or missing topic,
        or one the broker refuses (an ACL)."""
        from streaming.source.kafka_python import subscribed_partitions

        source = self.config.source
        # the source's own subscription: the pattern when set, else the topic names
        names = [] if source.subscribe_pattern else [topic.name for topic in source.topics]
        try:
            metadata = self._client().list_topics(timeout=5)
        except Exception as err:  # as in __call__: a diagnostic, never a reason to stop
            LOG.warning("source partitions unavailable: %s", err)
            self.close()
            return None
        return len(subscribed_partitions(metadata, names, source.subscribe_pattern)[0])

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
