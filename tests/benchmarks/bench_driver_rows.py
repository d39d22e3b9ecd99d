"""What reaches the driver when the read tasks write bronze: rows per 100 decoded samples.

With delta.bronze_writers: read_tasks a read task writes its chunk's bronze and quarantine
files and sends the driver only what the held windows need (streaming.decode.packing
`pack_chunk`): the counter samples whole (their increases need each series' predecessor,
held on the driver), the gauge partials per (cluster, broker, window), the newest
NumLogSegments sample per replica and window ("segments"), and a summary per (cluster,
broker, topic, window). The driver's work per batch grows with these rows, not with the
samples; this counts them, per kind, over bench_pipeline's single-sample fleet stream cut
into chunks the size a task gathers (GATHER_ROWS) and smaller ones, and times the task's
reduction. It then times what the driver does with them, the held windows' step
(OpenWindows.update_parts), in batches of 5k samples (a live stream's 0.5 s trigger at
10k samples/s: one or two windows a batch) and of 250k (bench_pipeline's catch-up
batches: about a hundred windows each). Pure Python, no Spark, no broker.

    .venv/bin/python tests/benchmarks/bench_driver_rows.py [--samples 400000]
Writes tests/benchmarks/results/driver-rows.json.

    .venv/bin/python tests/benchmarks/bench_driver_rows.py --fleet 300 40000 --samples 1000000
does the same over a fleet of 300 brokers and 40,000 partitions (400 replicas a broker),
timing the held-window step in batches of 5k, 50k and 250k samples, which at this fleet's
size are all live batches (a scrape round is 129k samples, one or two windows a batch):
the driver's cost a sample at the scale-out issue's size, without the catch-up's hundred
windows a batch. Writes tests/benchmarks/results/driver-rows-fleet.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import streaming  # noqa: E402, F401 - its __init__ sets mimalloc's purge delay: before pyarrow loads

# isort: split
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from streaming.catalog import load_catalog  # noqa: E402
from streaming.config import QualityConfig, SignalsConfig  # noqa: E402
from streaming.decode.packing import (  # noqa: E402
    GATHER_ROWS,
    gathered,
    segments_fold,
    signal_rows,
    summarize,
)
from streaming.decode.records import DecodeContext, decode_record_batch  # noqa: E402
from streaming.signals.broker import SAMPLE_COLUMNS, prepared, signal_partials  # noqa: E402
from streaming.signals.incremental import (  # noqa: E402
    OpenWindows,
    chunk_parts,
)
from streaming.signals.spans import touched_spans  # noqa: E402
from tests.benchmarks.bench_decode import T0, batches  # noqa: E402
from tests.benchmarks.bench_pipeline import (  # noqa: E402
    PARTITIONS,
    fleet_model,
    single_sample_messages,
)

RESULTS = Path(__file__).resolve().parent / "results" / "driver-rows.json"
FLEET_RESULTS = RESULTS.with_name("driver-rows-fleet.json")
# the fleet stream's event time starts an hour before bench_decode's ingestion time
CONTEXT = DecodeContext(max_skew_seconds=86_400)


def reduce_chunks(decoded: list[pa.Table], signals: SignalsConfig) -> dict[str, Any]:
    """pack_chunk's reduction (without the file writes) over each chunk: rows per kind."""
    rows = {"samples": 0, "counters": 0, "partials": 0, "segments": 0, "summary": 0}
    started = time.perf_counter()
    for chunk in decoded:
        counters, partials, segments = chunk_parts(signal_rows(chunk), signals)
        summary = summarize(chunk, signals.window_seconds)
        rows["samples"] += chunk.column("reject_reason").null_count  # null: a good sample
        rows["counters"] += counters.num_rows
        rows["partials"] += partials.num_rows
        rows["segments"] += segments.num_rows
        rows["summary"] += summary.num_rows
    seconds = time.perf_counter() - started
    samples = rows["samples"]
    return {"chunks": len(decoded), "rows": rows,
            "per_100_samples": {k: round(100 * v / samples, 2) for k, v in rows.items()
                                if k != "samples"},
            "to_driver_per_100_samples": round(100 * sum(
                v for k, v in rows.items() if k != "samples") / samples, 2),
            "reduce_us_per_sample": round(seconds / samples * 1e6, 3)}


# Rows a decoded chunk holds here, before a task gathers chunks up to GATHER_ROWS.
DECODED_CHUNK_ROWS = 10_000


def task_parts(batch: pa.Table, signals: SignalsConfig, fold: bool = True
               ) -> tuple[pa.Table, list[pa.Table], list[pa.Table]]:
    """What the read tasks send for a batch (pack_chunks without the file writes): its rows
    dealt round-robin to one task per partition of bench_pipeline's topic, as its producer
    deals the messages; each task's decoded chunks gathered and reduced (chunk_parts) as
    pack_chunks gathers them, and its segments folded as pack_chunks folds them (`fold`;
    otherwise sent chunk by chunk). Returns the counters, partials and segments."""
    counters, partials, segments = [], [], []
    for task in range(PARTITIONS):
        share = batch.take(pa.array(range(task, batch.num_rows, PARTITIONS)))
        chunks = ((share.slice(i, DECODED_CHUNK_ROWS), 0)
                  for i in range(0, share.num_rows, DECODED_CHUNK_ROWS))
        folded = segments_fold()
        for decoded, _ in gathered(chunks, GATHER_ROWS):
            chunk_counters, chunk_partials, chunk_segments = chunk_parts(
                signal_rows(decoded), signals)
            counters.append(chunk_counters.select(SAMPLE_COLUMNS))
            partials.append(chunk_partials)
            if fold:
                folded.add(chunk_segments)
            else:
                segments.append(chunk_segments)
        if fold:
            segments.append(folded.table())
    return pa.concat_tables(counters), partials, segments


