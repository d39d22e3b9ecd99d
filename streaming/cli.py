"""kafka-health: the command line.

  kafka-health demo                 everything on this machine: real Kafka, faults, shipper, job
  kafka-health run --config FILE    the production job against your Kafka
  kafka-health cluster              only the embedded Kafka clusters (watched + metrics)
  kafka-health simulate ...         produce a model cluster's metrics to a topic
  kafka-health headroom             partition headroom per broker, with a PNG chart
  kafka-health report               static HTML report of the last hours from the Delta tables
  kafka-health status               open incidents, stale brokers, lowest headroom, now
  kafka-health peek --topic T       sample a metrics topic: formats, identities, signals fed
  kafka-health check-config FILE    validate a config and print it with secrets masked
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import threading
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from streaming.allocator import set_purge_delay
from streaming.logsetup import configure, spark_log_config
from streaming.refusal import NotStarted

LOG = logging.getLogger("kafka_health")

EPILOG = """\
Configuration: one YAML file (see deploy/config.example.yaml); any key can be overridden
from the environment as KAFKA_HEALTH__SECTION__KEY, e.g.
  KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS=kafka-1:9093
Secrets (SASL passwords, TLS keys) go under source.secrets as {file: PATH} or {env: NAME}
and are never logged.
"""


def _number(kind: Callable[[str], Any], low: float, what: str) -> Callable[[str], Any]:
    """An argparse type: `kind` of at least `low`, else a usage error that says so."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not low <= value < math.inf:  # also refuses nan, and inf (no cycle, no timer)
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    return parse


POSITIVE_INT = _number(int, 1, "a whole number >= 1")
COUNT = _number(int, 0, "a whole number >= 0")
SECONDS = _number(float, 1e-3, "a finite number of seconds > 0")
HOURS = _number(float, 1e-6, "a finite number of hours > 0")


