"""Every transport and naming scheme through the real streaming job decodes to the same
canonical samples as the Jolokia run of the same model state."""

from __future__ import annotations

import json
import time
import uuid

import pandas as pd
import pytest

from streaming.simulate.formats import ENCODERS
from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Event, Simulator
from streaming.testbed.kafka import create_topic
from tests.integration.helpers import run_until, table

pytestmark = pytest.mark.integration
COLUMNS = ["cluster", "broker", "ts", "metric", "attribute", "labels", "value", "kind"]


def config_format(encoder: str) -> str:
    return encoder.split("-")[0]


def produce_same_state(bootstrap: str, topic: str, encoder: str, start: float) -> int:
    model = ClusterModel("c1", [1, 2, 3], {"orders": 3})
    sim = Simulator(model, bootstrap, topic, fmt=encoder, scrape_interval=15, start=start)
    sim.run(180, events=[Event(60, lambda m: m.broker_down(3)),
                         Event(90, lambda m: m.isr_flap(2)),
                         Event(120, lambda m: m.saturate(1, 300, 0.3))])
    return sim.records


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame[COLUMNS].copy()
    out["labels"] = out["labels"].map(lambda pairs: json.dumps(sorted(dict(pairs).items())))
    return out.sort_values(COLUMNS).reset_index(drop=True)


def test_every_format_decodes_to_the_jolokia_samples(broker, job_env, spark):
    start = (int(time.time()) // 60 - 5) * 60.0
    topics, records = {}, 0
    for i, encoder in enumerate(sorted(ENCODERS)):
        topic = f"fmt-{encoder}-{uuid.uuid4().hex[:6]}"
        create_topic(broker.bootstrap, topic, partitions=3)
        records += produce_same_state(broker.bootstrap, topic, encoder, start)
        topics[topic] = (encoder, "auto" if i % 2 else config_format(encoder))
    env = {**job_env, "KAFKA_HEALTH__SOURCE__TOPICS": json.dumps(
        [{"name": t, "format": fmt} for t, (_, fmt) in topics.items()])}
    root = env["KAFKA_HEALTH__DELTA__PATH"]

    def all_read() -> bool:
        frame = table(root, "bronze")
        keys = ["source_topic", "source_partition", "source_offset"]
        return not frame.empty and len(frame[keys].drop_duplicates()) == records

    run_until(spark, env, all_read, 300, f"samples from all {records} records of every format")
    bronze = table(root, "bronze")
    assert table(root, "quarantine").empty
    by_encoder = {topics[t][0]: canonical(rows) for t, rows in bronze.groupby("source_topic")}
    reference = by_encoder.pop("jolokia")
    for encoder, rows in by_encoder.items():
        carried = set(zip(rows["metric"], rows["attribute"], strict=True))
        assert {("UnderReplicatedPartitions", "Value"), ("IsrShrinksPerSec", "Count")} <= carried \
            or encoder.startswith("otlp") and ("IsrShrinksPerSec", "Count") in carried, encoder
        expected = reference[[pair in carried for pair in zip(
            reference["metric"], reference["attribute"], strict=True)]].reset_index(drop=True)
        pd.testing.assert_frame_equal(rows, expected, check_dtype=False, obj=encoder)
