"""Windows built batch by batch from held partials equal windows recomputed from bronze.

Two real BatchProcessors write real Delta tables (no Spark: the batches are handed to the
signal step as the job's foreachBatch would after decoding): one with the open windows
held between batches, one recomputing every touched window from bronze. The batches are
out of order on purpose: late samples inside and beyond the held horizon, a batch longer
than the horizon, a counter reset,
a counter sample older than its series' newest, a cluster that appears later, a replay.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streaming.config import Config
from streaming.decode.packing import pack
from streaming.pipeline.batch import BatchProcessor
from streaming.pipeline.recovery import Pending, PendingMarker
from streaming.schemas import arrow_schema, decoded_arrow_schema
from streaming.signals.broker import SIGNAL_METRICS
from streaming.signals.incremental import NewestSegments, chunk_parts
from tests.integration.helpers import assert_same_tables, comparable

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GAUGES = [("UnderMinIsrPartitionCount", "Value"), ("UnderReplicatedPartitions", "Value"),
          ("RequestQueueSize", "Value"), ("PartitionCount", "Value"), ("LeaderCount", "Value"),
          ("NetworkProcessorAvgIdlePercent", "Value"), ("ActiveControllerCount", "Value"),
          ("RequestHandlerAvgIdlePercent", "OneMinuteRate")]
DERIVED = ("broker_signals", "cluster_signals", "incidents", "partition_headroom")
COUNTERS = ["IsrShrinksPerSec", "IsrExpandsPerSec", "UncleanLeaderElectionsPerSec"]


def scrape(cluster: str, broker: str, at: float, step: int, rng: random.Random) -> list[dict]:
    """One scrape of a broker: gauges, counters that grow (and reset at step 40 on broker
    2), the idle Count, and NumLogSegments of three partitions."""
    ts = START + timedelta(seconds=at)
    rows = [(m, a, float(rng.randint(0, 5)), []) for m, a in GAUGES]
    grown = step - 40 if broker == "2" and step >= 40 else step
    rows += [(m, "Count", float(grown * (i + 1) + rng.randint(0, 1) * 0), [])
             for i, m in enumerate(COUNTERS)]
    rows.append(("RequestHandlerAvgIdlePercent", "Count", step * 7.5e9, []))
    rows += [("NumLogSegments", "Value", float(step + p),
              [("topic", "orders"), ("partition", str(p))]) for p in range(3)]
    return [{"ts": ts, "cluster": cluster, "broker": broker, "metric": m, "attribute": a,
             "labels": labels, "value": v, "kind": "counter" if a == "Count" else "gauge"}
            for m, a, v, labels in rows]


def batches() -> list[list[dict]]:
    rng = random.Random(7)
    steps: list[list[dict]] = []
    for step in range(92):  # a scrape every 10 s for 15 minutes
        clusters = ["east"] + (["west"] if step >= 30 else [])
        steps.append([row for cluster in clusters for broker in ("1", "2", "3")
                      for row in scrape(cluster, broker, step * 10.0, step, rng)])
    out: list[list[dict]] = []
    held_back: list[dict] = []
    i = 0
    while i < len(steps) - 2:
        # once, five minutes in one batch: more windows than are held
        size = 30 if 40 <= i < 44 else rng.randint(1, 4)
        batch = [row for chunk in steps[i:i + size] for row in chunk]
        i += size
        if 20 <= i < 24:  # broker 3's gauges arrive one batch late (inside the horizon)
            held_back += [r for r in batch if r["broker"] == "3" and r["kind"] == "gauge"]
            batch = [r for r in batch if not (r["broker"] == "3" and r["kind"] == "gauge")]
        elif held_back:
            batch, held_back = batch + held_back, []
        out.append(batch)
    # a gauge from 12 minutes ago (beyond the held horizon) and a stale counter sample
    late = scrape("east", "1", 60.0, 6, rng)
    out.insert(len(out) - 3, [r for r in late if r["kind"] == "gauge"])
    out.insert(len(out) - 2, [r for r in late if r["metric"] == "IsrShrinksPerSec"])
    # the newest scrape, then the gauges of the one before it (same window, one batch late)
    out += [steps[-1] + [r for r in steps[-2] if r["kind"] == "counter"],
            [r for r in steps[-2] if r["kind"] == "gauge"]]
    return out


def as_bronze(rows: list[dict], offset: int) -> pa.Table:
    schema = arrow_schema("bronze")
    full = [{name: None for name in schema.names} | row | {
        "source_offset": offset + i, "source_partition": 0, "source_topic": "m",
        "source_format": "jolokia", "ingest_ts": START, "date": row["ts"].strftime("%Y-%m-%d")}
        for i, row in enumerate(rows)]
    return pa.Table.from_pylist(full, schema=schema)


def processor(root: Path, incremental: bool, clock_skew_seconds: float | None = None,
              marker: Path | None = None) -> BatchProcessor:
    """A processor over Delta tables under `root`; with `marker` (a pending marker's
    path) its signals are deferred to the signals writer."""
    config = Config()
    if clock_skew_seconds is not None:
        config.quality.max_timestamp_skew_seconds = clock_skew_seconds
    config.delta.path = str(root)
    config.signals.incremental = incremental
    config.signals.scrape_interval_seconds = 10
    return BatchProcessor(config, exporter=None,
                          pending=None if marker is None else PendingMarker(marker))


def from_chunks(proc: BatchProcessor, bronze: pa.Table, batch_id: int,
                rng: random.Random) -> dict[str, float]:
    """The batch as the read tasks send it (delta.bronze_writers: read_tasks): cut into
    chunks at random, each reduced to its counter samples and its gauges' partials; now and
    then a chunk arrives whole, as when a task could not reduce it. Returns the signal
    steps' timings."""
    cuts = sorted(rng.sample(range(1, bronze.num_rows), min(3, bronze.num_rows - 1)))
    bounds = [0, *cuts, bronze.num_rows]
    signals = bronze.filter(pc.is_in(bronze["metric"], pa.array(SIGNAL_METRICS)))
    chunks = [signals.slice(lo, hi - lo) for lo, hi in zip(bounds, bounds[1:], strict=False)
              if lo < signals.num_rows]
    parts = [(chunk, chunk.schema.empty_table().select([]), None) if rng.random() < 0.1
             else chunk_parts(chunk, proc.config.signals) for chunk in chunks]
    samples = pa.concat_tables([samples for samples, _, _ in parts])
    segments = [s for _, _, s in parts if s is not None]
    if segments and rng.random() < 0.5:  # a task's chunks' segments, sent as one table
        folded = NewestSegments(bound=rng.randint(1, 40))
        for table in segments:
            folded.add(table)
        segments = [folded.table()]
    window_rows = proc.stages.open_window_rows_from_parts(
        samples, [p for _, p, s in parts if s is not None], segments)
    return proc.stages.signals_for(*proc.stages.touched(bronze), batch_id, window_rows.rows)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[bool]]:
    """The sequence through three processors: held windows fed the batch's samples, held
    windows fed the read tasks' partials, and recomputing everything from bronze."""
    root = tmp_path_factory.mktemp("open-windows")
    held, parts = processor(root / "held", True), processor(root / "parts", True)
    recomputing = processor(root / "recomputed", False)
    answered: list[bool] = []
    rng = random.Random(11)
    offset = 0
    sequence = batches()
    for batch_id, rows in enumerate(sequence):
        bronze = as_bronze(rows, offset)
        offset += len(rows)
        replay = batch_id == len(sequence) // 2  # the same batch again, as after a failure
        for proc in (held, parts, recomputing):
            for bid in ([batch_id, batch_id] if replay else [batch_id]):
                proc.stages.open_windows.begin(bid)
                proc.tables["bronze"].append(bronze, bid)  # a replay's append is a no-op
                if proc is parts:
                    timings = from_chunks(proc, bronze, bid, rng)
                else:
                    timings = proc.stages.update_signals(bronze, bid)
                if proc is not recomputing:
                    answered.append("slice" not in timings)
    return root / "held", root / "recomputed", answered


