"""newest_of_each: the newest (ts, offset) row of each key, as a stable sort by (ts, offset)
and group_by's "last" give it, for the keys the segment partials use."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from streaming.signals.broker import SEGMENT_KEYS, in_time_order, newest_of_each

TS = pa.timestamp("us", "UTC")


def segments(rng: random.Random, rows: int) -> pa.Table:
    """Few distinct keys, timestamps and offsets: many rows share a key, many tie."""
    return pa.table({
        "cluster": [rng.choice(["a", "b", None]) for _ in range(rows)],
        "broker": [rng.choice(["1", "2", "", None]) for _ in range(rows)],
        "window_start": pa.array([rng.choice([0, 60, 120]) * 1_000_000
                                  for _ in range(rows)], pa.int64()).cast(TS),
        "labels_key": [rng.choice(["topic=x", "topic=y", "", "topic=x\x1fpartition=1"])
                       for _ in range(rows)],
        "value": [float(i) for i in range(rows)],  # tells each row apart
        "ts_us": pa.array([rng.randrange(4) for _ in range(rows)], pa.int64()),
        "source_offset": pa.array([rng.randrange(3) for _ in range(rows)], pa.int64()),
    })


def by_group_by(table: pa.Table, keys: list[str]) -> set[tuple]:
    newest = in_time_order(table, "ts_us").group_by(keys, use_threads=False).aggregate(
        [("value", "last")])
    return set(zip(*[newest[c].to_pylist() for c in [*keys, "value_last"]], strict=True))


def rows_of(table: pa.Table, keys: list[str]) -> set[tuple]:
    return set(zip(*[table[c].to_pylist() for c in [*keys, "value"]], strict=True))


@pytest.mark.parametrize("rows", [1, 2, 7, 300, 4000])
def test_the_newest_row_of_each_key_a_tie_to_the_later_row(rows):
    rng = random.Random(rows)
    for _ in range(10):
        table = segments(rng, rows)
        newest = newest_of_each(table, SEGMENT_KEYS, "ts_us")
        assert newest.num_rows == len(rows_of(newest, list(SEGMENT_KEYS)))
        assert rows_of(newest, list(SEGMENT_KEYS)) == by_group_by(table, list(SEGMENT_KEYS))
        chosen = newest["value"].to_pylist()
        assert chosen == sorted(chosen)  # the rows keep their given order


def test_keys_whose_combined_codes_would_overflow_stay_apart():
    """Five columns of 65,535 distinct values each: a column's codes span 2**16 (null has
    one too), so five of them pass 64 bits and, combined without being made dense on the
    way, the first column's code would be shifted out: the last row, which differs from the
    first only there, would share its key."""
    distinct = 2 ** 16 - 1
    first = list(range(distinct)) + [1]
    same = list(range(distinct)) + [0]
    table = pa.table({"a": first, "b": same, "c": same, "d": same, "e": same,
                      "value": [float(i) for i in range(distinct + 1)],
                      "ts_us": pa.array([0] * (distinct + 1), pa.int64()),
                      "source_offset": pa.array([0] * (distinct + 1), pa.int64())})
    newest = newest_of_each(table, list("abcde"), "ts_us")
    assert newest.num_rows == distinct + 1
    assert rows_of(newest, list("abcde")) == by_group_by(table, list("abcde"))


def test_a_null_offset_sorts_last_and_large_times_stay_apart():
    """A null (ts or offset) sorts after every value, as in Arrow's sort; a column with a
    null still compares its values as int64, so times one apart past 2**53 stay apart."""
    big = 2 ** 53
    table = pa.table({"k": ["a", "a", "b", "b", "c"], "value": [0.0, 1.0, 2.0, 3.0, 4.0],
                      "ts_us": pa.array([big + 1, big, 5, 5, None], pa.int64()),
                      "source_offset": pa.array([0, 1, None, 7, 0], pa.int64())})
    assert newest_of_each(table, ["k"], "ts_us")["value"].to_pylist() == [0.0, 2.0, 4.0]
    assert rows_of(newest_of_each(table, ["k"], "ts_us"), ["k"]) == by_group_by(table, ["k"])
