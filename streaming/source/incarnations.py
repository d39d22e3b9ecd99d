"""Topic incarnations, on the driver: a topic deleted and created again is data loss.

Offsets alone cannot tell once the new topic has grown past the checkpoint's offsets
(Spark's own source cannot either), and its records below them would be skipped without a
word. So each subscribed topic's id (KIP-516) is kept beside the checkpoint, and compared
with the broker's at every trigger and at the first batch after a restart. A changed id
stops the query unless failOnDataLoss is off; then the next batch reads the recreated
topics from their log start, and that pending restart is kept in the same file, so a
restart of the job replays or goes on after it.

`TopicIncarnations` is used by the thread Spark plans the batches on, as the stream
(streaming.source.stream) is; it never travels to the executors.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from streaming.locations import join, read_text, write_text
from streaming.source.errors import data_loss
from streaming.source.offsets import KafkaOffsetReader
from streaming.source.options import SourceOptions

LOG = logging.getLogger("kafka_health.source")
# Each subscribed topic's id, and the pending restart of a recreated one, in the checkpoint.
TOPIC_IDS_FILE = "kafka_health_topic_ids.json"


class TopicIncarnations:
    """The checkpoint's topic ids and the pending restart of recreated topics:
    {"topics": [...], "from": offsets, "end": offsets or None}, the batch from `from` (the
    one ending at `end`, once known) reading them from their log start."""

    def __init__(self, source: SourceOptions) -> None:
        self.source = source
        self._file = join(source.checkpoint, TOPIC_IDS_FILE) if source.checkpoint else None
        self._known: dict[str, str] = {}  # each topic's id as the checkpoint knows it
        self._restart: dict[str, Any] | None = None
        self._restart_planned = False
        self._stored: str | None = None
        self._readable = False
        self.checked = False  # whether the ids were compared since the job started
        self._load()

    def check(self, start: Mapping[str, Any], latest: Mapping[str, Any],
              offsets: KafkaOffsetReader) -> set[str]:
        """The topics the query has offsets for whose id changed since: deleted and
        created again (data loss, which raises with failOnDataLoss). KafkaException when
        the broker does not answer."""
        if not self._readable:
            self._load()
        current = offsets.topic_ids(list(latest))
        self.checked = True
        recreated = set()
        for topic, topic_id in sorted(current.items()):
            known = self._known.get(topic)
            if topic in start and known is not None and known != topic_id:
                data_loss(
                    self.source.fail_on_data_loss,
                    f"topic {topic} was deleted and created again since the checkpoint's "
                    f"offsets were taken (topic id {known}, now {topic_id}): those offsets "
                    "are the old topic's, and the new topic's records below them would be "
                    "skipped", instead="read the new topic from its first offset")
                recreated.add(topic)
        self._known.update(current)
        self._store()
        return recreated

    def check_replayed_batch(self, start: dict, end: dict, offsets: KafkaOffsetReader) -> None:
        """The first partitions() after a restart, before any latestOffset(): Spark's
        replay of a batch planned before it, or (start == end) its call for the batch it
        had committed. Topics recreated while the job was down are read from their log
        start by the replayed batch, or else by the next one (failOnDataLoss off). A
        broker that does not answer leaves the batch unchecked rather than fail the query:
        its reads wait."""
        from confluent_kafka import KafkaException

        try:
            recreated = self.check(start, end, offsets)
        except KafkaException as err:
            LOG.warning("cannot compare the topics' ids for the batch replayed after the "
                        "restart (%s)", err)
            return
        if recreated:  # Spark's call for a committed batch at a restart has start == end
            self.mark_restart(recreated, start, end if end != start else None)

    def mark_restart(self, topics: set[str], start: Mapping[str, Any],
                     end: Mapping[str, Any] | None) -> None:
        """The next batch from `start` (the one ending at `end`, once known) reads these
        topics from their log start. Stored before that batch is planned: a restart
        replays it, or, once it is committed, goes on after it."""
        if self._restart is not None and not self._restart_planned:
            topics = topics | set(self._restart["topics"])
        self._restart = {"topics": sorted(topics), "from": dict(start),
                         "end": dict(end) if end is not None else None}
        self._restart_planned = end is not None
        self._store()

    def reading_from(self, start: dict, latest: Mapping[str, Any],
                     last_end: Mapping[str, Any] | None, offsets: KafkaOffsetReader) -> dict:
        """Where the next batch reads from: `start`, with the recreated topics still to
        restart at their log start. Spark asks for the next batch only once the planned
        one is committed, so a restart batch planned (by this reader, or in the offset
        log before a restart: its end is `last_end`) is done with here."""
        restart = self._restart
        if restart is not None and (self._restart_planned or (
                restart["end"] is not None and restart["end"] == last_end
                and restart["end"] != restart["from"])):
            self._restart, self._restart_planned = None, False
            self._store()
            return start
        if restart is None:
            return start
        return {**start, **{topic: {p: offsets.log_start(topic, int(p)) for p in parts}
                            for topic, parts in latest.items() if topic in restart["topics"]}}

    def planned_end(self, end: Mapping[str, Any]) -> None:
        """The end latestOffset() answers: the restart batch's end, until Spark plans it."""
        if self._restart is not None and not self._restart_planned \
                and self._restart["end"] != end:
            self._restart["end"] = end
            self._store()

    def restarting(self, end: Mapping[str, Any]) -> set[str]:
        """The topics the batch ending at `end` reads from their log start (the same answer
        however often Spark asks for its partitions), counting that batch as planned."""
        if self._restart is None or self._restart["end"] != end:
            return set()
        self._restart_planned = True
        return set(self._restart["topics"])

    def _load(self) -> None:
        """The checkpoint's topic ids and pending restart. A file the store cannot read
        now is read again at the next check, and not written over until then."""
        self._readable = True
        if self._file is None:
            return
        try:
            text = read_text(self._file, self.source.checkpoint_storage())
        except OSError as err:
            self._readable = False
            LOG.warning("cannot read the topic ids in %s (%s): a topic deleted and created "
                        "again is not noticed until it can", TOPIC_IDS_FILE, err)
            return
        try:
            stored = json.loads(text) if text else {}
        except ValueError:
            stored = {}
        stored = stored if isinstance(stored, dict) else {}
        topics, restart = stored.get("topics"), stored.get("restart")
        self._known = ({str(k): str(v) for k, v in topics.items()}
                       if isinstance(topics, dict) else {})
        self._restart = (restart if isinstance(restart, dict)
                         and isinstance(restart.get("topics"), list) else None)
        self._stored = text

    def _store(self) -> None:
        if self._file is None or not self._readable:
            return
        state: dict[str, Any] = {"topics": self._known}
        if self._restart is not None:
            state["restart"] = self._restart
        text = json.dumps(state, sort_keys=True)
        if text == self._stored:
            return
        try:
            write_text(self._file, text, self.source.checkpoint_storage())
        except OSError as err:  # the next trigger tries again
            LOG.warning("cannot write the topic ids to %s: %s", TOPIC_IDS_FILE, err)
            return
        self._stored = text
