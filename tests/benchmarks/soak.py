"""Soak: the demo at a steady rate for N minutes; memory, checkpoint state and batch time.

Starts `kafka-health demo` as a child, samples every 30 s the RSS of its whole process
tree (driver JVM, Python driver, Python workers, the broker), the checkpoint folder size
(Spark's offset/commit logs; the job keeps no streaming state store) and the batch
durations and step timings from its progress lines, then compares the first and last 5
minutes. The demo's cluster grows by 6 partitions every 5 minutes, so the result also
lists, per 5 minutes, the records per batch beside the batch and step times: a batch
that slows with its input is not a leak.

    .venv/bin/python tests/benchmarks/soak.py --minutes 30
Writes tests/benchmarks/results/soak.json; the verdict is printed last.

With `--hostile 0.1` a tenth of the metrics topic's records are hostile ones of every class
(tests/benchmarks/hostile_feed.py) and `--fault-period 0` runs no faults, so at the end the
demo cluster's gauges can be held against Kafka's own Admin API; the result goes to
soak-hostile.json with what became of each hostile record:

    .venv/bin/python tests/benchmarks/soak.py --minutes 30 --hostile 0.1 --fault-period 0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.benchmarks.hostile_feed import SOAK_BOUNDS, HostileFeed  # noqa: E402
from tests.benchmarks.proctree import tree_rss_mb  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "soak.json"
BATCH = re.compile(r"^batch (\d+): (\d+) records .*?, ([\d.]+)s, newest event.*?\[(.*)\]")
STEP = re.compile(r"([A-Za-z_+]+) ([\d.]+)s")  # a name, not the bracket before it
BUCKET_SECONDS = 300
WATCHED = re.compile(r"^\s+watched\s+Kafka (\S+),")
SHIPPED = re.compile(r"^\s+shipper\s+.* -> (\S+) (\S+)$")


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6 if path.exists() \
        else 0.0


def buckets(batches: list[tuple[float, int, float]], steps: list[dict[str, float]],
            started: float) -> list[dict[str, object]]:
    """Medians per BUCKET_SECONDS of the run: records per batch, batch seconds, step seconds."""
    grouped: dict[int, list[int]] = {}
    for i, (at, _, _) in enumerate(batches):
        grouped.setdefault(int((at - started) // BUCKET_SECONDS), []).append(i)
    out: list[dict[str, object]] = []
    for bucket, members in sorted(grouped.items()):
        names = sorted({name for i in members for name in steps[i]})
        out.append({
            "from_minute": bucket * BUCKET_SECONDS // 60,
            "batches": len(members),
            "records_median": statistics.median(batches[i][1] for i in members),
            "batch_seconds_median": statistics.median(batches[i][2] for i in members),
            "step_seconds_median": {n: round(statistics.median(steps[i].get(n, 0.0)
                                                               for i in members), 3)
                                    for n in names},
        })
    return out


def demo_gauges(port: int, watched: str | None) -> dict[str, object]:
    """The demo cluster's exported gauges beside Kafka's Admin API (no faults running): per
    broker the partitions hosted and led; the cluster's brokers, controllers, under-min-ISR."""
    from confluent_kafka.admin import AdminClient
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    got: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("cluster") == "demo":
                got.setdefault(sample.name, {})[sample.labels.get("broker", "")] = sample.value
    if watched is None:
        return {"error": "the demo printed no watched bootstrap"}
    topics = AdminClient({"bootstrap.servers": watched}).list_topics(timeout=10).topics
    hosted: Counter[str] = Counter()
    led: Counter[str] = Counter()
    for meta in topics.values():
        for partition in meta.partitions.values():
            hosted.update(str(r) for r in partition.replicas)
            led[str(partition.leader)] += 1
    want = {"kafka_health_partitions": dict(hosted), "kafka_health_leaders": dict(led)}
    mismatches = {name: {b: (got.get(name, {}).get(b), v) for b, v in per.items()
                         if got.get(name, {}).get(b) != v}
                  for name, per in want.items()}
    return {
        "mismatches (exported, admin)": {k: v for k, v in mismatches.items() if v},
        "brokers_reporting": got.get("kafka_health_brokers_reporting", {}).get(""),
        "active_controllers": got.get("kafka_health_active_controllers", {}).get(""),
        "under_min_isr_total": sum(got.get("kafka_health_under_min_isr_partitions", {}).values()),
        "stale_brokers": sum(got.get("kafka_health_broker_stale", {}).values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--every", type=float, default=30.0, help="sampling period, seconds")
    parser.add_argument("--hostile", type=float, default=0.0,
                        help="fraction of the metrics topic's records made hostile (0-0.5)")
    parser.add_argument("--fault-period", type=float, default=None,
                        help="the demo's fault period in seconds; 0: no faults")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="kh-soak-"))
    port = 9490
    faults = [] if args.fault_period is None else [
        "--fault-period", str(args.fault_period or args.minutes * 60 * 10)]
    env = {**os.environ, **(SOAK_BOUNDS.env() if args.hostile else {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "demo", "-v", "--data-dir", str(data),
         "--metrics-port", str(port), "--duration", str(args.minutes * 60 + 30), *faults],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
        env=env)
    batches: list[tuple[float, int, float]] = []
    steps: list[dict[str, float]] = []
    found: dict[str, str] = {}
    feed: HostileFeed | None = None

    def read_progress() -> None:
        nonlocal feed
        for line in proc.stdout:  # type: ignore[union-attr]
            if (watched := WATCHED.match(line)) is not None:
                found["watched"] = watched.group(1)
            if (shipped := SHIPPED.match(line)) is not None and args.hostile and feed is None:
                feed = HostileFeed(shipped.group(1), shipped.group(2), args.hostile).start()
            match = BATCH.match(line)
            if match:
                batches.append((time.time(), int(match.group(2)), float(match.group(3))))
                steps.append({k: float(v) for k, v in STEP.findall(match.group(4))})

    threading.Thread(target=read_progress, daemon=True).start()
    samples = []
    started = time.time()
    try:
        while time.time() - started < args.minutes * 60:
            time.sleep(args.every)
            if proc.poll() is not None:
                raise SystemExit(f"demo exited early with {proc.returncode}")
            samples.append({"t": round(time.time() - started), **tree_rss_mb(proc.pid),
                            "checkpoint_mb": dir_mb(data / "checkpoint"),
                            "delta_mb": dir_mb(data / "delta"), "batches": len(batches)})
            print(json.dumps(samples[-1]), flush=True)
        gauges = demo_gauges(port, found.get("watched")) if args.hostile else {}
    finally:
        if feed is not None:
            feed.stop.set()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(120)
    window = 300
    first = [s for s in samples if s["t"] <= window + samples[0]["t"]]
    last = [s for s in samples if s["t"] >= samples[-1]["t"] - window]
    early = [d for t, _, d in batches if t - started < window + 120]
    late = [d for t, _, d in batches if t > time.time() - window - 60]
    result = {
        "minutes": args.minutes,
        "samples": samples,
        "rss_start_mb": statistics.mean(s["total"] for s in first),
        "rss_end_mb": statistics.mean(s["total"] for s in last),
        "jvm_start_mb": statistics.mean(s.get("jvm", 0) for s in first),
        "jvm_end_mb": statistics.mean(s.get("jvm", 0) for s in last),
        "checkpoint_start_mb": first[0]["checkpoint_mb"],
        "checkpoint_end_mb": last[-1]["checkpoint_mb"],
        "batch_seconds_early_median": statistics.median(early) if early else None,
        "batch_seconds_late_median": statistics.median(late) if late else None,
        "batches": len(batches),
        # The demo adds 6 partitions every 5 minutes, so its input grows during a soak: per
        # bucket, the records per batch next to the batch time and each step's time.
        "buckets": buckets(batches, steps, started),
    }
    out = RESULTS
    if args.hostile:
        out = RESULTS.with_name("soak-hostile.json")
        result["hostile_fraction"] = args.hostile
        result["hostile"] = feed.verdict(data / "delta") if feed else "the feed never started"
        result["demo_gauges_against_admin"] = gauges
        print(json.dumps({k: result[k] for k in ("hostile", "demo_gauges_against_admin")},
                         indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"soak {args.minutes:.0f} min, {len(batches)} batches: process tree RSS "
          f"{result['rss_start_mb']:.0f} -> {result['rss_end_mb']:.0f} MB, JVM "
          f"{result['jvm_start_mb']:.0f} -> {result['jvm_end_mb']:.0f} MB, checkpoint "
          f"{result['checkpoint_start_mb']:.1f} -> {result['checkpoint_end_mb']:.1f} MB, "
          f"median batch {result['batch_seconds_early_median']}s -> "
          f"{result['batch_seconds_late_median']}s, records per batch (median, first and last "
          f"5 min) {result['buckets'][0]['records_median'] if result['buckets'] else '?'} -> "
          f"{result['buckets'][-1]['records_median'] if result['buckets'] else '?'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
