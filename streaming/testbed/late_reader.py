"""The demo's consumer group that falls behind retention: a topic kept 60 s, written all
along, and a group that reads a little, commits, and stops. Once Kafka deletes the
segments past its committed offset, the group has lost those records unread: what the
consumer-group poller pages on (loss to retention)."""

from __future__ import annotations

import contextlib
import threading
import time

from streaming.logsetup import kafka_logger
from streaming.testbed.kafka import create_topic

TOPIC = "audit-log"
GROUP = "billing-nightly"
RETENTION_MS = 60_000


class LateReader:
    """`start()` creates the topic, writes to it on a thread, and lets the group commit
    once; `stop()` ends the writing."""

    def __init__(self, bootstrap: str, rate: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.rate = rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-late-reader", daemon=True)

    def start(self) -> LateReader:
        create_topic(self.bootstrap, TOPIC, partitions=2, replication=3,
                     config={"retention.ms": str(RETENTION_MS), "segment.ms": "5000"})
        self._thread.start()
        return self

    def _run(self) -> None:
        from confluent_kafka import Consumer, Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20,
                             "logger": kafka_logger()})
        committed_at: float | None = time.monotonic() + 10  # a few records in, the group reads and stops
        while not self._stop.wait(1.0 / self.rate):
            with contextlib.suppress(BufferError):
                producer.produce(TOPIC, b"audit entry")
            producer.poll(0)
            if committed_at is not None and time.monotonic() >= committed_at:
                consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                                     "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False, "logger": kafka_logger()})
                with contextlib.suppress(Exception):  # a broker down now: tried again
                    consumer.subscribe([TOPIC])
                    read = [m for m in consumer.consume(50, timeout=10) if m.error() is None]
                    if read:
                        consumer.commit(asynchronous=False)
                        committed_at = None
                consumer.close()
        producer.flush(5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
