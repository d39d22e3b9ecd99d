"""How the Python source cuts a batch's offset ranges into read tasks."""

from __future__ import annotations

import logging
import pickle
import time
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from streaming.config import IdentityConfig
from streaming.decode.packing import lost_ranges, unpack
from streaming.decode.records import DecodeContext
from streaming.source.errors import KafkaDataLossError
from streaming.source.partition_reader import reader_config
from streaming.source.planning import plan_tasks
from streaming.source.ranges import KafkaRange, ReadTask
from streaming.source.records import binary_column
from streaming.source.stream import KafkaStreamReader


def covered(tasks: list[list[KafkaRange]]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Per topic-partition, the offset intervals the tasks read, merged where they touch."""
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in sorted((r for task in tasks for r in task),
                    key=lambda r: (r.topic, r.partition, r.start)):
        spans = out.setdefault((r.topic, r.partition), [])
        if spans and spans[-1][1] == r.start:
            spans[-1] = (spans[-1][0], r.end)
        else:
            spans.append((r.start, r.end))
    return out


def test_a_small_batch_is_one_task_over_every_partition() -> None:
    ranges = [KafkaRange("m", p, 100, 3_100) for p in range(3)]  # 9k records
    tasks = plan_tasks(ranges, max_tasks=2, min_records=25_000)
    assert len(tasks) == 1
    assert covered(tasks) == {("m", p): [(100, 3_100)] for p in range(3)}


@pytest.mark.parametrize("sizes", [[500_000], [300_000, 100_000, 100_000], [7, 250_000, 1]])
def test_a_large_batch_is_split_evenly_and_read_exactly_once(sizes: list[int]) -> None:
    ranges = [KafkaRange("m", p, 1_000, 1_000 + size) for p, size in enumerate(sizes)]
    tasks = plan_tasks(ranges, max_tasks=2, min_records=25_000)
    assert len(tasks) == 2
    counts = [sum(r.size for r in task) for task in tasks]
    assert abs(counts[0] - counts[1]) <= 1
    assert covered(tasks) == {("m", p): [(1_000, 1_000 + size)] for p, size in enumerate(sizes)}
    assert all(r.size > 0 for task in tasks for r in task)


def test_no_task_falls_under_the_minimum_when_it_could_be_avoided() -> None:
    ranges = [KafkaRange("m", p, 0, 20_000) for p in range(3)]  # 60k records, 8 cores
    tasks = plan_tasks(ranges, max_tasks=8, min_records=25_000)
    assert [sum(r.size for r in task) for task in tasks] == [30_000, 30_000]


def test_nothing_to_read_plans_no_task() -> None:
    assert plan_tasks([], max_tasks=2) == []


def test_decode_context_survives_the_option_string() -> None:
    context = DecodeContext(topic_formats={"m": "jolokia"}, topic_clusters={"m": "east"},
                            identity=IdentityConfig(default_cluster="x",
                                                    instance_map={"h:1": "3"}),
                            max_skew_seconds=60.0, max_message_bytes=1024)
    back = DecodeContext.from_json(context.to_json())
    assert back == context
    assert pickle.loads(pickle.dumps(back)) == context


def test_a_task_over_several_ranges_reads_each_record_exactly_once(broker: Any, topic: str
                                                                   ) -> None:
    """One consumer walks the ranges in turn: no record of another range (prefetched past
    the end of the previous one) and no record outside a range may leak into the output."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(900):
        producer.produce(topic, value=f"{i % 3}:{i // 3}".encode(), partition=i % 3)
    producer.flush(30)
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    ranges = [KafkaRange(topic, 2, 250, 300), KafkaRange(topic, 0, 0, 120),
              KafkaRange(topic, 1, 10, 20), KafkaRange(topic, 0, 200, 299)]
    read = [(row["partition"], row["offset"], row["value"])
            for batch in reader.read(ReadTask(ranges)) for row in batch.to_pylist()]
    expected = [(r.partition, offset, f"{r.partition}:{offset}".encode())
                for r in ranges for offset in range(r.start, r.end)]
    assert read == expected


def offsets_read(reader: KafkaStreamReader, ranges: list[KafkaRange]) -> list[int]:
    return [row["offset"] for batch in reader.read(ReadTask(ranges))
            for row in batch.to_pylist()]


def fill_two_partitions(bootstrap: str, topic: str, records: int) -> None:
    """`records` records in each of partitions 0 and 1, offsets from 0."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(topic, value=b"v%d" % i, partition=0)
        producer.produce(topic, value=b"w%d" % i, partition=1)
    producer.flush(30)


def delete_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """Move the partition's log start to `offset`, as retention would."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        future.result(30)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_records_deleted_before_a_range_is_read_are_data_loss(broker: Any, topic: str,
                                                              fail_on_data_loss: bool) -> None:
    """A range whose first records are gone (retention ran past it): the reader reads from
    the log start and reports the loss, or stops the query with failOnDataLoss; a range
    gone entirely ends at once instead of waiting for records that cannot come."""
    fill_two_partitions(broker.bootstrap, topic, 100)
    delete_before(broker.bootstrap, topic, 0, 60)
    delete_before(broker.bootstrap, topic, 1, 100)
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                                "failOnDataLoss": str(fail_on_data_loss).lower()})
    if fail_on_data_loss:
        with pytest.raises(KafkaDataLossError, match=rf"{topic}-0: offsets 20\.\.59 are gone"):
            offsets_read(reader, [KafkaRange(topic, 0, 20, 100)])
        return
    assert offsets_read(reader, [KafkaRange(topic, 0, 20, 100)]) == list(range(60, 100))
    assert offsets_read(reader, [KafkaRange(topic, 1, 10, 100),
                                 KafkaRange(topic, 0, 70, 80)]) == list(range(70, 80))


