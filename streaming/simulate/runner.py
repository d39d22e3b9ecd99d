"""Drive a model cluster through time and produce its scrapes to a metrics topic."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Producer

from streaming.logsetup import kafka_logger
from streaming.simulate.formats import ENCODERS
from streaming.simulate.model import ClusterModel
from streaming.simulate.samples import broker_samples
from streaming.simulate.truth import GroundTruth

LOG = logging.getLogger("kafka_health.simulate")


@dataclass
class Event:
    """A change to the model at `at` seconds after the simulation start."""

    at: float
    action: Callable[[ClusterModel], object]
    label: str = ""


class Simulator:
    def __init__(
        self,
        model: ClusterModel,
        bootstrap: str,
        topic: str,
        fmt: str = "jolokia",
        scrape_interval: float = 15.0,
        start: float | None = None,
        per_partition: bool = True,
        window_seconds: int = 60,
        producer_conf: dict[str, str] | None = None,
    ) -> None:
        if fmt not in ENCODERS:
            raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(ENCODERS)}")
        self.model = model
        self.topic = topic
        self.encode = ENCODERS[fmt]
        self.scrape_interval = scrape_interval
        self.start = float(int(start if start is not None else time.time()))
        self.now = self.start
        self.per_partition = per_partition
        self.truth = GroundTruth(window_seconds)
        self.records = 0
        # records Kafka did not take (no broker answered in message.timeout.ms, a refusal),
        # and the last such error: a run that delivered nothing must not say it produced
        self.undelivered = 0
        self.delivery_error: str | None = None
        self.hold: Callable[[int, float], bool] | None = None
        self.held: list[tuple[bytes | None, bytes]] = []
        self.held_samples = 0
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                  "batch.num.messages": 10000, "logger": kafka_logger(),
                                  **(producer_conf or {})})

    def _delivered(self, err: object, _msg: object) -> None:
        if err is not None:
            self.undelivered += 1
            self.delivery_error = str(err)

    def tick(self) -> int:
        """One scrape of every live, reporting broker at the current simulated time."""
        produced = 0
        for broker_id, state in self.model.brokers.items():
            if not (state.up and state.reporting):
                continue
            samples = broker_samples(self.model, broker_id, self.scrape_interval,
                                     self.per_partition)
            held = self.hold is not None and self.hold(broker_id, self.now - self.start)
            self.held_samples += len(samples) if held else 0
            for key, value in self.encode(self.model.name, broker_id, self.now, samples):
                if held:
                    self.held.append((key, value))  # delivered late by release_held()
                else:
                    self._produce(key, value)
            self.truth.observe(self.model, broker_id, self.now, len(samples))
            produced += len(samples)
        return produced

    def _produce(self, key: bytes | None, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(self.topic, value=value, key=key,
                                      timestamp=int(time.time() * 1000),
                                      on_delivery=self._delivered)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.records += 1
        self.producer.poll(0)

    def run(
        self,
        duration: float,
        events: list[Event] | None = None,
        realtime: bool = False,
        stop: Callable[[], bool] | None = None,
    ) -> int:
        """Scrape every interval for `duration` simulated seconds, applying events on time."""
        pending = sorted(events or [], key=lambda e: e.at)
        produced = 0
        end = self.now + duration
        while self.now < end and not (stop and stop()):
            while pending and pending[0].at <= self.now - self.start:
                event = pending.pop(0)
                LOG.info("t+%.0fs %s", self.now - self.start, event.label or event.action)
                event.action(self.model)
            produced += self.tick()
            self.now += self.scrape_interval
            if realtime:
                self.producer.poll(0)
                delay = self.now - time.time()
                if delay > 0:
                    time.sleep(delay)
        self.producer.flush(30)
        return produced

    def release_held(self, reverse: bool = True) -> int:
        """Produce the held-back scrapes now, newest first by default (late and out of order)."""
        held, self.held = self.held, []
        for key, value in (reversed(held) if reverse else held):
            self._produce(key, value)
        self.producer.flush(30)
        return len(held)

    def flush(self) -> None:
        self.producer.flush(30)
