"""Consumer groups on a real broker (the suite's metrics broker): a group that stops
reading a topic with short retention loses, per partition, exactly the log start minus its
committed offset once Kafka deletes the segments; a group that keeps up, a compacted
topic's group and a group that never committed lose nothing. Each poll goes the job's way
(the poller's read, the service's Delta tables and /metrics series).

The truth is read by the test through the consumer's API (committed offsets of the group,
low watermarks), not the Admin API calls the poller makes.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable

from streaming.clients.group_poller import GroupPoller
from streaming.clients.group_status import PartitionStatus, RetentionLoss
from streaming.clients.groups import GroupSettings
from streaming.clients.service import ClientsService
from streaming.clients.store import ClientsStore
from streaming.config import load_config
from streaming.exporter import Exporter
from streaming.testbed.kafka import create_topic
from tests.conftest import wait_for

pytestmark = pytest.mark.integration

# names of this run's own: the broker is the whole suite's
RUN = f"groups-{uuid.uuid4().hex[:6]}-"
RETAINED = f"{RUN}retained"
COMPACTED = f"{RUN}compacted"
STOPS, KEEPS_UP, COMPACTED_STOPS, NEVER_COMMITS = (
    f"{RUN}{name}" for name in ("stops", "keeps-up", "compacted-stops", "never-commits"))
PARTITIONS = 3


def _consume(bootstrap: str, group: str, topic: str, per_partition: int, commit: bool
             ) -> Consumer:
    """A consumer of `group` that reads `per_partition` records of every partition (all
    assigned from the start) and, when `commit`, commits where it is on each."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    read: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while min(read.get(p, 0) for p in range(PARTITIONS)) < per_partition:
        assert time.monotonic() < deadline, f"{group} read {read}"
        for message in consumer.consume(100, timeout=0.5):
            if message.error() is None:
                read[message.partition()] = read.get(message.partition(), 0) + 1
    if commit:
        _commit(consumer)
    return consumer


def _commit(consumer: Consumer) -> None:
    consumer.commit(offsets=consumer.position(consumer.assignment()), asynchronous=False)


def _truth(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (committed, log start) through the consumer's API."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = {tp.partition: tp.offset for tp in consumer.committed(parts, timeout=10)}
        return {p: (committed[p], consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=10)[0]) for p in range(PARTITIONS)}
    finally:
        consumer.close()


def _sample(exporter: Exporter, name: str, **labels: str) -> float | None:
    return exporter.registry.get_sample_value(name, labels)


