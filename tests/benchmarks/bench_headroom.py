"""The headroom stage's cost a broker row, against the length of each broker's history.

The signals writer evaluates headroom for every broker row of a round, and each row's
forecast is a least-squares slope over the broker's look-back (14 days by default: about
20,000 one-minute windows once the job has run that long). This times
`HeadroomTracker.evaluate` (process CPU) on a history seeded to a given length, in three
shapes: a live round of a 300-broker fleet (one new window a broker), a catch-up round of
6 brokers (200 windows a broker, as bench_pipeline's topic packs them) at a full and at a
short history. Each shape is timed with the forecasts from the brokers' running sums (what
the job does) and, in the same run, with the pass over the look-back that a history falls
back to when its counts cannot be summed exactly (`PartitionHistory.forecast`).

    .venv/bin/python tests/benchmarks/bench_headroom.py
Writes tests/benchmarks/results/headroom.json; prints the figures last.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from streaming.headroom.stage import HeadroomTracker, PartitionHistory

RESULTS = Path(__file__).resolve().parent / "results" / "headroom.json"
T0 = datetime(2026, 11, 1, tzinfo=UTC)
SHAPES = (  # brokers, history windows a broker, windows a broker a round
    (300, 20_000, 1),
    (6, 20_000, 200),
    (6, 2_000, 200),
)


def no_history(*_: Any, **__: Any) -> pa.Table:
    return pa.table({"cluster": pa.array([], pa.string()), "broker": pa.array([], pa.string()),
                     "evaluated_at": pa.array([], pa.timestamp("us", "UTC")),
                     "partitions": pa.array([], pa.float64())})


def broker_rows(brokers: int, minutes: range) -> list[dict[str, Any]]:
    """broker_signals rows as the writer hands them over: a slowly growing count."""
    return [{"cluster": "prod", "broker": str(b), "window_start": T0 + timedelta(minutes=m),
             "partition_count_last": 1_000 + m // 30 + m % 7, "leader_count_last": 400,
             "log_segments_last": 5_000, "open_fds_last": 20_000, "max_fds_last": 100_000}
            for m in minutes for b in range(brokers)]


@contextmanager
def passing_over_points() -> Iterator[None]:
    """Histories whose running sums are refused, as for counts int64 cannot sum exactly."""
    sums = PartitionHistory._sum
    PartitionHistory._sum = lambda self, first, end: False  # type: ignore[method-assign]
    try:
        yield
    finally:
        PartitionHistory._sum = sums  # type: ignore[method-assign]


def timed(brokers: int, history: int, per_round: int, rounds: int) -> dict[str, Any]:
    tracker = HeadroomTracker({}, no_history)
    tracker.evaluate(broker_rows(brokers, range(history)))
    batches = [broker_rows(brokers, range(history + i * per_round, history + (i + 1) * per_round))
               for i in range(rounds)]
    started = time.process_time()
    rows = 0
    for batch in batches:
        rows += len(tracker.evaluate(batch))
    seconds = time.process_time() - started
    return {"rows": rows, "us_per_row": round(seconds / rows * 1e6, 1),
            "ms_per_round": round(seconds / rounds * 1e3, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds timed per shape")
    args = parser.parse_args()
    shapes = []
    for brokers, history, per_round in SHAPES:
        with passing_over_points():
            passing = timed(brokers, history, per_round, args.rounds)
        sums = timed(brokers, history, per_round, args.rounds)
        shapes.append({"brokers": brokers, "history_windows": history,
                       "windows_a_broker_a_round": per_round, "running_sums": sums,
                       "pass_over_points": passing,
                       "ratio": round(passing["us_per_row"] / sums["us_per_row"], 2)})
    result = {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "python": platform.python_version(), "machine": platform.machine(),
              "rounds": args.rounds, "shapes": shapes}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    for shape in shapes:
        print(f"{shape['brokers']} brokers, {shape['history_windows']:,} windows of history, "
              f"{shape['windows_a_broker_a_round']} a broker a round: "
              f"{shape['running_sums']['us_per_row']} us a row from the running sums, "
              f"{shape['pass_over_points']['us_per_row']} passing over the points "
              f"({shape['ratio']}x)")


if __name__ == "__main__":
    main()
