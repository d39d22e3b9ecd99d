"""`kafka_health_pipeline_source_up` on an idle query: whether the metrics broker answers,
also before any batch has run (an empty topic at start is not an unreachable broker)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from streaming.config import load_config
from streaming.exporter import Exporter
from streaming.logsetup import VERBOSITY_ENV
from streaming.runtime.lag_probe import LagProbe
from streaming.runtime.progress import ProgressListener
from streaming.source.partition_reader import reader_config
from streaming.source.stream import KafkaStreamReader
from streaming.testbed.kafka import free_port


def when_idle(bootstrap: str, last_end: dict[str, Any] | None, gauge: str,
              **source: str) -> float | None:
    """The gauge after an idle tick of a query subscribed as `source` says (YAML)."""
    environ = {"KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": bootstrap,
               **{f"KAFKA_HEALTH__SOURCE__{key.upper()}": value for key, value in source.items()}}
    config = load_config(None, environ=environ)
    exporter, probe = Exporter(), LagProbe(config)
    listener = ProgressListener(None, exporter, probe, printer=None)  # type: ignore[arg-type]
    listener.last_end = last_end
    try:
        listener.onQueryStarted(None)
        listener.onQueryIdle(None)
    finally:
        probe.close()
    return exporter.registry.get_sample_value(gauge)


def source_up_when_idle(bootstrap: str, last_end: dict[str, Any] | None) -> float | None:
    return when_idle(bootstrap, last_end, "kafka_health_pipeline_source_up")


def test_an_idle_query_counts_the_partitions_it_can_read(broker: Any, topic: str) -> None:
    """0 with the broker up is a subscription that reads nothing (KafkaHealthSourceEmpty):
    a misspelt name, a topic not there yet, or one the broker refuses."""
    gauge = "kafka_health_pipeline_source_partitions"
    assert when_idle(broker.bootstrap, None, gauge, topics=f"[{{name: {topic}}}]") == 3
    assert when_idle(broker.bootstrap, None, gauge, topics="[{name: no-such-topic}]") == 0
    assert when_idle(broker.bootstrap, None, gauge, subscribe_pattern=f"{topic[:-1]}.") == 3
    # the broker down: unknown, not 0 (KafkaHealthSourceUnreachable says that)
    assert math.isnan(when_idle(f"127.0.0.1:{free_port()}", None, gauge))


def test_a_reachable_broker_is_up_before_any_batch(broker: Any) -> None:
    assert source_up_when_idle(broker.bootstrap, None) == 1


def test_a_reachable_broker_is_up_after_batches(broker: Any, topic: str) -> None:
    assert source_up_when_idle(broker.bootstrap, {topic: {"0": 0, "1": 0, "2": 0}}) == 1


def test_nothing_listening_is_down_and_librdkafka_stays_off_stderr(
        capfd: pytest.CaptureFixture[str]) -> None:
    """While the broker is down the probe runs every idle second and librdkafka repeats its
    connection errors many times a second: they go through the job's logging (shown from
    -v on), not straight to the job's output, which says the source is down itself."""
    assert source_up_when_idle(f"127.0.0.1:{free_port()}", None) == 0
    assert "rdkafka#" not in capfd.readouterr().err


@pytest.mark.parametrize("verbosity, shown", [("0", False), ("1", True)], ids=["quiet", "-v"])
def test_the_sources_clients_keep_librdkafka_off_stderr_unless_verbose(
        verbosity: str, shown: bool, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """The source's planner (in the process Spark starts for it) and its read tasks hold
    librdkafka clients whose stderr no logging of the job's reaches: with the metrics
    broker down, each wrote an error line per reconnect, about 20 a second (1,184 lines in
    a one-minute outage), beside the source's own warning. They now say only what the
    command line's verbosity asks for (-v: librdkafka's warnings and errors)."""
    from confluent_kafka import Consumer, KafkaException

    monkeypatch.setenv(VERBOSITY_ENV, verbosity)
    options = {"kafka.bootstrap.servers": f"127.0.0.1:{free_port()}", "subscribe": "metrics"}
    planner = KafkaStreamReader(options).offsets.consumer()
    task = Consumer(reader_config(options))
    try:
        for client in (planner, task):
            with pytest.raises(KafkaException):
                client.list_topics(timeout=1)
    finally:
        planner.close()
        task.close()
    assert ("rdkafka#" in capfd.readouterr().err) == shown