def test_partials_from_the_read_tasks_equal_the_recomputed_tables(runs) -> None:
    _, recomputed, _ = runs
    assert_same_tables(recomputed.with_name("parts"), recomputed, names=DERIVED)


def test_every_table_equals_the_recomputed_one(runs) -> None:
    held, recomputed, _ = runs
    assert_same_tables(held, recomputed, names=DERIVED)
    theirs = comparable(recomputed, "broker_signals")
    increases = theirs["isr_shrinks_increase"].dropna()
    assert (increases > 0).any() and len(theirs["cluster"].unique()) == 2
    assert theirs["request_queue_utilization_p95"].notna().all()


def test_most_batches_are_answered_from_held_windows(runs) -> None:
    _, _, answered = runs
    # the first batch, the new cluster, the replay, the very late gauge and the stale
    # counter recompute; everything else comes from the held windows (both ways of
    # feeding them, so twice)
    assert sum(answered) >= len(answered) - 16
    assert not answered[0]


def test_how_long_a_dark_broker_counts_follows_the_clock_skew_allowance(
        tmp_path: Path) -> None:
    """Two of three brokers stop, the one left goes on for 6 minutes. Within the clock-skew
    allowance (quality.max_timestamp_skew_seconds) of the live one, the dark brokers may
    still be a clock behind, so the cluster's horizon stays where they were last; past it
    they no longer count: with a 1-minute allowance the held windows stay few."""
    rng = random.Random(6)
    sequence = [[row for broker in (("1", "2", "3") if step < 2 else ("1",))
                 for row in scrape("east", broker, step * 60.0, step, rng)]
                for step in range(8)]
    proc = processor(tmp_path, True, clock_skew_seconds=60.0)
    feed(proc, sequence)
    held = proc.stages.open_windows
    # the 15-minute default would hold all 8 windows
    assert 0 < len(held.held) <= held.keep // held.width + 2 < len(sequence), sorted(held.held)


