"""Paging latency: fault in Kafka -> PagerDuty Events API payload received.

Every piece is real and on loopback: the embedded broker, the streaming job (local Spark,
in this process), its Prometheus exporter, Debian's prometheus and alertmanager, and a
local HTTP receiver standing in for PagerDuty. The fault is an unclean leader election
(data loss), injected `--injections` times, each on a fresh cluster name so each one
is a new Alertmanager group (group_by alertname, cluster) and a new PagerDuty incident.

Two paths, measured one after the other with the same job settings:
  rules  exporter -> prometheus (scrape_interval = evaluation_interval = --interval,
         default 5 s, the committed alerts/kafka-health.rules.yml) -> alertmanager
  push   the job POSTs the incident to alertmanager itself (alert_push.alertmanager_url,
         kinds [unclean_election]); no Prometheus running, so only the push can page
Alertmanager runs the committed alerts/alertmanager.yml (data-loss route: group_wait 0s).

t0 is when the first scrape showing the fault was flushed to Kafka (the earliest moment
the pipeline could know; the brokers' own metric collection interval comes on top in
production). Per injection it records t0 -> exported gauge (pipeline), t0 -> alert POSTed
by the job (push path) and t0 -> PagerDuty payload received (the figure that counts).

    .venv/bin/python tests/benchmarks/bench_paging.py [--injections 10] [--interval 5]
        [--trigger 1] [--scrape 2] [--paths rules,push]

Writes tests/benchmarks/results/paging.json. Targets: p95 <= 10 s via rules, <= 3 s via push.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from streaming.config import load_config  # noqa: E402
from streaming.exporter import Exporter  # noqa: E402
from streaming.job import Job  # noqa: E402
from streaming.paging import AlertPusher  # noqa: E402
from streaming.paging.client import Request  # noqa: E402
from streaming.runtime.spark_session import build_spark  # noqa: E402
from streaming.simulate.model import ClusterModel  # noqa: E402
from streaming.testbed.kafka import create_topic, metrics_cluster  # noqa: E402
from tests.e2e.stack import (  # noqa: E402
    PagerDutyReceiver,
    RealtimeDriver,
    drain,
    free_port,
    job_environment,
    poll,
    start_alertmanager,
    start_prometheus,
)

RESULTS = REPO / "tests" / "benchmarks" / "results" / "paging.json"
ALERTNAME = "KafkaUncleanLeaderElection"
TARGETS = {"rules": 10.0, "push": 3.0}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p95 of 10 values is the largest but none)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


class PushClock:
    """Records when the job's alert push (`pusher`) first POSTed an alert of each cluster."""

    def __init__(self, pusher: AlertPusher) -> None:
        self.first: dict[str, float] = {}
        self.posts: list[tuple[float, float]] = []
        self.pusher = pusher
        original = pusher.post

        def timed(url: str, request: Request) -> None:
            started = time.time()
            original(url, request)
            self.posts.append((started, time.time()))
            for alert in json.loads(request.body):
                self.first.setdefault(alert["labels"]["cluster"], started)

        pusher.post = timed


def gauge(exporter: Exporter, name: str, **labels: str) -> float:
    return exporter.registry.get_sample_value(name, labels) or 0.0


