"""The chunks' partials merged with Arrow aggregations equal combine() folded row by row."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from streaming.config import SignalsConfig
from streaming.schemas import arrow_schema
from streaming.signals.broker import PARTIAL_KEYS, SAMPLE_COLUMNS
from streaming.signals.incremental import chunk_parts, combine, merge_partials

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GAUGES = [("UnderMinIsrPartitionCount", "Value"), ("RequestQueueSize", "Value"),
          ("PartitionCount", "Value"), ("ActiveControllerCount", "Value"),
          ("RequestHandlerAvgIdlePercent", "OneMinuteRate"),
          ("NetworkProcessorAvgIdlePercent", "Value"), ("OfflinePartitionsCount", "Value")]


def samples(rng: random.Random, n: int) -> pa.Table:
    schema = pa.schema([arrow_schema("bronze").field(c) for c in SAMPLE_COLUMNS])
    rows = []
    for _ in range(n):
        metric, attribute = rng.choice(GAUGES)
        value = rng.choice([0.0, 1.0, 2.5, float("nan"), None, float(rng.randint(0, 9))])
        rows.append({"ts": START + timedelta(seconds=rng.randint(0, 400)),
                     "cluster": rng.choice("ab"), "broker": rng.choice("123"),
                     "metric": metric, "attribute": attribute, "labels": [],
                     "value": value, "kind": "gauge", "source_offset": rng.randint(0, 50)})
    return pa.Table.from_pylist(rows, schema=schema)


def folded(tables: list[pa.Table]) -> list[dict]:
    merged: dict[tuple, dict] = {}
    for table in tables:
        for row in table.to_pylist():
            key = tuple(row[k] for k in PARTIAL_KEYS)
            merged[key] = row if key not in merged else combine(merged[key], row)
    return sorted(merged.values(), key=lambda r: tuple(r[k] for k in PARTIAL_KEYS))


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list):
        return sorted(a, key=repr) == sorted(b, key=repr) or (
            len(a) == len(b) and all(same(x, y) for x, y in zip(sorted(a), sorted(b),
                                                                strict=True)))
    return a == b


def test_merged_partials_equal_the_row_by_row_fold() -> None:
    config = SignalsConfig()
    for seed in range(6):
        rng = random.Random(seed)
        tables = [chunk_parts(samples(rng, rng.randint(0, 300)), config)[1]
                  for _ in range(rng.randint(1, 5))]
        schema = tables[0].schema
        got = merge_partials(tables, schema)
        got_rows = sorted(got.to_pylist(), key=lambda r: tuple(r[k] for k in PARTIAL_KEYS))
        want = folded(tables)
        assert len(got_rows) == len(want)
        for mine, theirs in zip(got_rows, want, strict=True):
            bad = [k for k in theirs if not same(mine[k], theirs[k])]
            assert not bad, (seed, {k: (mine[k], theirs[k]) for k in bad})
