"""A read task, on an executor: one consumer of the task's own reads its offset ranges in
order, and yields kafka_records batches, or with option `decode` the decoded rows packed as
Arrow IPC blobs (streaming.decode.packing): one Python worker instead of a read worker
plus a mapInArrow worker, and neither the raw records nor the decoded rows are converted to
Spark rows and back. Spark's own source (engine "spark") feeds the same decoder through
the mapInArrow stage instead.

The task's thread owns everything here: the consumer, made and closed by the task (one
kept by the Python worker between tasks would go on reconnecting to a broker that is down
while no task runs: tens of librdkafka error lines a second in the job's output, for a few
ms saved a task on loopback), and the count of ranges found gone. Nothing of the driver's
state reaches it: only the parsed options (streaming.source.options) and the task.

A read waits out a broker that does not answer, and fails when one that answers sends none
of the range's records for STALL_SECONDS.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from streaming.common.gc_policy import pace_cycle_collector
from streaming.common.repeated_warning import RepeatedWarning
from streaming.decode.packing import pack, pack_chunks
from streaming.decode.records import decoded_chunks
from streaming.kafka_client import consumer_config, source_client_settings
from streaming.logsetup import spark_process_kafka_settings
from streaming.schemas import decoded_arrow_schema
from streaming.source.errors import NO_ANSWER, data_loss
from streaming.source.options import SourceOptions
from streaming.source.ranges import KafkaRange, ReadTask
from streaming.source.records import FIRST_CHUNK, chunk_records, records_batch

LOG = logging.getLogger("kafka_health.source")
# A broker that answers yet sends none of a range's records for this long fails the read;
# one that does not answer (NO_ANSWER) is waited for.
STALL_SECONDS = 60.0
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


def reader_config(options: Mapping[str, str]) -> dict[str, Any]:
    """The read tasks' consumer: assigned offsets only (no group, no commits), a short
    broker-side wait unless the options set one (see READER_FETCH_WAIT_MS)."""
    return consumer_config("reader", {
        "fetch.wait.max.ms": READER_FETCH_WAIT_MS,
        "fetch.queue.backoff.ms": READER_FETCH_QUEUE_BACKOFF_MS,
        # librdkafka's default 64 MiB ahead: see READER_PREFETCH_KBYTES
        "fetch.max.bytes": READER_PREFETCH_KBYTES * 1024,
        "queued.max.messages.kbytes": READER_PREFETCH_KBYTES,
        **spark_process_kafka_settings(),
        **source_client_settings(options),
    })


def read_task(source: SourceOptions, task: ReadTask) -> Iterator[pa.RecordBatch]:
    """The task's records (or decoded, packed rows), through a consumer of its own."""
    from confluent_kafka import Consumer

    pace_cycle_collector()
    conf = reader_config(source.options)
    reader = RangeReader(Consumer(conf), conf["bootstrap.servers"], source.fail_on_data_loss)
    try:
        batches = reader.read_all(task.ranges)
        if source.decode is None:
            yield from batches
            return
        yield from pack_chunks(decoded_chunks(batches, source.decode), source.writer,
                               source.signals)
        if reader.skipped:  # a row of its own, so the driver counts the loss
            yield pack(decoded_arrow_schema().empty_table(), 0,
                       None if source.writer is None else (None, None, None, "[]"),
                       lost=reader.skipped)
    finally:
        reader.consumer.close()


