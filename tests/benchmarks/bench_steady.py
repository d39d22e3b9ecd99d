"""Steady load: sample produced -> exported gauge updated, and the process tree's peak RSS.

A producer thread writes single-sample Jolokia messages (the worst case, ~170 bytes) of a
6-broker model at a steady `--rate` samples/s with event time = wall time, to the
embedded broker. The job runs as `kafka-health run` in its own process (local[2], as
shipped). Every `--marker-every` seconds (plus up to 1 s of jitter, so that markers fall
at every phase of the job's trigger) broker 1's UnderMinIsrPartitionCount takes a new
value k; the latency of k is from the first produce() of k to the first scrape of the
job's /metrics showing `kafka_health_under_min_isr_partitions{broker="1"} == k` (polled
every 50 ms). RSS of the job's whole process tree (driver JVM, Python driver, Python
workers) is sampled every second.

    .venv/bin/python tests/benchmarks/bench_steady.py --rate 10000 --seconds 180   # (3)
    .venv/bin/python tests/benchmarks/bench_steady.py --rate 100000 --seconds 180  # (4)
Writes tests/benchmarks/results/steady-<rate>.json; prints the figures last. With
`--trigger-seconds T` the job runs with spark.trigger_seconds T (the shipped default is
0.5 s, and a sample waits for the next trigger: up to that long before its batch starts),
into steady-<rate>-trigger<T>.json. `--writers driver` sets delta.bronze_writers, into
steady-<rate>-driver.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from streaming.catalog import load_catalog  # noqa: E402
from streaming.config import SparkConfig  # noqa: E402
from streaming.simulate.formats import _object_name  # noqa: E402
from streaming.simulate.model import ClusterModel  # noqa: E402
from streaming.simulate.samples import broker_samples  # noqa: E402
from streaming.testbed.kafka import create_topic, free_port, metrics_cluster  # noqa: E402
from tests.benchmarks.proctree import tree_rss_mb  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
MARKED = "UnderMinIsrPartitionCount"


class SteadyProducer(threading.Thread):
    """Scrape rounds of the model with event time = now, paced to `rate` samples/s."""

    def __init__(self, bootstrap: str, topic: str, rate: float, marker_every: float) -> None:
        super().__init__(daemon=True)
        catalog = load_catalog()
        model = ClusterModel("bench", [1, 2, 3, 4, 5, 6], {"orders": 600, "payments": 300})
        # (key, request, value, is the marker) per sample of one round, built once
        self.round = [
            (f"bench/{broker}".encode(), dict(zip(("mbean", "attribute"),
                                                  _object_name(catalog, s), strict=True)),
             s.value, broker == 1 and s.metric == MARKED)
            for broker in model.brokers for s in broker_samples(model, broker, 1.0)]
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                  "queue.buffering.max.messages": 2_000_000,
                                  "batch.num.messages": 10000})
        self.topic, self.rate, self.marker_every = topic, rate, marker_every
        self.stop = threading.Event()
        self.marker = 0
        self.marker_sent: dict[int, float] = {}
        self.jitter = random.Random()
        self.sent = 0
        self.started = 0.0

    def run(self) -> None:
        self.started = time.time()
        next_marker = self.started + self.marker_every
        while not self.stop.is_set():
            now = time.time()
            if now >= next_marker:
                self.marker += 1
                # Jittered by up to a second: markers exactly `marker_every` apart keep the
                # same phase against the job's 1 s trigger, so a whole run measured one
                # phase (p50 0.51 s in one run, 0.88 s in the next, same code).
                next_marker += self.marker_every + self.jitter.uniform(0.0, 1.0)
            for key, request, value, marked in self.round:
                if marked:
                    value = float(self.marker)
                    self.marker_sent.setdefault(self.marker, time.time())
                body = orjson.dumps({"request": {**request, "type": "read"}, "value": value,
                                     "timestamp": int(now), "status": 200})
                while True:
                    try:
                        self.producer.produce(self.topic, value=body, key=key)
                        break
                    except BufferError:
                        self.producer.poll(0.01)
            self.sent += len(self.round)
            self.producer.poll(0)
            ahead = self.sent / self.rate - (time.time() - self.started)
            if ahead > 0:
                self.stop.wait(ahead)
        self.producer.flush(30)


def gauge(port: int, name: str, labels: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as response:
            text = response.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=10_000, help="samples (= messages) per s")
    parser.add_argument("--seconds", type=float, default=180, help="measured time")
    parser.add_argument("--warmup", type=float, default=30, help="seconds before measuring")
    parser.add_argument("--marker-every", type=float, default=5.0)
    parser.add_argument("--trigger-seconds", type=float, default=None,
                        help="spark.trigger_seconds of the job (default: the shipped one)")
    parser.add_argument("--writers", choices=("driver", "read_tasks"), default=None,
                        help="delta.bronze_writers of the job (default: the shipped one)")
    parser.add_argument("--verbose", action="store_true",
                        help="run the job with -v: per-batch step timings in its job.log")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kh-steady-"))
    port = free_port()
    with metrics_cluster() as broker:
        topic = "metrics-steady"
        create_topic(broker.bootstrap, topic, partitions=3)
        env = {**os.environ,
               "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": broker.bootstrap,
               "KAFKA_HEALTH__SOURCE__TOPICS": json.dumps([{"name": topic, "format": "jolokia"}]),
                              "KAFKA_HEALTH__SPARK__CHECKPOINT": str(work / "checkpoint"),
               "KAFKA_HEALTH__DELTA__PATH": str(work / "delta"),
               "KAFKA_HEALTH__EXPORTER__PORT": str(port),
               "KAFKA_HEALTH__SIGNALS__SCRAPE_INTERVAL_SECONDS": "1"}
        if args.trigger_seconds is not None:
            env["KAFKA_HEALTH__SPARK__TRIGGER_SECONDS"] = str(args.trigger_seconds)
        if args.writers is not None:
            env["KAFKA_HEALTH__DELTA__BRONZE_WRITERS"] = args.writers
        (work / "config.yaml").write_text("{}\n")
        log = open(work / "job.log", "wb")  # noqa: SIM115
        job = subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", *(["-v"] if args.verbose else []), "run",
             "--config", str(work / "config.yaml")],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        producer = SteadyProducer(broker.bootstrap, topic, args.rate, args.marker_every)
        seen: dict[int, float] = {}
        rss: list[dict[str, float]] = []
        try:
            deadline = time.time() + 120
            while gauge(port, "kafka_health_pipeline_up", "") is None:
                if time.time() > deadline or job.poll() is not None:
                    raise SystemExit(f"job did not come up: {(work / 'job.log').read_text()[-2000:]}")
                time.sleep(0.5)
            producer.start()
            measure_from = time.time() + args.warmup
            end = measure_from + args.seconds
            last_rss = 0.0
            while time.time() < end:
                if job.poll() is not None:
                    raise SystemExit(f"job exited: {(work / 'job.log').read_text()[-2000:]}")
                value = gauge(port, "kafka_health_under_min_isr_partitions",
                              'broker="1",cluster="bench"')
                if value is not None and int(value) > 0:
                    seen.setdefault(int(value), time.time())
                if time.time() - last_rss >= 1.0:
                    last_rss = time.time()
                    rss.append({"t": round(last_rss - producer.started, 1), **tree_rss_mb(job.pid)})
                time.sleep(0.05)
            lag = gauge(port, "kafka_health_pipeline_source_lag_records", "")
        finally:
            producer.stop.set()
            if producer.is_alive():
                producer.join(60)
            os.killpg(job.pid, signal.SIGTERM)
            job.wait(120)
    achieved = producer.sent / max(time.time() - producer.started, 1e-9)
    latencies = sorted(seen[k] - producer.marker_sent[k] for k in seen
                       if k in producer.marker_sent and producer.marker_sent[k] >= measure_from)
    missed = [k for k, t in producer.marker_sent.items() if measure_from <= t < end - 30
              and k not in seen]
    peak = max(rss, key=lambda s: s["total"]) if rss else {}
    result: dict[str, Any] = {
        "benchmark": "steady", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "trigger_seconds": args.trigger_seconds or SparkConfig().trigger_seconds,
        "bronze_writers": args.writers or "the default (read_tasks)",
        "offered_samples_per_s": args.rate, "achieved_samples_per_s": round(achieved),
        "message": "single-sample Jolokia read response, ~170 bytes, event time = now",
        "seconds_measured": args.seconds, "markers_measured": len(latencies),
        "markers_never_seen": len(missed),
        "latency_p50_s": round(statistics.median(latencies), 2) if latencies else None,
        "latency_p95_s": (round(latencies[max(0, int(len(latencies) * 0.95 + 0.5) - 1)], 2)
                          if latencies else None),
        "latencies_s": [round(x, 2) for x in latencies],
        "source_lag_records_at_end": lag,
        "peak_rss_mb": {k: round(v) for k, v in peak.items() if k != "t"},
        "rss_first_last_mb": [round(rss[0]["total"]), round(rss[-1]["total"])] if rss else None,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"steady-{int(args.rate)}"
    if args.trigger_seconds is not None:
        name += f"-trigger{args.trigger_seconds:g}"
    if args.writers is not None:
        name += f"-{args.writers}"
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))
    print(f"job log: {work / 'job.log'}")
    print(f"steady {achieved:,.0f} samples/s (offered {args.rate:,.0f}) for {args.seconds:.0f}s: "
          f"produced -> gauge p50 {result['latency_p50_s']}s p95 {result['latency_p95_s']}s over "
          f"{len(latencies)} markers ({len(missed)} never seen), lag at end {lag}, peak RSS "
          f"{result['peak_rss_mb'].get('total')} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
