"""kafka-health: the command line.

  kafka-health demo                 everything on this machine: real Kafka, faults, shipper, job
  kafka-health run --config FILE    the production job against your Kafka
  kafka-health cluster              only the embedded Kafka clusters (watched + metrics)
  kafka-health simulate ...         produce a model cluster's metrics to a topic
  kafka-health headroom             partition headroom per broker, with a PNG chart
  kafka-health report               static HTML report of the last hours from the Delta tables
  kafka-health check-config FILE    validate a config and print it with secrets masked
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from pathlib import Path

from streaming.config import ConfigError, load_config, redacted
from streaming.lease import LeaseHeld

LOG = logging.getLogger("kafka_health")

EPILOG = """\
Configuration: one YAML file (see deploy/config.example.yaml); any key can be overridden
from the environment as KAFKA_HEALTH__SECTION__KEY, e.g.
  KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS=kafka-1:9093
Secrets (SASL passwords, TLS keys) go under source.secrets as {file: PATH} or {env: NAME}
and are never logged.
"""


def _add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", default="demo", help="cluster name (default: demo)")
    parser.add_argument("--brokers", type=int, default=3, help="broker count (default: 3)")
    parser.add_argument("--topics", type=int, default=4, help="topics (default: 4)")
    parser.add_argument("--partitions", type=int, default=6,
                        help="partitions per topic (default: 6)")
    parser.add_argument("--replication-factor", type=int, default=3, help="RF (default: 3)")
    parser.add_argument("--min-isr", type=int, default=2,
                        help="min.insync.replicas (default: 2)")
    parser.add_argument("--scrape-interval", type=float, default=5.0,
                        help="seconds between scrapes of each broker (default: 5)")


def _model(args: argparse.Namespace):  # noqa: ANN202 - imported lazily
    from streaming.simulate.model import ClusterModel

    topics = {f"topic-{i}": args.partitions for i in range(args.topics)}
    return ClusterModel(args.cluster, list(range(1, args.brokers + 1)), topics,
                        replication_factor=args.replication_factor, min_isr=args.min_isr)


def demo_events(brokers: int, period: float = 300.0):  # noqa: ANN201
    """A fault cycle so the demo shows something: one follower down, then a second, then back;
    and steady partition growth so the headroom forecast has a trend."""
    from streaming.simulate.runner import Event

    if brokers < 3:
        return []
    events = []
    for cycle in range(288):  # a day of cycles
        base = cycle * period
        events += [
            Event(base + 30, lambda m: m.add_partitions("topic-0", 3), "3 partitions added"),
            Event(base + 150, lambda m: m.add_partitions("topic-0", 3), "3 partitions added"),
            Event(base + 60, lambda m: m.broker_down(brokers), f"broker {brokers} down"),
            Event(base + 120, lambda m: m.broker_down(brokers - 1),
                  f"broker {brokers - 1} down (under-min-ISR)"),
            Event(base + 210, lambda m: m.broker_up(brokers - 1), f"broker {brokers - 1} up"),
            Event(base + 240, lambda m: m.broker_up(brokers), f"broker {brokers} up"),
        ]
    return events


def cmd_demo(args: argparse.Namespace) -> int:
    if not args.simulated:
        from streaming.testbed.demo import run_real_demo

        return run_real_demo(args)
    from streaming.exporter import Exporter
    from streaming.job import Job
    from streaming.simulate.runner import Simulator
    from streaming.testbed.demo import demo_config
    from streaming.testbed.kafka import create_topic, metrics_cluster

    data = Path(args.data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    broker = metrics_cluster(data / "kafka-metrics").start()
    stop = threading.Event()
    try:
        create_topic(broker.bootstrap, args.topic, partitions=3)
        config = demo_config(args, broker.bootstrap, data)
        model = _model(args)
        simulator = Simulator(model, broker.bootstrap, args.topic,
                              scrape_interval=args.scrape_interval)
        sim_thread = threading.Thread(
            target=simulator.run, name="simulator", daemon=True,
            kwargs={"duration": args.duration or 10**9, "realtime": True,
                    "events": demo_events(args.brokers), "stop": stop.is_set},
        )
        exporter = Exporter(config=config.exporter)
        exporter.start(config.exporter.bind, config.exporter.port)
        job = Job(config, exporter=exporter, printer=lambda line: print(
            f"{line} | truth under-min-ISR: {_truth_line(model)}", flush=True))
        job.install_signal_handlers()
        sim_thread.start()
        job.start()
        print(f"""
kafka-health demo running (Ctrl-C stops everything)
  metrics    Kafka {broker.bootstrap} (one node, real Apache Kafka), topic {args.topic}
  simulator  cluster {args.cluster}: {args.brokers} brokers, scrape every {args.scrape_interval}s
  delta      {config.delta.path}/{{bronze,broker_signals,cluster_signals,quarantine}}
  /metrics   http://{config.exporter.bind}:{config.exporter.port}/metrics
