"""The `kafka-health` command line: every command, option and help text.

Standard library only at import (the commands import their libraries when they run): the
wrapper scripts print help before anything is installed (deploy/demo.sh).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from streaming.cli.check_config import cmd_check_config
from streaming.cli.headroom import cmd_headroom
from streaming.cli.options import COUNT, HOURS, POSITIVE_INT, SECONDS, tcp_port
from streaming.cli.peek import cmd_peek
from streaming.cli.run import cmd_run
from streaming.cli.simulate import cmd_simulate
from streaming.cli.tables import cmd_report, cmd_status
from streaming.cli.testbed import cmd_cluster, cmd_demo

DESCRIPTION = """\
kafka-health: Kafka fleet health from broker metrics.

  kafka-health demo                 everything on this machine: real Kafka, faults, shipper, job
  kafka-health run --config FILE    the production job against your Kafka
  kafka-health cluster              only the embedded Kafka clusters (watched + metrics)
  kafka-health simulate ...         produce a model cluster's metrics to a topic
  kafka-health headroom             partition headroom per broker (and a PNG chart with --png)
  kafka-health report --out DIR     static HTML report of the last hours from the Delta tables
  kafka-health status               open incidents, stale brokers, lowest headroom, now
  kafka-health peek --topic T       sample a metrics topic: formats, identities, signals fed
  kafka-health check-config FILE    validate a config (--print shows it, secrets masked)

`kafka-health COMMAND --help` says what a command is for, with an example.
"""

EPILOG = """\
Configuration: one YAML file (see deploy/config.example.yaml); any key can be overridden
from the environment as KAFKA_HEALTH__SECTION__KEY, e.g.
  KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS=kafka-1:9093
Secrets (SASL passwords, TLS keys) go under source.secrets as {file: PATH} or {env: NAME}
and are never logged.

Exit status: 0 done, 1 failed at run time (Kafka unreachable, a table unreadable, the job
stopped on an error), 2 a usage or config error (the message says what to fix).
"""

VERBOSE_HELP = ("more output: -v adds the libraries' INFO lines (Spark, great_expectations, "
                "librdkafka warnings) and the job's DEBUG; -vv everything at DEBUG")
LOG_FORMAT_HELP = ("text (default) for people, or json: one JSON object per log line, for "
                   "containers and log collectors")
METRICS_PORT_HELP = "port of the job's Prometheus /metrics (exporter.port)"
BOOTSTRAP_HELP = ("the metrics cluster's Kafka, host:port[,host:port] (default: the "
                  "config's source.bootstrap_servers)")
COMMAND_CONFIG_HELP = ("Kafka client properties file (key=value lines in Java properties "
                       "syntax, as kafka-topics.sh --command-config and kcat -F take), applied "
                       "over the config's source.kafka and source.secrets: security.protocol, "
                       "sasl.mechanism, sasl.username/sasl.password or a Java client's "
                       "sasl.jaas.config, ssl.ca.location, ...")


def package_version() -> str:
    """The installed distribution's version; a source tree run without installing says so."""
    try:
        return version("kafka-health")
    except PackageNotFoundError:
        return "unknown (not installed; pip install -e . sets it)"


def _subcommand(sub: Any, name: str, common: argparse.ArgumentParser,
                func: Callable[[argparse.Namespace], int], summary: str, description: str,
                examples: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=summary, description=description, parents=[common],
                            epilog="example:\n" + examples,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(func=func, parser=parser)
    return parser


def _add_kafka_args(parser: argparse.ArgumentParser) -> None:
    """How a command that talks to the metrics cluster reaches it, as Kafka's tools say it."""
    parser.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap_server",
                        default=None, metavar="HOST:PORT", help=BOOTSTRAP_HELP)
    parser.add_argument("--command-config", default=None, metavar="FILE",
                        help=COMMAND_CONFIG_HELP)


def _add_model_args(parser: argparse.ArgumentParser, shape_title: str | None = None) -> None:
    """The model's cluster name and scrape interval, and its shape (cli.simulate's
    SIMULATED_SHAPE) in an argument group of its own when `shape_title` is given."""
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


def _add_output_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="table for people (default) or json for scripts")