def _port(text: str) -> int:
    value = COUNT(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return value


def usage_error(args: argparse.Namespace, message: str) -> None:
    """Exit 2 with the subcommand's usage and what to fix, as argparse does for its own checks."""
    args.parser.error(message)


def _given(args: argparse.Namespace, name: str) -> bool:
    """Whether an option was set to other than its default (a default given explicitly is
    the same as none)."""
    return getattr(args, name) != args.parser.get_default(name)


# The simulated cluster's shape: the real demo's watched cluster has a fixed one.
SIMULATED_SHAPE = ("brokers", "topics", "partitions", "replication_factor", "min_isr")


def _add_model_args(parser: argparse.ArgumentParser, shape_title: str | None = None) -> None:
    """The model's cluster name and scrape interval, and its shape (SIMULATED_SHAPE) in an
    argument group of its own when `shape_title` is given."""
    parser.add_argument("--cluster", default="demo",
                        help="cluster name in the produced metrics (default: demo)")
    parser.add_argument("--scrape-interval", type=SECONDS, default=5.0,
                        help="seconds between scrapes of each broker (default: 5)")
    shape = parser.add_argument_group(shape_title) if shape_title else parser
    shape.add_argument("--brokers", type=POSITIVE_INT, default=3,
                       help="broker count (default: 3)")
    shape.add_argument("--topics", type=POSITIVE_INT, default=4, help="topics (default: 4)")
    shape.add_argument("--partitions", type=POSITIVE_INT, default=6,
                       help="partitions per topic (default: 6)")
    shape.add_argument("--replication-factor", type=POSITIVE_INT, default=3,
                       help="replication factor, at most --brokers (default: 3)")
    shape.add_argument("--min-isr", type=POSITIVE_INT, default=2,
                       help="min.insync.replicas (default: 2)")


def _model(args: argparse.Namespace):  # noqa: ANN202 - imported lazily
    from streaming.simulate.model import ClusterModel

    if args.replication_factor > args.brokers:
        usage_error(args, f"--replication-factor {args.replication_factor} exceeds --brokers "
                    f"{args.brokers}: each replica needs its own broker")
    topics = {f"topic-{i}": args.partitions for i in range(args.topics)}
    return ClusterModel(args.cluster, list(range(1, args.brokers + 1)), topics,
                        replication_factor=args.replication_factor, min_isr=args.min_isr)


# A day of the simulated demo's fault cycles, bounded: a --fault-period of a second must
# not build millions of events.
DEMO_MAX_CYCLES = 10_000


def demo_events(brokers: int, period: float = 300.0):  # noqa: ANN201
    """A fault cycle so the demo shows something: one follower down, then a second, then back;
    and steady partition growth so the headroom forecast has a trend. The steps sit at the
    same fractions of every `period` (at 300 s: 30, 60, 120, 150, 210 and 240 s in), for a
    day of cycles, at most DEMO_MAX_CYCLES."""
    from streaming.simulate.runner import Event

    if brokers < 3:
        return []
    events = []
    for cycle in range(max(1, min(DEMO_MAX_CYCLES, math.ceil(86_400 / period)))):
        base = cycle * period

        def at(fraction: float, base: float = base) -> float:
            return base + fraction * period

        events += [
            Event(at(0.1), lambda m: m.add_partitions("topic-0", 3), "3 partitions added"),
            Event(at(0.5), lambda m: m.add_partitions("topic-0", 3), "3 partitions added"),
            Event(at(0.2), lambda m: m.broker_down(brokers),
                  f"FAULT: the simulator stops broker {brokers}"),
            Event(at(0.4), lambda m: m.broker_down(brokers - 1),
                  f"FAULT: the simulator stops broker {brokers - 1} (under-min-ISR)"),
            Event(at(0.7), lambda m: m.broker_up(brokers - 1),
                  f"RECOVERY: broker {brokers - 1} up"),
            Event(at(0.8), lambda m: m.broker_up(brokers), f"RECOVERY: broker {brokers} up"),
        ]
    return events


def cmd_demo(args: argparse.Namespace) -> int:
    spark_log_config(args.verbosity)
    if not args.simulated:
        from streaming.testbed.demo import run_real_demo

        shaped = [name for name in SIMULATED_SHAPE if _given(args, name)]
        if shaped:
            usage_error(args, f"--{shaped[0].replace('_', '-')} shapes the simulated cluster: "
                        "add --simulated, or leave it out (the real demo's watched cluster is "
                        "fixed: 3 KRaft nodes broker+controller and 2 broker-only nodes, topic "
                        "orders with replication factor 3 and min.insync.replicas 2)")
        return run_real_demo(args)
    from streaming.exporter import Exporter
    from streaming.job import Job
    from streaming.simulate.runner import Simulator
    from streaming.testbed.demo import (
        DemoNarration,
        IncidentNarrator,
        batch_printer,
        demo_config,
        say,
        summary,
    )
    from streaming.testbed.kafka import create_topic, metrics_cluster

    data = Path(args.data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    broker = metrics_cluster(data / "kafka-metrics").start()
    stop = threading.Event()
    narration = None
    job = None
    try:
        create_topic(broker.bootstrap, args.topic, partitions=3)
        config = demo_config(args, broker.bootstrap, data)
        model = _model(args)
        simulator = Simulator(model, broker.bootstrap, args.topic,
                              scrape_interval=args.scrape_interval)
        sim_thread = threading.Thread(
            target=simulator.run, name="simulator", daemon=True,
            kwargs={"duration": args.duration or 10**9, "realtime": True,
                    "events": demo_events(args.brokers, args.fault_period),
                    "stop": stop.is_set},
        )
        exporter = Exporter(config=config.exporter)
        exporter.start(config.exporter.bind, config.exporter.port)
        job = Job(config, exporter=exporter, printer=batch_printer(args))
        job.install_signal_handlers()
        sim_thread.start()
        job.start()
        faults = (f"every {args.fault_period:g}s: broker {args.brokers} stopped, then broker "
                  f"{args.brokers - 1}, both back" if args.brokers >= 3 else
                  "none: the fault cycle needs --brokers 3 or more")
        print(f"""
kafka-health demo running (Ctrl-C stops everything)
  metrics    Kafka {broker.bootstrap} (one node, real Apache Kafka), topic {args.topic}
  simulator  cluster {args.cluster}: {args.brokers} brokers, scrape every {args.scrape_interval}s
  delta      {config.delta.path}
  /metrics   http://{config.exporter.bind}:{config.exporter.port}/metrics
  faults     {faults}
""", flush=True)
        # brokers the simulator stops are known to the model, so stale-broker incidents name them
        stopped = _DownBrokers(model)
        narrator = IncidentNarrator(config, say, stopped)
        narration = DemoNarration(job, exporter, narrator, say).start()
        if args.duration:
            # daemon: a stop by signal or a failed query must not wait out the duration
            timer = threading.Timer(args.duration, job.request_stop)
            timer.daemon = True
            timer.start()
        code = job.run_until_stopped()
        narration.stop()
        narration = None
        print(summary(narrator, config, data), flush=True)
        return code
    finally:
        stop.set()
        if narration:
            narration.stop()
        if job is not None:
            # Spark's Python workers may still hold a Kafka client (a read task the stop
            # cancelled, the stream's planner): stopped first, they do not log the broker's
            # going away as errors.
            job.spark.stop()
        broker.stop()


class _DownBrokers:
    """The model's brokers that are down now, as the narration's set of stopped broker ids."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __contains__(self, broker: object) -> bool:
        return any(str(b) == broker and not self.model.brokers[b].up for b in self.model.brokers)


def cmd_run(args: argparse.Namespace) -> int:
    from streaming import paging
    from streaming.config import ConfigError, load_config, redacted
    from streaming.exporter import Exporter
    from streaming.job import Job

    config = load_config(args.config)
    paging.check(config.alert_push)  # a rule the push cannot render: refused before start
    if (config.spark.master or "").startswith("local"):
        spark_log_config(args.verbosity)
    exporter = None
    if config.exporter.enabled:
        exporter = Exporter(config=config.exporter)
        exporter.start(config.exporter.bind, config.exporter.port)
    try:
        job = Job(config, exporter=exporter)  # opens the tables: one may be unreadable
        job.install_signal_handlers()
        job.start()
    except (NotStarted, ConfigError):  # said by main(); a config error exits 2 as at load
        raise
    except Exception as err:  # noqa: BLE001 - said in one line; the traceback from -v on
        # A start that cannot write its tables (read-only, full, permissions) or recover
        # what the last run owed: the pod restarts and KafkaHealthPipelineDown pages, and
        # the line that says why must not be buried in a traceback.
        LOG.debug("the start failed", exc_info=True)
        first = str(err).strip().splitlines()
        LOG.error("not started: %s%s%s (-v shows the traceback)", type(err).__name__,
                  f": {first[0]}" if first else "", _paths_hint(err, config))
        return 1
    shown = redacted(config)
    source = shown["source"]
    LOG.info("kafka-health running: reading %s from %s, checkpoint %s, tables in %s; metrics "
             "on %s:%d", f"topics matching {source['subscribe_pattern']!r}"
             if source["subscribe_pattern"] else
             "topics " + ", ".join(t["name"] for t in source["topics"]),
             source["bootstrap_servers"], shown["spark"]["checkpoint"], shown["delta"]["path"],
             config.exporter.bind, config.exporter.port)
    code = job.run_until_stopped()
    LOG.info("kafka-health stopped%s", f" (exit {code})" if code else "")
    return code


def _paths_hint(err: Exception, config: Any) -> str:
    """Which setting a file error's path comes from: the error names only the file."""
    filename = getattr(err, "filename", None) if isinstance(err, OSError) else None
    if not isinstance(filename, str):
        return ""
    path = Path(filename).absolute()
    for setting, root in (("delta.path", config.delta.path),
                          ("spark.checkpoint", config.spark.checkpoint)):
        folder = Path(root).absolute()
        if path == folder or folder in path.parents:
            return f" (under {setting}: {root})"
    return ""


def cmd_cluster(args: argparse.Namespace) -> int:
    from streaming.testbed.demo import run_clusters

    if not args.brokers:
        for option, given in (("--ship", _given(args, "ship")), ("--name", _given(args, "name")),
                              ("--broker-only", _given(args, "broker_only")
                               and args.broker_only != 0)):
            if given:
                usage_error(args, f"{option} is about the watched cluster, which --brokers 0 "
                            "does not start: drop it, or give --brokers 1 or more")
    return run_clusters(args)


def cmd_simulate(args: argparse.Namespace) -> int:
    from streaming.simulate.formats import ENCODERS
    from streaming.simulate.runner import Simulator

    if args.format not in ENCODERS:
        usage_error(args, f"--format {args.format!r} is not a format the simulator writes; "
                    f"choose one of: {', '.join(ENCODERS)}")
    model = _model(args)
    start = None if args.realtime else time.time() - args.duration
    client = None
    if args.config:  # the metrics cluster's login: the job's source.kafka / source.secrets
        from streaming.config import load_config

        client = load_config(args.config).source.client_config()
        if not _given(args, "bootstrap"):
            args.bootstrap = client["bootstrap.servers"]
        client["bootstrap.servers"] = args.bootstrap
    simulator = Simulator(model, args.bootstrap, args.topic, fmt=args.format,
                          scrape_interval=args.scrape_interval, start=start,
                          producer_conf=client)
    produced = simulator.run(args.duration, realtime=args.realtime)
    if args.truth:
        simulator.truth.write(args.truth)
    print(f"produced {produced} samples in {simulator.records} records to {args.topic}")
    return 0


def cmd_headroom(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.report import format_headroom_table, headroom_table, write_headroom_chart

    config = load_config(args.config) if args.config else None
    root = delta_root(args, config or load_config(None))
    if args.png and not Path(args.png).resolve().parent.is_dir():
        usage_error(args, f"--png {args.png}: the folder {Path(args.png).resolve().parent} does "
                    "not exist; give a path in an existing folder, or --png '' for no chart")
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
    creation must be split (the KRaft controller takes 10,000 partitions per CreateTopics request)."""
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
    from streaming.config import load_config
    from streaming.report import write_report

    root = delta_root(args, load_config(args.config))
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        usage_error(args, f"--out {args.out}: cannot create the report folder "
                    f"({err.strerror}); give a writable folder")
    index = write_report(root, args.out, hours=args.hours, cluster=args.cluster)
    print(f"report: {index}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.report.status import format_status, read_status, status_json

    config = load_config(args.config)
    signals = config.signals
    stale_after = signals.stale_after_intervals * signals.scrape_interval_seconds
    status = read_status(delta_root(args, config), cluster=args.cluster,
                         stale_after_seconds=stale_after)
    print(status_json(status) if args.output == "json" else format_status(status, stale_after))
    return 0 if status.known else 1  # a section unknown is no all-clear


def cmd_peek(args: argparse.Namespace) -> int:
    from streaming.config import FORMATS, load_config
    from streaming.decode.records import DecodeContext
    from streaming.peek import PeekError, format_peek, peek, sample_records

    if args.format not in FORMATS:
        usage_error(args, f"--format {args.format!r} is not a format the job decodes; "
                    f"choose one of: {', '.join(FORMATS)}")
    config = load_config(args.config)
    client = config.source.client_config()
    if args.bootstrap:
        client["bootstrap.servers"] = args.bootstrap
    try:
        records = sample_records(client, args.topic, args.n, args.from_beginning,
                                 args.timeout)
    except PeekError as err:
        usage_error(args, f"{err}; check --bootstrap and --topic (and source.kafka / "
                    "source.secrets in --config for a secured cluster)")
    # auto: the config's format for the topic, as the job reads it (auto when not listed)
    fmt = None if args.format == "auto" else args.format
    result = peek(records, DecodeContext.from_config(config), args.topic, fmt)
    print(format_peek(result, config.identity.default_cluster))
    return 0


def delta_root(args: argparse.Namespace, config: Any) -> str:
    """The Delta root to read: --delta, else the config's delta.path; a local one must hold
    at least one of the job's tables, so a mistyped path is a usage error (exit 2), not an
    empty report. Remote roots (s3://, abfss://, ...) are left to the reader."""
    root = str(args.delta or config.delta.path)
    if "://" in root:
        return root
    if args.delta:
        named, fix = f"--delta {root}", "give the job's delta.path"
    else:
        named = f"delta.path {root} (from {args.config or 'the defaults'})"
        fix = "pass --delta with the job's delta.path, or --config with the job's config"
    fix += " (the folder holding bronze/, broker_signals/, incidents/, ...)"
    folder = Path(root)
    if not folder.is_dir():
        usage_error(args, f"{named}: no such folder; {fix}")
    if not any((child / "_delta_log").is_dir() for child in folder.iterdir()):
        usage_error(args, f"{named}: holds none of the job's Delta tables; {fix}")
    return root


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate the config, read every secret it references (a missing one is exit 2 naming
    its key), and print the config masked by the redaction rule."""
    from streaming import paging
    from streaming.config import load_config, redacted

    config = load_config(args.config)
    config.check_secrets()
    paging.check(config.alert_push)
    print(json.dumps(redacted(config), indent=2, default=str))
    return 0


def package_version() -> str:
    """The installed distribution's version; a source tree run without installing says so."""
    try:
        return version("kafka-health")
    except PackageNotFoundError:
        return "unknown (not installed; pip install -e . sets it)"


VERBOSE_HELP = ("more output: -v adds the libraries' INFO lines (Spark, great_expectations, "
                "librdkafka warnings) and the job's DEBUG; -vv everything at DEBUG")


def _subcommand(sub: Any, name: str, common: argparse.ArgumentParser,
                func: Callable[[argparse.Namespace], int], summary: str,
                description: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=summary, description=description, parents=[common])
    parser.set_defaults(func=func, parser=parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-health", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    )
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {package_version()}",
                        help="print the installed version and exit")
    parser.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE_HELP)
    # -v after the subcommand too; its own dest, since a subcommand's defaults would
    # overwrite a shared one given before it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", dest="verbose_after", action="count", default=0,
                        help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = _subcommand(
        sub, "demo", common, cmd_demo, "run everything locally: real Kafka, faults, the job",
        "Start a real Kafka cluster to watch (3 KRaft nodes broker+controller and 2 "
        "broker-only nodes) and a one-node metrics cluster on loopback, the shipper, an "
        "acks=all producer, the streaming job on local Spark (Delta tables under --data-dir, "
        "/metrics), and a recurring cycle of real faults, narrating incidents as they open "
        "and resolve. --simulated uses the simulator instead of the watched cluster.")
    demo.add_argument("--config", help="optional YAML to start from (the demo's own keys win)")
    demo.add_argument("--data-dir", default="data/demo",
                      help="Delta tables, checkpoint and Kafka data (default: data/demo)")
    demo.add_argument("--topic", default="kafka-metrics",
                      help="the metrics topic the job reads (default: kafka-metrics)")
    demo.add_argument("--metrics-port", type=_port, default=9464,
                      help="port of the job's Prometheus /metrics (default: 9464)")
    demo.add_argument("--fault-period", type=SECONDS, default=300.0,
                      help="seconds per fault cycle (default: 300)")
    demo.add_argument("--simulated", action="store_true",
                      help="no watched Kafka: a simulated cluster produces the metrics "
                      "(faster to start, every scenario exact)")
    demo.add_argument("--duration", type=SECONDS, default=None,
                      help="stop by itself after this many seconds (default: run until Ctrl-C)")
    _add_model_args(demo, "the simulated cluster (with --simulated only)")

    run = _subcommand(
        sub, "run", common, cmd_run, "the production job (also under spark-submit)",
        "Run the always-on streaming job with one YAML config: read the metrics topics, "
        "write the Delta tables, serve /metrics for Prometheus (exporter.port), push "
        "incidents to Alertmanager if alert_push is configured. Stops after the current "
        "batch on SIGTERM or Ctrl-C. deploy/spark-submit.sh runs it on a Spark cluster.")
    run.add_argument("--config", required=True,
                     help="YAML config file (deploy/config.example.yaml documents every key)")

    cluster = _subcommand(
        sub, "cluster", common, cmd_cluster, "run the embedded Kafka clusters until Ctrl-C",
        "Start, on loopback, a watched Kafka cluster of --brokers KRaft nodes "
        "(broker+controller in one JVM, the Jolokia and jmx_exporter agents attached) and a "
        "separate one-node metrics cluster for the metrics topics, optionally with the "
        "shipper carrying the watched brokers' JMX into them. Test-bed settings: faults show "
        "within seconds (replica.lag.time.max.ms 3 s). Ctrl-C or SIGTERM stops every node.")
    cluster.add_argument("--data-dir", default=None,
                         help="the nodes' folders (logs, configs, data) while they run; "
                         "their data is removed at the stop, so every start is a new, empty "
                         "cluster (default: a temporary folder)")
    cluster.add_argument("--brokers", type=COUNT, default=3,
                         help="watched cluster's combined broker+controller nodes, 0 for the "
                         "metrics cluster only (default: 3)")
    cluster.add_argument("--broker-only", type=COUNT, default=2,
                         help="watched cluster's broker-only nodes (default: 2): stop these "
                         "to take two brokers down without losing the controller quorum")
    cluster.add_argument("--metrics-port", type=_port, default=None,
                         help="the metrics cluster's port (default: a free one)")
    cluster.add_argument("--topic", action="append", default=[],
                         help="create this metrics topic (repeatable; default: kafka-metrics)")
    cluster.add_argument("--partitions", type=POSITIVE_INT, default=3,
                         help="partitions of each metrics topic (default: 3)")
    cluster.add_argument("--ship", type=SECONDS, default=None, metavar="SECONDS",
                         help="run the shipper: Jolokia reads to the first topic every SECONDS")
    cluster.add_argument("--name", default="local",
                         help="the watched cluster's name in the shipped metrics (default: local)")
    cluster.add_argument("--secured", action="store_true",
                         help="secure both clusters: SCRAM-SHA-512 over SASL_SSL on the "
                         "bootstrap ports, a mutual-TLS listener, ACLs on, a least-privilege "
                         "user per component (docs/security.md); prints each component's "
                         "settings and writes a job config and the secret files beside the "
                         "nodes' folders")

    simulate = _subcommand(
        sub, "simulate", common, cmd_simulate, "produce a model cluster's broker metrics",
        "Scrape a model cluster every --scrape-interval and produce the scrapes to --topic. "
        "Without --realtime, --duration seconds of metrics ending now are produced at once.")
    simulate.add_argument("--bootstrap", default="127.0.0.1:9092",
                          help="Kafka to produce to (default: 127.0.0.1:9092, or the "
                          "--config's source.bootstrap_servers)")
    simulate.add_argument("--config", default=None,
                          help="YAML config whose source.kafka and source.secrets log in to "
                          "a secured metrics cluster (the producer needs Write and Describe "
                          "on --topic)")
    simulate.add_argument("--topic", default="kafka-metrics",
                          help="topic to produce to (default: kafka-metrics)")
    simulate.add_argument("--format", default="jolokia",
                          help="wire format: jolokia, jolokia-single, prometheus-<scheme>, "
                          "otlp, otlp-javaagent, telegraf, telegraf-batch (default: jolokia; "
                          "a wrong name lists every one)")
    simulate.add_argument("--duration", type=SECONDS, default=300.0,
                          help="simulated seconds (default: 300)")
    simulate.add_argument("--realtime", action="store_true",
                          help="pace scrapes in wall-clock time")
    simulate.add_argument("--truth", help="write ground truth per window to this JSONL file")
    _add_model_args(simulate)

    headroom = _subcommand(
        sub, "headroom", common, cmd_headroom,
        "partition headroom per broker: ceilings, binding bound, forecast",
        "Print the newest partition_headroom row per broker (every bound's ceiling, the "
        "binding one, headroom, growth per day, days to the ceiling) and optionally a PNG of "
        "partitions over time against each ceiling.")
    headroom.add_argument("--config", help="YAML config (for delta.path and cluster limits)")
    headroom.add_argument("--delta", help="Delta root instead of the config's delta.path")
    headroom.add_argument("--cluster", help="only this cluster")
    headroom.add_argument("--plan-partitions", type=POSITIVE_INT, default=None,
                          help="planned new partitions: brokers needed and request split")
    headroom.add_argument("--replication-factor", type=POSITIVE_INT, default=3,
                          help="RF of the planned partitions (default: 3)")
    headroom.add_argument("--png", default="headroom.png",
                          help="write the chart here (default: headroom.png; '' for none)")

    report = _subcommand(
        sub, "report", common, cmd_report, "static HTML report of the last N hours",
        "Incidents timeline, per-broker and cluster signals, headroom and quarantine from the "
        "Delta tables, as index.html with PNG charts (no external resources).")
    report.add_argument("--config", help="YAML config (for delta.path)")
    report.add_argument("--delta", help="Delta root instead of the config's delta.path")
    report.add_argument("--out", default="report", help="output folder (default: report)")
    report.add_argument("--hours", type=HOURS, default=6.0, help="look-back (default: 6)")
    report.add_argument("--cluster", help="only this cluster")

    status = _subcommand(
        sub, "status", common, cmd_status,
        "open incidents, stale brokers, lowest headroom, from the Delta tables",
        "What needs attention now: the open incidents (kind, broker, since, peak), the "
        "brokers the job's staleness rule calls silent in their cluster's newest window, "
        "and the lowest partition headroom per cluster, read from the job's Delta tables, "
        "under the end of the newest signal window and its age (old tables read as calm as "
        "a healthy fleet's). Exit 1 when a table cannot be read: that section is unknown, "
        "no all-clear.")
    status.add_argument("--config",
                        help="YAML config (for delta.path and the staleness settings)")
    status.add_argument("--delta", help="Delta root instead of the config's delta.path")
    status.add_argument("--cluster", help="only this cluster")
    status.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="table for people (default) or json for scripts")

    peek = _subcommand(
        sub, "peek", common, cmd_peek,
        "sample a metrics topic: formats, clusters and brokers, signals it can feed",
        "Read the last -n records of --topic (nothing committed, no consumer group) and "
        "decode them as the job would: per record the detected format, the cluster and "
        "broker its samples resolve to (and whether the cluster is only the default), its "
        "sample count or quarantine reason; then which of the job's signals this data can "
        "feed and which it cannot, and the quarantine reasons with counts.")
    peek.add_argument("--topic", required=True, help="the metrics topic to sample")
    peek.add_argument("--bootstrap", default=None, metavar="HOST:PORT",
                      help="Kafka to read from (default: the config's source.bootstrap_servers)")
    peek.add_argument("--config", help="YAML config: identity rules, topic formats and "
                      "Kafka security settings as the job uses them (default: the defaults)")
    peek.add_argument("-n", type=POSITIVE_INT, default=20,
                      help="records to sample (default: 20)")
    peek.add_argument("--from-beginning", action="store_true",
                      help="the oldest records instead of the newest")
    peek.add_argument("--format", default="auto",
                      help="decode as this format: auto, jolokia, prometheus, otlp, telegraf "
                      "(default: auto, or the topic's format in --config)")
    peek.add_argument("--timeout", type=SECONDS, default=15.0,
                      help="seconds to wait for Kafka (default: 15)")

    check = _subcommand(
        sub, "check-config", common, cmd_check_config, "validate a config file",
        "Load the config as the job would (environment overrides applied), check every "
        "value, read every secret it references, and print it with secrets masked. A problem "
        "exits 2 naming its key.")
    check.add_argument("config", help="the YAML config file to check")
    return parser


def main(argv: list[str] | None = None) -> int:
    # before anything loads pyarrow, which reads it once (streaming/allocator.py)
    set_purge_delay()
    args = build_parser().parse_args(argv)
    # imported after parsing: --help and usage errors need only the standard library, so
    # the wrapper scripts print help before anything is installed
    from streaming.config import ConfigError

    args.verbosity = args.verbose + args.verbose_after
    configure(args.verbosity)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    except NotStarted as err:
        print(f"not started: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