def counter_and_gauge(broker: str, at: float, unclean: float) -> list[dict]:
    ts = START + timedelta(seconds=at)
    return [{"ts": ts, "cluster": "east", "broker": broker, "metric": metric,
             "attribute": attribute, "labels": [], "value": value, "kind": kind}
            for metric, attribute, value, kind in (
                ("UnderMinIsrPartitionCount", "Value", 0.0, "gauge"),
                ("UncleanLeaderElectionsPerSec", "Count", unclean, "counter"))]


def feed(proc: BatchProcessor, sequence: list[list[dict]]) -> None:
    """Each batch of `sequence` into bronze and then the processor's signal stages."""
    offset = 0
    for batch_id, rows in enumerate(sequence):
        bronze = as_bronze(rows, offset)
        offset += len(rows)
        proc.stages.open_windows.begin(batch_id)
        proc.tables["bronze"].append(bronze, batch_id)
        proc.stages.update_signals(bronze, batch_id)


def run_both(root: Path, sequence: list[list[dict]]) -> dict[str, float | None]:
    """Feed both processors; return broker 2's unclean increase per window, held and not."""
    out = {}
    for name, incremental in (("held", True), ("recomputed", False)):
        feed(processor(root / name, incremental), sequence)
        frame = comparable(root / name, "broker_signals")
        frame = frame[frame["broker"] == "2"]
        out[name] = dict(zip(frame["window_start"].astype(str),
                             frame["unclean_elections_increase"], strict=True))
    return out


def test_an_increase_does_not_depend_on_how_samples_were_batched(tmp_path: Path) -> None:
    """Broker 2 silent for longer than the counter look-back, back with a reset count: the
    answer may not depend on which samples shared its batch (a review found held 1.0 vs
    recomputed 0.0 in one batching and the reverse in another)."""
    def until(begin: int, end: int) -> list[dict]:
        return [row for at in range(begin, end, 10) for row in (
            counter_and_gauge("1", at, 0.0) + (counter_and_gauge("2", at, 5.0) if at < 600
                                                else []))]

    def back(at: int) -> list[dict]:
        return counter_and_gauge("1", at, 0.0) + counter_and_gauge("2", at, 1.0)

    head = [until(0, 310)] + [until(at, at + 30) for at in range(310, 880, 30)]
    together = head + [until(880, 900) + back(910), back(920)]
    late_gauge = [{**counter_and_gauge("1", 895, 0.0)[0], "metric": "UnderReplicatedPartitions"}]
    apart = head + [until(880, 900), back(910), late_gauge + back(920)]
    first, second = run_both(tmp_path / "a", together), run_both(tmp_path / "b", apart)
    assert first["held"] == first["recomputed"] == second["held"] == second["recomputed"]


