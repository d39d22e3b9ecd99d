"""`kafka-health headroom`: partition headroom per broker and per cluster, for capacity
planning; a chart only where --png says."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from streaming.cli.options import usage_error
from streaming.cli.tables import delta_root


def cmd_headroom(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.report import format_headroom_table, headroom_table, write_headroom_chart

    config = load_config(args.config) if args.config else None
    root = delta_root(args, config or load_config(None))
    if args.png and not Path(args.png).resolve().parent.is_dir():
        usage_error(args, f"--png {args.png}: the folder {Path(args.png).resolve().parent} does "
                    "not exist; give a path in an existing folder")
    table = headroom_table(root, cluster=args.cluster)
    clusters = cluster_summaries(table, config.clusters if config else {}, args.plan_partitions,
                                 args.replication_factor)
    chart, no_chart = None, ""
    if args.png:
        try:
            chart = str(write_headroom_chart(root, args.png, cluster=args.cluster))
        except LookupError as err:
            no_chart = str(err)
    if args.output == "json":
        brokers = json.loads(table.to_json(orient="records", date_format="iso"))
        print(json.dumps({"brokers": brokers, "clusters": clusters, "chart": chart},
                         indent=2))
        return 0
    print(format_headroom_table(table))
    if clusters:
        print(format_cluster_summaries(clusters))
    if args.png:
        print(f"chart: {chart}" if chart else f"no chart: {no_chart}")
    return 0


def cluster_summaries(table: Any, overrides: dict, planned: int | None,
                      rf: int) -> list[dict[str, Any]]:
    """Per cluster: replicas hosted vs max.partitions (KIP-578) and vs the sum of broker
    ceilings; with --plan-partitions, how many brokers that growth needs and how the topic
    creation must be split (the KRaft controller takes 10,000 partitions per CreateTopics
    request)."""
    from streaming.headroom.model import brokers_needed, create_topic_batches, make_config

    summaries = []
    for cluster, rows in table.groupby("cluster"):
        total = int(rows["partitions"].sum())
        ceilings = int(rows["binding_ceiling"].sum())
        summary: dict[str, Any] = {
            "cluster": cluster, "partition_replicas": total, "brokers": len(rows),
            "sum_of_ceilings": ceilings, "free": ceilings - total,
            "max_partitions": make_config(overrides.get(cluster)).max_partitions}
        if planned:
            per_broker = int(rows["binding_ceiling"].min())
            summary["plan"] = {
                "partitions": planned, "replication_factor": rf,
                "brokers_needed": brokers_needed(total // max(rf, 1) + planned, per_broker, rf),
                "lowest_ceiling": per_broker,
                "create_topic_batches": create_topic_batches(planned)}
        summaries.append(summary)
    return summaries


def format_cluster_summaries(summaries: list[dict[str, Any]]) -> str:
    lines = []
    for s in summaries:
        guard = s["max_partitions"]
        lines.append(
            f"cluster {s['cluster']}: {s['partition_replicas']} partition replicas on "
            f"{s['brokers']} brokers; sum of broker ceilings {s['sum_of_ceilings']} "
            f"({s['free']} free); max.partitions {guard if guard is not None else 'not set'}")
        plan = s.get("plan")
        if plan:
            batches = plan["create_topic_batches"]
            lines.append(
                f"  +{plan['partitions']} partitions at RF {plan['replication_factor']}: "
                f"{plan['brokers_needed']} brokers at the lowest ceiling "
                f"{plan['lowest_ceiling']} (now {s['brokers']}); create in {len(batches)} "
                f"request(s) of <= 10,000 partitions: {batches}")
    return "\n".join(lines)