def test_a_decoding_task_reports_the_ranges_it_skipped_to_the_driver(broker: Any, topic: str
                                                                    ) -> None:
    """With failOnDataLoss off the loss is found on the executor; a packed row of its own
    carries the count to the driver (which adds it to data_loss_total), once per range."""
    fill_two_partitions(broker.bootstrap, topic, 50)  # records no decoder takes: quarantine
    delete_before(broker.bootstrap, topic, 0, 30)
    reader = KafkaStreamReader({
        "kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
        "failOnDataLoss": "false", "decode": DecodeContext(
            topic_formats={topic: "jolokia"}, topic_clusters={}, identity=IdentityConfig(),
            max_skew_seconds=60.0, max_message_bytes=1024).to_json()})

    def packed(ranges: list[KafkaRange]) -> pa.Table:
        return pa.Table.from_batches(list(reader.read(ReadTask(ranges))))

    lossy = packed([KafkaRange(topic, 0, 10, 50), KafkaRange(topic, 1, 0, 50)])
    assert lost_ranges(lossy) == 1
    assert unpack(lossy)[1] == 20 + 50  # every record still there was read
    assert lost_ranges(packed([KafkaRange(topic, 1, 0, 50)])) == 0


def test_a_range_starting_at_a_transaction_marker_is_no_data_loss(broker: Any, topic: str
                                                                  ) -> None:
    """A committed transaction ends with a control record the consumer never delivers, so
    a range may begin at an offset no record has: that gap is not a loss."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    for batch in range(2):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=b"t%d-%d" % (batch, i), partition=2)
        producer.commit_transaction(30)
    # offsets 0-4 the first transaction, 5 its commit marker, 6-10 the second, 11 its marker
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                                "failOnDataLoss": "true"})
    assert offsets_read(reader, [KafkaRange(topic, 2, 5, 12)]) == list(range(6, 11))


def test_records_keep_key_value_and_the_producer_timestamp(broker: Any, topic: str) -> None:
    """The record columns are built column-wise (timestamps by Arrow): each must still be the
    record's own, a missing key stays null, and the create time survives to the microsecond."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    sent = [(f"k{i}".encode() if i % 2 else None, f"v{i}".encode(), 1_714_564_800_123 + i)
            for i in range(40)]
    for key, value, millis in sent:
        producer.produce(topic, key=key, value=value, partition=1, timestamp=millis)
    producer.flush(30)
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    rows = [row for batch in reader.read(ReadTask([KafkaRange(topic, 1, 0, 40)]))
            for row in batch.to_pylist()]
    assert [(r["key"], r["value"], int(r["timestamp"].timestamp() * 1000)) for r in rows] == sent
    assert {(r["topic"], r["partition"], r["timestampType"]) for r in rows} == {(topic, 1, 0)}
    assert [r["offset"] for r in rows] == list(range(40))


