"""`kafka-health peek` decoding and summary, on record batches built in memory (no Kafka)."""

from __future__ import annotations

import random
import time

import pyarrow as pa

from streaming.config import Config
from streaming.decode.records import DecodeContext
from streaming.peek import SIGNAL_INPUTS, _topics_listed, format_peek, peek
from streaming.schemas import arrow_schema
from streaming.signals.broker import SIGNAL_METRICS
from streaming.simulate.formats import ENCODERS
from streaming.simulate.model import ClusterModel
from streaming.simulate.samples import broker_samples
from tests.hostile import adapter, malformed

TOPIC = "kafka-metrics"
LONG = "c" * 200  # a valid cluster name (under 256), too long to print whole


def encoded(encoder: str, cluster: str, broker: int, ts: float) -> list[tuple[bytes | None, bytes]]:
    model = ClusterModel(cluster, [1, 2, 3], {"orders": 3})
    return ENCODERS[encoder](cluster, broker, ts, broker_samples(model, broker, 15.0))


def records(pairs: list[tuple[bytes | None, bytes]], ts: float) -> pa.RecordBatch:
    n = len(pairs)
    return pa.RecordBatch.from_pydict({
        "key": [k for k, _ in pairs], "value": [v for _, v in pairs], "topic": [TOPIC] * n,
        "partition": [0] * n, "offset": list(range(n)),
        "timestamp": pa.array([int(ts * 1e6)] * n, pa.int64()).cast(pa.timestamp("us", "UTC")),
        "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))


def sample() -> tuple[pa.RecordBatch, list[str]]:
    now = time.time()
    key = b"c1/1"
    pairs = [*encoded("jolokia", "c1", 1, now), *encoded("prometheus-strimzi", "c1", 2, now),
             *encoded("otlp", "c1", 3, now)[:1], *encoded("telegraf", LONG, 1, now)[:1]]
    formats = ["jolokia", "prometheus", "otlp", "telegraf"]
    bad = {h.name: h for h in malformed(now, random.Random(1), key)}
    pairs += [(key, bad["non-JSON"].value), (key, bad["negative counter"].value),
              (None, adapter({"instance": "b7:9404"}, "3", now))]  # no cluster anywhere
    return records(pairs, now), formats


def test_every_metric_the_signals_read_has_a_signal_in_peek() -> None:
    assert {metric for metric, _ in SIGNAL_INPUTS.values()} == set(SIGNAL_METRICS)


def test_peek_names_formats_identities_signals_and_quarantine_reasons() -> None:
    batch, formats = sample()
    result = peek(batch, DecodeContext.from_config(Config()), TOPIC, None)
    assert [v.offset for v in result.records] == list(range(batch.num_rows))
    assert {v.format for v in result.records} == {*formats, "undetected"}
    jolokia = result.records[0]
    assert (jolokia.clusters, jolokia.brokers, jolokia.cluster_defaulted) == (["c1"], ["1"], False)
    assert jolokia.samples > 0 and jolokia.rejected is None
    defaulted = result.records[-1]
    assert defaulted.cluster_defaulted and defaulted.brokers == ["7"]
    assert result.reasons == {"not_json": 1, "negative_counter": 1}
    assert "under_min_isr_max" in result.feeds and "isr_shrinks_increase" in result.feeds
    assert set(result.feeds) | set(result.cannot_feed) == set(SIGNAL_INPUTS)

    text = format_peek(result, Config().identity.default_cluster)
    for name in formats:
        assert name in text
    assert "cluster=c1 broker=1" in text and "(defaulted)" in text
    assert "QUARANTINED not_json" in text and "not_json x1" in text
    assert "identity.default_cluster" in text
    assert "signals this data can feed" in text and "under_min_isr_max" in text
    assert LONG not in text and LONG[:79] + "…" in text  # identities are bounded


def test_peek_with_a_forced_format_quarantines_what_it_cannot_read() -> None:
    batch, _ = sample()
    result = peek(batch, DecodeContext.from_config(Config()), TOPIC, "telegraf")
    assert result.records[0].rejected is not None  # a Jolokia record read as Telegraf
    assert {v.format for v in result.records} == {"telegraf"}


def test_peek_of_an_empty_topic_says_so() -> None:
    empty = records([], time.time())
    text = format_peek(peek(empty, DecodeContext.from_config(Config()), TOPIC, None), "default")
    assert "0 record(s)" in text and "none (no records)" in text
    assert "can feed (0 of" in text


def test_a_missing_topic_lists_the_names_closest_to_the_typo_first() -> None:
    names = [f"app-events-{n:02d}" for n in range(30)] + ["__consumer_offsets",
                                                           "zz-kafka-metrics"]
    listed = _topics_listed("zz-kafka-metrcs", names).split(", ")
    assert listed[0] == "zz-kafka-metrics"  # the last by name: behind a plain cut
    assert len(listed) == 20 and listed[-1].endswith(" ...")
    assert not any(name.startswith("__") for name in listed)
    assert _topics_listed("orders", ["audit", "orders-v2"]) == "orders-v2, audit"
