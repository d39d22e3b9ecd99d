"""Hostile records mixed into a running demo's metrics topic, and the verdict on them.

The feed keeps hostile records at a given fraction of the topic's records (it watches the
topic's end offsets, so the shipper's real rate sets the pace), drawn at random from every
class of tests/hostile.py that a Kafka 4 broker accepts, and remembers where each landed.
`verdict` then reads the quarantine and bronze tables: each record that must be
quarantined is, exactly once, with its reason; each accepted one reached bronze and was
never quarantined.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc
from confluent_kafka import Consumer, Producer, TopicPartition
from deltalake import DeltaTable

from streaming.decode.records import reason_category
from tests.hostile import Bounds, Hostile, every_class

# The demo's real Jolokia bulk reads stay well inside these (a few hundred samples, tens of KB).
SOAK_BOUNDS = Bounds(max_message_bytes=512 * 1024, max_samples_per_record=5000)


@dataclass
class HostileFeed:
    bootstrap: str
    topic: str
    fraction: float
    topic_format: str = "jolokia"  # a record in another format is quarantined, reason aside
    key: bytes = b"demo/1"  # claim a real broker's identity: it must not be hurt
    seed: int = 7
    landed: dict[tuple[int, int], Hostile] = field(default_factory=dict)
    failed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def classes(self, now: float, rnd: random.Random) -> list[Hostile]:
        # Kafka 4 refuses record times more than an hour ahead itself
        return [h for h in every_class(now, rnd, self.key, SOAK_BOUNDS) if h.timestamp_ms is None]

    def end_offsets(self, consumer: Consumer) -> int:
        meta = consumer.list_topics(self.topic, timeout=10).topics[self.topic]
        total = 0
        for partition in meta.partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, partition),
                                                     timeout=10)
            total += high
        return total

    def run(self) -> None:
        rnd = random.Random(self.seed)
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "message.max.bytes": 2 << 20, "linger.ms": 5})
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "kh-soak-feed"})
        sent = 0

        def delivered(hostile: Hostile):  # noqa: ANN202
            def done(err, msg) -> None:  # noqa: ANN001
                if err:
                    self.failed += 1
                else:
                    self.landed[(msg.partition(), msg.offset())] = hostile
            return done

        try:
            while not self.stop.wait(2.0):
                good = self.end_offsets(consumer) - sent
                due = int(self.fraction / (1 - self.fraction) * good) - sent
                pool = self.classes(time.time(), rnd)
                for _ in range(max(due, 0)):
                    hostile = rnd.choice(pool)
                    producer.produce(self.topic, value=hostile.value, key=hostile.key,
                                     on_delivery=delivered(hostile))
                    sent += 1
                producer.poll(0)
            producer.flush(30)
        finally:
            consumer.close()

    def start(self) -> HostileFeed:
        threading.Thread(target=self.run, name="hostile-feed", daemon=True).start()
        return self

    def verdict(self, delta_root: Path) -> dict[str, object]:
        """What became of every hostile record, from the tables the demo's job wrote."""
        key = ["source_topic", "source_partition", "source_offset"]
        quarantine = DeltaTable(str(delta_root / "quarantine")).to_pyarrow_table(
            columns=[*key, "reason"])
        quarantine = quarantine.filter(pc.equal(quarantine["source_topic"], self.topic))
        bronze = DeltaTable(str(delta_root / "bronze")).to_pyarrow_dataset().to_table(
            columns=key)
        in_bronze = set(zip(bronze["source_partition"].to_pylist(),
                            bronze["source_offset"].to_pylist(), strict=True))
        times: Counter[tuple[int, int]] = Counter()
        reasons: dict[tuple[int, int], str] = {}
        for part, off, reason in zip(quarantine["source_partition"].to_pylist(),
                                     quarantine["source_offset"].to_pylist(),
                                     quarantine["reason"].to_pylist(), strict=True):
            times[(part, off)] += 1
            reasons[(part, off)] = reason_category(reason)
        wrong: Counter[str] = Counter()
        for where, hostile in self.landed.items():
            if hostile.fmt not in (None, self.topic_format):
                if where not in reasons:
                    wrong[f"{hostile.name} ({hostile.fmt} on a {self.topic_format} topic): "
                          "not quarantined"] += 1
                continue
            if hostile.reason is not None and reasons.get(where) != hostile.reason:
                wrong[f"{hostile.name}: {reasons.get(where)} instead of {hostile.reason}"] += 1
            if (hostile.reason is None or hostile.also_bronze) and where not in in_bronze:
                wrong[f"{hostile.name}: not in bronze"] += 1
            if hostile.reason is None and where in reasons:
                wrong[f"{hostile.name}: quarantined as {reasons[where]}"] += 1
        return {
            "hostile_records": len(self.landed),
            "hostile_by_class": dict(Counter(h.name for h in self.landed.values())),
            "produce_failures": self.failed,
            "quarantined_twice": sum(1 for n in times.values() if n > 1),
            "quarantined_not_hostile": sorted({reasons[w] for w in reasons
                                               if w not in self.landed}),
            "wrong": dict(wrong),
        }
