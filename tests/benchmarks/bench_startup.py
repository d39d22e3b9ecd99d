"""Start-up: `kafka-health run` spawned -> its first batch in bronze, with the driver JVM's
class-data archive (streaming/runtime/class_archive.py) and without, alternating.

One topic of the embedded broker holds a few hundred Jolokia records; each start gets a
fresh checkpoint and tables (`starting_offsets: earliest`), so every run's first batch
reads the same records. Without the archive means a cache folder that holds none
(KAFKA_HEALTH_CACHE for the job only; the default session needs no cached jars). The
archive is built first if missing (`python -m streaming.runtime.class_archive_build`).

    .venv/bin/python tests/benchmarks/bench_startup.py --rounds 4
Writes tests/benchmarks/results/startup.json; prints the figures last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from streaming.config import load_config  # noqa: E402
from streaming.runtime.class_archive_build import build  # noqa: E402
from streaming.testbed.kafka import create_topic, metrics_cluster  # noqa: E402
from tests.hostile import good_jolokia  # noqa: E402
from tests.integration.helpers import config_file, count  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def one_start(config: Path, root: Path, log: Path, env: dict[str, str]) -> dict[str, float]:
    """Seconds from spawn to the first bronze row, and from SIGTERM to the exit."""
    started = time.monotonic()
    job = subprocess.Popen([sys.executable, "-m", "streaming.cli", "run", "--config",
                            str(config)], stdout=log.open("ab"), stderr=subprocess.STDOUT,
                           env=env, start_new_session=True)
    try:
        while count(root, "bronze") == 0:
            if job.poll() is not None:
                raise SystemExit(f"the job exited ({job.returncode}): {log.read_text()[-3000:]}")
            if time.monotonic() - started > 120:
                raise SystemExit(f"no batch after 300 s: {log.read_text()[-3000:]}")
            time.sleep(0.05)
        first_batch = time.monotonic() - started
    finally:
        stopping = time.monotonic()
        job.send_signal(signal.SIGTERM)
        job.wait(120)
    return {"first_batch_s": round(first_batch, 2),
            "stop_s": round(time.monotonic() - stopping, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="starts of each variant")
    parser.add_argument("--records", type=int, default=300)
    args = parser.parse_args()
    archive, how = build(load_config(None, environ={}))
    print(f"archive: {archive} ({how})", flush=True)
    if archive is None:
        return 1
    runs: dict[str, list[dict[str, float]]] = {"archive": [], "none": []}
    with metrics_cluster() as broker, tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        topic = "startup"
        create_topic(broker.bootstrap, topic)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        now = time.time()
        for i in range(args.records):
            broker_id = 1 + i % 3
            producer.produce(topic, good_jolokia("c1", broker_id, now - args.records + i),
                             key=f"c1/{broker_id}".encode())
        assert producer.flush(30) == 0
        empty = base / "empty-cache"
        empty.mkdir()
        for round_ in range(args.rounds):
            for variant in ("archive", "none") if round_ % 2 == 0 else ("none", "archive"):
                run = base / f"{variant}-{round_}"
                config = config_file(run, broker.bootstrap, topic, max_offsets=args.records,
                                     source={"starting_offsets": "earliest"})
                env = dict(os.environ)
                if variant == "none":
                    env["KAFKA_HEALTH_CACHE"] = str(empty)
                result = one_start(config, run / "delta", run / "job.log", env)
                runs[variant].append(result)
                print(variant, result, flush=True)
    summary = {variant: {"first_batch_median_s": statistics.median(
        r["first_batch_s"] for r in rs), "stop_median_s": statistics.median(
        r["stop_s"] for r in rs)} for variant, rs in runs.items()}
    summary["ratio"] = round(summary["archive"]["first_batch_median_s"]
                             / summary["none"]["first_batch_median_s"], 3)
    out = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": platform.machine(), "cpus": os.cpu_count(), "records": args.records,
           "summary": summary, "runs": runs}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "startup.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
