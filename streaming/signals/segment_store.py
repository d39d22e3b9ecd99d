"""The held windows' NumLogSegments: each partition replica's newest value per (cluster,
broker, window), and their sum per (cluster, broker, window), the broker's log segments.

Why arrays and not a dict per replica: NumLogSegments is a per-partition gauge, so on a
large fleet nearly every sample the driver receives is one (a broker hosting thousands of
replicas sends one per replica and scrape); a read task reduces them to one per replica
and window of its share of the batch, which at a live stream's density still leaves about
one row per replica, task and window. A Python dict of replicas per window, updated
sample by sample and summed on every batch, was most of the driver's held-window step
there. Here a replica is a slot of its cluster, found once per row, its value, timestamp
and offset sit in NumPy arrays per window, the newest of a batch's rows replace theirs in
one vectorized step (so the tasks' rows of held windows need no sort and group-by across
tasks first), and a window's sums per broker are one bincount.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Key = tuple[str, str, int]  # cluster, broker, window start (µs)
# a cluster's slots are compacted when fewer than this share of them is held in a window
COMPACT_BELOW = 0.5
COMPACT_MIN_SLOTS = 4096


def _identity(broker: pa.ChunkedArray | pa.Array, labels: pa.ChunkedArray | pa.Array
              ) -> pa.Array:
    """One string per (broker, labels) pair that no other pair shares: the broker's length
    first, so no broker or labels text can make two pairs' strings collide, and null apart
    from empty."""
    def length(column: pa.ChunkedArray | pa.Array) -> pa.Array:
        return pc.fill_null(pc.cast(pc.utf8_length(column), pa.string()), "-")

    is_labelled = pc.if_else(pc.is_valid(labels), "v", "n")
    joined = pc.binary_join_element_wise(length(broker), ":", pc.fill_null(broker, ""),
                                         is_labelled, pc.fill_null(labels, ""), "")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


@dataclass
class _Slots:
    """A cluster's replicas seen in its held windows: slot i is `ids[i]`, whose broker is
    `brokers[broker_of[i]]`. The slots are found by a dict: Arrow's `index_in` rebuilds its
    hash set of every slot on each call (~20 ms for a 300-broker fleet's 120k replicas),
    which at a live stream's small batches cost more than looking up their few rows."""

    ids: list[str] = field(default_factory=list)
    slot: dict[str, int] = field(default_factory=dict)
    broker_of: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    brokers: pa.Array = field(default_factory=lambda: pa.array([], pa.string()))
    code: dict[str | None, int] = field(default_factory=dict)

    def broker_codes(self, broker: pa.Array) -> np.ndarray:
        new = pc.unique(broker.filter(pc.is_null(pc.index_in(broker, value_set=self.brokers))))
        if len(new):
            for name in new.to_pylist():
                self.code[name] = len(self.code)
            self.brokers = pa.concat_arrays([self.brokers, new.cast(pa.string())])
        return pc.index_in(broker, value_set=self.brokers).to_numpy(zero_copy_only=False)

    def lookup(self, broker: pa.Array, labels: pa.Array) -> np.ndarray:
        """The slot of each (broker, labels) row, new replicas given new slots."""
        ids = _identity(broker, labels).to_pylist()
        found = list(map(self.slot.get, ids))
        first = len(self.ids)
        if None in found:
            for row, identity in enumerate(ids):
                if found[row] is None:
                    found[row] = self.slot.get(identity)
                    if found[row] is None:
                        found[row] = self.slot[identity] = len(self.ids)
                        self.ids.append(identity)
        slots = np.array(found, np.int64)
        if len(self.ids) > first:
            fresh = slots >= first
            self.broker_of = np.concatenate([self.broker_of,
                                             np.zeros(len(self.ids) - first, np.int64)])
            self.broker_of[slots[fresh]] = self.broker_codes(broker)[fresh]
        return slots

    def keep(self, slots: np.ndarray) -> None:
        """Only `slots`, renumbered in their order."""
        self.ids = [self.ids[i] for i in slots.tolist()]
        self.slot = {identity: i for i, identity in enumerate(self.ids)}
        self.broker_of = self.broker_of[slots]


@dataclass
class _Window:
    """One (cluster, window)'s newest value, its (ts µs, offset) and presence per slot."""

    value: np.ndarray
    ts: np.ndarray
    offset: np.ndarray
    present: np.ndarray

    @classmethod
    def sized(cls, slots: int) -> _Window:
        return cls(np.zeros(slots), np.zeros(slots, np.int64), np.zeros(slots, np.int64),
                   np.zeros(slots, bool))

    def fit(self, slots: int) -> None:
        grow = slots - len(self.present)
        if grow > 0:
            self.value = np.concatenate([self.value, np.zeros(grow)])
            self.ts = np.concatenate([self.ts, np.zeros(grow, np.int64)])
            self.offset = np.concatenate([self.offset, np.zeros(grow, np.int64)])
            self.present = np.concatenate([self.present, np.zeros(grow, bool)])

    def keep(self, slots: np.ndarray) -> None:
        self.value, self.ts = self.value[slots], self.ts[slots]
        self.offset, self.present = self.offset[slots], self.present[slots]


class SegmentStore:
    """Each partition replica's newest NumLogSegments per (cluster, broker, window); a
    replica's later sample replaces its value, a tie in (ts, offset) goes to the later
    call, as the dict it replaces did."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._slots: dict[str | None, _Slots] = {}
        self._windows: dict[tuple[str | None, int], _Window] = {}

    def absorb(self, segments: pa.Table) -> None:
        """Rows of incremental.SEGMENT_SCHEMA in the order sent; of a replica's rows in a
        window the newest (ts, offset) counts, a tie to the later row."""
        if segments.num_rows == 0:
            return
        encoded = pc.dictionary_encode(segments["cluster"].combine_chunks())
        codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
        for code, cluster in [*enumerate(encoded.dictionary.to_pylist()), (-1, None)]:
            rows = np.flatnonzero(codes == code)
            if len(rows):
                self._absorb_cluster(cluster, segments.take(rows))

    def _absorb_cluster(self, cluster: str | None, rows: pa.Table) -> None:
        slots = self._slots.setdefault(cluster, _Slots())
        slot = slots.lookup(rows["broker"].combine_chunks(),
                            rows["labels_key"].combine_chunks())
        windows = pc.cast(rows["window_start"], pa.int64()).to_numpy(zero_copy_only=False)
        value = rows["value"].to_numpy().astype(float)  # never null: signal_partials
        ts = rows["ts_us"].to_numpy(zero_copy_only=False)
        offset = rows["source_offset"].to_numpy(zero_copy_only=False)
        order = np.argsort(windows, kind="stable")
        ordered = windows[order]
        starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        for begin, end in zip(starts, [*starts[1:], len(order)], strict=True):
            at = order[begin:end]
            window = self._windows.get((cluster, int(windows[at[0]])))
            if window is None:
                window = self._windows[(cluster, int(windows[at[0]]))] = _Window.sized(
                    len(slots.ids))
            window.fit(len(slots.ids))
            s = slot[at]
            if len(s) > 1 and np.bincount(s).max() > 1:
                # the newest of each slot's rows: last in (slot, ts, offset, row) order
                last = np.lexsort((at, offset[at], ts[at], s))
                ends = np.flatnonzero(np.append(s[last][1:] != s[last][:-1], True))
                at = at[last[ends]]
                s = slot[at]
            newer = ~window.present[s] | (ts[at] > window.ts[s]) | (
                (ts[at] == window.ts[s]) & (offset[at] >= window.offset[s]))
            s, at = s[newer], at[newer]
            window.value[s], window.ts[s], window.offset[s] = value[at], ts[at], offset[at]
            window.present[s] = True

    def totals(self, keys: list[Key]) -> list[tuple[Key, float]]:
        """The sum of the held replicas' values of each key that holds any, in `keys`'
        order."""
        sums: dict[tuple[str | None, int], tuple[np.ndarray, np.ndarray]] = {}
        out = []
        for key in keys:
            cluster, broker, start = key
            window = self._windows.get((cluster, start))
            slots = self._slots.get(cluster)
            if window is None or slots is None or broker not in slots.code:
                continue
            if (cluster, start) not in sums:
                owners = slots.broker_of[: len(window.present)][window.present]
                sums[(cluster, start)] = (
                    np.bincount(owners, minlength=len(slots.code)),
                    np.bincount(owners, weights=window.value[window.present],
                                minlength=len(slots.code)))
            count, total = sums[(cluster, start)]
            if count[slots.code[broker]]:
                out.append((key, float(total[slots.code[broker]])))
        return out

    def evict(self, horizon: dict[str, int]) -> None:
        """Drop the windows older than their cluster's horizon; compact a cluster's slots
        once most of them are held in no window (replicas moved or deleted), so that
        memory follows the replicas held, not every replica ever seen."""
        for cluster, start in [k for k in self._windows if k[1] < horizon.get(k[0], -1)]:
            del self._windows[(cluster, start)]
        for cluster, slots in list(self._slots.items()):
            held = [w for (c, _), w in self._windows.items() if c == cluster]
            if not held:
                del self._slots[cluster]
                continue
            if len(slots.ids) < COMPACT_MIN_SLOTS:
                continue
            live = np.zeros(len(slots.ids), bool)
            for window in held:
                live[: len(window.present)] |= window.present
            if live.mean() < COMPACT_BELOW:
                keep = np.flatnonzero(live)
                slots.keep(keep)
                for window in held:
                    window.fit(len(live))
                    window.keep(keep)

    def forget(self, cluster: str | None) -> None:
        self._slots.pop(cluster, None)
        for key in [k for k in self._windows if k[0] == cluster]:
            del self._windows[key]
