"""A PySpark streaming data source over confluent-kafka, shaped like Spark's own kafka source.

Used where spark-sql-kafka is not on the classpath (no Maven here). Same output columns
(key, value, topic, partition, offset, timestamp, timestampType, and headers as with
includeHeaders), offsets as JSON in the Spark checkpoint ({"topic": {"0": 42}}), one input
partition per topic-partition range, a per-trigger cap and failOnDataLoss, like
`maxOffsetsPerTrigger` / `failOnDataLoss`.

PySpark 4.1 facts this is built around: latestOffset() is given neither the start nor
a limit and may be called before initialOffset(), so the cap remembers the last end it
planned (or reads the checkpoint's offset log on restart); read() runs on executors from
a pickled reader, so no live client may be an attribute when pickled.

Two departures from Spark's source, both for the cost of a micro-batch on few cores:
- Read tasks are planned by records, not one per topic-partition. A small batch is one
  task (each task costs a Python worker round trip and a consumer; three partitions on two
  cores ran in two waves), a large one is cut into `maxTasks` equal shares, splitting
  big partitions, so both cores work to the end of the batch.
- With option `decode` (a DecodeContext as JSON) the task decodes what it read and the
  source yields decoded rows, packed as Arrow IPC blobs (streaming.decode.packing): one
  Python worker instead of a read worker plus a mapInArrow worker, and neither the raw
  records nor the decoded rows are converted to Spark rows and back. Spark's own source
  (engine "spark") feeds the same decoder through the mapInArrow stage instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    CaseInsensitiveDict,
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

from streaming.config import SecretRef, SignalsConfig
from streaming.decode.packing import PACKED_DDL, pack, pack_chunks
from streaming.decode.records import DecodeContext, decoded_chunks
from streaming.kafka_client import (
    SOURCE_NEEDS,
    consumer_config,
    security_advice,
    source_client_settings,
)
from streaming.locations import is_local, join, numbered_files, read_text, write_text
from streaming.logsetup import spark_process_kafka_settings
from streaming.redact import redact_text, redact_url
from streaming.common.gc_policy import pace_cycle_collector
from streaming.common.repeated_warning import RepeatedWarning
from streaming.schemas import arrow_schema, decoded_arrow_schema, spark_ddl
from streaming.sinks.task_files import TaskWriter

LOG = logging.getLogger("kafka_health.source")
# Each subscribed topic's id (KIP-516), and the pending restart of a recreated one, in
# the checkpoint.
TOPIC_IDS_FILE = "kafka_health_topic_ids.json"
# A topic id the broker does not know (a broker before Kafka 2.8): nothing to compare.
NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
# How often a subscription that matches no readable partition is said again.
NOTHING_TO_READ_EVERY = 600.0
# How often an outage of the metrics Kafka is said again.
UNREACHABLE_EVERY = 60.0
SOURCE_NAME = "kafka_health_kafka"
CHUNK = 10_000
# The values a chunk of records should hold at most (chunk_records); decoding slices it
# further (streaming.decode.records.DECODE_BYTES).
CHUNK_BYTES = 16 * 1024 * 1024
# A range's first consume(), before any of its records' sizes is known: CHUNK_BYTES of
# records at the broker's default message.max.bytes (1 MiB).
FIRST_CHUNK = 16
# A task below this many records costs more in set-up than it saves in parallelism.
MIN_RECORDS_PER_TASK = 5_000
# A broker that answers yet sends none of a range's records for this long fails the read;
# one that does not answer (NO_ANSWER) is waited for.
STALL_SECONDS = 60.0
# librdkafka's errors (KafkaError names): no broker answers; a partition's leader is being
# elected; and either, or a broker that answers late, which a read waits through.
UNREACHABLE = frozenset({"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN"})
LEADER_MOVING = frozenset({"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE"})
NO_ANSWER = UNREACHABLE | LEADER_MOVING | {"REQUEST_TIMED_OUT", "BROKER_NOT_AVAILABLE"}
# How long a partition without a leader (an election, a topic just created) is asked again
# for its offsets before that counts as an error: KRaft elects a new leader in well under it.
LEADER_MOVE_SECONDS = 10.0
# Empty reads for this long make the reader check whether the rest of its range still exists
# (not at once: a leader change can briefly answer an empty fetch for records that exist).
GONE_CHECK_SECONDS = 5.0
# The reader's ranges end at or below the high watermark, so a broker-side long poll only
# ever waits past a range's end: librdkafka's fetch for the offsets after it is parked for
# fetch.wait.max.ms (500 ms by default), and the next range's fetch on the same connection,
# and close(), wait behind it: a task of two ranges would spend most of its time waiting.
# A `kafka.fetch.wait.max.ms` option still wins.
READER_FETCH_WAIT_MS = "10"
# Once its local queue passes queued.min.messages or queued.max.messages.kbytes, librdkafka
# postpones the partition's next fetch by fetch.queue.backoff.ms (1000 ms by default; see
# librdkafka's CONFIGURATION.md). A read task drains its queue in milliseconds, so at the
# default it would spend most of consume() waiting on an empty queue.
READER_FETCH_QUEUE_BACKOFF_MS = "10"
# What the consumer fetches ahead of the task. A task reads a bounded range, and what
# librdkafka has queued past the range's end when the task unassigns is fetched, sent and
# parsed for nothing, by the broker and by the task. 4 MiB keeps that waste small while
# a fetch still carries thousands of records; smaller sizes read no faster, and
# librdkafka refuses a fetch.max.bytes below message.max.bytes (1 MB by default).
READER_PREFETCH_KBYTES = 4 * 1024
_RECORDS = arrow_schema("kafka_records", optional=True)  # with Spark's `headers`
_HEADERS = _RECORDS.field("headers").type
_MILLIS = pa.timestamp("ms", tz="UTC")
LATEST_MICROS_AS_MILLIS = np.iinfo(np.int64).max // 1000
_MICROS = pa.timestamp("us", tz="UTC")


class KafkaDataLossError(RuntimeError):
    """Offsets the checkpoint expects are gone; raised only when failOnDataLoss is true."""


class KafkaUnavailableError(RuntimeError):
    """Kafka could not be reached before the query knew any offsets (nothing to wait on)."""


@dataclass(frozen=True)
class KafkaRange:
    """Offsets [start, end) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