class RangeReader:
    """Reads ranges through one consumer; counts the ranges found gone and skipped over
    (failOnDataLoss off) in `skipped`."""

    def __init__(self, consumer: Any, bootstrap: str, fail_on_data_loss: bool) -> None:
        self.consumer = consumer
        self.bootstrap = bootstrap
        self.fail_on_data_loss = fail_on_data_loss
        self.skipped = 0

    def read_all(self, ranges: list[KafkaRange]) -> Iterator[pa.RecordBatch]:
        for offsets in ranges:
            yield from self.read(offsets)
            self.consumer.unassign()  # stop prefetching past the range's end

    def read(self, partition: KafkaRange) -> Iterator[pa.RecordBatch]:
        """The range's records from its start. Assigned at the start with auto.offset.reset
        earliest, a consumer whose start is gone (retention, a broker that lost data) reads
        from the log start instead; only then, when the first records begin past the start
        or none come, is the log start asked for, to tell a loss from a gap that is no loss
        (compaction, transaction markers): a round trip saved on every other range."""
        from confluent_kafka import TopicPartition

        consumer = self.consumer
        position = partition.start
        consumer.assign([TopicPartition(partition.topic, partition.partition, position)])
        start_known = False  # whether the start's records are there, or their loss reported
        last_progress = time.monotonic()
        # a broker that does not answer, said once it has lasted STALL_SECONDS, and again
        no_answer = RepeatedWarning(STALL_SECONDS, grace=STALL_SECONDS)
        chunk = FIRST_CHUNK  # until the range's first records tell their size
        while position < partition.end:
            messages = consumer.consume(num_messages=min(chunk, partition.end - position),
                                        timeout=1.0)
            batch, position = records_batch(messages, partition, position)
            if not start_known:
                start_known, position = self._check_start(partition, batch, position)
            if batch is not None:
                last_progress = time.monotonic()
                no_answer.ended()
                chunk = chunk_records(batch)
                yield batch
            elif self._consumed_through(partition):
                break  # what is left of the range holds no records (transaction markers)
            elif time.monotonic() - last_progress > GONE_CHECK_SECONDS:
                gone = self._range_gone(partition, position)
                if gone:
                    break
                now = time.monotonic()
                if gone is None:
                    # a broker that does not answer (hung, cut off) is waited out, as one
                    # down between batches is: the stall counts only while it answers
                    if no_answer.due() is not None:
                        LOG.warning("%s-%d: broker %s does not answer; the read of offsets "
                                    "%d..%d waits for it", partition.topic,
                                    partition.partition, self.bootstrap, position,
                                    partition.end - 1)
                    last_progress = now - GONE_CHECK_SECONDS
                elif now - last_progress > STALL_SECONDS:
                    raise TimeoutError(
                        f"{partition.topic}-{partition.partition}: broker {self.bootstrap} "
                        f"answers and holds offsets {position}..{partition.end - 1}, but "
                        f"sent none of them for {STALL_SECONDS:.0f}s")

    def _consumed_through(self, partition: KafkaRange) -> bool:
        """Whether the consumer's position passed the range's end though no record up to
        it came: the offsets left were transaction markers (a committed transaction's last
        offset always is one) or records of aborted transactions, which a read_committed
        consumer skips and Kafka counts in the high watermark."""
        from confluent_kafka import TopicPartition

        (at,) = self.consumer.position([TopicPartition(partition.topic, partition.partition)])
        return at.offset >= partition.end

    def _check_start(self, partition: KafkaRange, batch: pa.RecordBatch | None,
                     position: int) -> tuple[bool, int]:
        """Whether the range's first records are there or their loss is reported, and the
        position to read on from. The log start is asked for only when the first records
        begin past the range's start or none came; a broker that does not answer leaves
        the question open, asked again at the next read."""
        from confluent_kafka import KafkaException, TopicPartition

        if batch is not None and batch.column("offset")[0].as_py() == partition.start:
            return True, position
        try:
            low, _ = self.consumer.get_watermark_offsets(
                TopicPartition(partition.topic, partition.partition), timeout=15, cached=False)
        except KafkaException:
            return False, position
        if low > partition.start:
            data_loss(self.fail_on_data_loss,
                      f"{partition.topic}-{partition.partition}: offsets "
                      f"{partition.start}..{low - 1} are gone (retention or a broker "
                      "that lost data)")
            self.skipped += 1
        return True, max(position, low)

    def _range_gone(self, partition: KafkaRange, position: int) -> bool | None:
        """Nothing arrives: is the rest of the range gone (broker lost data while we read)?

        True (after reporting data loss, which raises when failOnDataLoss is on) when the
        partition now ends below `position`, False when it still holds them, None when the
        broker does not answer.
        """
        from confluent_kafka import KafkaException, TopicPartition

        try:
            _, high = self.consumer.get_watermark_offsets(
                TopicPartition(partition.topic, partition.partition), timeout=5, cached=False)
        except KafkaException as err:
            # no answer, or a leader moving: waited for; any other refusal (the topic
            # gone, an ACL) is an answer, and the stall limit applies to it
            return None if err.args[0].name() in NO_ANSWER else False
        if high >= partition.end or high > position:
            return False
        data_loss(self.fail_on_data_loss,
                  f"{partition.topic}-{partition.partition}: offsets {position}.."
                  f"{partition.end - 1} are gone (the broker lost data during the read)")
        self.skipped += 1
        return True