@pytest.mark.parametrize("replayed", [False, True], ids=["committed", "replayed"])
def test_a_batch_whose_signals_were_pending_is_recomputed_on_restart(
        tmp_path: Path, replayed: bool) -> None:
    """The job died with three batches' bronze committed and their signals still owed (the
    signals writer had fallen behind): the restarted processor recomputes them from the
    marker, which names all three. Spark either had committed the newest (nothing follows:
    no later batch recomputes its windows) or replays it, whose samples then count once,
    also in the windows held for the batches after it."""
    died_at = 10
    sequence = batches()[:died_at + (8 if replayed else 1)]

    def feed(proc: BatchProcessor, batch_id: int) -> None:
        proc.stages.open_windows.begin(batch_id)
        proc.tables["bronze"].append(bronzes[batch_id], batch_id)
        proc.stages.update_signals(bronzes[batch_id], batch_id)

    offsets = [sum(len(rows) for rows in sequence[:i]) for i in range(len(sequence))]
    bronzes = [as_bronze(rows, offset) for rows, offset in zip(sequence, offsets, strict=True)]
    reference = processor(tmp_path / "reference", True)
    for batch_id in range(len(sequence)):
        feed(reference, batch_id)

    marker = tmp_path / "checkpoint" / "pending.json"
    marker.parent.mkdir()
    first = processor(tmp_path / "crashed", True, marker=marker)
    owed = range(died_at - 2, died_at + 1)
    for batch_id in range(owed[0]):
        feed(first, batch_id)
    for batch_id in owed:
        first.tables["bronze"].append(bronzes[batch_id], batch_id)
        first.pending.add(Pending(first.app_id, batch_id,
                                  *first.stages.touched(bronzes[batch_id])))
    assert PendingMarker(marker).read().batch_id == died_at

    again = processor(tmp_path / "crashed", True, marker=marker)
    assert again.recover() == died_at and not marker.exists()
    assert again.recover() is None
    for batch_id in range(died_at + 1 if not replayed else died_at, len(sequence)):
        feed(again, batch_id)
    # Not partition_headroom: a restart reloads its forecast history for the look-back
    # before now, and these samples are from months ago (a restart's own property).
    assert_same_tables(tmp_path / "crashed", tmp_path / "reference",
                       names=("broker_signals", "cluster_signals", "incidents"))


def test_a_marker_of_another_query_is_dropped_with_a_warning(tmp_path: Path, caplog) -> None:
    """A new checkpoint (another query id) beside an old marker: nothing is recomputed
    under the new query's transaction ids, and the operator is told what was dropped."""
    marker = tmp_path / "checkpoint" / "pending.json"
    marker.parent.mkdir()
    bronze = as_bronze(batches()[0], 0)
    old = processor(tmp_path / "tables", True, marker=marker)
    old.set_app_id("old-query")
    old.pending.add(Pending("old-query", 41, *old.stages.touched(bronze)))
    new = processor(tmp_path / "tables", True, marker=marker)
    new.set_app_id("new-query")
    with caplog.at_level("WARNING", logger="kafka_health.batch"):
        assert new.recover() is None
    assert not marker.exists()
    assert "batch 41 of another query" in caplog.text


class PackedBatch:
    """What foreachBatch is handed, as far as the processor looks: toArrow() of packed blobs."""

    def __init__(self, bronze: pa.Table) -> None:
        decoded = pa.Table.from_pylist(bronze.to_pylist(), schema=decoded_arrow_schema())
        self.packed = pa.Table.from_batches([pack(decoded.combine_chunks().to_batches()[0],
                                                  bronze.num_rows)])

    def toArrow(self) -> pa.Table:  # noqa: N802 (Spark's name)
        return self.packed


