"""`kafka-health peek`: sample a metrics topic and show what the job would make of it.

The first command an operator runs on their own data: for each sampled record, the format
detection found, the cluster and broker its samples resolve to (and whether the cluster
is only identity.default_cluster), how many samples it gave or why it was quarantined;
then which of the job's signals the sample can feed and which it cannot, by the
(metric, attribute) pairs each signal reads. Decoding is the job's own
(``decode_record_batch``) with the job's configuration, so peek and the job agree.

Records are read by assignment (no consumer group, nothing committed): peeking never
moves anyone's offsets.
"""

from __future__ import annotations

import difflib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streaming.decode.records import DecodeContext, decode_record_batch, reason_category
from streaming.kafka_client import consumer_config
from streaming.logsetup import kafka_logger
from streaming.signals.broker import (
    INCREASE_METRICS,
    LAST_SIGNALS,
    MAX_SIGNALS,
    MIN_MEAN_SIGNALS,
)
from streaming.text import shown

# broker_signals column (or partial) -> the (metric, attribute) of the samples it reads;
# together they read every metric in SIGNAL_METRICS (held so by a test)
SIGNAL_INPUTS: dict[str, tuple[str, str]] = {
    **LAST_SIGNALS, **MAX_SIGNALS,
    **{name: (metric, attribute) for name, (metric, attribute, *_) in MIN_MEAN_SIGNALS.items()},
    **INCREASE_METRICS,
    "log_segments_last": ("NumLogSegments", "Value"),
}
UNDETECTED = ("auto", "unknown", None)


class PeekError(Exception):
    """Kafka cannot be sampled as asked (no broker answers, no such topic): the message
    says what to fix."""


@dataclass
class RecordView:
    partition: int
    offset: int
    format: str
    clusters: list[str] = field(default_factory=list)
    brokers: list[str] = field(default_factory=list)
    cluster_defaulted: bool = False
    samples: int = 0
    catalog_samples: int = 0
    rejected: str | None = None


@dataclass
class Peek:
    topic: str
    records: list[RecordView]
    feeds: dict[str, tuple[str, str]]
    cannot_feed: dict[str, tuple[str, str]]
    reasons: Counter[str]


