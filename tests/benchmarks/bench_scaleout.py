"""Scale-out throughput: the full job on a real Spark standalone cluster with 1 executor
(1 worker × 1 core), then with 2 executors (2 workers × 1 core), over one pre-filled topic.

The topic holds single-sample Jolokia messages (about 170 bytes each, bench_pipeline's
6-broker fleet model) round-robin over --partitions partitions, so every micro-batch has
one input partition per topic-partition range to spread over the executors. Each run is
the same job and config (its own checkpoint and tables) in this process as the driver,
against a cluster of tests/spark_cluster.py; samples/s are counted from the end of the
first micro-batch to the end of the last (the first carries Spark and Python-worker
start-up), as in bench_pipeline. The driver's REST API confirms how many executors ran
tasks and how long; per-step seconds show what stays on the driver.

    .venv/bin/python tests/benchmarks/bench_scaleout.py --messages 300000
Writes tests/benchmarks/results/scaleout.json (scaleout-driver.json with `--writers
driver`); prints the ratio last. `--fleet 300 40000` runs over a 300-broker fleet's scrapes
instead (40,000 partitions: nearly every sample a replica's NumLogSegments, a scrape round
129k samples, so a batch holds one or a few windows, a live stream's density) and writes
scaleout-fleet.json. `--writers` picks delta.bronze_writers (default
read_tasks: the executors write bronze and send partials).

Each process's CPU a sample (tests/benchmarks/proctree.role_of: the driver's Python and
JVM, the executor JVMs, their Python workers, the cluster's daemons, the broker) gives the
projection: one executor core does 1 / (executor JVM + Python worker CPU a sample)
samples/s, the driver at most 1 / (its Python, its JVM and the Python processes that plan
the source for it, CPU a sample), so N executors reach
min(N x the first, the second). The driver's JVM lives as long as this process, so the
first run pays its JIT and class loading; `--warmup` runs the job once on 1 executor
before the measured runs, so that both find it warm (a long-running job's state), and
the driver's figure of every run is written beside the projection. On this 2-core
machine the broker, the driver and the executors share the cores, so the measured
2-executor figure cannot show the projection; the CPU per sample of each process can.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from streaming.testbed.kafka import create_topic, free_port, metrics_cluster  # noqa: E402
from tests.benchmarks.bench_pipeline import (  # noqa: E402
    fleet_model,
    full_job,
    prefill,
    single_sample_stream,
)
from tests.benchmarks.proctree import driver_us  # noqa: E402
from tests.spark_cluster import StandaloneCluster, driver_ui_conf, executors  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "scaleout.json"


def run_on(cluster: StandaloneCluster, want_executors: int, bootstrap: str, topic: str,
           total: int, cap: int, writers: str) -> dict[str, Any]:
    """The full job against `cluster`; fails unless exactly `want_executors` ran tasks."""
    conf = driver_ui_conf(free_port())
    ui_port = int(conf["spark.ui.port"])

    def observe() -> dict[str, Any]:
        """While the query is still up: executors that ran tasks (waited for, with a deadline,
        since the driver's REST API answers slowly under load) and the cores the master granted."""
        deadline, found = time.monotonic() + 60, []
        while time.monotonic() < deadline:
            found = [e for e in executors(ui_port) if e.get("totalTasks")]
            if len(found) >= want_executors:
                break
            time.sleep(0.5)
        app = cluster.active_app("kafka-health") or {}
        return {"app_cores_granted": app.get("cores"),
                "executors": [{k: e.get(k) for k in ("id", "hostPort", "totalTasks",
                                                      "totalDuration", "totalGCTime")}
                              for e in found]}

    load_before = os.getloadavg()[0]
    result = full_job(bootstrap, topic, total, cap, observe=observe, environ={
        "KAFKA_HEALTH__SPARK__MASTER": cluster.url,
        "KAFKA_HEALTH__SPARK__CONF": json.dumps(conf),
        "KAFKA_HEALTH__DELTA__BRONZE_WRITERS": writers,
    })
    result["load_avg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    observed = result["observed"]
    if len(observed["executors"]) != want_executors or observed["app_cores_granted"] != want_executors:
        raise SystemExit(f"wanted {want_executors} executors at work, saw {result['observed']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--cap", type=int, default=50_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--writers", choices=("driver", "read_tasks"), default="read_tasks",
                        help="delta.bronze_writers")
    parser.add_argument("--fleet", type=int, nargs=2, metavar=("BROKERS", "PARTITIONS"),
                        help="the scrapes of a fleet of this many brokers and partitions "
                             "(replication factor 3) instead of the 6-broker one; writes "
                             "scaleout-fleet.json")
    parser.add_argument("--warmup", action="store_true",
                        help="first an unmeasured run on 1 executor, so that both measured "
                             "runs find the driver's JVM warm (it lives as long as this "
                             "process: without it the 1-executor run pays its JIT)")
    parser.add_argument("--out", help="the result file's name in tests/benchmarks/results/ "
                                      "instead of the default one")
    args = parser.parse_args()
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # the driver in this process: loopback, like the cluster
    total = args.messages
    work = Path(tempfile.mkdtemp(prefix="kh-scaleout-"))
    with metrics_cluster() as broker, StandaloneCluster(work / "cluster") as cluster:
        topic = "bench-scaleout"
        create_topic(broker.bootstrap, topic, partitions=args.partitions)
        size = prefill(broker.bootstrap, topic, single_sample_stream(
            total, time.time() - 3600, fleet_model(args.fleet)), partitions=args.partitions)
        cluster.start(workers=1)
        warmup = (run_on(cluster, 1, broker.bootstrap, topic, total, args.cap, args.writers)
                  if args.warmup else None)
        one = run_on(cluster, 1, broker.bootstrap, topic, total, args.cap, args.writers)
        cluster.add_worker()
        two = run_on(cluster, 2, broker.bootstrap, topic, total, args.cap, args.writers)
    shutil.rmtree(work, ignore_errors=True)  # the daemons' logs; kept when a run failed
    ratio = two["samples_per_s"] / one["samples_per_s"]
    result = {
        "messages": args.messages, "message_bytes_avg": round(size, 1),
        "partitions": args.partitions, "cap": args.cap,
        "cluster": "Spark standalone on loopback, workers of 1 core and 1 GB each; driver here",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "writers": args.writers,
        "fleet": None if args.fleet is None else {"brokers": args.fleet[0],
                                                  "partitions": args.fleet[1]},
        "warmup": None if warmup is None else {
            "samples_per_s": warmup["samples_per_s"],
            "cpu_us_per_sample_by_role": warmup["cpu_us_per_sample_by_role"]},
        "executors_1": one, "executors_2": two, "ratio": ratio,
        "driver_us_per_sample_by_run": {
            name: round(driver_us(run["cpu_us_per_sample_by_role"]), 2) for name, run in
            (("warmup", warmup), ("executors_1", one), ("executors_2", two)) if run},
        "projection": projection(two),
    }
    out = RESULTS.with_name(args.out or (
        "scaleout-fleet.json" if args.fleet else
        "scaleout.json" if args.writers == "read_tasks" else "scaleout-driver.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    for label, run in (("1 executor ", one), ("2 executors", two)):
        print(f"{label}: {run['samples_per_s']:,.0f} samples/s over {run['batches']} batches "
              f"({run['records_after_first_batch']} samples in {run['seconds']:.1f}s after the "
              f"first); steps {run['step_seconds']}; load {run['load_avg_1m']}")
    print(f"{args.messages} single-sample Jolokia messages of {size:.0f} B on {args.partitions} "
          f"partitions: 2 executors / 1 executor = {ratio:.2f}")
    print(json.dumps(result["projection"], indent=2))


def projection(run: dict[str, Any]) -> dict[str, Any]:
    """Per-executor-core and driver limits from each process's CPU a sample, and the
    projected samples/s for N executors (see the module docstring)."""
    per = run["cpu_us_per_sample_by_role"]
    executors = len(run["observed"]["executors"])
    executor_us = (per.get("executor-jvm", 0.0) + per.get("python-worker", 0.0)) / executors
    driver = driver_us(per)
    core_rate = 1e6 / executor_us if executor_us > 0 else float("inf")
    driver_rate = 1e6 / driver if driver > 0 else float("inf")
    return {"cpu_us_per_sample": per, "executor_core_us_per_sample": round(executor_us, 2),
            "driver_us_per_sample": round(driver, 2),
            "executor_core_samples_per_s": round(core_rate),
            "driver_limit_samples_per_s": round(driver_rate),
            "projected_samples_per_s": {n: round(min(n * core_rate, driver_rate))
                                        for n in (1, 2, 4, 8, 16, 32)}}


if __name__ == "__main__":
    main()
