"""A topic deleted and created again while the job is down: offsets alone cannot tell it
once the new topic has grown past the checkpoint's offsets, its topic id can."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from streaming.source.errors import KafkaDataLossError
from streaming.source.stream import KafkaStreamReader
from streaming.testbed.kafka import create_topic


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"m{i}".encode())
    assert producer.flush(30) == 0


def recreate(bootstrap: str, topic: str) -> None:
    """Delete the topic, wait until the broker no longer lists it, create it again."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=5).topics:
        assert time.monotonic() < deadline, f"{topic} still listed 30 s after its deletion"
        time.sleep(0.2)
    create_topic(bootstrap, topic)


def checkpointed(checkpoint: Path, end: dict[str, Any]) -> None:
    """The offset log entry Spark writes for a planned batch (version, metadata, offsets)."""
    import json

    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / "0").write_text(
        "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0}) + "\n"
        + json.dumps(end))


def reader(bootstrap: str, topic: str, checkpoint: Path, fail: bool = True,
           cap: int | None = None) -> KafkaStreamReader:
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
               "checkpointLocation": str(checkpoint), "failOnDataLoss": str(fail).lower()}
    if cap:
        options["maxOffsetsPerTrigger"] = str(cap)
    return KafkaStreamReader(options)


def read_offsets(source: KafkaStreamReader, start: dict, end: dict) -> list[int]:
    return [offset for task in source.partitions(start, end)
            for batch in source.read(task) for offset in batch.column("offset").to_pylist()]


@pytest.fixture
def committed(broker: Any, tmp_path: Path) -> tuple[str, Path, dict]:
    """A topic of 5 records that a query read to its end and committed."""
    topic = f"recreated-{time.monotonic_ns()}"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 5)
    first = reader(broker.bootstrap, topic, tmp_path)
    end = first.latestOffset()
    assert read_offsets(first, first.initialOffset(), end) == [0, 1, 2, 3, 4]
    checkpointed(tmp_path, end)
    first.commit(end)
    first.stop()
    return topic, tmp_path, end


@pytest.fixture
def recreated(broker: Any, committed: tuple[str, Path, dict]) -> tuple[str, Path, dict]:
    """The committed topic deleted and created again with 8 records: past the old 5."""
    topic, _, _ = committed
    recreate(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 8)
    return committed


def test_a_restart_after_the_topic_was_recreated_and_grew_past_the_offsets_stops(
        broker: Any, recreated: tuple[str, Path, dict]) -> None:
    topic, checkpoint, end = recreated  # past the old topic's 5: the offsets look fine
    restarted = reader(broker.bootstrap, topic, checkpoint)
    with pytest.raises(KafkaDataLossError, match=f"topic {topic} was deleted and created "
                       "again.*fail_on_data_loss: false to read the new topic from its "
                       "first offset"):
        restarted.latestOffset()
    restarted.stop()
    # Refused, the checkpoint still knows the old topic: the next start refuses too.
    again = reader(broker.bootstrap, topic, checkpoint)
    with pytest.raises(KafkaDataLossError):
        again.latestOffset()
    again.stop()


def test_without_fail_on_data_loss_the_new_topic_is_read_from_its_start(
        broker: Any, recreated: tuple[str, Path, dict]) -> None:
    topic, checkpoint, end = recreated
    restarted = reader(broker.bootstrap, topic, checkpoint, fail=False)
    latest = restarted.latestOffset()
    assert latest == {topic: {"0": 8}}
    assert read_offsets(restarted, end, latest) == list(range(8))
    # Spark may plan a batch's partitions twice: the same ranges both times.
    assert read_offsets(restarted, end, latest) == list(range(8))
    restarted.stop()
    # Not committed, that batch is read again after a restart, not lost.
    again = reader(broker.bootstrap, topic, checkpoint, fail=False)
    assert again.latestOffset() == latest
    assert read_offsets(again, end, latest) == list(range(8))
    again.commit(latest)  # Spark commits the batch's end when it plans the next
    produce(broker.bootstrap, topic, 2)
    newer = again.latestOffset()
    assert read_offsets(again, latest, newer) == [8, 9]
    again.stop()
    # The new topic's id is the checkpoint's now: a plain restart resumes where it was.
    produce(broker.bootstrap, topic, 1)
    checkpointed(checkpoint, newer)
    plain = reader(broker.bootstrap, topic, checkpoint)
    assert read_offsets(plain, newer, plain.latestOffset()) == [10]
    plain.stop()