class ReadTask(InputPartition):
    """One Spark task: offset ranges read in order through one consumer."""

    def __init__(self, ranges: list[KafkaRange]) -> None:
        super().__init__(tuple(ranges))
        self.ranges = ranges


def plan_tasks(ranges: list[KafkaRange], max_tasks: int,
               min_records: int = MIN_RECORDS_PER_TASK) -> list[list[KafkaRange]]:
    """Cut a batch's ranges into at most `max_tasks` shares of nearly equal record counts,
    none (but a lone one) under `min_records`; a range may be split across shares."""
    total = sum(r.size for r in ranges)
    if total == 0:
        return []
    tasks = max(1, min(max_tasks, total // max(min_records, 1)))
    share = math.ceil(total / tasks)
    planned: list[list[KafkaRange]] = []
    current: list[KafkaRange] = []
    room = share
    for whole in ranges:
        start = whole.start
        while start < whole.end:
            take = min(whole.end - start, room)
            current.append(KafkaRange(whole.topic, whole.partition, start, start + take))
            start += take
            room -= take
            if room == 0:
                planned.append(current)
                current, room = [], share
    if current:
        planned.append(current)
    return planned


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The source's librdkafka settings from its options (streaming.kafka_client): kafka.*
    options pass through, the secrets are read from the references the options carry."""
    return source_client_settings(options)


def checkpoint_storage(options: Mapping[str, str]) -> dict[str, str] | None:
    """Storage options for reading a remote checkpoint's offset log (locations' names, e.g.
    AWS_ENDPOINT_URL): checkpointStorage.* as given, checkpointStorageSecretFile.* and
    checkpointStorageSecretEnv.* as references read here, as the Kafka secrets are.

    Prefixes match in any case: Spark hands a Python data source its options with the
    keys lowercased (the option names' own case does not matter to streaming.locations)."""
    kinds = (("checkpointstoragesecretfile.", "file"), ("checkpointstoragesecretenv.", "env"),
             ("checkpointstorage.", None))
    out: dict[str, str] = {}
    for key, value in options.items():
        for prefix, ref in kinds:
            if key.lower().startswith(prefix):
                name = key[len(prefix):]
                out[name] = value if ref is None else SecretRef(**{ref: value}).read(
                    f"delta.storage_secrets.{name}")
                break
    return out or None


def reader_config(options: Mapping[str, str]) -> dict[str, Any]:
    """The read tasks' consumer: assigned offsets only (no group, no commits), a short
    broker-side wait unless the options set one (see READER_FETCH_WAIT_MS)."""
    conf: dict[str, Any] = {
        "fetch.wait.max.ms": READER_FETCH_WAIT_MS,
        "fetch.queue.backoff.ms": READER_FETCH_QUEUE_BACKOFF_MS,
        # librdkafka's default 64 MiB ahead: see READER_PREFETCH_KBYTES
        "fetch.max.bytes": READER_PREFETCH_KBYTES * 1024,
        "queued.max.messages.kbytes": READER_PREFETCH_KBYTES,
        **spark_process_kafka_settings(),
        **client_config(options),
    }
    return consumer_config("reader", conf)


def subscribed_partitions(metadata: Any, topics: list[str], pattern: str | None
                          ) -> tuple[list[tuple[str, int]], list[str]]:
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


def _as_bool(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() in ("1", "true", "yes")


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


def binary_column(items: list[bytes | None]) -> pa.Array:
    """A binary column of message keys or values from one join and their lengths: Arrow's
    builder copies item by item (0.25 µs a 170-byte value, against 0.07). A null (a
    tombstone, a record without a key) or a chunk past 2 GiB takes the builder."""
    try:
        data = b"".join(items)  # type: ignore[arg-type]
    except TypeError:
        return pa.array(items, pa.binary())
    if len(data) >= 2**31:
        return pa.array(items, pa.binary())
    offsets = np.zeros(len(items) + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, items), dtype=np.int32, count=len(items)), out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(items),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def headers_column(messages: list[Any]) -> pa.Array:
    """Each message's headers as Spark's kafka source gives them (includeHeaders): a list of
    {key, value} structs, null for a message without any."""
    headers = [m.headers() for m in messages]
    if not any(headers):
        return pa.nulls(len(headers), _HEADERS)
    return pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in headers],
                    _HEADERS)