@pytest.mark.parametrize("fails", ["bronze_append", "pending_marker"])
def test_a_batch_that_fails_before_its_gauges_writes_no_signal_and_replays_exactly(
        tmp_path: Path, fails: str) -> None:
    """With deferred signals the held windows absorb a batch on their thread while bronze is
    written. The batch fails once the thread has absorbed it: in the bronze append (nothing
    committed) or in writing the pending marker (bronze committed). Either way no signal is
    written and the held windows are forgotten; Spark's replay of the batch then ends where
    an unfailed run ends."""
    sequence = batches()[:14]
    offsets = [sum(len(rows) for rows in sequence[:i]) for i in range(len(sequence))]
    carried = [PackedBatch(as_bronze(rows, offset))
               for rows, offset in zip(sequence, offsets, strict=True)]
    (tmp_path / "checkpoint").mkdir()
    reference, failing = (processor(tmp_path / name, True,
                                    marker=tmp_path / "checkpoint" / f"{name}.json")
                          for name in ("reference", "failing"))
    fail_at, failed = 9, []
    # bronze's append(data, batch_id) or the pending batches' add(Pending(batch_id, ...))
    owner, method = ((failing.tables["bronze"], "append") if fails == "bronze_append"
                     else (failing.pending, "add"))
    original = getattr(owner, method)

    def batch_of(args: tuple) -> int:
        return args[1] if fails == "bronze_append" else args[0].batch_id

    def fail_once(*args: object) -> object:
        if batch_of(args) == fail_at and not failed:
            # the absorber runs one task at a time, in order: this one runs once it has
            # taken in the batch
            failing.absorber.submit(lambda: None).result(timeout=30)
            assert failing.stages.open_windows.last_batch == fail_at
            assert failing.stages.open_windows.partials
            failed.append(fail_at)
            raise OSError("No space left on device")
        return original(*args)

    setattr(owner, method, fail_once)
    for batch_id, batch in enumerate(carried):
        reference(batch, batch_id)
        if batch_id == fail_at:
            failing.wait_for_writer()
            signals = failing.tables["broker_signals"].ensure().version()
            with pytest.raises(OSError, match="No space"):
                failing(batch, batch_id)
            assert failing.tables["broker_signals"].ensure().version() == signals
            assert (not failing.pending.marker.exists()
                    and not failing.stages.open_windows.partials)
            assert failing.tables["bronze"].committed(fail_at) == (fails == "pending_marker")
        failing(batch, batch_id)
    for proc in (reference, failing):
        proc.wait_for_writer()
        assert proc.control.signals_error is None and not proc.pending.marker.exists()
    assert len(failed) == 1
    assert_same_tables(tmp_path / "failing", tmp_path / "reference", names=DERIVED)


class HeldBackWriter:
    """The signals writer's interface, written by the test: batches wait until flush(), so
    that they reach the Delta tables in the groups a writer that fell behind forms."""

    def __init__(self, write) -> None:  # noqa: ANN001
        self.write, self.queue, self.groups = write, [], []

    def submit(self, owed, catching_up: bool = False) -> None:  # noqa: ANN001
        self.queue.append(owed)

    def wait(self) -> None:  # a recomputation or housekeeping waits for everything owed
        self.flush()

    def flush(self) -> None:
        group, self.queue = self.queue, []
        if group:
            self.groups.append([owed.pending.batch_id for owed in group])
            self.write(group)

    def reset(self) -> None:
        self.queue.clear()


def test_batches_written_in_groups_equal_batches_written_one_by_one(tmp_path: Path) -> None:
    """A signals writer that fell behind writes the batches queued since its last round as
    one group (the newest row of each window wins, one transaction id). The tables end
    equal to a processor that writes each batch's signals before the next; while batches
    wait, the pending marker names every one of them."""
    sequence = batches()
    offsets = [sum(len(rows) for rows in sequence[:i]) for i in range(len(sequence))]
    carried = [PackedBatch(as_bronze(rows, offset))
               for rows, offset in zip(sequence, offsets, strict=True)]
    (tmp_path / "checkpoint").mkdir()
    reference = processor(tmp_path / "reference", True)
    behind = processor(tmp_path / "behind", True,
                       marker=tmp_path / "checkpoint" / "pending.json")
    behind.writer = writer = HeldBackWriter(behind.write_signals)
    rng = random.Random(3)
    for batch_id, batch in enumerate(carried):
        reference(batch, batch_id)
        behind(batch, batch_id)
        if writer.queue:
            owed = behind.pending.marker.read()
            assert owed.batch_id == batch_id
            assert set(owed.clusters) == {c for o in writer.queue for c in o.pending.clusters}
            assert all(any(lo <= s_lo and s_hi <= hi for lo, hi in owed.spans)
                       for o in writer.queue for s_lo, s_hi in o.pending.spans)
        if rng.random() < 0.3:
            writer.flush()
    writer.flush()
    assert not behind.pending.marker.exists()
    assert max(len(group) for group in writer.groups) >= 3, writer.groups
    assert_same_tables(tmp_path / "behind", tmp_path / "reference", names=DERIVED)


def run_answered(root: Path, sequence: list[list[dict]]) -> list[bool]:
    """`sequence` through a processor holding windows (fed as the read tasks feed it) and
    one recomputing everything; the tables must end equal. Returns, per batch, whether the
    held windows answered it (no bronze slice read)."""
    held, recomputing = processor(root / "held", True), processor(root / "recomputed", False)
    rng, answered, offset = random.Random(5), [], 0
    for batch_id, rows in enumerate(sequence):
        bronze = as_bronze(rows, offset)
        offset += len(rows)
        for proc in (held, recomputing):
            proc.stages.open_windows.begin(batch_id)
            proc.tables["bronze"].append(bronze, batch_id)
            if proc is held:
                answered.append("slice" not in from_chunks(proc, bronze, batch_id, rng))
            else:
                proc.stages.update_signals(bronze, batch_id)
    assert_same_tables(root / "held", root / "recomputed", names=DERIVED)
    return answered


