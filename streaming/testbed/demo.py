"""`kafka-health cluster` and the real-Kafka `kafka-health demo`: the test bed run by hand."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from streaming.testbed.kafka import KafkaCluster, create_topic, metrics_cluster
from streaming.testbed.shipper import Shipper, Target


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so `finally` blocks stop every child process."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def targets(cluster: KafkaCluster) -> list[Target]:
    return [Target(n.node_id, n.jolokia_url, n.jmx_exporter_url) for n in cluster.nodes]


def run_clusters(args: argparse.Namespace) -> int:
    """Start the metrics cluster (and the watched one unless --brokers 0) until a signal."""
    stop = stop_on_signals()
    root = Path(args.data_dir).resolve() if args.data_dir else None
    topics = args.topic or ["kafka-metrics"]
    metrics = metrics_cluster(root / "metrics" if root else None, port=args.metrics_port)
    watched = (KafkaCluster(args.brokers, root / "watched" if root else None)
               if args.brokers else None)
    shipper = None
    try:
        metrics.start()
        for topic in topics:
            create_topic(metrics.bootstrap, topic, partitions=args.partitions)
        print(f"metrics cluster  {metrics.bootstrap}  topics: {', '.join(topics)}", flush=True)
        if watched:
            watched.start()
            print(f"watched cluster  {watched.bootstrap}  ({args.brokers} KRaft nodes, "
                  "broker+controller)", flush=True)
            for node in watched.nodes:
                print(f"  node {node.node_id}: {node.bootstrap}  jolokia {node.jolokia_url}  "
                      f"jmx_exporter {node.jmx_exporter_url}  log {node.log_path}", flush=True)
            if args.ship:
                shipper = Shipper(targets(watched), args.name, metrics.bootstrap,
                                  jolokia_topic=topics[0], prometheus_topic=None,
                                  interval=args.ship).start()
                print(f"shipper: Jolokia reads every {args.ship:g}s -> {topics[0]} "
                      f"(key {args.name}/<broker>)", flush=True)
        print("Ctrl-C stops every node", flush=True)
        stop.wait()
    finally:
        if shipper:
            shipper.stop()
        if watched:
            watched.stop(keep_data=root is not None)
        metrics.stop(keep_data=root is not None)
    return 0


def run_real_demo(args: argparse.Namespace) -> int:
    raise SystemExit("the real-Kafka demo is not built yet; use --simulated")