def _add_delta_args(parser: argparse.ArgumentParser, config_help: str) -> None:
    parser.add_argument("--config", help=config_help)
    parser.add_argument("--delta", help="Delta root instead of the config's delta.path")
    parser.add_argument("--cluster", help="only this cluster")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-health", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    )
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {package_version()}",
                        help="print the installed version and exit")
    parser.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE_HELP)
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help=LOG_FORMAT_HELP)
    # -v and --log-format after the subcommand too: -v with its own dest, since a
    # subcommand's defaults would overwrite a shared one given before it; --log-format with
    # no default there, for the same reason
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", dest="verbose_after", action="count", default=0,
                        help=VERBOSE_HELP)
    common.add_argument("--log-format", choices=("text", "json"), default=argparse.SUPPRESS,
                        help=LOG_FORMAT_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = _subcommand(
        sub, "demo", common, cmd_demo, "run everything locally: real Kafka, faults, the job",
        "See kafka-health work before pointing it at your fleet. Start a real Kafka cluster "
        "to watch (3 KRaft nodes broker+controller and 2 broker-only nodes) and a one-node "
        "metrics cluster on loopback, the shipper, an acks=all producer, the streaming job on "
        "local Spark (Delta tables under --data-dir, /metrics), and a recurring cycle of real "
        "faults, narrating incidents as they open and resolve. --simulated uses the "
        "simulator instead of the watched cluster.",
        "  kafka-health demo --fault-period 120 --duration 600\n"
        "  kafka-health demo --simulated --brokers 5   # faster start, a model cluster\n")
    demo.add_argument("--config", help="optional YAML to start from (the demo's own keys win)")
    demo.add_argument("--data-dir", default="data/demo",
                      help="Delta tables, checkpoint and Kafka data (default: data/demo)")
    demo.add_argument("--topic", default="kafka-metrics",
                      help="the metrics topic the job reads (default: kafka-metrics)")
    demo.add_argument("--metrics-port", type=tcp_port, default=9464,
                      help=f"{METRICS_PORT_HELP} (default: 9464)")
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
        "batch on SIGTERM or Ctrl-C. deploy/spark-submit.sh runs it on a Spark cluster. The "
        "Kafka login is the config's source.kafka and source.secrets (no --command-config: "
        "the job's settings reach Spark's executors, where a file's secrets would show).",
        "  kafka-health run --config /etc/kafka-health/config.yaml\n"
        "  kafka-health --log-format json run --config config.yaml --bootstrap-server "
        "kafka-1:9093\n")
    run.add_argument("--config", default=None,
                     help="YAML config file (default: the file KAFKA_HEALTH_CONFIG names; "
                     "docs/configuration.md lists every key)")
    run.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap_server",
                     default=None, metavar="HOST:PORT",
                     help="the metrics cluster's Kafka, over the config's "
                     "source.bootstrap_servers")
    run.add_argument("--metrics-port", type=tcp_port, default=None,
                     help=f"{METRICS_PORT_HELP}, over the config's")

    cluster = _subcommand(
        sub, "cluster", common, cmd_cluster, "run the embedded Kafka clusters until Ctrl-C",
        "A Kafka test bed to try the job, the shipper or your own agents against. Start, on "
        "loopback, a watched Kafka cluster of --brokers KRaft nodes (broker+controller in one "
        "JVM, the Jolokia and jmx_exporter agents attached) and a separate one-node metrics "
        "cluster for the metrics topics, optionally with the shipper carrying the watched "
        "brokers' JMX into them. Test-bed settings: faults show within seconds "
        "(replica.lag.time.max.ms 3 s). Ctrl-C or SIGTERM stops every node.",
        "  kafka-health cluster --ship 5   # then: kafka-health run --config ... "
        "--bootstrap-server <the printed metrics bootstrap>\n"
        "  kafka-health cluster --brokers 0 --metrics-cluster-port 9092   # a metrics "
        "cluster only\n")
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
    cluster.add_argument("--metrics-cluster-port", type=tcp_port, default=None,
                         help="the metrics cluster's Kafka port (default: a free one)")
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
        "Feed a metrics topic without a real fleet, to try the job, a dashboard or a "
        "format. Scrape a model cluster every --scrape-interval and produce the scrapes to "
        "--topic. Without --realtime, --duration seconds of metrics ending now are produced "
        "at once. Records Kafka does not take are a failure (exit 1).",
        "  kafka-health simulate --bootstrap-server 127.0.0.1:9092 --topic kafka-metrics "
        "--duration 600\n"
        "  kafka-health simulate --realtime --format prometheus-strimzi --brokers 6\n")
    _add_kafka_args(simulate)
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
        "Plan capacity: how many more partitions each broker can take. Print the newest "
        "partition_headroom row per broker (every bound's ceiling, the binding one, "
        "headroom, growth per day, days to the ceiling) and a line per cluster; with --png, "
        "a chart of partitions over time against each ceiling. Writes no file without --png.",
        "  kafka-health headroom --config config.yaml --plan-partitions 2000\n"
        "  kafka-health headroom --delta data/demo/delta -o json | jq '.clusters'\n")
    _add_delta_args(headroom, "YAML config (for delta.path and cluster limits)")
    headroom.add_argument("--plan-partitions", type=POSITIVE_INT, default=None,
                          help="planned new partitions: brokers needed and request split")
    headroom.add_argument("--replication-factor", type=POSITIVE_INT, default=3,
                          help="RF of the planned partitions (default: 3)")
    headroom.add_argument("--png", default=None, metavar="FILE",
                          help="write the chart to FILE (default: no chart)")
    _add_output_arg(headroom)

    report = _subcommand(
        sub, "report", common, cmd_report, "static HTML report of the last N hours",
        "A page to read or attach after an incident: the incidents timeline, per-broker and "
        "cluster signals, headroom and quarantine from the Delta tables, as index.html with "
        "PNG charts (no external resources) in the --out folder. Charts span the data "
        "found, at most --hours.",
        "  kafka-health report --config config.yaml --out /tmp/kh-report --hours 24\n")
    _add_delta_args(report, "YAML config (for delta.path)")
    report.add_argument("--out", required=True, metavar="DIR",
                        help="folder to write index.html and its charts into (created if "
                        "missing)")
    report.add_argument("--hours", type=HOURS, default=6.0,
                        help="look-back, the longest span shown (default: 6)")

    status = _subcommand(
        sub, "status", common, cmd_status,
        "open incidents, stale brokers, lowest headroom, from the Delta tables",
        "What needs attention now: the open incidents (kind, broker, since, peak), the "
        "brokers the job's staleness rule calls silent in their cluster's newest window, "
        "and the lowest partition headroom per cluster, read from the job's Delta tables, "
        "under the end of the newest signal window and its age (old tables read as calm as "
        "a healthy fleet's). Exit 1 when a table cannot be read: that section is unknown, "
        "no all-clear.",
        "  kafka-health status --config config.yaml\n"
        "  kafka-health status --delta s3://bucket/kafka-health -o json | jq '.open_incidents'\n")
    _add_delta_args(status, "YAML config (for delta.path and the staleness settings)")
    _add_output_arg(status)

    peek = _subcommand(
        sub, "peek", common, cmd_peek,
        "sample a metrics topic: formats, clusters and brokers, signals it can feed",
        "Check a metrics topic before the job reads it. Read the last -n records of --topic "
        "(nothing committed, no consumer group) and decode them as the job would: per record "
        "the detected format, the cluster and broker its samples resolve to (and whether the "
        "cluster is only the default), its sample count or quarantine reason; then which of "
        "the job's signals this data can feed and which it cannot, and the quarantine "
        "reasons with counts. Kafka unreachable or no such topic: exit 1.",
        "  kafka-health peek --bootstrap-server kafka-1:9093 --command-config client.properties"
        " --topic kafka-metrics\n"
        "  kafka-health peek --config config.yaml --topic kafka-metrics -n 200 -o json\n")
    peek.add_argument("--topic", required=True, help="the metrics topic to sample")
    _add_kafka_args(peek)
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
    _add_output_arg(peek)

    check = _subcommand(
        sub, "check-config", common, cmd_check_config, "validate a config file",
        "Before a deploy: load the config as the job would (environment overrides applied), "
        "check every value and read every secret it references; print one OK line, or the "
        "config with secrets masked (--print). A problem exits 2 naming its key.",
        "  kafka-health check-config config.yaml\n"
        "  kafka-health check-config --skip-secrets --print config.yaml   # on a laptop "
        "without the secrets\n")
    check.add_argument("config", nargs="?", default=None,
                       help="the YAML config file to check (default: the file "
                       "KAFKA_HEALTH_CONFIG names)")
    check.add_argument("--print", action="store_true",
                       help="print the resolved config (overrides applied), secrets masked")
    check.add_argument("--skip-secrets", action="store_true",
                       help="do not read the secrets the config references (their files and "
                       "variables may exist only where the job runs)")
    return parser