def held_window_step(samples: pa.Table, signals: SignalsConfig, batch_rows: int,
                     fold: bool) -> dict[str, Any]:
    """The driver's held-window step over `samples` cut into batches of `batch_rows`, each
    sent as the read tasks send it (task_parts, their segments folded per task or sent per
    chunk). The first batch seeds the windows, as a recompute from bronze does at a start;
    the rest are timed (process CPU), the tasks' work apart from the driver's."""
    batches = [samples.slice(i, batch_rows) for i in range(0, samples.num_rows, batch_rows)]
    first = signal_rows(batches[0]).select(SAMPLE_COLUMNS)
    first = first.filter(pc.is_valid(first["metric"]))
    partials, segments = signal_partials(prepared(first, signals), signals)
    held = OpenWindows(signals, QualityConfig().max_timestamp_skew_seconds)
    held.begin(0)
    held.seed(first, partials, segments,
              touched_spans(first["ts"], signals.window_seconds,
                            signals.counter_lookback_seconds),
              pc.unique(first["cluster"]).to_pylist(), set())
    started = time.process_time()
    sent = [(*task_parts(batch, signals, fold), batch.num_rows) for batch in batches[1:]]
    tasks = time.process_time() - started
    started = time.process_time()
    for batch_id, (counters, chunk_partials, task_segments, _) in enumerate(sent, 1):
        held.begin(batch_id)
        if held.update_parts(counters, chunk_partials, task_segments) is None:
            raise RuntimeError(f"batch {batch_id} was not answered from the held windows")
    seconds = time.process_time() - started
    timed = sum(rows for *_, rows in sent)
    segment_rows = sum(t.num_rows for _, _, tables, _ in sent for t in tables)
    return {"batches_timed": len(sent), "samples_timed": timed,
            "segments_per_100_samples": round(100 * segment_rows / timed, 2),
            "tasks_us_per_sample": round(tasks / timed * 1e6, 3),
            "us_per_sample": round(seconds / timed * 1e6, 3),
            "ms_per_batch": round(seconds / len(sent) * 1e3, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=400_000,
                        help="single-sample messages of the fleet stream")
    parser.add_argument("--fleet", type=int, nargs=2, metavar=("BROKERS", "PARTITIONS"),
                        help="a fleet of this many brokers and partitions (replication "
                             "factor 3) instead of bench_pipeline's 6 brokers")
    args = parser.parse_args()
    catalog = load_catalog()
    model = fleet_model(args.fleet)
    records = batches(single_sample_messages(args.samples, T0 - 1800, model))
    decoded = [pa.Table.from_batches([decode_record_batch(b, CONTEXT, catalog)])
               for b in records]
    signals = SignalsConfig()
    by_chunk: dict[str, Any] = {}
    for size in (10_000, GATHER_ROWS):
        per = max(1, size // decoded[0].num_rows)
        chunks = [pa.concat_tables(decoded[i:i + per]) for i in range(0, len(decoded), per)]
        by_chunk[str(size)] = reduce_chunks(chunks, signals)
    everything = pa.concat_tables(decoded)
    sizes = (5_000, 250_000) if model is None else (5_000, 50_000, 250_000, 1_000_000)
    # each size twice, per task and per chunk alternating: a ratio in one run
    held: dict[str, Any] = {}
    for rows in [r for r in sizes if r < everything.num_rows]:
        for _ in (1, 2):
            for way, fold in (("per_task", True), ("per_chunk", False)):
                held.setdefault(str(rows), {}).setdefault(way, []).append(
                    held_window_step(everything, signals, rows, fold))
    result = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(), "machine": platform.machine(),
        "samples": args.samples, "window_seconds": signals.window_seconds,
        "stream": "bench_pipeline's single-sample Jolokia fleet stream (6 brokers, 15 s "
                  "scrape rounds)" if model is None else
                  f"single-sample Jolokia stream of {args.fleet[0]} brokers and "
                  f"{args.fleet[1]} partitions (replication factor 3), 15 s scrape rounds",
        "by_chunk_rows": by_chunk,
        "held_window_step_by_batch_rows": held,
    }
    out = RESULTS if model is None else FLEET_RESULTS
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    for size, figures in by_chunk.items():
        print(f"chunks of {int(size):,} samples: {figures['to_driver_per_100_samples']} rows "
              f"reach the driver per 100 samples {figures['per_100_samples']}; the task's "
              f"reduction {figures['reduce_us_per_sample']} us a sample")
    for rows, ways in held.items():
        for way, runs in ways.items():
            print(f"batches of {int(rows):,} samples, segments sent {way.replace('_', ' ')}: "
                  f"{runs[0]['segments_per_100_samples']} segment rows reach the driver per "
                  f"100 samples; the tasks' reduction "
                  f"{' / '.join(str(r['tasks_us_per_sample']) for r in runs)} us a sample, "
                  f"the driver's held-window step "
                  f"{' / '.join(str(r['us_per_sample']) for r in runs)} us a sample")


if __name__ == "__main__":
    main()
