"""Single-attribute Jolokia reads decoded a chunk at a time by Arrow's JSON reader.

Why: one Jolokia read response per Kafka record (one sample each) is the worst case for the
per-record decoder: orjson, a dict per message, an Observation and a dozen list appends cost
about 15 µs a record, the largest cost of the job. Arrow's reader parses a chunk of records
as newline-delimited JSON against a fixed schema in C++ (about 1 µs a record); the catalog is
then consulted once per distinct (MBean, attribute), identity resolved once per distinct
(key, topic, agent url, identity labels, identity headers), and the output columns gathered
with `take`.

Exactness comes before speed: a record is kept here only where its result is provably the
per-record decoder's; every other record is handed back to that decoder, which writes the
rows and rejects it always did. Handed back: anything not a one-line ASCII JSON object of at
most FAST_MAX_BYTES (a bound that also keeps nesting under orjson's depth limit), anything
containing NaN/Inf literals (Arrow accepts them, strict JSON does not), records Arrow cannot
parse (a failing chunk is cut around the bad record, so one does not cost the whole chunk),
bulk or pattern reads and objects without an attribute, a status other than 200, values or
timestamps at or past 2**53 (where integer and float parsing may round apart), a value of
negative zero (the integer -0 is 0 to orjson, -0.0 to Arrow), and every
record the quality rules (negative counter, timestamp skew or range), the catalog (malformed MBean)
or identity resolution (no broker) would reject.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from streaming.bounded_cache import ANSWER_KEY_CHARS, AnswerCache
from streaming.catalog import Catalog
from streaming.decode.common import LIMITS, DecodeError, check_labels, decoded_batch, header_groups
from streaming.decode.jolokia import HINT, resolve_attribute

FAST_MAX_BYTES = 2000
SCAN_WITH_NUMPY = 4096  # below this, bytes' own search is faster than numpy's set-up
MIN_PIECE = 1024
FAILED_PARSES_PER_CHUNK = 16
EXACT_LIMIT = float(2**53)
FORMAT = "jolokia"

_READ_SCHEMA = pa.schema([
    ("request", pa.struct([
        ("mbean", pa.string()),
        ("attribute", pa.string()),
        ("target", pa.struct([("url", pa.string())])),
    ])),
    ("value", pa.float64()),
    ("timestamp", pa.float64()),
    ("status", pa.int64()),
])
_PARSE = pa_json.ParseOptions(explicit_schema=_READ_SCHEMA, unexpected_field_behavior="ignore",
                              newlines_in_values=False)
_ERROR_ROW = re.compile(r"\bin row (\d+)\b")
_READ = pa_json.ReadOptions(use_threads=False, block_size=1 << 26)
_LABELS = pa.map_(pa.string(), pa.string())
_TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass
class Decoded:
    """Rows decoded here, the batch positions of their records, and the positions left over."""

    pieces: list[pa.RecordBatch]
    positions: list[np.ndarray]
    rest: np.ndarray


def _plain(text: bytes) -> bool:
    if not text.isascii() or b"\r" in text:
        return False
    if len(text) < SCAN_WITH_NUMPY:
        return b"NaN" not in text and b"Inf" not in text
    data = np.frombuffer(text, dtype=np.uint8)
    return not _has(data, b"NaN") and not _has(data, b"Inf")


def _has(data: np.ndarray, needle: bytes) -> bool:
    """Whether a 3-byte needle occurs: its first byte by a vectorized compare, the rest at
    those places only. On a joined chunk (1.7 MB for 10k records) 0.25 ms a needle, where
    bytes' own search took 1 ms (it scans a byte at a time)."""
    starts = np.flatnonzero(data[:-2] == needle[0])
    return bool(((data[starts + 1] == needle[1]) & (data[starts + 2] == needle[2])).any())


