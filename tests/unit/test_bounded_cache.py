"""The decoders' caches of resolved names keep a bounded amount of producer-written text.

A producer chooses its MBean names and timestamps; a cache bounded by entries alone would
keep each one at whatever length it comes, for the life of a read task's worker."""

from __future__ import annotations

import orjson
import pyarrow as pa

from streaming.bounded_cache import CACHED_KEY_CHARS, AnswerCache, cached_when_short
from streaming.catalog import load_catalog
from streaming.decode.prometheus import parse_timestamp
from streaming.decode.records import DecodeContext, decode_record_batch
from streaming.schemas import arrow_schema


def test_an_answer_cache_stops_at_its_entries_or_its_key_text():
    by_entries = AnswerCache(entries=2, chars=10**6)
    for name in ("a", "b", "c"):
        by_entries.put((name, "Value"), name)
    assert sorted(by_entries) == [("a", "Value"), ("b", "Value")]
    by_text = AnswerCache(entries=100, chars=12)
    for name in ("aaaa", "bbbb", "cccc"):
        by_text.put((name, "x"), name)
    assert sorted(by_text) == [("aaaa", "x"), ("bbbb", "x")] and by_text.kept_chars == 10
    by_text.put(("aaaa", "x"), "again")  # a key it holds is not counted twice
    assert by_text.kept_chars == 10 and by_text[("aaaa", "x")] == "again"
    long_part = AnswerCache(entries=100, chars=10**9)
    long_part.put(("n" * (CACHED_KEY_CHARS + 1), "Value"), 1)
    assert not long_part


def test_a_text_cache_keeps_short_texts_only():
    calls: list[str] = []

    @cached_when_short(8)
    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    long = "x" * (CACHED_KEY_CHARS + 1)
    assert [length("ab"), length("ab"), length(long), length(long)] == [2, 2, len(long), len(long)]
    assert calls == ["ab", long, long] and length.cache_info().currsize == 1


def test_long_mbean_names_and_timestamps_leave_no_trace_in_the_decoders_caches():
    """Quarantined or not, a record's long names are resolved and forgotten: the caches'
    kept text does not grow with them, while the fleet's own names are still kept."""
    catalog = load_catalog()
    names = [f"kafka.log:type=Log,name=Size,topic={'t' * 50_000}{i},partition=0"
             for i in range(20)]
    bulk = [{"request": {"mbean": name, "type": "read"}, "value": {"Value": 1},
             "status": 200} for name in names]
    single = [{"request": {"mbean": name, "attribute": "Value", "type": "read"}, "value": 1,
               "status": 200} for name in names]
    usual = {"request": {"mbean": "kafka.server:type=ReplicaManager,name=LeaderCount",
                         "attribute": "Value", "type": "read"}, "value": 3, "status": 200}
    values = [orjson.dumps(bulk), *map(orjson.dumps, single), orjson.dumps(usual)]
    n = len(values)
    batch = pa.RecordBatch.from_pydict({
        "key": [b"prod/7"] * n, "value": values, "topic": ["m"] * n, "partition": [0] * n,
        "offset": list(range(n)), "timestamp": pa.array([None] * n, pa.timestamp("us", "UTC")),
        "timestampType": [0] * n}, schema=arrow_schema("kafka_records"))
    def kept() -> list[int]:  # the catalog is shared: other tests' names are there too
        """Characters of key text in the per-record and the columnar decoder's caches."""
        caches = [[catalog.__dict__.get("_jolokia_cache", {})],
                  list(catalog.__dict__.get("_jolokia_pair_cache", {}).values())]
        return [sum(len(part) for cache in group for key in cache for part in key)
                for group in caches]

    before = kept()
    decoded = decode_record_batch(batch, DecodeContext(), catalog)
    assert decoded.filter(pa.compute.is_null(decoded["reject_reason"]))["metric"].to_pylist() == [
        "LeaderCount"]
    grown = [after - earlier for after, earlier in zip(kept(), before, strict=True)]
    assert all(growth < 200 for growth in grown), grown  # LeaderCount's name at most
    caches = [catalog.__dict__["_jolokia_cache"],
              *catalog.__dict__["_jolokia_pair_cache"].values()]
    assert any(key[0].endswith("LeaderCount") for cache in caches for key in cache)
    before = parse_timestamp.cache_info().currsize
    assert parse_timestamp("2026-03-01T12:00:00." + "1" * 100_000 + "Z") > 0
    assert parse_timestamp.cache_info().currsize == before
