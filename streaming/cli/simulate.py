"""`kafka-health simulate`: a model cluster's broker metrics produced to a topic; and the
model built from the command line, which `demo --simulated` uses too."""

from __future__ import annotations

import argparse
import time
from typing import Any

from streaming.cli.options import CommandFailed, kafka_client, usage_error

# The simulated cluster's shape: the real demo's watched cluster has a fixed one.
SIMULATED_SHAPE = ("brokers", "topics", "partitions", "replication_factor", "min_isr")


def cluster_model(args: argparse.Namespace) -> Any:
    """The model cluster the shape options describe (a ClusterModel)."""
    from streaming.simulate.model import ClusterModel

    if args.replication_factor > args.brokers:
        usage_error(args, f"--replication-factor {args.replication_factor} exceeds --brokers "
                    f"{args.brokers}: each replica needs its own broker")
    topics = {f"topic-{i}": args.partitions for i in range(args.topics)}
    return ClusterModel(args.cluster, list(range(1, args.brokers + 1)), topics,
                        replication_factor=args.replication_factor, min_isr=args.min_isr)


def cmd_simulate(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.simulate.formats import ENCODERS
    from streaming.simulate.runner import Simulator

    if args.format not in ENCODERS:
        usage_error(args, f"--format {args.format!r} is not a format the simulator writes; "
                    f"choose one of: {', '.join(ENCODERS)}")
    model = cluster_model(args)
    start = None if args.realtime else time.time() - args.duration
    # the metrics cluster's login: the job's source.kafka / source.secrets, --command-config
    client = kafka_client(args, load_config(args.config))
    simulator = Simulator(model, client["bootstrap.servers"], args.topic, fmt=args.format,
                          scrape_interval=args.scrape_interval, start=start,
                          producer_conf=client)
    produced = simulator.run(args.duration, realtime=args.realtime)
    undelivered = simulator.undelivered + len(simulator.producer)
    if undelivered:
        raise CommandFailed(
            f"{undelivered} of {simulator.records} records not delivered to {args.topic} at "
            f"{client['bootstrap.servers']} ({simulator.delivery_error or 'still queued'}); "
            "check --bootstrap-server and --topic (and --command-config, or source.kafka / "
            "source.secrets in --config, for a secured cluster)")
    if args.truth:
        simulator.truth.write(args.truth)
    print(f"produced {produced} samples in {simulator.records} records to {args.topic}")
    return 0