def sample_records(client: dict[str, Any], topic: str, count: int, from_beginning: bool,
                   timeout: float) -> pa.RecordBatch:
    """Up to `count` records of `topic`, the newest (or with `from_beginning` the oldest)
    by record time, as a kafka_records batch with headers."""
    from confluent_kafka import Consumer, KafkaException

    from streaming.source.records import RECORDS

    consumer = Consumer(consumer_config("peek", {**client, "logger": kafka_logger()}))
    deadline = time.monotonic() + timeout
    try:
        ranges = _ranges(consumer, topic, count, from_beginning, timeout)
        batches = [batch for want in ranges for batch in _read(consumer, want, deadline)]
    except KafkaException as err:
        raise PeekError(f"Kafka at {client.get('bootstrap.servers')}: {err.args[0]}") from None
    finally:
        consumer.close()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=RECORDS)
    table = pa.Table.from_batches(batches, schema=RECORDS).sort_by(
        [("timestamp", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
    start = 0 if from_beginning else max(0, table.num_rows - count)
    return table.slice(start, count).combine_chunks().to_batches()[0]


def _ranges(consumer: Any, topic: str, count: int, from_beginning: bool,
            timeout: float) -> list[Any]:
    from confluent_kafka import TopicPartition

    from streaming.source.ranges import KafkaRange

    metadata = consumer.list_topics(timeout=timeout)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise PeekError(f"no topic {shown(topic)!r} on {len(metadata.brokers)} broker(s); "
                        f"its topics: {_topics_listed(topic, metadata.topics) or 'none'}")
    ranges = []
    for partition in sorted(found.partitions):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                   timeout=timeout, cached=False)
        start, end = (low, min(high, low + count)) if from_beginning else (
            max(low, high - count), high)
        if end > start:
            ranges.append(KafkaRange(topic, partition, start, end))
    return ranges


def _topics_listed(asked: str, topics: Any, limit: int = 20) -> str:
    """Up to `limit` of the cluster's topics (internal ones left out), those closest to
    the name asked first: on a cluster with hundreds of topics the one a typo meant must
    not fall behind the cut."""
    names = sorted(t for t in topics if not t.startswith("__"))
    close = difflib.get_close_matches(asked, names, n=5, cutoff=0.6)
    ordered = close + [name for name in names if name not in close]
    return (", ".join(shown(n) for n in ordered[:limit])
            + (" ..." if len(ordered) > limit else ""))


def _read(consumer: Any, want: Any, deadline: float) -> list[pa.RecordBatch]:
    """The records of one range; stops at the deadline, or where the partition has no more
    (a transactional topic's control records leave offsets no message has)."""
    from confluent_kafka import TopicPartition

    from streaming.source.records import records_batch

    consumer.assign([TopicPartition(want.topic, want.partition, want.start)])
    position, out = want.start, []
    while position < want.end and time.monotonic() < deadline:
        messages = consumer.consume(num_messages=want.end - position, timeout=0.5)
        batch, position = records_batch(messages, want, position)
        if batch is not None:
            out.append(batch)
        elif consumer.position([TopicPartition(want.topic, want.partition)])[0].offset \
                >= want.end:
            break
    consumer.unassign()
    return out


def peek(records: pa.RecordBatch, ctx: DecodeContext, topic: str, fmt: str | None) -> Peek:
    """Decode `records` as the job would (`fmt` overriding the topic's configured format)
    and sum up per record and over the sample."""
    if fmt is not None:
        ctx = replace(ctx, topic_formats={**ctx.topic_formats, topic: fmt})
    decoded = decode_record_batch(records, ctx)
    views: dict[tuple[int, int], RecordView] = {}
    rows = decoded.select(["source_partition", "source_offset", "source_format", "cluster",
                           "broker", "metric", "attribute", "reject_reason",
                           "cluster_defaulted"]).to_pylist()
    for row in rows:
        key = (row["source_partition"], row["source_offset"])
        view = views.get(key)
        if view is None:
            fmt_seen = row["source_format"]
            view = views[key] = RecordView(*key, "undetected" if fmt_seen in UNDETECTED
                                           else fmt_seen)
        if row["reject_reason"] is not None:
            view.rejected = row["reject_reason"]
            continue
        view.samples += 1
        view.catalog_samples += row["metric"] is not None
        view.cluster_defaulted |= bool(row["cluster_defaulted"])
        for seen, value in ((view.clusters, row["cluster"]), (view.brokers, row["broker"])):
            if value not in seen:
                seen.append(value)
    good = decoded.filter(pc.is_null(decoded["reject_reason"]))
    pairs = set(zip(good["metric"].to_pylist(), good["attribute"].to_pylist(), strict=True))
    feeds = {name: pair for name, pair in SIGNAL_INPUTS.items() if pair in pairs}
    cannot = {name: pair for name, pair in SIGNAL_INPUTS.items() if name not in feeds}
    reasons = Counter(reason_category(v.rejected) for v in views.values() if v.rejected)
    ordered = [views[(p, o)] for p, o in zip(records["partition"].to_pylist(),
                                              records["offset"].to_pylist(), strict=True)
               if (p, o) in views]
    return Peek(topic, ordered, feeds, cannot, reasons)


def format_peek(result: Peek, default_cluster: str) -> str:
    """One line per record, then formats, identities, signals and quarantine reasons."""
    out = [f"{len(result.records)} record(s) of {shown(result.topic)}:"]
    places = [f"p{view.partition}@{view.offset}" for view in result.records]
    width = max(map(len, places), default=0)
    for place, view in zip(places, result.records, strict=True):
        where = f"  {place:<{width}}  {view.format:<11}"
        if view.samples:
            where += (f" cluster={_names(view.clusters)}"
                      + (" (defaulted)" if view.cluster_defaulted else "")
                      + f" broker={_names(view.brokers)} samples={view.samples}"
                      + f" ({view.catalog_samples} in the catalog)")
        if view.rejected:
            where += f" QUARANTINED {shown(view.rejected)}"
        out.append(where)
    formats = Counter(view.format for view in result.records)
    out += ["", "formats: " + (", ".join(f"{name} x{n}" for name, n in formats.most_common())
                               or "none (no records)")]
    identities = Counter((c, b) for view in result.records if view.samples
                         for c in view.clusters for b in view.brokers)
    out.append("cluster/broker: " + (", ".join(
        f"{shown(c, 40)}/{shown(b, 40)} x{n}" for (c, b), n in identities.most_common(20))
        or "none"))
    defaulted = sum(view.cluster_defaulted for view in result.records)
    if defaulted:
        out.append(f"  {defaulted} record(s) name no cluster (no cluster label, header, key "
                   f"group or topic cluster): they count as {shown(default_cluster)!r} "
                   "(identity.default_cluster); set source.topics[].cluster or "
                   "identity.key_pattern")
    out += ["", f"signals this data can feed ({len(result.feeds)} of {len(SIGNAL_INPUTS)}): "
            + (", ".join(sorted(result.feeds)) or "none")]
    out.append("signals it cannot feed (missing metric.attribute): " + (", ".join(
        f"{name} ({metric}.{attribute})" for name, (metric, attribute)
        in sorted(result.cannot_feed.items())) or "none"))
    out += ["", "quarantine reasons: " + (", ".join(
        f"{shown(reason, 40)} x{n}" for reason, n in result.reasons.most_common())
        or "none")]
    return "\n".join(out)


def peek_json(result: Peek) -> str:
    """The sample as JSON for scripts: the records, the signals fed and not (each with the
    metric.attribute it needs), the quarantine reasons with counts."""
    def needs(signals: dict[Any, tuple[str, str]]) -> dict[str, str]:
        return {str(name): f"{metric}.{attribute}"
                for name, (metric, attribute) in sorted(signals.items(), key=str)}

    return json.dumps({"topic": result.topic,
                       "records": [asdict(view) for view in result.records],
                       "feeds": needs(result.feeds), "cannot_feed": needs(result.cannot_feed),
                       "reasons": dict(result.reasons.most_common())}, indent=2)


def _names(values: list[str], limit: int = 3) -> str:
    text = ",".join(shown(v) for v in values[:limit])
    return text + (f",+{len(values) - limit} more" if len(values) > limit else "")