def test_a_stopped_group_loses_what_retention_deleted_and_nobody_else_does(
        broker: Any, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, RETAINED, partitions=PARTITIONS, replication=1,
                 config={"retention.ms": "3000", "segment.ms": "1000"})
    create_topic(bootstrap, COMPACTED, partitions=PARTITIONS, replication=1,
                 config={"cleanup.policy": "compact", "segment.ms": "1000",
                         "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"})
    producing = threading.Event()
    producing.set()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        n = 0
        while producing.is_set():
            for topic in (RETAINED, COMPACTED):
                producer.produce(topic, key=str(n % 7).encode(), value=str(n).encode(),
                                 partition=n % PARTITIONS)
            n += 1
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(10)
    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = load_config(None, environ={
        "KAFKA_HEALTH__METADATA__CLUSTERS": f'{{"watched": {{"bootstrap_servers": "{bootstrap}"}}}}',
        "KAFKA_HEALTH__CONSUMER_GROUPS__ENABLED": "true",
        "KAFKA_HEALTH__CONSUMER_GROUPS__INCLUDE": f'["{RUN}.*"]'})
    exporter = Exporter()
    service = ClientsService(config, exporter)
    service.store = ClientsStore(str(tmp_path), "test-groups")
    poller = GroupPoller("watched", {"bootstrap.servers": bootstrap},
                         GroupSettings(include=(f"{RUN}.*",), window_polls=3), 30, 10,
                         service.record_groups)
    last: dict[tuple[str, str, int], PartitionStatus] = {}
    losses: list[RetentionLoss] = []

    def poll() -> None:
        read = poller.poll_once(admin)
        assert read.up, read.error
        service.record_groups(read)
        last.update({(s.group, s.topic, s.partition): s for s in read.statuses})
        losses.extend(read.losses)

    keeper = _consume(bootstrap, KEEPS_UP, RETAINED, 20, commit=True)
    try:
        _consume(bootstrap, STOPS, RETAINED, 20, commit=True).close()
        _consume(bootstrap, COMPACTED_STOPS, COMPACTED, 20, commit=True).close()
        never = _consume(bootstrap, NEVER_COMMITS, RETAINED, 5, commit=False)

        def stopped_group_lost() -> bool:
            for _ in range(10):  # the keeper reads and commits between polls
                keeper.consume(500, timeout=0.2)
                _commit(keeper)
            poll()
            return all(last.get((STOPS, RETAINED, p)) is not None
                       and last[(STOPS, RETAINED, p)].lost_to_retention > 0
                       for p in range(PARTITIONS))
        wait_for(stopped_group_lost, 120, "retention deleting what the stopped group did not read",
                 every=0.1)
        producing.clear()
        writer.join(30)
        # once writes stop, retention deletes up to the active segment and the log start
        # stays: the truth and the last poll are then of the same log
        previous: dict[int, tuple[int, int]] = {}

        def settled() -> bool:
            nonlocal previous
            now = _truth(bootstrap, STOPS, RETAINED)
            same, previous = now == previous, now
            time.sleep(3)
            return same
        wait_for(settled, 60, "the log start settled")
        keeper.consume(500, timeout=1)
        _commit(keeper)
        poll()
        poll()
        truth = _truth(bootstrap, STOPS, RETAINED)
        never.close()
    finally:
        producing.clear()
        keeper.close()

    for p, (committed, log_start) in truth.items():
        status = last[(STOPS, RETAINED, p)]
        assert log_start > committed >= 0, (p, committed, log_start)
        assert (status.committed, status.log_start) == (committed, log_start), status
        assert status.lost_to_retention == log_start - committed, status
        assert status.status == "error", status
        episode = [x for x in losses if x.group == STOPS and x.partition == p][-1]
        assert episode.lost == log_start - committed, episode
    assert {x.group for x in losses} == {STOPS}, losses
    others = {k: s.status for k, s in last.items() if k[0] != STOPS}
    assert {k[0] for k in others} == {KEEPS_UP, COMPACTED_STOPS}, others
    assert all(s == "ok" for k, s in others.items() if k[0] == KEEPS_UP), others
    assert all(s == "stopped" for k, s in others.items()
               if k[0] == COMPACTED_STOPS and last[k].lag_records > 0), others

    # the job's view of the same polls: the episodes in Delta, the series on /metrics
    lost = sum(log_start - committed for committed, log_start in truth.values())
    stored = DeltaTable(str(tmp_path / "consumer_group_losses")).to_pyarrow_table().to_pylist()
    assert {(r["group"], r["partition"]): r["lost"] for r in stored
            if r["committed"] == truth[r["partition"]][0]} == {
        (STOPS, p): log_start - committed for p, (committed, log_start) in truth.items()}
    assert _sample(exporter, "kafka_health_consumer_group_lost_to_retention_records_total",
                   cluster="watched", group=STOPS, topic=RETAINED) == lost
    assert _sample(exporter, "kafka_health_consumer_group_status", cluster="watched",
                   group=STOPS, topic=RETAINED, status="error") == 1
    assert _sample(exporter, "kafka_health_consumer_group_status", cluster="watched",
                   group=KEEPS_UP, topic=RETAINED, status="ok") == 1
    assert _sample(exporter, "kafka_health_consumer_groups_up", cluster="watched") == 1
    polled = DeltaTable(str(tmp_path / "consumer_group_status")).to_pyarrow_table()
    assert set(polled.column("group").to_pylist()) == {STOPS, KEEPS_UP, COMPACTED_STOPS}