def _candidates(values: pa.Array, wanted_topic: np.ndarray, limit: int) -> np.ndarray:
    """Positions of records that look like one JSON object on one line: framing is checked
    on Arrow's offsets for the whole batch, content once on the joined candidates (record by
    record only when that finds something)."""
    n = len(values)
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[values.offset:values.offset + n + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(1)
    lengths = np.diff(offsets)
    ok = wanted_topic & _valid(values) & (lengths > 1) & (lengths <= limit)
    if len(data):
        first = data[np.minimum(offsets[:-1], len(data) - 1)]
        last = data[np.clip(offsets[1:] - 1, 0, len(data) - 1)]
        ok &= (first == 0x7B) & (last == 0x7D)
    positions = np.flatnonzero(ok)
    return positions


def _error_row(err: Exception, rows: int) -> int | None:
    """The document Arrow stopped at ("... in row N"), when it says so."""
    match = _ERROR_ROW.search(str(err))
    return int(match.group(1)) if match and int(match.group(1)) < rows else None


def _parse(values: list[bytes], positions: list[int], failures: list[int]
           ) -> list[tuple[pa.Table, list[int]]]:
    """Parsed pieces with the positions of their rows; what Arrow rejects is left out.

    A failing chunk is cut around the document Arrow names (documents count records while
    every record holds one; where that fails, the row count check catches it), else halved
    down to MIN_PIECE. Arrow stops at the first error, so a cut costs about one extra parse
    of what precedes it, but each call has a fixed cost: after `failures` failed parses the
    rest of a chunk (a flood of bad records) goes to the per-record decoder.
    """
    if not values or failures[0] <= 0:
        return []
    bad = None
    try:
        table = pa_json.read_json(io.BytesIO(b"\n".join(values)), read_options=_READ,
                                  parse_options=_PARSE)
        if table.num_rows == len(values):
            return [(table, positions)]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        bad = _error_row(err, len(values))
    failures[0] -= 1
    if bad is not None:
        return (_parse(values[:bad], positions[:bad], failures)
                + _parse(values[bad + 1:], positions[bad + 1:], failures))
    if len(values) < 2 * MIN_PIECE:
        return []
    half = len(values) // 2
    return (_parse(values[:half], positions[:half], failures)
            + _parse(values[half:], positions[half:], failures))


def _rows_at(rows: Any, positions: Any) -> Any:
    """`rows.take(positions)` for ascending distinct positions, which cover every row when
    there are as many: then the rows themselves (a take of every row copied each key and
    value, 0.14 µs a record, in the usual chunk where every record is a candidate)."""
    if len(positions) == len(rows):
        return rows
    return rows.take(positions if isinstance(positions, pa.Array)
                     else pa.array(positions, pa.int64()))


def _codes(column: pa.Array) -> tuple[np.ndarray, list[Any]]:
    """Dictionary codes (null as -1) and the distinct values they index."""
    encoded = pc.dictionary_encode(column)
    return (encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False),
            encoded.dictionary.to_pylist())


def _valid(column: pa.Array) -> np.ndarray:
    return column.is_valid().to_numpy(zero_copy_only=False)


def decode(batch: pa.RecordBatch, topics: set[str], max_bytes: int, resolver: Any,
           catalog: Catalog, ingest: datetime, max_skew: float,
           bounds: tuple[float, float] = (-np.inf, np.inf)) -> Decoded:
    """Decode what can be decoded here from the records of `topics` (Jolokia or auto);
    `bounds` are the earliest and latest believable record and sample times."""
    column = batch.column("value")
    wanted = pc.is_in(batch.column("topic"), value_set=pa.array(sorted(topics), pa.string()))
    wanted = wanted.to_numpy(zero_copy_only=False)
    positions = _candidates(column, wanted, min(FAST_MAX_BYTES, max_bytes)).tolist()
    values = _rows_at(column, positions).to_pylist()
    joined = b"\n".join(values)
    if not (_plain(joined) and joined.count(b"\n") == len(values) - 1):
        clean = [i for i, value in enumerate(values) if _plain(value) and b"\n" not in value]
        positions, values = [positions[i] for i in clean], [values[i] for i in clean]
    taken = np.zeros(batch.num_rows, dtype=bool)
    pieces, kept = [], []
    for table, where in _parse(values, positions, [FAILED_PARSES_PER_CHUNK]):
        records = _rows_at(batch, where)
        piece, rows = _decode_piece(table, records, resolver, catalog, ingest, max_skew,
                                    bounds)
        if piece is not None:
            rows = np.asarray(where, dtype=np.int64)[rows]
            pieces.append(piece)
            kept.append(rows)
            taken[rows] = True
    return Decoded(pieces, kept, np.flatnonzero(~taken))


@dataclass
class _Pairs:
    """Catalog answers per distinct (MBean, attribute); `row` indexes them, -1 = hand back."""

    metric: list[str | None]
    attribute: list[str]
    kind: list[str]
    labels: list[list[tuple[str, str]]]
    identity_labels: list[int]
    identity_groups: list[tuple[tuple[str, str], ...]]
    row: np.ndarray


_Answer = tuple[str | None, str, str, list[tuple[str, str]], tuple[tuple[str, str], ...], bool]
# distinct (MBean, attribute) answers kept per (stripped labels, limits): a fleet's
# per-partition MBeans are tens of thousands of names, each back every scrape
PAIR_CACHE_SIZE = 200_000