def test_a_broker_whose_clock_runs_ahead_keeps_its_cluster_held(tmp_path: Path) -> None:
    """Broker 3's clock runs five and a half minutes ahead of the others (within the skew
    allowance), on every scrape: its windows are past the kept horizon of theirs. Each
    batch, a scrape round of every broker, is still answered from the held windows (the
    cluster's horizon follows most of its brokers, not its newest window: otherwise every
    batch recomputed from bronze), and the tables equal the recomputed ones. (Batches that
    hold the fast broker apart still recompute once one has: docs/architecture.md.)"""
    rng = random.Random(9)
    sequence = [[row for broker in ("1", "2", "3") for row in scrape(
        "east", broker, step * 10.0 + (330 if broker == "3" else 0), step, rng)]
        for step in range(16)]
    answered = run_answered(tmp_path, sequence)
    assert not answered[0] and all(answered[1:]), answered


def test_one_sample_dated_minutes_ahead_does_not_make_every_batch_recompute(
        tmp_path: Path) -> None:
    """One gauge dated nine minutes ahead (a producer's mistake within the skew
    allowance) among ordinary scrapes: the batches after it are answered from the held
    windows as before it, and the tables equal the recomputed ones."""
    rng = random.Random(4)
    sequence = [[row for broker in ("1", "2", "3") for row in scrape(
        "east", broker, step * 10.0, step, rng)] for step in range(16)]
    stray = scrape("east", "2", 8 * 10.0 + 540, 8, rng)[0]
    sequence[8].append(stray)
    answered = run_answered(tmp_path, sequence)
    assert not answered[0] and all(answered[1:]), answered


def test_a_broker_gone_dark_does_not_hold_windows_without_end(tmp_path: Path) -> None:
    """Two of three brokers stop; the one left goes on for 25 minutes. The cluster's
    horizon follows the live broker once the others are further behind than the live span,
    so the held windows stay few (a horizon pinned where most brokers were last would hold
    every window since)."""
    rng = random.Random(6)
    sequence = [[row for broker in (("1", "2", "3") if step < 5 else ("1",))
                 for row in scrape("east", broker, step * 60.0, step, rng)]
                for step in range(30)]
    proc = processor(tmp_path, True)
    feed(proc, sequence)
    held = proc.stages.open_windows
    keep_windows = held.keep // held.width
    assert 0 < len(held.held) <= keep_windows + 2, sorted(held.held)


def test_a_cluster_gone_dark_does_not_keep_the_other_clusters_counters(
        tmp_path: Path) -> None:
    """West sends one scrape and goes dark (its floor stays where it was); east goes on for
    20 minutes with a counter series whose labels change every scrape. The newest sample of
    each counter series is kept for the counter look-back below its own cluster's floor, so
    east's finished series leave; held below the lowest floor of any cluster, every one of
    them stayed for as long as west was dark."""
    rng = random.Random(2)
    sequence = [[*(scrape("west", "1", 0.0, 0, rng) if step == 0 else []),
                 *scrape("east", "1", step * 60.0, step, rng),
                 {"ts": START + timedelta(minutes=step), "cluster": "east", "broker": "1",
                  "metric": "IsrShrinksPerSec", "attribute": "Count",
                  "labels": [("scrape", str(step))], "value": float(step), "kind": "counter"}]
                for step in range(20)]
    proc = processor(tmp_path, True)
    feed(proc, sequence)
    held = proc.stages.open_windows
    assert held.floor["west"] < held.floor["east"] - held.lookback
    assert held.counters is not None
    shrinks = held.counters.filter(pc.and_(pc.equal(held.counters["cluster"], "east"), pc.equal(
        held.counters["metric"], "IsrShrinksPerSec")))
    # one series without labels (its two newest samples are held), and one a scrape (a
    # minute) within the look-back and the kept windows
    assert shrinks.num_rows <= 2 + (held.lookback + held.keep) // 60_000_000 + 1, \
        shrinks["labels"].to_pylist()
