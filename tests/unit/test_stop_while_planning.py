"""A stop while the trigger only asks the source for offsets has no batch to wait for.

During an outage of the metrics Kafka a trigger sits in the source's offset request,
which waits out the Kafka client's timeouts: taken for a batch in flight, a SIGTERM then
waited spark.stop_timeout_seconds and warned of a cancelled batch that never was
(measured: 27 s to stop, against Kubernetes' 30 s grace period)."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import pytest

from streaming.job import Job


def await_batch_end(message: str, caplog: pytest.LogCaptureFixture) -> bool:
    """Whether the stop waited its whole timeout (and said it cancels a batch)."""
    job = Job.__new__(Job)  # only the listener's event is needed, no Spark
    job.listener = SimpleNamespace(batch_committed=threading.Event())  # type: ignore[assignment]
    query = SimpleNamespace(status={"isTriggerActive": True, "message": message})
    caplog.clear()
    with caplog.at_level(logging.WARNING, "kafka_health.job"):
        job._await_batch_end(query, timeout=0.3)  # type: ignore[arg-type]
    return "stopping mid-batch" in caplog.text


def test_a_trigger_asking_for_offsets_is_not_waited_on(caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    assert not await_batch_end("Getting offsets from KafkaHealthKafkaSource[...]", caplog)


def test_a_batch_processing_data_is_waited_on(caplog: pytest.LogCaptureFixture) -> None:
    assert await_batch_end("Processing new data", caplog)