def _answer(catalog: Catalog, mbean: str, attribute: str, strip: set[str],
            limits: Any) -> _Answer:
    """(metric, canonical attribute, kind, labels but the stripped ones sorted, the stripped
    ones, usable) of one (MBean, attribute)."""
    resolved, usable = None, False
    try:
        resolved = resolve_attribute(catalog, mbean, attribute)
        check_labels(resolved[3], limits)  # the per-record decoder rejects it
        usable = True
    except DecodeError:
        pass
    metric, canonical, kind, labels = resolved or (None, "", "gauge", {})
    return (metric, canonical, kind,
            [(k, v) for k, v in sorted(labels.items()) if k not in strip],
            tuple(item for item in labels.items() if item[0] in strip), usable)


def _pairs(mbean: pa.Array, attribute: pa.Array, catalog: Catalog, strip: set[str]) -> _Pairs:
    m_codes, m_values = _codes(mbean)
    a_codes, a_values = _codes(attribute)
    width = len(a_values) + 1
    combined = np.where((m_codes >= 0) & (a_codes >= 0),
                        m_codes.astype(np.int64) * width + a_codes, -1)
    distinct, inverse = np.unique(combined, return_inverse=True)
    metrics: list[str | None] = []
    attributes: list[str] = []
    kinds: list[str] = []
    labels_per_pair: list[list[tuple[str, str]]] = []
    identity_labels: list[int] = []
    groups: dict[tuple[tuple[str, str], ...], int] = {}
    usable = np.zeros(len(distinct), dtype=bool)
    limits = LIMITS.get()
    caches: dict[Any, AnswerCache] = catalog.__dict__.setdefault(
        "_jolokia_pair_cache", {})
    cache = caches.setdefault((frozenset(strip), limits),
                              AnswerCache(PAIR_CACHE_SIZE, ANSWER_KEY_CHARS))
    for i, code in enumerate(distinct.tolist()):
        if code >= 0:
            pair = (m_values[code // width], a_values[code % width])
            answer = cache.get(pair)
            if answer is None:
                answer = _answer(catalog, *pair, strip, limits)
                cache.put(pair, answer)
        else:
            answer = (None, "", "gauge", [], (), False)
        metric, canonical, kind, labels, group, usable[i] = answer
        metrics.append(metric)
        attributes.append(canonical)
        kinds.append(kind)
        labels_per_pair.append(labels)
        identity_labels.append(groups.setdefault(group, len(groups)))
    return _Pairs(metrics, attributes, kinds, labels_per_pair, identity_labels, list(groups),
                  np.where(usable[inverse], inverse, -1))


def _header_codes(records: pa.RecordBatch) -> tuple[np.ndarray, list[Any]]:
    """Codes (-1 = none) of each record's identity headers (cluster, broker) and the
    distinct header lists they index; no per-record work when no record has headers."""
    if "headers" not in records.schema.names or records.column("headers").null_count == len(
            records):
        return np.full(records.num_rows, -1, dtype=np.int64), []
    seen: dict[tuple[tuple[str, str], ...], int] = {}
    codes = np.full(records.num_rows, -1, dtype=np.int64)
    for i, headers in enumerate(records.column("headers").to_pylist()):
        groups = tuple(header_groups(headers).items())
        if groups:
            codes[i] = seen.setdefault(groups, len(seen))
    return codes, [[{"key": k, "value": v} for k, v in groups] for groups in seen]


def _identities(records: pa.RecordBatch, url: pa.Array, pairs: _Pairs, resolver: Any
                ) -> tuple[np.ndarray, list[str | None], list[str | None], list[bool]]:
    """(index per row into clusters/brokers/defaulted, -1 = no broker) resolved once per
    distinct (key, topic, agent url, identity labels, identity headers), as the per-record
    decoder's cache does."""
    key_codes, keys = _codes(records.column("key"))
    topic_codes, topics = _codes(records.column("topic"))
    url_codes, urls = _codes(url)
    header_codes, headers = _header_codes(records)
    group_codes = np.asarray(pairs.identity_labels, dtype=np.int64)[np.maximum(pairs.row, 0)]
    stacked = np.stack([key_codes, topic_codes, url_codes, group_codes, header_codes], axis=1)
    # One integer per combination where it fits (a 1-D unique sorts far faster than rows).
    sizes = [len(keys) + 1, len(topics) + 1, len(urls) + 1, len(pairs.identity_groups) + 1,
             len(headers) + 1]
    if float(np.prod(np.asarray(sizes, dtype=np.float64))) < 2.0**62:
        combined = np.zeros(len(stacked), dtype=np.int64)
        for column, size in zip(stacked.T, sizes, strict=True):
            combined = combined * size + (column + 1)
        _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    clusters: list[str | None] = []
    brokers: list[str | None] = []
    defaulted: list[bool] = []
    found = np.zeros(len(first), dtype=bool)
    for i, (k, t, u, g, h) in enumerate(stacked[first].tolist()):
        key = keys[k] if k >= 0 else None
        hints = {HINT: urls[u]} if u >= 0 else {}
        try:
            cluster, broker, fell_back = resolver.resolve_flagged(
                dict(pairs.identity_groups[g]), hints,
                resolver.record_groups(key, headers[h] if h >= 0 else None), topics[t])
        except DecodeError:  # the per-record decoder writes the reject
            cluster, broker, fell_back = None, None, False
        clusters.append(cluster)
        brokers.append(broker)
        defaulted.append(fell_back)
        found[i] = broker is not None
    inverse = inverse.reshape(-1)
    return np.where(found[inverse], inverse, -1), clusters, brokers, defaulted


def _decode_piece(table: pa.Table, records: pa.RecordBatch, resolver: Any, catalog: Catalog,
                  ingest: datetime, max_skew: float, bounds: tuple[float, float]
                  ) -> tuple[pa.RecordBatch | None, np.ndarray]:
    """Decoded rows of one parsed piece and the piece rows they came from."""
    request = table.column("request").combine_chunks()
    mbean, attribute = request.field("mbean"), request.field("attribute")
    url = request.field("target").field("url")
    # Struct children ignore the parent's nulls: a null request (or target) nulls them here.
    present = _valid(request)
    mbean = pc.if_else(pa.array(present), mbean, pa.scalar(None, pa.string()))
    target_present = pa.array(present & _valid(request.field("target")))
    url = pc.if_else(target_present, url, pa.scalar(None, pa.string()))
    value = table.column("value").to_numpy()
    ts = table.column("timestamp").to_numpy()  # NaN where absent or null
    status = table.column("status").fill_null(0).to_numpy()
    pairs = _pairs(mbean, attribute, catalog, resolver.strip)
    is_counter = np.asarray([k == "counter" for k in pairs.kind], dtype=bool)

    record_time = records.column("timestamp")
    record_us = record_time.cast(pa.int64()).fill_null(0).to_numpy()
    record_ts = np.where(_valid(record_time), record_us.astype(np.float64) / 1e6,
                         ingest.timestamp())
    no_ts = np.isnan(ts)
    event_us = np.where(no_ts, record_ts, ts) * 1_000_000
    with np.errstate(invalid="ignore"):
        ok = ((status == 200) & (pairs.row >= 0) & _valid(attribute)
              & (np.abs(value) < EXACT_LIMIT)
              # a negative zero: "-0" is the integer 0 to orjson, -0.0 to Arrow's reader
              & ~((value == 0) & np.signbit(value))
              & (no_ts | (np.abs(ts) < EXACT_LIMIT))
              & ~(is_counter[np.maximum(pairs.row, 0)] & (value < 0))
              & (no_ts | ~(np.abs(ts - record_ts) > max_skew))
              & (np.abs(event_us) < float(2**62))
              & (record_ts >= bounds[0]) & (record_ts <= bounds[1])
              & (event_us >= bounds[0] * 1e6) & (event_us <= bounds[1] * 1e6))
    identity, clusters, brokers, defaulted = _identities(records, url, pairs, resolver)
    ok &= identity >= 0
    rows = np.flatnonzero(ok)
    if rows.size == 0:
        return None, rows
    at = pa.array(rows)
    pair = pa.array(pairs.row[rows])
    who = pa.array(identity[rows])
    n = rows.size
    ingest_us = int(ingest.timestamp() * 1_000_000)
    return decoded_batch({
        "ts": pa.array(event_us[rows].astype(np.int64)).cast(_TIMESTAMP),
        "cluster": pa.array(clusters, pa.string()).take(who),
        "broker": pa.array(brokers, pa.string()).take(who),
        "metric": pa.array(pairs.metric, pa.string()).take(pair),
        "attribute": pa.array(pairs.attribute, pa.string()).take(pair),
        "labels": pa.array(pairs.labels, _LABELS).take(pair),
        "value": pa.array(value[rows], pa.float64()),
        "kind": pa.array(pairs.kind, pa.string()).take(pair),
        "source_format": pa.array([FORMAT] * n, pa.string()),
        "source_topic": _rows_at(records.column("topic"), at),
        "source_partition": _rows_at(records.column("partition"), at),
        "source_offset": _rows_at(records.column("offset"), at),
        "ingest_ts": pa.array(np.full(n, ingest_us, dtype=np.int64)).cast(_TIMESTAMP),
        "reject_reason": pa.nulls(n, pa.string()),
        "raw": pa.nulls(n, pa.binary()),
        "cluster_defaulted": pa.array(defaulted, pa.bool_()).take(who),
    }), rows
