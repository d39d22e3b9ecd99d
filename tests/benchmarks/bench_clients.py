"""What the clients' truth costs (issue: clients' truth, scenario 6).

- The probe's load on a watched cluster: records and bytes a second it writes (and reads
  back), from the record it really sends and the request framing Kafka adds, for a topic
  of `--probe-partitions` partitions at `--probe-interval` seconds; measured too from a
  real probe's run on the suite's one-node broker (its topic's log end offsets and sizes
  before and after `--probe-seconds`).
- The consumer-group poller's CPU per group-partition: a real poll (the poller's Admin API
  reads, then the judging, the rows and the series the job makes of it) of `--groups`
  groups committing on a topic of `--partitions` partitions on that broker, CPU time of
  this process (time.process_time, librdkafka's threads included) per poll, per
  group-partition; and the judging alone at 10,000 group-partitions, without Kafka.

    .venv/bin/python tests/benchmarks/bench_clients.py [--groups 100] [--partitions 100]

Writes tests/benchmarks/results/clients.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from streaming.clients.export import export_groups  # noqa: E402
from streaming.clients.group_poller import GroupPoller  # noqa: E402
from streaming.clients.group_status import GroupEvaluator, PartitionOffsets  # noqa: E402
from streaming.clients.groups import GroupSettings  # noqa: E402
from streaming.clients.probe import DurabilityProbe, ProbeSettings, _message  # noqa: E402
from streaming.clients.service import ClientsService  # noqa: E402
from streaming.clients.store import ClientsStore, topic_rows  # noqa: E402
from streaming.config import load_config  # noqa: E402
from streaming.exporter import Exporter  # noqa: E402
from streaming.testbed.kafka import create_topic, metrics_cluster  # noqa: E402

RESULTS = REPO / "tests" / "benchmarks" / "results" / "clients.json"
# A record batch of one record with no key or headers in Kafka's v2 format: 61 bytes of
# batch header and about 8 of record framing around the value (Kafka's record format).
BATCH_OVERHEAD_BYTES = 69


def probe_load(partitions: int, interval: float) -> dict[str, float]:
    value = _message(uuid.uuid4().hex[:12], 123_456, time.time())
    records = partitions / interval
    return {"partitions": partitions, "interval_seconds": interval,
            "records_per_second": records, "value_bytes": len(value),
            "log_bytes_per_second": records * (len(value) + BATCH_OVERHEAD_BYTES)}


def measured_probe(bootstrap: str, seconds: float, interval: float) -> dict[str, float]:
    topic = f"bench-probe-{uuid.uuid4().hex[:6]}"
    probe = DurabilityProbe("bench", {"bootstrap.servers": bootstrap},
                            ProbeSettings(topic=topic, interval_seconds=interval,
                                          window_seconds=5, timeout_seconds=5)).start()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kafka-health-{topic}"})
    try:
        deadline = time.monotonic() + 60
        while probe._topic is None and time.monotonic() < deadline:
            time.sleep(0.2)
        partitions = len(probe._topic.preferred) if probe._topic else 0

        def ends() -> int:
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                       for p in range(partitions))
        before, started = ends(), time.monotonic()
        time.sleep(seconds)
        written, took = ends() - before, time.monotonic() - started
    finally:
        probe.stop()
        consumer.close()
    return {"partitions": partitions, "seconds": took, "records_per_second": written / took}


def group_poll_cpu(bootstrap: str, groups: int, partitions: int, polls: int) -> dict[str, Any]:
    topic = f"bench-groups-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=partitions, replication=1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for n in range(partitions * 20):
        producer.produce(topic, b"x", partition=n % partitions)
    producer.flush(60)
    prefix = f"bench-{uuid.uuid4().hex[:6]}-"
    for g in range(groups):  # each group commits an offset on every partition
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{prefix}{g}"})
        consumer.commit(offsets=[TopicPartition(topic, p, 10) for p in range(partitions)],
                        asynchronous=False)
        consumer.close()
    with tempfile.TemporaryDirectory() as root:
        config = load_config(None, environ={
            "KAFKA_HEALTH__METADATA__CLUSTERS": json.dumps(
                {"bench": {"bootstrap_servers": bootstrap}}),
            "KAFKA_HEALTH__CONSUMER_GROUPS__ENABLED": "true"})
        service = ClientsService(config, Exporter())
        service.store = ClientsStore(root, "bench")
        poller = GroupPoller("bench", {"bootstrap.servers": bootstrap},
                             GroupSettings(include=(f"{prefix}.*",), max_partitions=10**6),
                             30, 30, service.record_groups)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        cpu: list[float] = []
        wall: list[float] = []
        judged = 0
        for _ in range(polls):
            c0, w0 = time.process_time(), time.monotonic()
            read = poller.poll_once(admin)
            assert read.up, read.error
            service.record_groups(read)
            cpu.append(time.process_time() - c0)
            wall.append(time.monotonic() - w0)
            judged = len(read.statuses)
    per = [c / judged for c in cpu[1:]] if judged else []
    return {"groups": groups, "partitions": partitions, "group_partitions": judged,
            "polls": polls, "cpu_seconds_per_poll": cpu, "wall_seconds_per_poll": wall,
            "cpu_microseconds_per_group_partition": 1e6 * min(per) if per else None}


def judging_cpu(group_partitions: int, polls: int) -> dict[str, Any]:
    """The judging, the rows and the series of one poll without Kafka: 100 groups of
    group_partitions / 100 partitions, each poll's offsets moved on."""
    evaluator = GroupEvaluator("bench")
    exporter = Exporter()
    per_group = group_partitions // 100
    cpu = []
    for poll in range(polls):
        offsets = [PartitionOffsets(f"g{g}", f"t{g % 10}", p, 1000 + poll * 10, 0,
                                    1100 + poll * 12) for g in range(100)
                   for p in range(per_group)]
        c0 = time.process_time()
        statuses, losses = evaluator.evaluate(offsets, {f"g{g}": "STABLE" for g in range(100)},
                                              set(), time.time() + poll)
        rows = topic_rows(statuses)
        export_groups(exporter, "bench", True, 0, rows, losses, {})
        cpu.append(time.process_time() - c0)
    return {"group_partitions": group_partitions, "polls": polls,
            "cpu_microseconds_per_group_partition": 1e6 * min(cpu[1:]) / group_partitions}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--polls", type=int, default=4)
    parser.add_argument("--probe-partitions", type=int, default=5)
    parser.add_argument("--probe-interval", type=float, default=5.0)
    parser.add_argument("--probe-seconds", type=float, default=20.0)
    args = parser.parse_args()
    result: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "probe_load_computed": probe_load(args.probe_partitions, args.probe_interval),
        "judging_10k": judging_cpu(10_000, 5),
    }
    with metrics_cluster() as broker:
        result["probe_load_measured"] = measured_probe(broker.bootstrap, args.probe_seconds,
                                                       args.probe_interval)
        result["group_poll"] = group_poll_cpu(broker.bootstrap, args.groups, args.partitions,
                                              args.polls)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
