"""The stall watchdog's clock (kafka_health_pipeline_last_batch_timestamp_seconds) at start."""

from __future__ import annotations

import time

from streaming.exporter import Exporter
from streaming.runtime.progress import ProgressListener


def test_a_started_query_is_not_stalled_before_its_first_batch() -> None:
    """KafkaHealthPipelineStalled (critical) reads time() - this gauge; at 0 a restarted driver
    would page as stalled for as long as its first batch takes."""
    exporter = Exporter()
    listener = ProgressListener(None, exporter, lambda end: None, printer=None)  # type: ignore[arg-type]
    before = time.time()
    listener.onQueryStarted(None)
    get = exporter.registry.get_sample_value
    assert get("kafka_health_pipeline_up") == 1
    started = get("kafka_health_pipeline_last_batch_timestamp_seconds")
    assert started is not None and before <= started <= time.time()
