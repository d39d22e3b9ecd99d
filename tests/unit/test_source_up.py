"""`kafka_health_pipeline_source_up` on an idle query: whether the metrics broker answers,
also before any batch has run (an empty topic at start is not an unreachable broker)."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.config import load_config
from streaming.exporter import Exporter
from streaming.logsetup import VERBOSITY_ENV
from streaming.runtime.lag_probe import LagProbe
from streaming.runtime.progress import ProgressListener
from streaming.source.kafka_python import KafkaStreamReader, reader_config
from streaming.testbed.kafka import free_port


def source_up_when_idle(bootstrap: str, last_end: dict[str, Any] | None) -> float | None:
    config = load_config(None, environ={"KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": bootstrap})
    exporter, probe = Exporter(), LagProbe(config)
    listener = ProgressListener(None, exporter, probe, printer=None)  # type: ignore[arg-type]
    listener.last_end = last_end
    try:
        listener.onQueryIdle(None)
    finally:
        probe.close()
    return exporter.registry.get_sample_value("kafka_health_pipeline_source_up")


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
    planner = KafkaStreamReader(options)._consumer()
    task = Consumer(reader_config(options))
    try:
        for client in (planner, task):
            with pytest.raises(KafkaException):
                client.list_topics(timeout=1)
    finally:
        planner.close()
        task.close()
    assert ("rdkafka#" in capfd.readouterr().err) == shown
