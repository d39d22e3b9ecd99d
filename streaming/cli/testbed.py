"""`kafka-health demo` and `kafka-health cluster`: the test bed (streaming/testbed/) run by
hand."""

from __future__ import annotations

import argparse

from streaming.cli.options import given, usage_error
from streaming.cli.simulate import SIMULATED_SHAPE, cluster_model
from streaming.logsetup import spark_log_config


def cmd_demo(args: argparse.Namespace) -> int:
    spark_log_config(args.verbosity)
    if args.simulated:
        from streaming.testbed.simulated_demo import run_simulated_demo

        return run_simulated_demo(args, cluster_model(args))
    from streaming.testbed.demo import run_real_demo

    shaped = [name for name in SIMULATED_SHAPE if given(args, name)]
    if shaped:
        usage_error(args, f"--{shaped[0].replace('_', '-')} shapes the simulated cluster: "
                    "add --simulated, or leave it out (the real demo's watched cluster is "
                    "fixed: 3 KRaft nodes broker+controller and 2 broker-only nodes, topic "
                    "orders with replication factor 3 and min.insync.replicas 2)")
    return run_real_demo(args)


def cmd_cluster(args: argparse.Namespace) -> int:
    from streaming.testbed.demo import run_clusters

    if not args.brokers:
        for option, set_ in (("--ship", given(args, "ship")), ("--name", given(args, "name")),
                             ("--broker-only", given(args, "broker_only")
                              and args.broker_only != 0)):
            if set_:
                usage_error(args, f"{option} is about the watched cluster, which --brokers 0 "
                            "does not start: drop it, or give --brokers 1 or more")
    return run_clusters(args)
