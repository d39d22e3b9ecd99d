"""Offset reading, on the driver: the subscription's partitions and their watermarks, the
topics' ids, and the end offsets of the newest batch in Spark's offset log.

`KafkaOffsetReader` holds the metadata clients (a consumer and an AdminClient of the
source's settings) and is used by the thread Spark plans the query's batches on, the only
one that calls the stream's methods on the driver. The clients are made on first use and
dropped whenever a request fails, so that the next trigger bootstraps fresh ones; they
never travel to the executors (the stream pickles none of this).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections import deque
from typing import Any

from streaming.common.repeated_warning import RepeatedWarning
from streaming.kafka_client import (
    SOURCE_NEEDS,
    consumer_config,
    security_advice,
    source_client_settings,
)
from streaming.locations import is_local, join, numbered_files, read_text
from streaming.logsetup import spark_process_kafka_settings
from streaming.redact import redact_text, redact_url
from streaming.source.errors import LEADER_MOVING, UNREACHABLE
from streaming.source.options import SourceOptions

LOG = logging.getLogger("kafka_health.source")
# A topic id the broker does not know (a broker before Kafka 2.8): nothing to compare.
NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
# How often a subscription that matches no readable partition is said again.
NOTHING_TO_READ_EVERY = 600.0
# How long a partition without a leader (an election, a topic just created) is asked again
# for its offsets before that counts as an error: KRaft elects a new leader in well under it.
LEADER_MOVE_SECONDS = 10.0


def subscribed_partitions(metadata: Any, topics: list[str] | tuple[str, ...],
                          pattern: str | None) -> tuple[list[tuple[str, int]], list[str]]:
    """The (topic, partition) pairs of a subscription (topic names, or a pattern that
    matches whole names) in a client's cluster metadata, and the subscribed topics the
    broker listed with an error instead (an ACL: "name (error)")."""
    wanted = set(topics)
    regex = re.compile(pattern) if pattern else None
    out: list[tuple[str, int]] = []
    refused: list[str] = []
    for name, topic in metadata.topics.items():
        if name in wanted or (regex is not None and regex.fullmatch(name)):
            if topic.error is not None:
                refused.append(f"{name} ({topic.error.str()})")
                continue
            out.extend((name, p) for p in topic.partitions)
    return sorted(out), refused


def last_checkpointed_offsets(checkpoint: str | None,
                              storage_options: dict[str, str] | None = None
                              ) -> dict[str, dict[str, int]] | None:
    """End offsets of the newest batch in Spark's offset log, for the cap after a restart.

    The checkpoint may be a local path or a URL (s3a://, abfss://, hdfs://), read through
    pyarrow: an S3 one with `storage_options` when given (delta-rs' names), else with the
    store's defaults. A remote log that cannot be read is a warning (the first batch's cap
    then counts from the start offsets); a local one that cannot be read is an error."""
    if not checkpoint:
        return None
    log = join(checkpoint, "offsets")
    try:
        for batch in reversed(numbered_files(log, storage_options)):
            lines = (read_text(join(log, str(batch)), storage_options) or "").splitlines()
            if len(lines) >= 3 and lines[2].strip().startswith("{"):
                return json.loads(lines[2])
    except OSError as err:
        if is_local(checkpoint):
            raise
        LOG.warning("cannot read the offset log of checkpoint %s (%s); the first batch's "
                    "maxOffsetsPerTrigger cap counts from the start offsets",
                    redact_url(checkpoint), err)
    return None


class KafkaOffsetReader:
    """The subscription's partitions, offsets and topic ids, from the metadata clients."""

    def __init__(self, source: SourceOptions) -> None:
        self.source = source
        self._meta: Any = None
        self._admin_client: Any = None
        # (name, message) of the errors the metadata clients reported (their error_cb): a
        # refused login or TLS handshake shows there, the failed request says "transport"
        self._reported: deque[tuple[str, str]] = deque(maxlen=20)
        self._nothing = RepeatedWarning(NOTHING_TO_READ_EVERY)

    def consumer(self) -> Any:
        if self._meta is None:
            from confluent_kafka import Consumer

            self._meta = Consumer(consumer_config("metadata", {
                **spark_process_kafka_settings(), **source_client_settings(self.source.options),
                "error_cb": self._client_error}))
        return self._meta

    def _admin(self) -> Any:
        if self._admin_client is None:
            from confluent_kafka.admin import AdminClient

            # Any: confluent-kafka's stubs leave the callback settings (error_cb) out
            settings: dict[str, Any] = {**spark_process_kafka_settings(),
                                        **source_client_settings(self.source.options),
                                        "error_cb": self._client_error}
            self._admin_client = AdminClient(settings)
        return self._admin_client

    def drop_clients(self) -> None:
        """Forget the metadata clients, so the next trigger bootstraps fresh ones. A client
        that met a broker restarting can stay disconnected after the broker is back: a
        Metadata response listing no broker (a node that has not registered yet) empties
        librdkafka's broker list for good (confluentinc/librdkafka#5301), and such a
        client answers "Broker transport failure" from then on."""
        meta, self._meta, self._admin_client = self._meta, None, None
        if meta is not None:
            meta.close()  # never subscribed: no group to leave, returns at once

    def close(self) -> None:
        if self._meta is not None:
            self._meta.close()
        self._meta = None
        self._admin_client = None  # an AdminClient has no close(); dropping it ends it

    def offsets(self, which: str) -> dict[str, dict[str, int]]:
        """Each subscribed partition's `which` offset: "earliest" (its log start) or
        "latest" (its high watermark)."""
        out: dict[str, dict[str, int]] = {}
        for topic, partition in self._partitions():
            low, high = self.watermarks(topic, partition)
            out.setdefault(topic, {})[str(partition)] = low if which == "earliest" else high
        return out

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """The partition's low and high watermarks. A partition whose leader is moving (an
        election, a topic created a moment ago) is asked again for a few seconds: before
        the query has its first offsets any error stops it, and this one is no outage."""
        from confluent_kafka import KafkaException, TopicPartition

        deadline = time.monotonic() + LEADER_MOVE_SECONDS
        pause = 0.1
        while True:
            try:
                return self.consumer().get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=15, cached=False)
            except KafkaException as err:
                name = err.args[0].name() if err.args else None
                if name not in LEADER_MOVING or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 1.0)

    def log_start(self, topic: str, partition: int) -> int:
        return self.watermarks(topic, partition)[0]

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        """Each topic's id from the broker; a topic it cannot describe (gone since the
        listing, refused, an error of its own) or without an id (a broker before Kafka
        2.8) is left out, so it is not compared. KafkaException when the broker does not
        answer."""
        from confluent_kafka import KafkaException, TopicCollection

        if not topics:
            return {}
        futures = self._admin().describe_topics(TopicCollection(sorted(topics)),
                                                request_timeout=15)
        out: dict[str, str] = {}
        for name, future in futures.items():
            try:
                topic_id = str(future.result().topic_id)
            except KafkaException as err:
                if err.args[0].name() in UNREACHABLE:
                    raise
                LOG.debug("topic %s not described (%s): its id is not compared", name, err)
                continue
            if topic_id != NO_TOPIC_ID:
                out[name] = topic_id
        return out

    def explained(self, err: Exception) -> str:
        """A failed request with its cause and what to fix, when the cause is a refused
        login, a failed TLS handshake or an ACL (the request's own error first, then those
        the clients reported meanwhile); else the error as it is."""
        for client in (self._meta, self._admin_client):
            if client is not None:
                with contextlib.suppress(Exception):
                    client.poll(0)  # serves the client's error callbacks
        error = err.args[0] if err.args and hasattr(err.args[0], "name") else None
        said = [(error.name(), error.str())] if error is not None else []
        for name, text in [*said, *reversed(self._reported)]:
            advice = security_advice(name, text, "source", SOURCE_NEEDS)
            if advice:
                self._reported.clear()
                return f"{name}: {redact_text(text)[:300]}. To fix: {advice}"
        return str(err)

    def answered(self) -> None:
        """A trigger's requests all succeeded: the errors reported before are history."""
        self._reported.clear()

    def _client_error(self, error: Any) -> None:
        """The metadata clients' error callback (see `explained`)."""
        self._reported.append((error.name(), error.str()))

    def _partitions(self) -> list[tuple[str, int]]:
        source = self.source
        metadata = self.consumer().list_topics(timeout=15)
        out, refused = subscribed_partitions(metadata, source.topics, source.pattern)
        if not out and not refused and source.topics and self._nothing.would_say():
            # The broker leaves out of a listing of all topics every topic an ACL hides;
            # asked by name, it answers TOPIC_AUTHORIZATION_FAILED (UNKNOWN_TOPIC_OR_PART
            # for a missing one), which the warning can then name.
            named = [self.consumer().list_topics(topic, timeout=15) for topic in source.topics]
            refused = [name for listing in named
                       for name in subscribed_partitions(listing, source.topics, None)[1]
                       if "authorization failed" in name.lower()]
        self._warn_nothing_to_read(not out, refused)
        return out

    def _warn_nothing_to_read(self, nothing: bool, refused: list[str]) -> None:
        """A subscription that matches no readable partition runs idle and looks healthy
        (the broker answers, no batch is late): said at once and every NOTHING_TO_READ_EVERY
        seconds while it lasts, naming what was asked for and what the broker refused."""
        if not nothing:
            lasted = self._nothing.ended()
            if lasted is not None:
                LOG.warning("the source has partitions to read again, after %.0fs", lasted)
            return
        if self._nothing.due() is None:
            return
        source = self.source
        asked = (f"topics {', '.join(source.topics)}" if source.topics else
                 f"subscribe pattern {source.pattern!r}")
        if any("authorization failed" in said.lower() for said in refused):
            LOG.warning("nothing to read: Kafka at %s refuses %s: %s. To fix: grant the "
                        "source's principal %s (docs/security.md); the query reads nothing "
                        "until then", source.bootstrap, asked, ", ".join(refused), SOURCE_NEEDS)
            return
        LOG.warning("nothing to read: no partition of %s on Kafka at %s%s. A misspelt "
                    "source.topics name, a topic not created yet or an ACL: the query reads "
                    "nothing until it is there", asked, source.bootstrap,
                    f"; refused: {', '.join(refused)}" if refused else "")
