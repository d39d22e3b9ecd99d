"""A batch that fails on its data is not replayed forever: its poison records are found
and quarantined, the rest of the batch goes on.

When a batch fails, the job notes it in a small file beside the checkpoint (next to the
pending-signals marker): the batch id, its Kafka offset ranges, the exception's class and
how often it failed. The attempt after that (Spark's replay of the batch, or the restarted
job recovering a batch whose deferred signals failed) first tries the batch's samples in
memory through the driver stages that compute from them (`trial`, on copies, nothing
written). If that raises the recorded class again (the second failure, the same way), the
batch is halved by source record (topic, partition, offset) until the records whose rows
raise it are found; they go to quarantine as `poison_record: <ExceptionClass>` (the class
only: an exception's message may carry data or secrets) and leave bronze, and the batch
goes on without them. A trial that passes means the failure was not the data's (a disk, a
lost connection): nothing is quarantined and the batch runs as usual.

Bisecting on the replay, not on the first failure, keeps the failing attempt's state out
of the search (it may have half-written tables and held windows), and keeps the cost of
trials off every batch that never fails.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from streaming import locations
from streaming.broker_admission import RECORD, record_rejects
from streaming.sinks.predicates import Predicate, any_of, field

LOG = logging.getLogger("kafka_health.poison")
FAILED_BATCH = "kafka_health_failed_batch.json"
REASON = "poison_record"
Range = tuple[str, int, int, int]  # topic, partition, first offset, last offset


def offset_ranges(rows: pa.Table) -> list[Range]:
    """Each topic-partition's first and last offset in `rows`, sorted: a batch's identity
    that a replay (same offsets) reproduces."""
    if not rows.num_rows:
        return []
    spans = rows.group_by(RECORD[:2], use_threads=False).aggregate(
        [("source_offset", "min"), ("source_offset", "max")])
    return sorted(zip(spans["source_topic"].to_pylist(), spans["source_partition"].to_pylist(),
                      spans["source_offset_min"].to_pylist(),
                      spans["source_offset_max"].to_pylist(), strict=True))


def in_ranges(ranges: list[Range]) -> tuple[Predicate, Predicate]:
    """Rows of those records as filters (never SQL text): by partition and offset
    (integers, which prune files), and with their topics too (strings, filtered in memory:
    see DeltaRsTable.read)."""
    spans = [(topic, (field("source_partition") == partition)
              & (field("source_offset") >= first) & (field("source_offset") <= last))
             for topic, partition, first, last in ranges]
    return (any_of(span for _, span in spans),
            any_of(span & (field("source_topic") == topic) for topic, span in spans))


@dataclass
class Failure:
    app_id: str
    batch_id: int
    ranges: list[Range]
    error: str  # the exception's class name
    count: int = 1


class FailureLog:
    """The one failed batch the job knows of, in a JSON file beside the checkpoint (local or
    on an object store), written whole or not at all. The micro-batch thread and the
    signals writer both note and clear: a lock keeps a clear from deleting a newer note."""

    def __init__(self, location: Path | str | None,
                 storage_options: Mapping[str, str] | None = None) -> None:
        self.location = None if location is None else str(location)
        self.storage_options = dict(storage_options or {})
        self._lock = threading.Lock()

    def read(self) -> Failure | None:
        if self.location is None:
            return None
        text = locations.read_text(self.location, self.storage_options)
        if text is None:
            return None
        try:
            raw = json.loads(text)
            return Failure(str(raw["app_id"]), int(raw["batch_id"]),
                           [(str(t), int(p), int(a), int(b)) for t, p, a, b in raw["ranges"]],
                           str(raw["error"]), int(raw["count"]))
        except (ValueError, KeyError, TypeError) as err:  # a broken note only loses a bisection
            LOG.warning("%s unreadable (%s): ignored", self.location, err)
            return None

    def record(self, app_id: str, batch_id: int, ranges: list[Range], error: BaseException
               ) -> Failure | None:
        """Note a failed attempt; returns the note (None without a checkpoint location)."""
        if self.location is None:
            return None
        with self._lock:
            earlier = self.read()
            failure = Failure(app_id, batch_id, ranges, type(error).__name__)
            if earlier is not None and (earlier.app_id, earlier.batch_id, earlier.ranges) == (
                    app_id, batch_id, ranges):
                failure.count = earlier.count + 1
            locations.write_text(self.location, json.dumps(asdict(failure)),
                                 self.storage_options)
        LOG.error("batch %d failed (%s, attempt %d); its replay looks for poison records",
                  batch_id, failure.error, failure.count)
        return failure

    def failed(self, app_id: str, batch_id: int) -> Failure | None:
        """The note if it names this batch (the app id tells a fresh checkpoint's apart)."""
        failure = self.read()
        if failure is None or (failure.app_id, failure.batch_id) != (app_id, batch_id):
            return None
        return failure

    def clear_through(self, batch_id: int) -> None:
        """The noted batch is at or before `batch_id`, and done: the note is spent."""
        with self._lock:
            failure = self.read()
            if self.location is not None and failure is not None and failure.batch_id <= batch_id:
                locations.delete(self.location, self.storage_options)


def isolate(rows: pa.Table, fails: Callable[[pa.Table], bool]) -> pa.Table:
    """The records (RECORD columns) whose rows make `fails` true, found by halving the
    batch's records; `fails(rows)` is assumed true. Where neither half fails alone (records
    that fail only together), that whole group is returned: the batch must go on."""
    records = rows.select(RECORD).group_by(RECORD, use_threads=False).aggregate([]).sort_by(
        [(name, "ascending") for name in RECORD])
    keys, record_keys = _record_keys(rows), _record_keys(records)

    def of(lo: int, hi: int) -> pa.Table:
        return rows.filter(pc.is_in(keys, value_set=record_keys[lo:hi]))

    found: list[pa.Table] = []
    stack = [(0, records.num_rows)]
    while stack:
        lo, hi = stack.pop()
        if hi - lo == 1:
            found.append(records.slice(lo, 1))
            continue
        mid = (lo + hi) // 2
        halves = [(a, b) for a, b in ((lo, mid), (mid, hi)) if fails(of(a, b))]
        if halves:
            stack.extend(halves)
        else:
            found.append(records.slice(lo, hi - lo))
    return pa.concat_tables(found) if found else records.slice(0, 0)


def without(rows: pa.Table, records: pa.Table) -> pa.Table:
    """`rows` minus those of `records`."""
    if not records.num_rows:
        return rows
    return rows.filter(pc.invert(_of_records(rows, records)))


def _of_records(rows: pa.Table, records: pa.Table) -> pa.Array:
    return pc.is_in(_record_keys(rows), value_set=_record_keys(records))


def _record_keys(table: pa.Table) -> pa.Array:
    return pc.binary_join_element_wise(
        table["source_topic"], table["source_partition"].cast(pa.string()),
        table["source_offset"].cast(pa.string()), "\x00")


def rejects(rows: pa.Table, records: pa.Table, error: str) -> pa.Table:
    """One decoded-schema reject row per poison record (no payload: bronze rows carry
    none; its topic, partition and offset find it in Kafka)."""
    per_record = rows.filter(_of_records(rows, records)).group_by(
        RECORD, use_threads=False).aggregate([("source_format", "min"), ("ingest_ts", "min")])
    return record_rejects(per_record, [f"{REASON}: {error}"] * per_record.num_rows)