def chunk_records(batch: pa.RecordBatch) -> int:
    """How many records the next consume() may take, from the sizes of this batch's: CHUNK
    of small ones, fewer of large ones, so that a chunk's values stay near CHUNK_BYTES
    (10,000 records of 1 MB, the broker's default limit, would be 10 GB in the worker)."""
    average = batch.column("value").nbytes / max(batch.num_rows, 1)
    return max(1, min(CHUNK, int(CHUNK_BYTES // max(average, 1.0))))


def records_batch(messages: list[Any], want: KafkaRange, position: int
                  ) -> tuple[pa.RecordBatch | None, int]:
    """The kafka_records batch of the messages in `want` from `position` on, and the next
    position. Built column by column: one list comprehension per accessor and Arrow for the
    timestamps (a loop of appends and a datetime per message cost more than the read).
    Messages outside the range (left from an earlier range on this consumer) are dropped."""
    from confluent_kafka import KafkaError

    failed = [m for m in messages if m.error() is not None]
    for message in failed:
        if message.error().code() != KafkaError._PARTITION_EOF:
            raise RuntimeError(f"Kafka read error: {message.error()}")
    if failed:
        messages = [m for m in messages if m.error() is None]
    offsets = np.asarray([m.offset() for m in messages], dtype=np.int64)
    inside = ((offsets >= position) & (offsets < want.end)
              & (np.asarray([m.partition() for m in messages], dtype=np.int64) == want.partition)
              & np.asarray([m.topic() == want.topic for m in messages], dtype=bool))
    if not inside.all():
        messages = [m for m, keep in zip(messages, inside.tolist(), strict=True) if keep]
        offsets = offsets[inside]
    if not messages:
        return None, position
    n = len(messages)
    stamps = np.asarray([m.timestamp() for m in messages], dtype=np.int64).reshape(n, 2)
    # A producer's CreateTime may be any long: one past what microseconds can hold is
    # clamped to the largest that fits (year 294247), so that the decoder quarantines it
    # as timestamp_out_of_range instead of the cast failing the task on every replay.
    kinds, millis = stamps[:, 0], np.minimum(stamps[:, 1], LATEST_MICROS_AS_MILLIS)
    return pa.RecordBatch.from_arrays([
        binary_column([m.key() for m in messages]),
        binary_column([m.value() for m in messages]),
        pa.array([want.topic] * n, pa.string()),
        pa.array(np.full(n, want.partition, dtype=np.int32)),
        pa.array(offsets),
        pa.array(millis, mask=millis < 0).cast(_MILLIS).cast(_MICROS),
        pa.array(np.where(kinds == 1, 0, np.where(kinds == 2, 1, -1)).astype(np.int32)),
        headers_column(messages),
    ], schema=_RECORDS), int(offsets.max()) + 1


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        # Spark hands the options over with their keys lowercased; a reader made from a
        # plain dict (a test, a caller of its own) looks them up in any case all the same.
        options = CaseInsensitiveDict(options)
        self.options = options
        self.topics = [t for t in options.get("subscribe", "").split(",") if t]
        self.pattern = options.get("subscribePattern")
        if not self.topics and not self.pattern:
            raise ValueError("kafka_health_kafka source: set option subscribe or subscribePattern")
        cap = options.get("maxOffsetsPerTrigger")
        self.max_per_trigger = int(cap) if cap else None
        self.fail_on_data_loss = _as_bool(options.get("failOnDataLoss"), True)
        self.starting = options.get("startingOffsets", "earliest")
        # No maxTasks: one task per topic-partition range, as Spark's own source plans.
        self.max_tasks = int(options["maxTasks"]) if options.get("maxTasks") else None
        self.min_records_per_task = int(options.get("minRecordsPerTask", MIN_RECORDS_PER_TASK))
        self.decode = DecodeContext.from_json(options["decode"]) if options.get("decode") else None
        # With writeTables (a TaskWriter as JSON) the task writes its chunks' bronze and
        # quarantine files and yields their add actions (streaming.sinks.task_files).
        self.writer = (TaskWriter.from_json(options["writeTables"])
                       if options.get("writeTables") else None)
        self.signals = SignalsConfig(**json.loads(options.get("signals") or "{}"))
        self._last_end: dict[str, dict[str, int]] | None = last_checkpointed_offsets(
            options.get("checkpointLocation"), checkpoint_storage(options)
        )
        self._meta: Any = None
        self._admin_client: Any = None
        # Each topic's id as the checkpoint knows it (the incarnation its offsets belong
        # to) and, with failOnDataLoss off, the batch that reads recreated topics from
        # their log start: {"topics": [...], "from": offsets, "end": offsets or None}.
        self._ids_file = (join(options["checkpointLocation"], TOPIC_IDS_FILE)
                          if options.get("checkpointLocation") else None)
        self._known_ids: dict[str, str] = {}
        self._restart: dict[str, Any] | None = None
        self._restart_planned = False
        self._skipped = 0  # a read task's ranges skipped as gone (see read)
        self._stored: str | None = None
        self._ids_readable = False
        self._load_topic_ids()
        self._ids_checked = False
        self._initial: dict[str, dict[str, int]] | None = None
        self._unreachable = RepeatedWarning(UNREACHABLE_EVERY)
        # (name, message) of the errors the metadata clients reported (their error_cb): a
        # refused login or TLS handshake shows there, the failed request says "transport"
        self._reported: deque[tuple[str, str]] = deque(maxlen=20)
        self._nothing = RepeatedWarning(NOTHING_TO_READ_EVERY)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_meta"] = None
        state["_admin_client"] = None
        return state

    # ---- metadata (driver side) ----
    def _consumer(self) -> Any:
        if self._meta is None:
            from confluent_kafka import Consumer

            self._meta = Consumer(consumer_config("metadata", {
                **spark_process_kafka_settings(), **client_config(self.options),
                "error_cb": self._client_error}))
        return self._meta

    def _admin(self) -> Any:
        if self._admin_client is None:
            from confluent_kafka.admin import AdminClient

            self._admin_client = AdminClient({**spark_process_kafka_settings(),
                                              **client_config(self.options),
                                              "error_cb": self._client_error})
        return self._admin_client

    def _drop_clients(self) -> None:
        """Forget the metadata clients, so the next trigger bootstraps fresh ones. A client
        that met a broker restarting can stay disconnected after the broker is back: a
        Metadata response listing no broker (a node that has not registered yet) empties
        librdkafka's broker list for good (confluentinc/librdkafka#5301), and such a
        client answers "Broker transport failure" from then on."""
        meta, self._meta, self._admin_client = self._meta, None, None
        if meta is not None:
            meta.close()  # never subscribed: no group to leave, returns at once

    def _partitions(self) -> list[tuple[str, int]]:
        metadata = self._consumer().list_topics(timeout=15)
        out, refused = subscribed_partitions(metadata, self.topics, self.pattern)
        if not out and not refused and self.topics and self._nothing.would_say():
            # The broker leaves out of a listing of all topics every topic an ACL hides;
            # asked by name, it answers TOPIC_AUTHORIZATION_FAILED (UNKNOWN_TOPIC_OR_PART
            # for a missing one), which the warning can then name.
            named = [self._consumer().list_topics(topic, timeout=15) for topic in self.topics]
            refused = [name for listing in named
                       for name in subscribed_partitions(listing, self.topics, None)[1]
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
        asked = (f"topics {', '.join(self.topics)}" if self.topics else
                 f"subscribe pattern {self.pattern!r}")
        if any("authorization failed" in said.lower() for said in refused):
            LOG.warning("nothing to read: Kafka at %s refuses %s: %s. To fix: grant the "
                        "source's principal %s (docs/security.md); the query reads nothing "
                        "until then", self._bootstrap(), asked, ", ".join(refused), SOURCE_NEEDS)
            return
        LOG.warning("nothing to read: no partition of %s on Kafka at %s%s. A misspelt "
                    "source.topics name, a topic not created yet or an ACL: the query reads "
                    "nothing until it is there", asked, self._bootstrap(),
                    f"; refused: {', '.join(refused)}" if refused else "")

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """The partition's low and high watermarks. A partition whose leader is moving (an
        election, a topic created a moment ago) is asked again for a few seconds: before
        the query has its first offsets any error stops it, and this one is no outage."""
        from confluent_kafka import KafkaException, TopicPartition

        deadline = time.monotonic() + LEADER_MOVE_SECONDS
        pause = 0.1
        while True:
            try:
                return self._consumer().get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=15, cached=False)
            except KafkaException as err:
                name = err.args[0].name() if err.args else None
                if name not in LEADER_MOVING or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 1.0)

    def _offsets(self, which: str) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for topic, partition in self._partitions():
            low, high = self._watermarks(topic, partition)
            out.setdefault(topic, {})[str(partition)] = low if which == "earliest" else high
        return out

    def initialOffset(self) -> dict:
        # PySpark asks latestOffset() before initialOffset() on a fresh start: "latest" read
        # twice could start a busy topic after the first batch's end (a false data loss),
        # so both answer from the one snapshot latestOffset took.
        if self._initial is not None:
            return self._initial
        if self.starting in ("earliest", "latest"):
            return self._offsets(self.starting)
        return json.loads(self.starting)

    def latestOffset(self) -> dict:
        from confluent_kafka import KafkaException

        start = self._last_end
        try:
            latest = self._offsets("latest")
            if start is None:
                if self.starting == "latest":
                    self._initial = latest
                start = self.initialOffset()
            recreated = self._check_topic_ids(start, latest)
            if recreated:
                self._mark_restart(recreated, start, None)
            reading_from = self._restart_start(start, latest)
        except KafkaException as err:
            why = self._explained(err)
            if start is None:
                raise KafkaUnavailableError(
                    f"cannot read offsets from Kafka at {self._bootstrap()} "
                    f"(source.bootstrap_servers) to start from: {why}. Once the query has "
                    f"its first offsets it waits out an outage; before, it stops") from err
            # An unreachable broker is an outage to wait out, not a reason to kill an
            # always-on query (and crash-loop its pod): no new end, so no batch is planned.
            self._warn_unreachable(why)
            self._drop_clients()
            return start
        self._reported.clear()
        lasted = self._unreachable.ended()
        if lasted is not None:
            LOG.warning("Kafka at %s reachable again after %.0fs", self._bootstrap(), lasted)
        vanished = sorted(f"{topic}-{p}" for topic, parts in start.items() for p in parts
                          if p not in latest.get(topic, {}))
        if vanished:
            self._data_loss(f"partition(s) {', '.join(vanished)} no longer exist: the topic "
                            "was deleted or the broker lost its data")
        end = self._capped(reading_from, latest) if self.max_per_trigger else latest
        if self._restart is not None and not self._restart_planned \
                and self._restart["end"] != end:
            self._restart["end"] = end  # the restart batch's end, until Spark plans it
            self._store_topic_ids()
        return end

    # ---- topic ids: a topic deleted and created again is data loss ----
    def _load_topic_ids(self) -> None:
        """The checkpoint's topic ids and pending restart. A file the store cannot read
        now is read again at the next check, and not written over until then."""
        self._ids_readable = True
        if self._ids_file is None:
            return
        try:
            text = read_text(self._ids_file, checkpoint_storage(self.options))
        except OSError as err:
            self._ids_readable = False
            LOG.warning("cannot read the topic ids in %s (%s): a topic deleted and created "
                        "again is not noticed until it can", TOPIC_IDS_FILE, err)
            return
        try:
            stored = json.loads(text) if text else {}
        except ValueError:
            stored = {}
        stored = stored if isinstance(stored, dict) else {}
        topics, restart = stored.get("topics"), stored.get("restart")
        self._known_ids = ({str(k): str(v) for k, v in topics.items()}
                           if isinstance(topics, dict) else {})
        self._restart = (restart if isinstance(restart, dict)
                         and isinstance(restart.get("topics"), list) else None)
        self._stored = text

    def _store_topic_ids(self) -> None:
        if self._ids_file is None or not self._ids_readable:
            return
        state: dict[str, Any] = {"topics": self._known_ids}
        if self._restart is not None:
            state["restart"] = self._restart
        text = json.dumps(state, sort_keys=True)
        if text == self._stored:
            return
        try:
            write_text(self._ids_file, text, checkpoint_storage(self.options))
        except OSError as err:  # the next trigger tries again
            LOG.warning("cannot write the topic ids to %s: %s", TOPIC_IDS_FILE, err)
            return
        self._stored = text

    def _topic_ids(self, topics: list[str]) -> dict[str, str]:
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

    def _check_topic_ids(self, start: Mapping[str, Any], latest: Mapping[str, Any]
                         ) -> set[str]:
        """The topics the query has offsets for whose id changed since: deleted and
        created again. Offsets alone cannot tell once the new topic has grown past them
        (Spark's own source cannot either), and its records below them would be skipped
        without a word: data loss, which stops the query unless failOnDataLoss is off."""
        if not self._ids_readable:
            self._load_topic_ids()
        current = self._topic_ids(list(latest))
        self._ids_checked = True
        recreated = set()
        for topic, topic_id in sorted(current.items()):
            known = self._known_ids.get(topic)
            if topic in start and known is not None and known != topic_id:
                self._data_loss(
                    f"topic {topic} was deleted and created again since the checkpoint's "
                    f"offsets were taken (topic id {known}, now {topic_id}): those offsets "
                    "are the old topic's, and the new topic's records below them would be "
                    "skipped", instead="read the new topic from its first offset")
                recreated.add(topic)
        self._known_ids.update(current)
        self._store_topic_ids()
        return recreated

    def _mark_restart(self, topics: set[str], start: Mapping[str, Any],
                      end: Mapping[str, Any] | None) -> None:
        """The next batch from `start` (the one ending at `end`, once known) reads these
        topics from their log start. Stored before that batch is planned: a restart
        replays it, or, once it is committed, goes on after it."""
        if self._restart is not None and not self._restart_planned:
            topics = topics | set(self._restart["topics"])
        self._restart = {"topics": sorted(topics), "from": dict(start),
                         "end": dict(end) if end is not None else None}
        self._restart_planned = end is not None
        self._store_topic_ids()

    def _restart_start(self, start: dict, latest: Mapping[str, Any]) -> dict:
        """Where the next batch reads from: `start`, with the recreated topics still to
        restart at their log start. Spark asks for the next batch only once the planned
        one is committed, so a restart batch planned (by this reader, or in the offset
        log before a restart) is done with here."""
        restart = self._restart
        if restart is not None and (self._restart_planned or (
                restart["end"] is not None and restart["end"] == self._last_end
                and restart["end"] != restart["from"])):
            self._restart, self._restart_planned = None, False
            self._store_topic_ids()
            return start
        if restart is None:
            return start
        return {**start, **{topic: {p: self._watermarks(topic, int(p))[0] for p in parts}
                            for topic, parts in latest.items() if topic in restart["topics"]}}

    def _bootstrap(self) -> str:
        return self.options.get("kafka.bootstrap.servers", "?")

    def _client_error(self, error: Any) -> None:
        """The metadata clients' error callback (see `_reported`)."""
        self._reported.append((error.name(), error.str()))

    def _explained(self, err: Exception) -> str:
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

    def _warn_unreachable(self, err: Exception | str) -> None:
        lasted = self._unreachable.due()
        if lasted == 0.0:
            LOG.warning("Kafka at %s unreachable (%s); the query waits for it", self._bootstrap(),
                        err)
        elif lasted is not None:
            LOG.warning("Kafka at %s still unreachable after %.0fs (%s)", self._bootstrap(),
                        lasted, err)

    def _capped(self, start: dict, latest: dict) -> dict:
        """Spread the per-trigger cap over partitions in proportion to their backlog."""
        backlog = {}
        for topic, parts in latest.items():
            for p, end in parts.items():
                begin = start.get(topic, {}).get(p, 0)
                backlog[(topic, p)] = (begin, max(0, end - begin))
        total = sum(b for _, b in backlog.values())
        if total <= self.max_per_trigger:
            return latest
        out: dict[str, dict[str, int]] = {}
        for (topic, p), (begin, size) in backlog.items():
            share = int(self.max_per_trigger * size / total)
            out.setdefault(topic, {})[p] = begin + min(size, max(share, 1 if size else 0))
        return out

    def partitions(self, start: dict, end: dict) -> list[ReadTask]:
        if not self._ids_checked:  # a batch planned before a restart, replayed
            self._check_replayed_batch(start, end)
        if start == end:  # Spark's call for the batch it committed before a restart
            self._last_end = end
            return []
        # The same answer however often Spark asks for a batch's partitions.
        restart: set[str] = set()
        if self._restart is not None and self._restart["end"] == end:
            restart = set(self._restart["topics"])
            self._restart_planned = True
        ranges: list[KafkaRange] = []
        for topic, parts in end.items():
            for p, stop in parts.items():
                begin = start.get(topic, {}).get(p)
                if begin is None or topic in restart:  # a new partition, or a new topic
                    begin = self._watermarks(topic, int(p))[0]
                if stop < begin:
                    self._data_loss(
                        f"{topic}-{p}: end offset {stop} is below the checkpointed {begin}; "
                        "the topic was recreated or the broker lost data"
                    )
                    begin = min(stop, self._watermarks(topic, int(p))[0])
                if stop > begin:
                    ranges.append(KafkaRange(topic, int(p), begin, stop))
        self._last_end = end
        ranges.sort(key=lambda r: (r.topic, r.partition))
        if self.max_tasks is None:
            return [ReadTask([r]) for r in ranges]
        return [ReadTask(task) for task in plan_tasks(ranges, self.max_tasks,
                                                      self.min_records_per_task)]

    def _check_replayed_batch(self, start: dict, end: dict) -> None:
        """The first partitions() after a restart, before any latestOffset(): Spark's
        replay of a batch planned before it, or (start == end) its call for the batch it
        had committed. Topics recreated while the job was down are read from their log
        start by the replayed batch, or else by the next one (failOnDataLoss off). A
        broker that does not answer leaves the batch unchecked rather than fail the query:
        its reads wait."""
        from confluent_kafka import KafkaException

        try:
            recreated = self._check_topic_ids(start, end)
        except KafkaException as err:
            LOG.warning("cannot compare the topics' ids for the batch replayed after the "
                        "restart (%s)", err)
            return
        if recreated:  # Spark's call for a committed batch at a restart has start == end
            self._mark_restart(recreated, start, end if end != start else None)

    def _data_loss(self, message: str, instead: str = "skip ahead") -> None:
        if self.fail_on_data_loss:
            raise KafkaDataLossError(
                f"{message}. Set source.fail_on_data_loss: false to {instead} and continue."
            )
        LOG.warning("data loss (continuing, failOnDataLoss=false): %s", message)

    def commit(self, end: dict) -> None:
        self._last_end = end

    def stop(self) -> None:
        if self._meta is not None:
            self._meta.close()
        self._meta = None
        self._admin_client = None  # an AdminClient has no close(); dropping it ends it

    # ---- data (executor side) ----
    def read(self, partition: ReadTask) -> Iterator[pa.RecordBatch]:
        # A consumer of the task's own, closed at its end: one kept by the Python worker
        # between tasks would go on reconnecting to a broker that is down while no task
        # runs (tens of librdkafka error lines a second in the job's output), for a few ms
        # saved a task on loopback.
        from confluent_kafka import Consumer

        pace_cycle_collector()
        conf = reader_config(self.options)
        consumer = Consumer(conf)
        self._skipped = 0  # ranges found gone and skipped over (failOnDataLoss off)
        try:
            batches = self._read_ranges(consumer, partition, conf["bootstrap.servers"])
            if self.decode is None:
                yield from batches
            else:
                yield from pack_chunks(decoded_chunks(batches, self.decode), self.writer,
                                       self.signals)
                if self._skipped:  # a row of its own, so the driver counts the loss
                    yield pack(decoded_arrow_schema().empty_table(), 0,
                               None if self.writer is None else (None, None, None, "[]"),
                               lost=self._skipped)
        finally:
            consumer.close()

    def _read_ranges(self, consumer: Any, partition: ReadTask, bootstrap: str
                     ) -> Iterator[pa.RecordBatch]:
        for offsets in partition.ranges:
            yield from self._read_range(consumer, offsets, bootstrap)
            consumer.unassign()  # stop prefetching past the range's end

    def _read_range(self, consumer: Any, partition: KafkaRange, bootstrap: str
                    ) -> Iterator[pa.RecordBatch]:
        """The range's records from its start. Assigned at the start with auto.offset.reset
        earliest, a consumer whose start is gone (retention, a broker that lost data) reads
        from the log start instead; only then, when the first records begin past the start
        or none come, is the log start asked for, to tell a loss from a gap that is no loss
        (compaction, transaction markers): a round trip saved on every other range."""
        from confluent_kafka import TopicPartition

        position = partition.start
        consumer.assign([TopicPartition(partition.topic, partition.partition, position)])
        start_known = False  # whether the start's records are there, or their loss reported
        last_progress = time.monotonic()
        last_warned = last_progress
        chunk = FIRST_CHUNK  # until the range's first records tell their size
        while position < partition.end:
            messages = consumer.consume(num_messages=min(chunk, partition.end - position),
                                        timeout=1.0)
            batch, position = records_batch(messages, partition, position)
            if not start_known:
                start_known, position = self._check_start(consumer, partition, batch, position)
            if batch is not None:
                last_progress = time.monotonic()
                chunk = chunk_records(batch)
                yield batch
            elif self._consumed_through(consumer, partition):
                break  # what is left of the range holds no records (transaction markers)
            elif time.monotonic() - last_progress > GONE_CHECK_SECONDS:
                gone = self._range_gone(consumer, partition, position)
                if gone:
                    break
                now = time.monotonic()
                if gone is None:
                    # a broker that does not answer (hung, cut off) is waited out, as one
                    # down between batches is: the stall counts only while it answers
                    if now - last_warned > STALL_SECONDS:
                        LOG.warning("%s-%d: broker %s does not answer; the read of offsets "
                                    "%d..%d waits for it", partition.topic,
                                    partition.partition, bootstrap, position,
                                    partition.end - 1)
                        last_warned = now
                    last_progress = now - GONE_CHECK_SECONDS
                elif now - last_progress > STALL_SECONDS:
                    raise TimeoutError(
                        f"{partition.topic}-{partition.partition}: broker {bootstrap} "
                        f"answers and holds offsets {position}..{partition.end - 1}, but "
                        f"sent none of them for {STALL_SECONDS:.0f}s")

    @staticmethod
    def _consumed_through(consumer: Any, partition: KafkaRange) -> bool:
        """Whether the consumer's position passed the range's end though no record up to
        it came: the offsets left were transaction markers (a committed transaction's last
        offset always is one) or records of aborted transactions, which a read_committed
        consumer skips and Kafka counts in the high watermark."""
        from confluent_kafka import TopicPartition

        (at,) = consumer.position([TopicPartition(partition.topic, partition.partition)])
        return at.offset >= partition.end

    def _check_start(self, consumer: Any, partition: KafkaRange, batch: pa.RecordBatch | None,
                     position: int) -> tuple[bool, int]:
        """Whether the range's first records are there or their loss is reported, and the
        position to read on from. The log start is asked for only when the first records
        begin past the range's start or none came; a broker that does not answer leaves
        the question open, asked again at the next read."""
        from confluent_kafka import KafkaException, TopicPartition

        if batch is not None and batch.column("offset")[0].as_py() == partition.start:
            return True, position
        try:
            low, _ = consumer.get_watermark_offsets(
                TopicPartition(partition.topic, partition.partition), timeout=15, cached=False)
        except KafkaException:
            return False, position
        if low > partition.start:
            self._data_loss(f"{partition.topic}-{partition.partition}: offsets "
                            f"{partition.start}..{low - 1} are gone (retention or a broker "
                            "that lost data)")
            self._skipped += 1
        return True, max(position, low)

    def _range_gone(self, consumer: Any, partition: KafkaRange, position: int
                    ) -> bool | None:
        """Nothing arrives: is the rest of the range gone (broker lost data while we read)?

        True (after reporting data loss, which raises when failOnDataLoss is on) when the
        partition now ends below `position`, False when it still holds them, None when the
        broker does not answer.
        """
        from confluent_kafka import KafkaException, TopicPartition

        try:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(partition.topic, partition.partition), timeout=5, cached=False)
        except KafkaException as err:
            # no answer, or a leader moving: waited for; any other refusal (the topic
            # gone, an ACL) is an answer, and the stall limit applies to it
            return None if err.args[0].name() in NO_ANSWER else False
        if high >= partition.end or high > position:
            return False
        self._data_loss(f"{partition.topic}-{partition.partition}: offsets {position}.."
                        f"{partition.end - 1} are gone (the broker lost data during the read)")
        self._skipped += 1
        return True


class KafkaHealthKafkaSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        if self.options.get("decode"):
            return PACKED_DDL
        return spark_ddl("kafka_records", optional=True)

    def streamReader(self, schema: Any) -> KafkaStreamReader:
        return KafkaStreamReader(self.options)
