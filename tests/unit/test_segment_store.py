"""The held windows' NumLogSegments store against the plain definition: per (cluster, broker,
window), the sum of each replica's value with the newest (ts, offset), a tie to the later
row (a batch's rows may hold a replica's window more than once)."""

from __future__ import annotations

import random

import pyarrow as pa

from streaming.signals import segment_store
from streaming.signals.incremental import SEGMENT_SCHEMA, newest_segments
from streaming.signals.segment_store import SegmentStore

WINDOW = 60_000_000


def batch_rows(rng: random.Random, windows: list[int], size: int) -> list[dict]:
    """Replica samples of two clusters whose broker and label texts are chosen to collide if
    a replica's identity were their plain concatenation; some brokers and labels null."""
    brokers = ["1", "11", "1:", None, ""]
    labels = ["topic=a,partition=0", "1topic=a,partition=0", ":v", "", None]
    return [{"cluster": rng.choice(["east", "west", None]), "broker": rng.choice(brokers),
             "window_start": rng.choice(windows), "labels_key": rng.choice(labels),
             "value": float(rng.randrange(0, 50)), "ts_us": rng.randrange(0, 5) * 1_000_000,
             "source_offset": rng.randrange(0, 3)} for _ in range(size)]


def as_table(rows: list[dict]) -> pa.Table:
    """`rows` (window starts in µs) as the segments tables the store takes."""
    return pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA.set(
        2, pa.field("window_start", pa.int64()))).cast(SEGMENT_SCHEMA)


def reference(batches: list[list[dict]], horizon: int) -> dict[tuple, float]:
    held: dict[tuple, dict] = {}
    for rows in batches:
        for r in rows:  # in the order sent: a tie goes to the later row
            key = (r["cluster"], r["broker"], r["window_start"], r["labels_key"])
            old = held.get(key)
            if old is None or (r["ts_us"], r["source_offset"]) >= (old["ts_us"],
                                                                     old["source_offset"]):
                held[key] = r
    sums: dict[tuple, float] = {}
    for (cluster, broker, start, _), r in held.items():
        if start >= horizon:
            sums[(cluster, broker, start)] = sums.get((cluster, broker, start), 0.0) + r["value"]
    return sums


def unique_newest(rows: list[dict]) -> list[dict]:
    """What the store is handed: the newest row per replica and window of a batch."""
    return [{**r, "window_start": int(r["window_start"].timestamp() * 1_000_000)}
            for r in newest_segments([as_table(rows)]).to_pylist()]


def test_store_sums_each_replicas_newest_value(monkeypatch) -> None:
    monkeypatch.setattr(segment_store, "COMPACT_MIN_SLOTS", 4)
    rng = random.Random(7)
    store = SegmentStore()
    windows = [w * WINDOW for w in range(1, 6)]
    batches: list[list[dict]] = []
    horizon = 0
    for step in range(40):
        rows = batch_rows(rng, windows, rng.randrange(1, 60))
        if step % 2:  # as newest_segments reduced them, or as sent (a replica more than once)
            rows = unique_newest(rows)
        batches.append(rows)
        store.absorb(as_table(rows))
        if step % 10 == 9:  # the oldest window leaves, later ones come
            horizon = windows[1]
            windows = [*windows[1:], windows[-1] + WINDOW]
            store.evict({"east": horizon, "west": horizon, None: horizon})
        want = reference(batches, horizon)
        keys = sorted(want, key=repr) + [("east", "nobody", windows[0]),
                                         ("north", "1", windows[0])]
        got = dict(store.totals(keys))
        assert got == want, f"after batch {step}"


def test_a_forgotten_cluster_holds_nothing() -> None:
    store = SegmentStore()
    rows = [{"cluster": c, "broker": "1", "window_start": WINDOW, "labels_key": "p=0",
             "value": 3.0, "ts_us": 1, "source_offset": 0} for c in ("east", "west")]
    store.absorb(as_table(rows))
    store.forget("east")
    assert store.totals([("east", "1", WINDOW), ("west", "1", WINDOW)]) == [
        (("west", "1", WINDOW), 3.0)]


def test_replicas_that_left_give_up_their_slots() -> None:
    """A window of many replicas evicted, the next holding few: the slots shrink to those,
    and what they hold is unchanged."""
    store = SegmentStore()
    many = [{"cluster": "east", "broker": str(i % 3), "window_start": WINDOW,
             "labels_key": f"p={i}", "value": 1.0, "ts_us": 1, "source_offset": i}
            for i in range(3 * segment_store.COMPACT_MIN_SLOTS)]
    few = [{**r, "window_start": 2 * WINDOW, "value": 2.0} for r in many[:30]]
    store.absorb(as_table(many))
    store.absorb(as_table(few))
    store.evict({"east": 2 * WINDOW})
    assert len(store._slots["east"].ids) == 30
    store.absorb(as_table([{**few[0], "labels_key": "p=new", "value": 5.0}]))
    assert store.totals([("east", b, 2 * WINDOW) for b in "012"]) == [
        (("east", "0", 2 * WINDOW), 25.0), (("east", "1", 2 * WINDOW), 20.0),
        (("east", "2", 2 * WINDOW), 20.0)]
