"""Hostile records through the whole batch path: decode on the executors, the batch
processor (bronze, quarantine, broker admission, signals, incidents), Delta, the exporter
and the report.

Hypothesis mixes every hostile class of tests/hostile.py with identity strings of any text
(quotes, newlines, NULs, megabyte lengths), record timestamps anywhere in Spark's range
(past Python's datetime both ways) and values such as NaN and infinities, next to one good
broker record per batch. The job must not raise, each record must end in bronze or
quarantine (a partly good one in both), never quarantined twice, and the good broker's
samples must all be in bronze and on /metrics.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from pyspark.sql import functions as F

from streaming.cli import main as cli_main
from streaming.config import load_config
from streaming.decode.records import DecodeContext, reason_category
from streaming.decode.stage import decode_stage
from streaming.exporter import Exporter
from streaming.pipeline.batch import BatchProcessor
from tests.hostile import URP, Bounds, Hostile, every_class, good_jolokia, jolokia

pytestmark = pytest.mark.integration
BOUNDS = Bounds()
NOW = time.time()
CLASSES = every_class(NOW, random.Random(5), b"c1/2", BOUNDS)
GOOD_SAMPLES = 20  # samples in one good_jolokia record
RECORDS_DDL = ("key binary, value binary, topic string, partition int, offset long, "
               "ts_us long, timestampType int")
BATCH_IDS = itertools.count()
# Spark's timestamp range in microseconds (years -290308 to 294247), past datetime's both ways.
SPARK_MICROS = st.integers(min_value=-(2**62), max_value=2**62)


class BatchPath:
    def __init__(self, spark, root: Path) -> None:  # noqa: ANN001
        env = {**BOUNDS.env(), "KAFKA_HEALTH__DELTA__PATH": str(root / "delta"),
               "KAFKA_HEALTH__SPARK__CHECKPOINT": str(root / "checkpoint"),
               "KAFKA_HEALTH__QUALITY__MAX_TIMESTAMP_SKEW_SECONDS": "86400"}
        self.spark = spark
        self.config = load_config(None, environ=env)
        self.root = Path(self.config.delta.path)
        self.exporter = Exporter()
        self.processor = BatchProcessor(self.config, self.exporter)
        self.context = DecodeContext.from_config(self.config)

    def run(self, records: list[tuple[bytes | None, bytes, int]]) -> str:
        """One batch of (key, value, record time in µs) on a topic of its own; the topic."""
        batch_id = next(BATCH_IDS)
        topic = f"hostile-{batch_id}"
        rows = [(key, value, topic, 0, offset, ts_us, 0)
                for offset, (key, value, ts_us) in enumerate(records)]
        frame = self.spark.createDataFrame(rows, RECORDS_DDL).select(
            "key", "value", "topic", "partition", "offset",
            F.timestamp_micros("ts_us").alias("timestamp"), "timestampType")
        self.processor(decode_stage(frame, self.context), batch_id)
        return topic

    def whole(self, table: str, columns: list[str]) -> list[dict]:
        """Every row of a table the batches share (those without a source topic)."""
        return DeltaTable(str(self.root / table)).to_pyarrow_table(columns=columns).to_pylist()

    def rows(self, table: str, topic: str, columns: list[str]) -> list[dict]:
        dataset = DeltaTable(str(self.root / table)).to_pyarrow_dataset()
        return dataset.to_table(columns=columns,
                                filter=ds.field("source_topic") == topic).to_pylist()


@pytest.fixture(scope="module")
def batch_path(spark, tmp_path_factory: pytest.TempPathFactory) -> BatchPath:
    return BatchPath(spark, tmp_path_factory.mktemp("hostile-path"))


def identity_record(name: str, ts_us: int) -> tuple[bytes, bytes, int]:
    return f"{name}/1".encode(), good_jolokia("c1", 1, NOW), ts_us


def value_record(value: float) -> tuple[bytes, bytes, int]:
    """json writes NaN and Infinity as bare words, as a careless Jolokia client would."""
    return b"c1/3", jolokia(URP, {"Value": value}, NOW), int(NOW * 1e6)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(classes=st.lists(st.sampled_from(CLASSES), min_size=1, max_size=8),
       names=st.lists(st.text(max_size=40) | st.text(min_size=257, max_size=2000)
                      | st.sampled_from(["it's", 'a"b', "x\ny", "\x00", "x" * 1_000_000]),
                      max_size=3),
       times=st.lists(SPARK_MICROS, max_size=3),
       values=st.lists(st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 2.0**64]),
                       max_size=3))
def test_hostile_records_never_stop_the_batch_path(batch_path: BatchPath, classes: list[Hostile],
                                                   names: list[str], times: list[int],
                                                   values: list[float]) -> None:
    now_us = int(NOW * 1e6)
    records: list[tuple[bytes | None, bytes, int]] = [(b"c1/1", good_jolokia("c1", 1, NOW),
                                                       now_us)]
    known: dict[int, Hostile] = {}
    for hostile in classes:
        known[len(records)] = hostile
        records.append((hostile.key, hostile.value,
                        hostile.timestamp_ms * 1000 if hostile.timestamp_ms else now_us))
    records += [identity_record(name, now_us) for name in names]
    records += [(b"c1/2", good_jolokia("c1", 2, NOW), ts_us) for ts_us in times]
    records += [value_record(value) for value in values]

    topic = batch_path.run(records)  # raising here is the failure this test exists for

    quarantined = batch_path.rows("quarantine", topic, ["source_offset", "reason"])
    offsets = [row["source_offset"] for row in quarantined]
    assert len(offsets) == len(set(offsets)), "a record quarantined twice"
    reasons = {row["source_offset"]: reason_category(row["reason"]) for row in quarantined}
    in_bronze = {row["source_offset"] for row in
                 batch_path.rows("bronze", topic, ["source_offset"])}
    for offset in range(len(records)):
        assert offset in reasons or offset in in_bronze, f"record {offset} went nowhere"
    for offset, hostile in known.items():
        assert reasons.get(offset) == hostile.reason, (hostile.name, reasons.get(offset))
        assert (offset in in_bronze) == (hostile.reason is None or hostile.also_bronze), \
            hostile.name
    good = batch_path.rows("bronze", topic, ["source_offset", "cluster", "broker"])
    assert sum(1 for r in good if r["source_offset"] == 0) == GOOD_SAMPLES
    registry = batch_path.exporter.registry
    assert generate_latest(registry)  # /metrics renders whatever names it holds
    assert registry.get_sample_value("kafka_health_partitions",
                                     {"cluster": "c1", "broker": "1"}) is not None


RM = "kafka.server:type=ReplicaManager,name="


@pytest.mark.parametrize("cluster, counts", [
    ("negative", {"PartitionCount": -5, "LeaderCount": -2}),
    # partitions / leaders x 1,000 leaders past float's range
    ("huge-ratio", {"PartitionCount": 1e306, "LeaderCount": 1}),
])
def test_absurd_counts_of_a_broker_do_not_stop_the_batch_path(
        batch_path: BatchPath, cluster: str, counts: dict[str, float]) -> None:
    """Kafka's counts are never negative nor near float's range, but a gauge's value is
    whatever a producer sent (only counters are refused below zero): the headroom stage
    gives such a broker no row, and everything else of the batch goes on."""
    now_us = int(NOW * 1e6)
    absurd = [jolokia(f"{RM}{name}", {"Value": value}, NOW) for name, value in counts.items()]
    topic = batch_path.run([(f"{cluster}/1".encode(), good_jolokia(cluster, 1, NOW), now_us),
                            *((f"{cluster}/3".encode(), value, now_us) for value in absurd)])
    in_bronze = {row["source_offset"] for row in
                 batch_path.rows("bronze", topic, ["source_offset"])}
    assert in_bronze == set(range(1 + len(absurd)))
    headroom = batch_path.whole("partition_headroom", ["cluster", "broker"])
    assert {"cluster": cluster, "broker": "1"} in headroom
    assert {"cluster": cluster, "broker": "3"} not in headroom


def test_a_huge_segment_count_does_not_stop_the_batch_path(batch_path: BatchPath) -> None:
    """One partition's NumLogSegments near float's range, next to the broker's real FD
    counts: the segments are unknown to the bounds, and the broker keeps its headroom."""
    now_us = int(NOW * 1e6)
    segments = jolokia("kafka.log:type=Log,name=NumLogSegments,topic=orders,partition=0",
                       {"Value": 1e308}, NOW)
    topic = batch_path.run([(b"segments/1", good_jolokia("segments", 1, NOW), now_us),
                            (b"segments/1", segments, now_us)])
    assert {row["source_offset"] for row in
            batch_path.rows("bronze", topic, ["source_offset"])} == {0, 1}
    headroom = batch_path.whole("partition_headroom", ["cluster", "broker", "log_segments"])
    assert {"cluster": "segments", "broker": "1", "log_segments": None} in headroom


def test_the_report_reads_what_hostile_batches_wrote(batch_path: BatchPath,
                                                     tmp_path: Path) -> None:
    batch_path.run([identity_record(name, int(NOW * 1e6)) for name in ("it's", "x\ny", "\x00",
                                                                      "c$\\frac{$")])
    assert cli_main(["report", "--delta", str(batch_path.root), "--out", str(tmp_path)]) == 0
    page = (tmp_path / "index.html").read_text()
    assert "could not be built" not in page, "a name from the data broke a report section"