def run_path(path: str, args: argparse.Namespace, broker: metrics_cluster, spark: Any,
             workdir: Path) -> dict[str, Any]:
    topic = f"bench-paging-{path}-{int(time.time())}"
    create_topic(broker.bootstrap, topic, partitions=3)
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        receiver = PagerDutyReceiver()
        stack.callback(receiver.close)
        am, am_url, _ = start_alertmanager(workdir / path / "alertmanager", receiver.url,
                                           group_interval=None)  # committed timings
        stack.callback(am.stop)
        exporter = Exporter()
        port = free_port()
        exporter.start("127.0.0.1", port)
        stack.callback(exporter.stop)
        checks = [am.check]
        if path == "rules":
            prom, _ = start_prometheus(workdir / path / "prometheus", f"127.0.0.1:{port}",
                                       am_url, f"{args.interval:g}s",
                                       evaluation=f"{args.eval_interval:g}s")
            stack.callback(prom.stop)
            checks.append(prom.check)
        driver = RealtimeDriver(broker.bootstrap, topic, interval=args.scrape)
        warm = f"bench-{path}-warmup"
        driver.add(ClusterModel(warm, [1, 2, 3], {"orders": 3}))
        env = job_environment(broker.bootstrap, topic, workdir / path / "job",
                              trigger=args.trigger, scrape_interval=args.scrape,
                              push_url=am_url if path == "push" else None)
        batch_seconds: list[float] = []

        batch_ends: list[float] = []

        def printer(line: str) -> None:  # "batch N: ... records/s, 1.23s, newest ..."
            found = re.search(r", ([0-9.]+)s, newest", line)
            if found:
                batch_seconds.append(float(found.group(1)))
                batch_ends.append(time.time())
                if os.environ.get("BENCH_DEBUG"):
                    print(f"    {time.time():.2f} {line}", flush=True)

        job = Job(load_config(None, environ=env), spark=spark, exporter=exporter,
                  printer=printer)
        clock = PushClock(job.processor.pusher)
        job.start()
        stack.callback(job.stop)
        driver.start()
        stack.callback(driver.stop)

        def alive() -> None:
            for check in checks:
                check()
            driver.check()
            if not job.query.isActive:
                raise AssertionError(f"streaming query stopped: {job.query.exception()}")

        batches = job.processor.history.newest_finished.batch_id
        poll(lambda: job.processor.history.newest_finished.batch_id >= batches + args.warmup_batches, 300,
             f"{args.warmup_batches} warm-up batches", alive=alive)
        measured_from = len(batch_seconds)
        previous = warm
        phase = random.Random(path)
        for i in range(args.injections):
            cluster = f"bench-{path}-{i}"
            # one cluster per micro-batch (see tests/e2e/stack.py RealtimeDriver)
            driver.remove(previous)
            drain(driver, exporter, alive=alive)
            driver.add(ClusterModel(cluster, [1, 2, 3], {"orders": 3}))
            previous = cluster
            poll(lambda c=cluster: gauge(exporter, "kafka_health_brokers_reporting",
                                         cluster=c) == 3, 120, f"{cluster} exported", alive=alive)
            # every ISR member of every partition gone, one out-of-sync replica (3) alive
            driver.inject(cluster, lambda m: (m.broker_down(3), m.broker_down(2),
                                              m.broker_up(3, caught_up=False),
                                              m.broker_down(1)), "offline")
            poll(lambda c=cluster: gauge(exporter, "kafka_health_offline_partitions",
                                         cluster=c) > 0, 120, f"{cluster} offline", alive=alive)
            # A random phase against Prometheus' scrape/evaluation cycle: injections paced by
            # the previous one's page otherwise land at nearly the same phase every time.
            time.sleep(phase.uniform(0, args.interval))
            fault = driver.inject(cluster, lambda m: m.unclean_election(), "unclean election")
            exported: float | None = None
            deadline = time.monotonic() + 120
            while True:
                alive()
                if exported is None and gauge(
                        exporter, "kafka_health_unclean_leader_elections_window_increase",
                        cluster=cluster, broker="3") > 0:
                    exported = time.time()
                pages = receiver.matching(cluster=cluster, alertname=ALERTNAME,
                                          action="trigger")
                if pages:
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"{cluster}: no PagerDuty trigger within 120 s")
                time.sleep(0.02)
            t0 = fault.produced
            assert t0 is not None
            if os.environ.get("BENCH_DEBUG"):
                posts = [(round(a - t0, 2), round(b - t0, 2)) for a, b in clock.posts[-3:]]
                print(f"    t0 {t0:.2f} posts {posts} stats {clock.pusher.stats}", flush=True)
            row = {
                "cluster": cluster,
                "paged_s": round(pages[0].received - t0, 3),
                "exported_s": round(exported - t0, 3) if exported else None,
                "pushed_s": (round(clock.first[cluster] - t0, 3)
                             if cluster in clock.first else None),
                "dedup_key": pages[0].dedup_key,
                "summary": pages[0].payload.get("summary"),
            }
            rows.append(row)
            print(f"  {path} #{i}: paged {row['paged_s']:.2f}s (exported {row['exported_s']}s, "
                  f"pushed {row['pushed_s']}s)", flush=True)
        steady = batch_seconds[measured_from:] or [float("nan")]
    paged = [r["paged_s"] for r in rows]
    return {
        "job_batch_seconds_p50": round(statistics.median(steady), 3),
        "job_batch_seconds_p95": round(percentile(steady, 95), 3),
        "injections": rows,
        "p50_s": round(statistics.median(paged), 3),
        "p95_s": round(percentile(paged, 95), 3),
        "max_s": round(max(paged), 3),
        "exported_p50_s": round(statistics.median(
            [r["exported_s"] for r in rows if r["exported_s"] is not None] or [float("nan")]), 3),
        "target_p95_s": TARGETS[path],
        "distinct_dedup_keys": len({r["dedup_key"] for r in rows}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--injections", type=int, default=10)
    parser.add_argument("--interval", type=float, default=5.0,
                        help="Prometheus scrape_interval and evaluation_interval (s)")
    parser.add_argument("--eval-interval", type=float, default=None,
                        help="Prometheus evaluation_interval (s), default = --interval")
    parser.add_argument("--trigger", type=float, default=1.0, help="job trigger (s)")
    parser.add_argument("--scrape", type=float, default=2.0,
                        help="simulated brokers' metric scrape interval (s)")
    parser.add_argument("--warmup-batches", type=int, default=8)
    parser.add_argument("--paths", default="rules,push")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--note", default="", help="free text stored with the settings "
                        "(e.g. other load on the machine during the run)")
    args = parser.parse_args(argv)
    if args.eval_interval is None:
        args.eval_interval = args.interval
    logging.basicConfig(level=logging.WARNING)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = set(paths) - set(TARGETS)
    if unknown:
        parser.error(f"--paths: unknown {', '.join(sorted(unknown))}; use rules, push")

    settings = {
        "fault": "unclean leader election (data loss), 3 brokers RF3 minISR2, 3 partitions",
        "t0": "first scrape showing the fault flushed to Kafka",
        "injections_per_path": args.injections,
        "prometheus_scrape_interval_s": args.interval,
        "prometheus_evaluation_interval_s": args.eval_interval,
        "rule": f"{ALERTNAME}: expr window_increase > 0, no for",
        "alertmanager": "committed alerts/alertmanager.yml (data-loss route group_wait 0s, "
                        "group_interval 1m), PagerDuty url -> local receiver",
        "job_trigger_s": args.trigger,
        "simulated_scrape_interval_s": args.scrape,
        "spark_master": "local[2]",
        "push": "alert_push.alertmanager_url set, kinds [unclean_election], no Prometheus",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
    }
    if args.note:
        settings["note"] = args.note
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-paging-") as tmp, \
            metrics_cluster() as broker:
        spark = build_spark(load_config(None, environ={}))
        try:
            for path in paths:
                print(f"path {path}: {args.injections} injections", flush=True)
                key = path
                if path == "rules" and (args.eval_interval, args.interval) != (5.0, 5.0):
                    key = f"rules_scrape{args.interval:g}s_eval{args.eval_interval:g}s"
                results[key] = run_path(path, args, broker, spark, Path(tmp))
                results[key]["settings"] = settings
        finally:
            spark.stop()

    # runs of other variants already in the file are kept (each result carries its settings)
    merged: dict[str, Any] = {}
    if args.output.exists():
        try:
            previous = json.loads(args.output.read_text())
            merged = previous.get("results", {})
            for entry in merged.values():
                entry.setdefault("settings", previous.get("settings"))
        except (ValueError, AttributeError):
            merged = {}
    merged.update(results)
    report = {"benchmark": "paging", "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "settings": settings, "results": merged}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")

    print("\nsettings:")
    for key, value in settings.items():
        print(f"  {key}: {value}")
    print(f"\nfault -> PagerDuty payload received, {args.injections} injections per path "
          f"(this run: {', '.join(results)}):")
    print(f"  {'path':<26} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'target p95':>11} "
          f"{'pipeline p50 s':>15} {'batch p50 s':>12}  verdict")
    failed = False
    for path, res in results.items():
        ok = res["p95_s"] <= res["target_p95_s"]
        failed |= not ok
        print(f"  {path:<26} {res['p50_s']:>7.2f} {res['p95_s']:>7.2f} {res['max_s']:>7.2f} "
              f"{res['target_p95_s']:>10.1f}s {res['exported_p50_s']:>15.2f} "
              f"{res['job_batch_seconds_p50']:>12.2f}  "
              f"{'meets target' if ok else 'MISSES target'}")
    print(f"written to {args.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