""", flush=True)
        if args.duration:
            # daemon: a stop by signal or a failed query must not wait out the duration
            timer = threading.Timer(args.duration, job.request_stop)
            timer.daemon = True
            timer.start()
        return job.run_until_stopped()
    finally:
        stop.set()
        broker.stop()


def _truth_line(model) -> str:  # noqa: ANN001
    values = {b: model.broker_values(b)["UnderMinIsrPartitionCount"] for b in model.brokers}
    return " ".join(f"b{b}={v}" for b, v in values.items())


def cmd_run(args: argparse.Namespace) -> int:
    from streaming.exporter import Exporter
    from streaming.job import Job

    config = load_config(args.config)
    exporter = None
    if config.exporter.enabled:
        exporter = Exporter(config=config.exporter)
        exporter.start(config.exporter.bind, config.exporter.port)
    job = Job(config, exporter=exporter)
    job.install_signal_handlers()
    job.start()
    LOG.info("kafka-health running; metrics on %s:%d", config.exporter.bind, config.exporter.port)
    return job.run_until_stopped()


def cmd_cluster(args: argparse.Namespace) -> int:
    from streaming.testbed.demo import run_clusters

    return run_clusters(args)


def cmd_simulate(args: argparse.Namespace) -> int:
    from streaming.simulate.runner import Simulator

    model = _model(args)
    start = None if args.realtime else time.time() - args.duration
    simulator = Simulator(model, args.bootstrap, args.topic, fmt=args.format,
                          scrape_interval=args.scrape_interval, start=start)
    produced = simulator.run(args.duration, realtime=args.realtime)
    if args.truth:
        simulator.truth.write(args.truth)
    print(f"produced {produced} samples in {simulator.records} records to {args.topic}")
    return 0


def cmd_headroom(args: argparse.Namespace) -> int:
    from streaming.report import format_headroom_table, headroom_table, write_headroom_chart

    config = load_config(args.config) if args.config else None
    root = args.delta or (config or load_config(None)).delta.path
    table = headroom_table(root, cluster=args.cluster)
    print(format_headroom_table(table))
    if not table.empty:
        print(cluster_view(table, config.clusters if config else {}, args.plan_partitions,
                           args.replication_factor))
    if args.png:
        try:
            print(f"chart: {write_headroom_chart(root, args.png, cluster=args.cluster)}")
        except LookupError as err:
            print(f"no chart: {err}")
    return 0


def cluster_view(table, overrides: dict, planned: int | None, rf: int) -> str:  # noqa: ANN001
    """Per cluster: replicas hosted vs max.partitions (KIP-578) and vs the sum of broker
    ceilings; with --plan-partitions, how many brokers that growth needs and how the topic
    creation must be split (10,000 partitions per CreateTopics request, seed 000)."""
    from streaming.headroom.model import brokers_needed, create_topic_batches, make_config

    lines = []
    for cluster, rows in table.groupby("cluster"):
        limits = make_config(overrides.get(cluster))
        total = int(rows["partitions"].sum())
        ceilings = int(rows["binding_ceiling"].sum())
        guard = limits.max_partitions
        lines.append(
            f"cluster {cluster}: {total} partition replicas on {len(rows)} brokers; sum of "
            f"broker ceilings {ceilings} ({ceilings - total} free); max.partitions "
            f"{guard if guard is not None else 'not set'}")
        if planned:
            per_broker = int(rows["binding_ceiling"].min())
            need = brokers_needed(total // max(rf, 1) + planned, per_broker, rf)
            batches = create_topic_batches(planned)
            lines.append(
                f"  +{planned} partitions at RF {rf}: {need} brokers at the lowest ceiling "
                f"{per_broker} (now {len(rows)}); create in {len(batches)} request(s) of "
                f"<= 10,000 partitions: {batches}")
    return "\n".join(lines)


def cmd_report(args: argparse.Namespace) -> int:
    from streaming.report import write_report

    root = args.delta or load_config(args.config).delta.path
    index = write_report(root, args.out, hours=args.hours, cluster=args.cluster)
    print(f"report: {index}")
    return 0


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate the config, read every secret it references (a missing one is exit 2 naming
    its key), and print the config masked by the redaction rule."""
    config = load_config(args.config)
    config.check_secrets()
    print(json.dumps(redacted(config), indent=2, default=str))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-health", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="run everything locally on the embedded default",
                          description="Start a real 3-node Kafka cluster (watched) and a "
                          "one-node metrics cluster on loopback, the shipper, an acks=all "
                          "producer, the streaming job on local Spark (Delta tables under "
                          "--data-dir, /metrics), and a recurring cycle of real faults, "
                          "narrating incidents as they open and resolve. --simulated uses "
                          "the simulator instead of the watched cluster.")
    demo.add_argument("--config", help="optional YAML to start from (embedded keys win)")
    demo.add_argument("--data-dir", default="data/demo", help="tables and checkpoint")
    demo.add_argument("--topic", default="kafka-metrics")
    demo.add_argument("--metrics-port", type=int, default=9464,
                      help="port of the job's Prometheus /metrics (default: 9464)")
    demo.add_argument("--fault-period", type=float, default=300.0,
                      help="seconds per fault cycle on the real cluster (default: 300)")
    demo.add_argument("--simulated", action="store_true",
                      help="no watched Kafka: a simulated cluster produces the metrics "
                      "(faster to start, every scenario exact)")
    demo.add_argument("--duration", type=float, default=None,
                      help="stop by itself after this many seconds")
    _add_model_args(demo)
    demo.set_defaults(func=cmd_demo)

    run = sub.add_parser("run", help="the production job (also under spark-submit)")
    run.add_argument("--config", required=True, help="YAML config file")
    run.set_defaults(func=cmd_run)

    cluster = sub.add_parser(
        "cluster", help="run the embedded Kafka clusters until Ctrl-C",
        description="Start, on loopback, a watched Kafka cluster of --brokers KRaft nodes "
        "(broker+controller in one JVM, the Jolokia and jmx_exporter agents attached) and a "
        "separate one-node metrics cluster for the metrics topics, optionally with the "
        "shipper carrying the watched brokers' JMX into them. Test-bed settings: faults show "
        "within seconds (replica.lag.time.max.ms 3 s). Ctrl-C or SIGTERM stops every node.")
    cluster.add_argument("--data-dir", default=None,
                         help="keep the nodes' data here (default: a temporary folder)")
    cluster.add_argument("--brokers", type=int, default=3,
                         help="watched cluster's combined broker+controller nodes, 0 for the "
                         "metrics cluster only (default: 3)")
    cluster.add_argument("--broker-only", type=int, default=2,
                         help="watched cluster's broker-only nodes (default: 2): stop these "
                         "to take two brokers down without losing the controller quorum")
    cluster.add_argument("--metrics-port", type=int, default=None,
                         help="the metrics cluster's port (default: a free one)")
    cluster.add_argument("--topic", action="append", default=[],
                         help="create this metrics topic (repeatable; default: kafka-metrics)")
    cluster.add_argument("--partitions", type=int, default=3,
                         help="partitions of each metrics topic (default: 3)")
    cluster.add_argument("--ship", type=float, default=None, metavar="SECONDS",
                         help="run the shipper: Jolokia reads to the first topic every SECONDS")
    cluster.add_argument("--name", default="local",
                         help="the watched cluster's name in the shipped metrics (default: local)")
    cluster.set_defaults(func=cmd_cluster)

    simulate = sub.add_parser("simulate", help="produce a model cluster's broker metrics",
                              description="Scrape a model cluster every --scrape-interval "
                              "and produce the scrapes to --topic. Without --realtime, "
                              "--duration seconds of metrics ending now are produced at once.")
    simulate.add_argument("--bootstrap", default="127.0.0.1:9092")
    simulate.add_argument("--topic", default="kafka-metrics")
    simulate.add_argument("--format", default="jolokia")
    simulate.add_argument("--duration", type=float, default=300.0,
                          help="simulated seconds (default: 300)")
    simulate.add_argument("--realtime", action="store_true",
                          help="pace scrapes in wall-clock time")
    simulate.add_argument("--truth", help="write ground truth per window to this JSONL file")
    _add_model_args(simulate)
    simulate.set_defaults(func=cmd_simulate)

    headroom = sub.add_parser(
        "headroom", help="partition headroom per broker: ceilings, binding bound, forecast",
        description="Print the newest partition_headroom row per broker (every bound's "
        "ceiling, the binding one, headroom, growth per day, days to the ceiling) and "
        "optionally a PNG of partitions over time against each ceiling.")
    headroom.add_argument("--config", help="YAML config (for delta.path)")
    headroom.add_argument("--delta", help="Delta root instead of the config's delta.path")
    headroom.add_argument("--cluster", help="only this cluster")
    headroom.add_argument("--plan-partitions", type=int, default=None,
                          help="planned new partitions: brokers needed and request split")
    headroom.add_argument("--replication-factor", type=int, default=3,
                          help="RF of the planned partitions (default: 3)")
    headroom.add_argument("--png", default="headroom.png",
                          help="write the chart here (default: headroom.png; '' for none)")
    headroom.set_defaults(func=cmd_headroom)

    report = sub.add_parser("report", help="static HTML report of the last N hours",
                            description="Incidents timeline, per-broker and cluster signals, "
                            "headroom and quarantine from the Delta tables, as index.html "
                            "with PNG charts (no external resources).")
    report.add_argument("--config", help="YAML config (for delta.path)")
    report.add_argument("--delta", help="Delta root instead of the config's delta.path")
    report.add_argument("--out", default="report", help="output folder (default: report)")
    report.add_argument("--hours", type=float, default=6.0, help="look-back (default: 6)")
    report.add_argument("--cluster", help="only this cluster")
    report.set_defaults(func=cmd_report)

    check = sub.add_parser("check-config", help="validate a config file")
    check.add_argument("config")
    check.set_defaults(func=cmd_check_config)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    except LeaseHeld as err:
        print(f"not started: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