def test_a_batch_planned_before_the_restart_is_replayed_from_the_new_topics_start(
        broker: Any, committed: tuple[str, Path, dict]) -> None:
    """Spark re-runs the newest planned batch without asking for new offsets: the ids are
    compared there too."""
    topic, checkpoint, end = committed
    recreate(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 8)
    planned = {topic: {"0": 8}}
    refused = reader(broker.bootstrap, topic, checkpoint)
    with pytest.raises(KafkaDataLossError):
        refused.partitions(end, planned)
    refused.stop()
    replay = reader(broker.bootstrap, topic, checkpoint, fail=False)
    assert read_offsets(replay, end, planned) == list(range(8))
    replay.stop()


def test_a_plain_restart_resumes_at_the_checkpoints_offsets(
        broker: Any, committed: tuple[str, Path, dict]) -> None:
    topic, checkpoint, end = committed
    produce(broker.bootstrap, topic, 3)
    restarted = reader(broker.bootstrap, topic, checkpoint)
    latest = restarted.latestOffset()
    assert read_offsets(restarted, end, latest) == [5, 6, 7]
    restarted.stop()


def next_batch(source: KafkaStreamReader, start: dict) -> tuple[dict, list[int]]:
    """What Spark does for a batch: ask for the end, plan the batch, read it."""
    end = source.latestOffset()
    return end, (read_offsets(source, start, end) if end != start else [])


def test_a_capped_restart_reads_the_new_topic_once_in_order(
        broker: Any, committed: tuple[str, Path, dict]) -> None:
    """With maxOffsetsPerTrigger the new topic takes several batches: each goes on from
    the last, none counts from the log start again (which stalled or re-read)."""
    topic, checkpoint, end = committed
    recreate(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 8)
    source = reader(broker.bootstrap, topic, checkpoint, fail=False, cap=3)
    read: list[int] = []
    for _ in range(4):
        end, offsets = next_batch(source, end)
        read += offsets
    assert read == list(range(8))
    source.stop()


def test_a_restart_after_the_restart_batch_was_committed_goes_on_after_it(
        broker: Any, recreated: tuple[str, Path, dict]) -> None:
    topic, checkpoint, end = recreated
    first = reader(broker.bootstrap, topic, checkpoint, fail=False)
    planned, offsets = next_batch(first, end)
    assert offsets == list(range(8))
    first.stop()  # stopped after the batch, before Spark planned another
    checkpointed(checkpoint, planned)
    produce(broker.bootstrap, topic, 2)
    again = reader(broker.bootstrap, topic, checkpoint)
    assert again.partitions(planned, planned) == []  # Spark's first call after a restart
    assert next_batch(again, planned)[1] == [8, 9]
    again.stop()


def test_a_new_topic_no_longer_than_the_old_is_read_once_it_grows(
        broker: Any, committed: tuple[str, Path, dict]) -> None:
    """Recreated with as many records as the old one had, its end equals the checkpoint's:
    Spark plans no batch until it grows, and the restart waits for that batch."""
    topic, checkpoint, end = committed
    recreate(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 5)
    source = reader(broker.bootstrap, topic, checkpoint, fail=False)
    assert source.latestOffset() == end  # no batch
    source.stop()
    waiting = reader(broker.bootstrap, topic, checkpoint, fail=False)  # and across a restart
    assert waiting.latestOffset() == end
    produce(broker.bootstrap, topic, 1)
    assert next_batch(waiting, end)[1] == list(range(6))
    waiting.stop()


def test_sparks_call_for_the_committed_batch_at_a_restart_does_not_use_up_the_restart(
        broker: Any, committed: tuple[str, Path, dict]) -> None:
    """On a restart Spark first asks for the committed batch's partitions with start ==
    end, before any latestOffset(): seen there, the recreation is still the next batch's
    to read (it was taken for that empty batch's, and the new topic's records below the
    old offsets were skipped)."""
    topic, checkpoint, end = committed
    recreate(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 8)
    source = reader(broker.bootstrap, topic, checkpoint, fail=False)
    assert source.partitions(end, end) == []
    assert next_batch(source, end)[1] == list(range(8))
    source.stop()
