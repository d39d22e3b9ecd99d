"""Kafka records -> canonical samples and quarantine rows, one Arrow batch at a time.

Runs inside Spark's Python workers (mapInArrow), so it imports no pyspark and keeps its
context picklable. Every record ends as samples, a quarantine row, or both (a record
whose good samples are kept and whose bad ones are reported once); none is dropped.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from streaming.catalog import Catalog, load_catalog
from streaming.config import DEFAULT_INSTANCE_REGEX, Config, IdentityConfig
from streaming.decode import jolokia, jolokia_columnar, otlp, prometheus, telegraf
from streaming.decode.common import (
    LIMITS,
    DecodeError,
    Limits,
    Observation,
    Rejected,
    bounded,
    decoded_batch,
    header_groups,
)
from streaming.identity import CLUSTER_WIDE
from streaming.schemas import decoded_arrow_schema

# Detection tries these in order; their looks_like() are mutually exclusive by construction
# (request / labels+value / resourceMetrics / fields), so the order only matters for speed.
DECODERS: dict[str, ModuleType] = {
    "jolokia": jolokia,
    "prometheus": prometheus,
    "otlp": otlp,
    "telegraf": telegraf,
}
RAW_KEEP_BYTES = 1 << 20  # quarantined payloads above 1 MiB keep their head only
# The label characters one record's rows may hold, per byte of the record, and at least.
# Samples share their MBean's or Telegraf metric's labels, so a record's rows repeat its
# label text once per attribute or field. What real shippers write stays below 40 a byte:
# an unknown MBean's name is in its labels about twice (its properties and raw_name),
# repeated for each of a Kafka timer's 15-20 numeric attributes. Past 64 (64 labels of
# 2 KB shared by 10,000 fields is 1.3 GB of rows from 250 KB) the record is quarantined
# whole (too_many_label_chars) before a row of it is built into Arrow: a decode slice of
# DECODE_BYTES then holds at most a few hundred MB of label text.
LABEL_CHARS_PER_BYTE = 64
LABEL_CHARS_AT_LEAST = 64 * 1024
# Sample times outside these (epoch seconds) are rejected whatever the configuration: past
# them the job's own time arithmetic (windows, days, Delta bounds) leaves Python's datetime.
EARLIEST_TS = 0.0
LATEST_TS = datetime(9999, 1, 1, tzinfo=UTC).timestamp()
DROP_LABELS = ("job", "__name__")
# Longer cluster, broker or instance strings are rejected (identity_too_long): they become
# Delta keys, exporter labels and alert fields, and no regex runs on more than this.
MAX_IDENTITY_CHARS = 256
MAX_KEY_CHARS = 4 * MAX_IDENTITY_CHARS
# An instance on the loopback (a Telegraf beside its broker polls http://localhost:8778)
# names no broker: the next instance label does. Anchored, so linear in any input.
LOOPBACK = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]{0,15}://)?"
                      r"(?:localhost|127(?:\.\d{1,3}){3}|\[::1\]|::1|0\.0\.0\.0)(?:[:/]|$)")
# Values that are no host name: a UUID (the OpenTelemetry Java agent's random
# service.instance.id) or a Docker container id (a container's default host name).
NOT_A_HOST = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-"
                        r"[0-9A-Fa-f]{12}|[0-9a-f]{12}|[0-9a-f]{64}")
# A host that is an IP address (10.0.0.7:9404, [fd00::7]:9404, fd00::7, ::ffff:10.0.0.7) or
# spells one (10.0.0.7.nip.io, ip-10-0-0-7.ec2.internal, 10-0-0-7.ns.pod.cluster.local),
# matched on an instance's text after its URL's last "://": its digits are no broker id
# (see config.DEFAULT_INSTANCE_REGEX).
IP_HOST = re.compile(r"(?:ip-)?\d{1,3}(?:([.-])\d{1,3})(?:\1\d{1,3}){2}(?:[.:/]|$)"
                     r"|\[[0-9A-Fa-f:.]+(?:%[^\]]*)?\]"
                     r"|[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:.]*$")

# How to name the broker of an instance that does not say it.
FIX = ("map it to its broker id in identity.instance_map, or label the samples with the "
       "broker")


def is_ip_host(instance: str) -> bool:
    """Whether an instance label (a host:port, a URL, a JMX service URL) names its host by
    an IP address."""
    return IP_HOST.match(instance.rsplit("://", 1)[-1]) is not None


def register_decoder(name: str, module: ModuleType) -> None:
    """Formats plug in here; each module has decode(doc, catalog) and looks_like(doc).

    decode() returns (observations, record hints). An observation may carry its own
    `hints` (OTLP: the attributes of its resource) that replace the record's, and a decoder
    may put a `Rejected` in the list for one bad data point (the record's good samples stay).
    """
    DECODERS[name] = module


@dataclass(frozen=True)
class DecodeContext:
    """Everything a worker needs, picklable: no Spark, no live clients."""

    topic_formats: dict[str, str] = field(default_factory=dict)
    topic_clusters: dict[str, str] = field(default_factory=dict)
    # mypy reads config/model.py's Field(default, ...) as a field without a default
    identity: IdentityConfig = field(default_factory=IdentityConfig)  # type: ignore[arg-type]
    max_skew_seconds: float = 900.0
    max_message_bytes: int = 10 * 1024 * 1024
    # How far a sample's time may be ahead of / behind the wall clock (None: no limit).
    # No limit here and the limits in QualityConfig: the job always goes through the latter.
    max_ahead_seconds: float | None = None
    max_behind_seconds: float | None = None
    max_samples_per_record: int = Limits.samples_per_record
    max_labels_per_sample: int = Limits.labels_per_sample
    max_label_chars: int = Limits.label_chars

    @classmethod
    def from_config(cls, config: Config) -> DecodeContext:
        return cls(
            topic_formats=config.topic_formats(),
            topic_clusters=config.topic_clusters(),
            identity=config.identity,
            max_skew_seconds=config.quality.max_timestamp_skew_seconds,
            max_message_bytes=config.quality.max_message_bytes,
            max_ahead_seconds=config.quality.max_ahead_of_wall_clock_seconds,
            max_behind_seconds=config.quality.max_behind_wall_clock_seconds,
            max_samples_per_record=config.quality.max_samples_per_record,
            max_labels_per_sample=config.quality.max_labels_per_sample,
            max_label_chars=config.quality.max_label_chars,
        )

    def limits(self) -> Limits:
        return Limits(self.max_samples_per_record, self.max_labels_per_sample,
                      self.max_label_chars)

    def time_bounds(self, now: datetime) -> tuple[float, float]:
        """The [earliest, latest] sample time (epoch seconds) believable at `now`."""
        stamp = now.timestamp()
        earliest = EARLIEST_TS if self.max_behind_seconds is None else max(
            EARLIEST_TS, stamp - self.max_behind_seconds)
        latest = LATEST_TS if self.max_ahead_seconds is None else min(
            LATEST_TS, stamp + self.max_ahead_seconds)
        return earliest, latest

    def to_json(self) -> str:
        """For a data source option (options are strings): the Python source decodes too."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> DecodeContext:
        fields = json.loads(text)
        return cls(**{**fields, "identity": IdentityConfig(**fields["identity"])})


class IdentityResolver:
    """Finds (cluster, broker) for a sample; the order is IdentityConfig's docstring."""

    def __init__(self, identity: IdentityConfig, topic_clusters: dict[str, str]) -> None:
        self.identity = identity
        self.topic_clusters = topic_clusters
        self.key_re = re.compile(identity.key_pattern) if identity.key_pattern else None
        self.instance_re = (
            re.compile(identity.broker_from_instance_regex)
            if identity.broker_from_instance_regex
            else None
        )
        # The default regex reads host names' digits only; a regex of the user's own is
        # applied to whatever the instance is (a fleet whose broker ids are the last octet).
        self.hosts_only = identity.broker_from_instance_regex == DEFAULT_INSTANCE_REGEX
        self.strip = set(identity.cluster_labels) | set(identity.broker_labels) | set(
            identity.instance_labels
        ) | set(DROP_LABELS)
        self._key_cache: dict[bytes, dict[str, str]] = {}

    @staticmethod
    def _first(names: list[str], *sources: dict[str, str]) -> str | None:
        for source in sources:
            for name in names:
                value = source.get(name)
                if value:
                    return value
        return None

    @staticmethod
    def _instance(names: list[str], *sources: dict[str, str]) -> str | None:
        """The first instance label that names a host: not a loopback address (a Telegraf
        beside its broker polls localhost), not a UUID or a container id (OpenTelemetry's
        Java agent sets service.instance.id to a random UUID, new at every start, whose
        digits would name a broker at random). An IP address does not move the search on:
        a later label may name a central shipper's own machine (Telegraf's `host`)."""
        for source in sources:
            for name in names:
                value = source.get(name)
                if value and not LOOPBACK.match(value) and not NOT_A_HOST.fullmatch(value):
                    return value
        return None

    def key_groups(self, key: bytes | None) -> dict[str, str]:
        """The named groups of key_pattern in the record key; DecodeError for a key too long
        to hold a valid identity (and to be matched or cached)."""
        if not key or self.key_re is None:
            return {}
        if len(key) > MAX_KEY_CHARS:
            raise DecodeError("identity_too_long",
                              f"record key of {len(key)} bytes (at most {MAX_KEY_CHARS})")
        groups = self._key_cache.get(key)
        if groups is None:
            match = self.key_re.match(key.decode("utf-8", "replace"))
            groups = {k: v for k, v in match.groupdict().items() if v} if match else {}
            if len(self._key_cache) < 100_000:
                self._key_cache[key] = groups
        return groups

    def record_groups(self, key: bytes | None, headers: list[Any] | None) -> dict[str, str]:
        """A record's own identity: its headers, else the named groups of its key."""
        groups = self.key_groups(key)
        found = header_groups(headers)
        return {**groups, **found} if found else groups

    def resolve(
        self, labels: dict[str, str], hints: dict[str, str], key_groups: dict[str, str], topic: str
    ) -> tuple[str, str | None]:
        """(cluster, broker or None); DecodeError when an identity string is over
        MAX_IDENTITY_CHARS, checked before any regex runs on it."""
        return self.resolve_flagged(labels, hints, key_groups, topic)[:2]

    def resolve_flagged(
        self, labels: dict[str, str], hints: dict[str, str], key_groups: dict[str, str], topic: str
    ) -> tuple[str, str | None, bool]:
        """resolve() and whether the cluster is default_cluster for want of any other."""
        ident = self.identity
        cluster = (
            self._first(ident.cluster_labels, labels, hints)
            or key_groups.get("cluster")
            or self.topic_clusters.get(topic)
        )
        defaulted = not cluster
        if not cluster:
            cluster = ident.default_cluster
        broker = self._first(ident.broker_labels, labels, hints) or key_groups.get("broker")
        if broker is None:
            instance = self._instance(ident.instance_labels, labels, hints)
            if instance is not None:
                _bounded("instance", instance)
                broker = ident.instance_map.get(instance)
                if broker is None and self.instance_re is not None:
                    if self.hosts_only and is_ip_host(instance):
                        raise DecodeError("no_broker_identity", f"instance {instance[:80]!r} is "
                                          f"an IP address, whose digits name no broker: {FIX}")
                    match = self.instance_re.search(instance)
                    if match is None:
                        raise DecodeError("no_broker_identity", f"instance {instance[:80]!r} "
                                          f"holds no broker id: {FIX}")
                    broker = match.group(1)
        _bounded("cluster", cluster)
        if broker is not None:
            _bounded("broker", broker)
            broker = broker_id_text(broker)
            if broker == CLUSTER_WIDE:
                # the incidents, the pages and the reports name a cluster-wide incident's
                # broker so: a broker called that would page as the whole cluster
                raise DecodeError("reserved_identity", f"broker {CLUSTER_WIDE!r} stands for "
                                  "a whole cluster in kafka-health's incidents and pages")
        return cluster, broker, defaulted


def broker_id_text(broker: str) -> str:
    """A broker named by its id as Kafka writes it: a host's padded digits (kafka01) or a
    label with spaces (" 1") are broker 1, as the Admin API and node.id say, so its samples,
    incidents and pages are one broker's and an incident finds its causes. A name that is
    not an id is kept as given."""
    text = broker.strip()
    return str(int(text)) if text.isascii() and text.isdigit() else broker


def _bounded(what: str, value: str) -> None:
    bounded(what, value, MAX_IDENTITY_CHARS, "identity_too_long")


def detect_format(doc: Any) -> str | None:
    for name, module in DECODERS.items():
        if module.looks_like(doc):
            return name
    return None


def _out_of_range(what: str, ts: float, bounds: tuple[float, float]) -> str:
    """The detail of a time outside `bounds`, in epoch seconds (it may be no datetime)."""
    return (f"{what} at {ts:.0f} is outside [{bounds[0]:.0f}, {bounds[1]:.0f}] "
            "(epoch seconds: the configured distance from the wall clock)")


def _check(obs: Observation, record_ts: float, max_skew: float,
           bounds: tuple[float, float]) -> Rejected | None:
    """The hard rules: values a signal could be computed from, at a believable time."""
    name = obs.metric or obs.raw_name or "?"
    if not math.isfinite(obs.value):
        return Rejected("non_finite_value", f"{name}.{obs.attribute}={obs.value}")
    if obs.kind == "counter" and obs.value < 0:
        return Rejected("negative_counter", f"{name}.{obs.attribute}={obs.value}")
    if obs.ts is not None and abs(obs.ts - record_ts) > max_skew:
        return Rejected(
            "timestamp_skew",
            f"{name} at {obs.ts:.0f} is {obs.ts - record_ts:+.0f}s from the record time",
        )
    ts = obs.ts if obs.ts is not None else record_ts
    if not bounds[0] <= ts <= bounds[1]:
        return Rejected("timestamp_out_of_range", _out_of_range(name, ts, bounds))
    return None


class _Columns:
    """Column lists for the per-record decoder; appending rows is the hot path, so no dicts.

    Times are kept as integer microseconds; `record` holds the batch position of each row's
    record, so rows from the columnar path can be merged back in record order.
    """

    def __init__(self, ingest_us: int) -> None:
        self.cols: dict[str, list[Any]] = {f.name: [] for f in decoded_arrow_schema()
                                           if f.name != "date"}
        self.record: list[int] = []
        self.ingest_us = ingest_us

    def append_reject(self, reason: str, raw: bytes | None, fmt: str, topic: str, part: int,
                      off: int, position: int) -> None:
        c = self.cols
        for name in ("ts", "cluster", "broker", "metric", "attribute", "labels", "value", "kind"):
            c[name].append(None)
        c["source_format"].append(fmt)
        c["source_topic"].append(topic)
        c["source_partition"].append(part)
        c["source_offset"].append(off)
        c["ingest_ts"].append(self.ingest_us)
        c["reject_reason"].append(reason)
        c["raw"].append(raw[:RAW_KEEP_BYTES] if raw is not None else None)
        c["cluster_defaulted"].append(None)
        self.record.append(position)

    def truncate(self, rows: int) -> None:
        """Drop the rows from `rows` on (a record refused after some of its rows)."""
        for column in self.cols.values():
            del column[rows:]
        del self.record[rows:]

    def batch(self) -> pa.RecordBatch:
        return decoded_batch({f.name: pa.array(self.cols[f.name], type=f.type)
                              for f in decoded_arrow_schema() if f.name != "date"})


def _columnar_topics(batch: pa.RecordBatch, ctx: DecodeContext) -> set[str]:
    """Topics whose records may take the columnar Jolokia path: format jolokia, or auto
    (detection tries Jolokia first), while the registered Jolokia decoder is the stock one."""
    if DECODERS.get("jolokia") is not jolokia or next(iter(DECODERS)) != "jolokia":
        return set()
    return {topic for topic in pc.unique(batch.column("topic")).to_pylist()
            if topic is not None and ctx.topic_formats.get(topic, "auto") in ("auto", "jolokia")}


# The most bytes of record values decoded at once: what a decode holds while it runs (its
# samples, up to about 40 a KB of value in the densest layouts and several hundred bytes
# each until packed) is bounded by the bytes it is given, where a chunk of 10,000 records
# of a few MB each would hold gigabytes. A record larger than this is decoded alone.
DECODE_BYTES = 4 * 1024 * 1024


def by_value_bytes(records: pa.RecordBatch, limit: int = DECODE_BYTES
                   ) -> Iterator[pa.RecordBatch]:
    """`records` in consecutive slices of at most `limit` bytes of values (a record larger
    than that in a slice of its own); the batch itself when it is within the limit."""
    sizes = pc.fill_null(pc.binary_length(records.column("value")), 0).to_numpy(
        zero_copy_only=False).astype(np.int64)
    ends = np.cumsum(sizes)
    if not len(ends) or ends[-1] <= limit:
        yield records
        return
    start = 0
    while start < len(ends):
        before = ends[start - 1] if start else 0
        stop = max(int(np.searchsorted(ends, before + limit, side="right")), start + 1)
        yield records.slice(start, stop - start)
        start = stop


def decoded_chunks(batches: Iterable[pa.RecordBatch], ctx: DecodeContext
                   ) -> Iterator[tuple[pa.RecordBatch, int]]:
    """(decoded rows, Kafka records) of the batches as a read task decodes them: in slices
    of at most DECODE_BYTES of values (by_value_bytes)."""
    for batch in batches:
        for records in by_value_bytes(batch):
            yield decode_record_batch(records, ctx), records.num_rows


def decode_record_batch(
    batch: pa.RecordBatch, ctx: DecodeContext, catalog: Catalog | None = None, *,
    columnar: bool = True, ingest: datetime | None = None,
) -> pa.RecordBatch:
    """Decode one batch of Kafka records (the kafka_records schema) into decoded rows.

    Single-attribute Jolokia records go through the columnar decoder; the rest, and every
    record it declines, through the per-record one (alone with columnar=False: the two are
    held equal row for row by tests). Rows come out in record order. `ingest` is the time the
    batch counts as read (now), which records without a timestamp of their own take.
    """
    token = LIMITS.set(ctx.limits())
    try:
        return _decode_record_batch(batch, ctx, catalog or load_catalog(), columnar,
                                    ingest or datetime.now(UTC))
    finally:
        LIMITS.reset(token)


def _decode_record_batch(batch: pa.RecordBatch, ctx: DecodeContext, catalog: Catalog,
                         columnar: bool, ingest: datetime) -> pa.RecordBatch:
    resolver = IdentityResolver(ctx.identity, ctx.topic_clusters)
    topics = _columnar_topics(batch, ctx) if columnar else set()
    if not topics:
        return _decode_records(batch, ctx, catalog, resolver, ingest).batch()
    fast = jolokia_columnar.decode(batch, topics, ctx.max_message_bytes, resolver, catalog,
                                   ingest, ctx.max_skew_seconds, ctx.time_bounds(ingest))
    if not fast.pieces:
        return _decode_records(batch, ctx, catalog, resolver, ingest).batch()
    if len(fast.rest) == 0 and len(fast.pieces) == 1:
        return fast.pieces[0]
    rest = _decode_records(batch.take(pa.array(fast.rest)), ctx, catalog, resolver, ingest)
    positions = np.concatenate([*fast.positions, fast.rest[np.asarray(rest.record, np.int64)]])
    merged = pa.Table.from_batches([*fast.pieces, rest.batch()])
    ordered = merged.take(pa.array(np.argsort(positions, kind="stable")))
    return ordered.combine_chunks().to_batches()[0]


def _decode_records(batch: pa.RecordBatch, ctx: DecodeContext, catalog: Catalog,
                    resolver: IdentityResolver, ingest: datetime) -> _Columns:
    """The per-record decoder: every format, every layout, every reject."""
    out = _Columns(int(ingest.timestamp() * 1_000_000))
    c = out.cols
    ts_col, cluster_col, broker_col = c["ts"], c["cluster"], c["broker"]
    metric_col, attr_col, labels_col = c["metric"], c["attribute"], c["labels"]
    value_col, kind_col, fmt_col = c["value"], c["kind"], c["source_format"]
    topic_col, part_col, off_col = c["source_topic"], c["source_partition"], c["source_offset"]
    ingest_col, reason_col, raw_col = c["ingest_ts"], c["reject_reason"], c["raw"]
    defaulted_col = c["cluster_defaulted"]
    ingest_us = out.ingest_us
    strip = resolver.strip
    labels_cache: dict[tuple[tuple[str, str], ...], tuple[list[tuple[str, str]], int]] = {}
    identity_cache: dict[tuple[Any, ...], tuple[str, str | None, bool] | Rejected] = {}
    # Told apart by `__class__ is Rejected` on the hot path, a test mypy does not narrow on.
    identity: Any
    # None: a key the cache cannot hold (an unhashable value), resolved without it
    items: tuple[tuple[str, str], ...] | None
    ident_key: tuple[Any, ...] | None
    max_skew = ctx.max_skew_seconds
    bounds = ctx.time_bounds(ingest)
    data = batch.drop_columns(["timestamp"]).to_pydict()
    headers_col = data.get("headers") or [None] * batch.num_rows
    # As integers: a producer may write a time no datetime can hold (to_pydict raised).
    record_us = batch.column("timestamp").cast(pa.int64()).to_pylist()
    record_col = out.record
    for position, (key, value, topic, part, off, rec_us, headers) in enumerate(zip(
        data["key"], data["value"], data["topic"], data["partition"], data["offset"],
        record_us, headers_col, strict=True,
    )):
        fmt = ctx.topic_formats.get(topic, "auto")
        record_ts = rec_us / 1_000_000 if rec_us is not None else ingest.timestamp()
        if not bounds[0] <= record_ts <= bounds[1]:
            out.append_reject(f"timestamp_out_of_range: {_out_of_range('record', record_ts, bounds)}",
                              value, fmt, topic, part, off, position)
            continue
        try:
            if not value:
                raise DecodeError("empty_value")
            if len(value) > ctx.max_message_bytes:
                raise DecodeError("message_too_large", f"{len(value)} bytes")
            try:
                doc = orjson.loads(value)
            except orjson.JSONDecodeError as err:
                raise DecodeError("not_json", str(err)[:200]) from err
            if fmt == "auto":
                fmt = detect_format(doc) or "unknown"
                if fmt == "unknown":
                    raise DecodeError("unknown_format", "no decoder recognises this layout")
            decoder = DECODERS.get(fmt)
            if decoder is None:
                raise DecodeError("unknown_format", f"no decoder for format {fmt!r}")
            observations, hints = decoder.decode(doc, catalog)
        except DecodeError as err:
            out.append_reject(str(err), value, fmt, topic, part, off, position)
            continue
        except Exception as err:  # a decoder bug must not stop the always-on job
            out.append_reject(f"decoder_error: {type(err).__name__}: {err}"[:500], value, fmt,
                              topic, part, off, position)
            continue
        try:
            key_groups = resolver.record_groups(key, headers)
        except DecodeError as err:
            out.append_reject(str(err), value, fmt, topic, part, off, position)
            continue
        rejected: list[Rejected] = []
        rows_before = len(record_col)
        label_chars_left = max(LABEL_CHARS_PER_BYTE * len(value), LABEL_CHARS_AT_LEAST)
        for obs in observations:
            obs_hints = hints
            if obs.__class__ is not Observation:
                if isinstance(obs, Rejected):
                    rejected.append(obs)
                    continue
                obs_hints = getattr(obs, "hints", hints)
            bad = _check(obs, record_ts, max_skew, bounds)
            if bad is None:
                items = tuple(obs.labels.items())
                ident_key = (tuple(i for i in items if i[0] in strip),
                             tuple(obs_hints.items()) if obs_hints else (), key, topic,
                             tuple(key_groups.items()) if headers else ())
                try:
                    identity = identity_cache.get(ident_key)
                except TypeError:  # an unhashable hint value: resolve without the cache
                    ident_key, identity = None, None
                if identity is None:
                    try:
                        identity = resolver.resolve_flagged(obs.labels, obs_hints, key_groups,
                                                            topic)
                    except DecodeError as err:
                        identity = Rejected(err.reason, err.detail)
                    if ident_key is not None:
                        identity_cache[ident_key] = identity
                if identity.__class__ is Rejected:
                    bad = identity
                else:
                    cluster, broker, defaulted = identity
                    if broker is None:
                        bad = Rejected("no_broker_identity", obs.metric or obs.raw_name or "?")
            if bad is not None:
                rejected.append(bad)
                continue
            try:
                # items is set whenever bad is None, which mypy does not follow
                stored = labels_cache.get(items)  # type: ignore[arg-type]
            except TypeError:
                items, stored = None, None
            if stored is None:
                kept = [(k, v) for k, v in sorted(obs.labels.items()) if k not in strip]
                stored = kept, sum(len(k) + len(v) for k, v in kept)
                if items is not None:
                    labels_cache[items] = stored
            labels, chars = stored
            label_chars_left -= chars
            if label_chars_left < 0:
                break
            ts_col.append(int((obs.ts if obs.ts is not None else record_ts) * 1_000_000))
            cluster_col.append(cluster)
            broker_col.append(broker)
            metric_col.append(obs.metric)
            attr_col.append(obs.attribute)
            labels_col.append(labels)
            value_col.append(obs.value)
            kind_col.append(obs.kind)
            fmt_col.append(fmt)
            topic_col.append(topic)
            part_col.append(part)
            off_col.append(off)
            ingest_col.append(ingest_us)
            reason_col.append(None)
            raw_col.append(None)
            defaulted_col.append(defaulted)
            record_col.append(position)
        if label_chars_left < 0:
            out.truncate(rows_before)
            out.append_reject(f"too_many_label_chars: its samples' labels pass "
                              f"{LABEL_CHARS_PER_BYTE} characters a byte of the record "
                              f"({len(value)} bytes)", value, fmt, topic, part, off, position)
        elif rejected:
            first = rejected[0]
            reason = f"{first.reason}: {first.detail}"
            if len(rejected) > 1:
                reason += f" (+{len(rejected) - 1} more rejected samples)"
            out.append_reject(reason[:500], value, fmt, topic, part, off, position)
        elif len(record_col) == rows_before:  # parsed, but not one sample in it
            out.append_reject(f"no_samples: a {fmt} record with no numeric sample in it",
                              value, fmt, topic, part, off, position)
    return out


def reason_category(reason: str) -> str:
    """The bounded label for metrics: the category before the colon."""
    return reason.split(":", 1)[0]