@pytest.mark.parametrize("items", [
    [b"{}", b"", "é".encode(), b"\x00\xff" * 300, b"x"],
    [b"a", None, b"", None],  # a tombstone or a record without a key
    [],
])
def test_a_binary_column_holds_each_item_as_the_builder_would(items: list[bytes | None]
                                                             ) -> None:
    """Keys and values are joined once and cut by their lengths: every item must come back
    whole, in order, with nulls kept, in a column Arrow itself finds valid."""
    import pyarrow as pa

    column = binary_column(items)
    column.validate(full=True)
    assert column.type == pa.binary()
    assert column.to_pylist() == items
    assert column.equals(pa.array(items, pa.binary()))


def test_the_reader_waits_briefly_at_a_range_end_unless_told_otherwise() -> None:
    options = {"kafka.bootstrap.servers": "k:9092"}
    assert int(reader_config(options)["fetch.wait.max.ms"]) <= 50
    assert reader_config({**options, "kafka.fetch.wait.max.ms": "200"})["fetch.wait.max.ms"] == "200"
    override = {**options, "kafka.fetch.queue.backoff.ms": "500"}
    assert reader_config(override)["fetch.queue.backoff.ms"] == "500"


def test_a_subscription_that_matches_nothing_says_so_until_it_does(
        broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A misspelt topic (or one not created yet) leaves the query idle with the broker
    answering: no alert sees it, so the source says it, once and not on every trigger,
    and says when there is something to read again."""
    from streaming.testbed.kafka import create_topic

    missing = f"not-yet-{time.monotonic_ns()}"
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap,
                                "subscribe": missing})
    caplog.set_level(logging.WARNING, "kafka_health.source")
    for _ in range(3):
        assert reader.latestOffset() == {}
    said = [r.getMessage() for r in caplog.records if "nothing to read" in r.getMessage()]
    assert said == [f"nothing to read: no partition of topics {missing} on Kafka at "
                    f"{broker.bootstrap}. A misspelt source.topics name, a topic not created "
                    f"yet or an ACL: the query reads nothing until it is there"]
    create_topic(broker.bootstrap, missing, partitions=2)
    assert reader.latestOffset() == {missing: {"0": 0, "1": 0}}
    assert "the source has partitions to read again" in caplog.text
    reader.stop()


class _ElectingConsumer:
    """Answers a partition's watermarks as a broker does while its leader moves: a few
    NOT_LEADER_FOR_PARTITION errors, then the offsets."""

    def __init__(self, refusals: int, code: int) -> None:
        self.refusals, self.code, self.asked = refusals, code, 0

    def get_watermark_offsets(self, partition: Any, timeout: float, cached: bool
                              ) -> tuple[int, int]:
        from confluent_kafka import KafkaError, KafkaException

        self.asked += 1
        if self.asked <= self.refusals:
            raise KafkaException(KafkaError(self.code))
        return 3, 42


def test_offsets_are_asked_again_while_a_partition_elects_its_leader() -> None:
    """Before the query has its first offsets any Kafka error stops it; a leader moving (a
    topic created a moment ago, an election) is not one, and other errors still are."""
    from confluent_kafka import KafkaError, KafkaException

    reader = KafkaStreamReader({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"})
    for code in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE):
        reader.offsets._meta = _ElectingConsumer(3, code)
        assert reader.offsets.watermarks("t", 0) == (3, 42) and reader.offsets._meta.asked == 4
    reader.offsets._meta = _ElectingConsumer(1, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        reader.offsets.watermarks("t", 0)
    assert reader.offsets._meta.asked == 1


def test_a_create_time_no_timestamp_can_hold_is_quarantined_by_a_decoding_task(broker: Any
                                                                             ) -> None:
    """A producer may write any long as CreateTime, and a topic whose
    message.timestamp.after.max.ms allows it stores it. The Python source's read task
    quarantines it as timestamp_out_of_range and goes on; the batch, and every replay of
    it, would fail if the conversion to microseconds raised (as Spark's own kafka source
    does: ArithmeticException, long overflow)."""
    from streaming.testbed.kafka import create_topic

    topic = f"far-future-{time.monotonic_ns()}"
    create_topic(broker.bootstrap, topic,
                 config={"message.timestamp.after.max.ms": str(2**63 - 1)})
    read = (b'{"request": {"mbean": "kafka.server:type=ReplicaManager,'
            b'name=UnderMinIsrPartitionCount", "attribute": "Value"}, "value": 2, '
            b'"status": 200}')
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=read, key=b"c1/1")
    producer.produce(topic, value=read, key=b"c1/1", timestamp=10**16)
    producer.produce(topic, value=read, key=b"c1/2")
    assert producer.flush(30) == 0
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                                "decode": DecodeContext().to_json()})
    decoded, records = unpack(pa.Table.from_batches(list(reader.read(ReadTask(
        [KafkaRange(topic, 0, 0, 3)])))))
    assert records == 3
    reasons = [r.split(":")[0] if r else None for r in decoded["reject_reason"].to_pylist()]
    assert reasons == [None, "timestamp_out_of_range", None]
    assert decoded["broker"].to_pylist() == ["1", None, "2"]


def test_a_range_of_large_records_is_read_in_chunks_bounded_by_their_bytes(broker: Any
                                                                          ) -> None:
    """10,000 records of a few hundred KB would be gigabytes in one chunk: the reader takes
    fewer records a consume() once it has seen their size (and few before it has), so a
    chunk's values stay near CHUNK_BYTES; small records still come CHUNK at a time."""
    from streaming.source.records import CHUNK, CHUNK_BYTES, FIRST_CHUNK
    from streaming.testbed.kafka import create_topic

    topic = f"large-{time.monotonic_ns()}"
    create_topic(broker.bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    large, small = b"x" * 900_000, b"y" * 50
    for _ in range(60):
        producer.produce(topic, value=large, partition=0)
    for _ in range(CHUNK + 500):
        producer.produce(topic, value=small, partition=1)
    assert producer.flush(60) == 0
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    chunks = list(reader.read(ReadTask([KafkaRange(topic, 0, 0, 60),
                                        KafkaRange(topic, 1, 0, CHUNK + 500)])))
    large_chunks = [c for c in chunks if c.column("partition")[0].as_py() == 0]
    assert sum(c.num_rows for c in large_chunks) == 60
    assert max(c.column("value").nbytes for c in large_chunks) <= CHUNK_BYTES + len(large)
    small_chunks = [c.num_rows for c in chunks if c.column("partition")[0].as_py() == 1]
    assert sum(small_chunks) == CHUNK + 500 and max(small_chunks) > 10 * FIRST_CHUNK


def test_a_broker_that_hangs_during_a_read_is_waited_out(
        broker: Any, topic: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A hung metrics broker (frozen, cut off: no answer at all, unlike a refused
    connection) must not fail the batch after the stall limit: the query would stop and,
    restarted, stop again for as long as the broker hangs. The read waits, says so, and
    reads every record once the broker answers."""
    import signal
    import threading

    from streaming.source import partition_reader

    fill_two_partitions(broker.bootstrap, topic, 50)
    monkeypatch.setattr(partition_reader, "STALL_SECONDS", 2.0)
    monkeypatch.setattr(partition_reader, "GONE_CHECK_SECONDS", 0.5)
    caplog.set_level(logging.WARNING, "kafka_health.source")
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    read: list[int] = []
    failed: list[BaseException] = []

    def read_range() -> None:
        try:
            read.extend(offsets_read(reader, [KafkaRange(topic, 0, 0, 50)]))
        except BaseException as err:  # noqa: BLE001 - the test reports it
            failed.append(err)

    node = broker.nodes[0]
    node.signal(signal.SIGSTOP)
    try:
        thread = threading.Thread(target=read_range, daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while "does not answer" not in caplog.text or time.monotonic() < deadline - 50:
            assert time.monotonic() < deadline and thread.is_alive(), failed
            time.sleep(0.2)
    finally:
        node.signal(signal.SIGCONT)
    thread.join(60)
    assert not thread.is_alive() and not failed
    assert read == list(range(50))
