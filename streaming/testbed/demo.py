"""`kafka-health cluster` and the real-Kafka `kafka-health demo`: the test bed run by hand."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Container
from pathlib import Path

import yaml

from streaming import metric_names as metric
from streaming.config import Config, load_config
from streaming.logsetup import kafka_logger
from streaming.testbed.clients_narration import ClientsNarrator
from streaming.testbed.kafka import KafkaCluster, create_topic, metrics_cluster
from streaming.testbed.late_reader import GROUP as LATE_GROUP
from streaming.testbed.late_reader import RETENTION_MS as LATE_RETENTION_MS
from streaming.testbed.late_reader import TOPIC as LATE_TOPIC
from streaming.testbed.late_reader import LateReader
from streaming.testbed.secured import (
    COMPONENT_USERS,
    SUPER_USER,
    client_sections,
    grant_components,
    metrics_security,
    secret_file,
    watched_security,
)
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
    secured = getattr(args, "secured", False)
    metrics = metrics_cluster(root / "metrics" if root else None, port=args.metrics_cluster_port,
                              secured=metrics_security() if secured else None)
    watched = (KafkaCluster(args.brokers, root / "watched" if root else None,
                            broker_only=args.broker_only,
                            secured=watched_security() if secured else None)
               if args.brokers else None)
    shipper = None
    try:
        metrics.start()
        for topic in topics:
            create_topic(metrics.bootstrap, topic, partitions=args.partitions,
                         client_config=metrics.client_config())
        print(f"metrics cluster  {metrics.bootstrap}  topics: {', '.join(topics)}", flush=True)
        if watched:
            watched.start()
            print(f"watched cluster  {watched.bootstrap}  ({args.brokers} KRaft nodes "
                  f"broker+controller, {args.broker_only} broker-only)", flush=True)
            for node in watched.nodes:
                print(f"  node {node.node_id} ({node.roles}): {node.bootstrap}  jolokia {node.jolokia_url}  "
                      f"jmx_exporter {node.jmx_exporter_url}  log {node.log_path}", flush=True)
            if args.ship:
                shipper = Shipper(targets(watched), args.name, metrics.bootstrap,
                                  jolokia_topic=topics[0], prometheus_topic=None,
                                  interval=args.ship,
                                  client=metrics.client_config(COMPONENT_USERS["shipper"])
                                  if secured else None).start()
                print(f"shipper: Jolokia reads every {args.ship:g}s -> {topics[0]} "
                      f"(key {args.name}/<broker>)", flush=True)
        if secured:
            print_secured_clients(metrics, topics, watched, args.name)
        print("Ctrl-C stops every node", flush=True)
        stop.wait()
    finally:
        if shipper:
            shipper.stop()
        if watched:
            watched.stop(keep_data=root is not None)
        metrics.stop(keep_data=root is not None)
    return 0


def print_secured_clients(metrics: KafkaCluster, topics: list[str],
                          watched: KafkaCluster | None, name: str) -> None:
    """Grant each component its ACLs, write its secrets to files and say how to log in:
    a job config to start from, and each user's settings (passwords by file only)."""
    grant_components(metrics, topics, watched)
    folder = metrics.directory / "clients"
    config = client_sections(metrics, topics, watched, name, folder)
    path = folder / "kafka-health.secured.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    print(f"secured: SCRAM-SHA-512 over SASL_SSL on the bootstrap ports, mutual TLS on the "
          f"MTLS ports, ACLs on (docs/security.md)\n  job config: {path}", flush=True)
    clusters = [(metrics, ("job", "shipper", "peek"))]
    if watched is not None:
        clusters.append((watched, ("poller",)))
    for cluster, components in clusters:
        sec = cluster.secured
        assert sec is not None
        print(f"  {cluster.name}: SASL_SSL {cluster.bootstrap}  MTLS {cluster.mtls_bootstrap}  "
              f"ssl.ca.location {sec.ca_file}", flush=True)
        admin = secret_file(folder, f"{cluster.name}-{SUPER_USER}.password",
                            sec.users[SUPER_USER])
        print(f"    super user: {SUPER_USER}, sasl.password in {admin}", flush=True)
        for component in components:
            user = COMPONENT_USERS[component]
            password = secret_file(folder, f"{cluster.name}-{user}.password", sec.users[user])
            print(f"    {component}: sasl.username {user}, sasl.password in {password}",
                  flush=True)
            cert = sec.client_certs.get(user)
            if cert is not None:
                print(f"    {component} by certificate: ssl.certificate.location "
                      f"{cert.certificate}, ssl.key.location {cert.key}, ssl.key.password in "
                      f"{cert.key_password_file}", flush=True)


ORDERS = "orders"


class AcksAllProducer:
    """A small acks=all producer on the watched cluster's demo topic: it shows what an
    application sees while partitions are under min ISR
    (NOT_ENOUGH_REPLICAS: see min.insync.replicas in Kafka's topic configs)."""

    def __init__(self, bootstrap: str, say, rate: float = 20.0) -> None:  # noqa: ANN001
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "message.timeout.ms": 5000, "retries": 0, "linger.ms": 5,
                                  "logger": kafka_logger()})
        self.say = say
        self.rate = rate
        self.delivered = self.refused = 0
        self._refusing_since: float | None = None
        self._refused_in_episode = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)

    def _on_delivery(self, err, _msg) -> None:  # noqa: ANN001
        if err is None:
            self.delivered += 1
            if self._refusing_since is not None:
                self.say(f"producer: acks=all writes accepted again after "
                         f"{_duration(time.time() - self._refusing_since)} "
                         f"({self._refused_in_episode} refused)")
                self._refusing_since = None
            return
        self.refused += 1
        self._refused_in_episode += 1
        if self._refusing_since is None:
            self._refusing_since = time.time()
            self._refused_in_episode = 1
            why = ("the ISR is below min.insync.replicas, so Kafka takes no write it could lose"
                   if err.name().startswith("NOT_ENOUGH_REPLICAS")
                   else "a broker went away mid-request")
            self.say(f"producer: acks=all write refused with {err.name()}: {why}")

    def _run(self) -> None:
        while not self._stop.wait(1.0 / self.rate):
            with contextlib.suppress(BufferError):
                self.producer.produce(ORDERS, b"demo order", on_delivery=self._on_delivery)
            self.producer.poll(0)

    def start(self) -> AcksAllProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.producer.flush(5)


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


def fault_cycle(cluster: KafkaCluster, say, stop: threading.Event, period: float,  # noqa: ANN001
                stopped: set[str] | None = None) -> None:
    """Over and over: a follower stopped cleanly, then a second broker killed (under min ISR
    on the leader left), then both back. `stopped` holds the ids of the brokers down now, so
    the narration can tie a stale-broker incident to the fault that caused it."""
    from streaming.testbed import faults

    only = [n.node_id for n in cluster.nodes if n.roles == "broker"]
    if len(only) < 2:
        return
    first, second = only[-1], only[-2]
    down = stopped if stopped is not None else set()

    def stop_broker(node: int, how: str) -> None:
        down.add(str(node))
        faults.stop_broker(cluster, node, how)

    def start_both() -> None:
        for node in (second, first):
            faults.start_broker(cluster, node)
            down.discard(str(node))

    steps = [
        (0.15, lambda: stop_broker(first, "clean"),
         f"FAULT: the fault cycle stops broker {first} (clean shutdown): its replicas leave "
         "the ISR, partitions are under-replicated, and its metrics stop"),
        (0.35, lambda: stop_broker(second, "kill"),
         f"FAULT: the fault cycle kills broker {second}: the leader left is alone in the "
         "ISR, below min.insync.replicas 2: under min ISR"),
        (0.70, start_both, f"RECOVERY: the fault cycle starts brokers {second} and {first} again"),
    ]
    while not stop.is_set():
        started = time.monotonic()
        for at, action, text in steps:
            if stop.wait(max(0.0, started + at * period - time.monotonic())):
                return
            say(text)
            try:
                action()
            except Exception as err:  # the demo goes on; the next cycle tries again
                say(f"fault step failed: {err}")
        stop.wait(max(0.0, started + period - time.monotonic()))


def _magnitude(kind: str, value: float | None) -> str:
    """An incident's peak in the operator's units."""
    if value is None:
        return "?"
    units = {"under_min_isr": "partitions", "offline_partitions": "partitions",
             "unclean_election": "unclean elections", "controller": "active controllers"}
    if kind == "stale_broker":
        return f"no metrics for {_duration(value)}"
    return f"{value:g} {units[kind]}" if kind in units else f"peak {value:g}"


class IncidentNarrator:
    """Says when an incident opens (and the page it raises), what the Admin API blames for
    it once known, and when it resolves, from the job's incidents table."""

    def __init__(self, config: Config, say, stopped: Container[str] = frozenset()) -> None:  # noqa: ANN001
        self.path = f"{config.delta.path}/incidents"
        self.push = config.alert_push
        self.say = say
        self.stopped = stopped
        self.open: dict[str, dict] = {}
        self.causes: dict[str, str] = {}  # the cause last said, per open incident
        # incidents said resolved: one open again was resolved on its window's first
        # samples, and the rest of that window saw the condition again (same run, same id)
        self.resolved_ids: set[str] = set()
        self.opened = self.reopened = self.resolved = self.pages = 0

    def poll(self) -> None:
        from deltalake import DeltaTable

        try:
            rows = DeltaTable(self.path).to_pyarrow_table().to_pylist()
        except Exception:
            return  # no incident written yet
        for row in sorted(rows, key=lambda r: r["started_at"]):
            key, where = row["incident_id"], f"{row['cluster']}/{row['broker']}"
            kind = row["kind"].replace("_", "-")
            if row["resolved_at"] is None and key not in self.open:
                self.open[key] = row
                cause = (f"; broker {row['broker']} is one the fault cycle stopped"
                         if row["kind"] == "stale_broker" and row["broker"] in self.stopped
                         else "")
                if key in self.resolved_ids:
                    self.reopened += 1
                    self.say(f"INCIDENT reopened: {kind} on {where} "
                             f"({_magnitude(row['kind'], row['peak_value'])}): back within "
                             f"the window it resolved in, so one incident since "
                             f"{row['started_at']:%H:%M:%S}Z{cause}")
                else:
                    self.opened += 1
                    self.say(f"INCIDENT opened: {kind} on {where} "
                             f"({_magnitude(row['kind'], row['peak_value'])}) since "
                             f"{row['started_at']:%H:%M:%S}Z{cause}")
                self._page(row)
            if row["resolved_at"] is None and row.get("cause") and \
                    self.causes.get(key) != row["cause"]:
                self.causes[key] = row["cause"]
                self.say(f"CAUSE of {kind} on {where} (Admin API): {row['cause']}; the page "
                         "names them")
            elif row["resolved_at"] is not None and key in self.open:
                del self.open[key]
                self.causes.pop(key, None)
                self.resolved_ids.add(key)
                self.resolved += 1
                lasted = (row["resolved_at"] - row["started_at"]).total_seconds()
                self.say(f"RESOLVED: {kind} on {where} after {_duration(lasted)}")

    def _page(self, row: dict) -> None:
        from streaming.paging import ALERTNAMES

        alertname = ALERTNAMES.get(row["kind"])
        if alertname is None:
            return  # a warning-grade incident: dashboards and tickets, no page
        self.pages += 1
        dedup = f"dedup: one PagerDuty incident per alertname+cluster, {alertname} {row['cluster']}"
        if self.push.urls() and row["kind"] in self.push.kinds:
            self.say(f"PAGE sent: {alertname} (critical) pushed to Alertmanager by the "
                     f"job ({dedup})")
        else:
            self.say(f"PAGE: {alertname} (critical) fires from the Prometheus rule -> "
                     f"Alertmanager -> PagerDuty ({dedup}; no Alertmanager runs in this demo)")


class DemoNarration:
    """The demo's voice while it runs, on its own thread: incidents as they open and resolve,
    and a status line every `status_every` seconds (records/s, source lag, open incidents)."""

    def __init__(self, job, exporter, narrator: IncidentNarrator, say,  # noqa: ANN001
                 producer: AcksAllProducer | None = None, status_every: float = 10.0,
                 poll_every: float = 2.0, clients: ClientsNarrator | None = None) -> None:
        self.job, self.narrator, self.say, self.producer = job, narrator, say, producer
        self.clients = clients
        self.registry = exporter.registry
        self.status_every, self.poll_every = status_every, poll_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-narration", daemon=True)
        self._records = 0.0
        self._since = time.monotonic()

    def start(self) -> DemoNarration:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.narrator.poll()

    def _run(self) -> None:
        due = time.monotonic() + self.status_every
        while not self._stop.wait(self.poll_every):
            try:
                self.narrator.poll()
                if self.clients is not None:
                    self.clients.poll()
                if time.monotonic() >= due:
                    due = time.monotonic() + self.status_every
                    self.say(self.status())
            except Exception as err:  # the narration is a view; the demo goes on without it
                self.say(f"narration: {err}")

    def status(self) -> str:
        now = time.monotonic()
        total = self.registry.get_sample_value(metric.PIPELINE_INPUT_RECORDS_TOTAL) or 0.0
        rate = (total - self._records) / max(now - self._since, 1e-9)
        self._records, self._since = total, now
        lag = self.registry.get_sample_value(metric.PIPELINE_SOURCE_LAG_RECORDS)
        line = (f"status: {rate:,.0f} records/s, lag {'?' if lag is None else f'{lag:,.0f}'} "
                f"records, {len(self.narrator.open)} open incident(s)")
        if self.producer is not None:
            line += (f", producer {self.producer.delivered} delivered / "
                     f"{self.producer.refused} refused")
        return line


def summary(narrator: IncidentNarrator, config: Config, data: Path) -> str:
    """The end of a demo: what happened, the HTML report (written now) and the tables."""
    from streaming.pipeline.tables import TABLES
    from streaming.report import write_report

    try:
        report = f"report   {write_report(config.delta.path, str(data / 'report'))}"
    except Exception as err:  # the tables are still there to look at
        report = f"report   not written ({err})"
    reopened = f", {narrator.reopened} reopened" if narrator.reopened else ""
    return (f"\nsummary: {narrator.opened} incident(s) opened{reopened}, {narrator.resolved} "
            f"resolved, {narrator.pages} page(s)\n  {report}\n"
            f"  tables   {config.delta.path}/{{{','.join(TABLES)}}}\n"
            f"  again    kafka-health report --delta {config.delta.path} --out {data / 'report'}\n")


def batch_printer(args: argparse.Namespace) -> Callable[[str], None] | None:
    """The job's line per micro-batch (step timings) only with -v: the status line is enough
    to follow the demo."""
    return print if args.verbosity >= 1 else None


def say(text: str) -> None:
    """One narration line, stamped with the wall clock."""
    print(f"{time.strftime('%H:%M:%S')}  {text}", flush=True)


# The demo polls its watched cluster's Admin API more often than production's 30 s, so a
# fault's cause shows within seconds of the incident.
DEMO_METADATA_INTERVAL = 10.0
DEMO_METADATA_TIMEOUT = 5.0


def demo_config(args: argparse.Namespace, bootstrap: str, data: Path,
                watched: str | None = None) -> Config:
    """The demo's config: --config if given, the environment's overrides, then the demo's
    own keys (the metrics topic, the data folder, the /metrics port) on top; with `watched`
    (the watched cluster's bootstrap; a simulated one has none) the Admin API poller, the
    durability probe and the consumer-group poller of that cluster too."""
    environ = {
        **os.environ,
        "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA_HEALTH__SOURCE__TOPICS": json.dumps([{"name": args.topic, "format": "jolokia"}]),
        "KAFKA_HEALTH__SPARK__CHECKPOINT": str(data / "checkpoint"),
        "KAFKA_HEALTH__DELTA__PATH": str(data / "delta"),
        "KAFKA_HEALTH__EXPORTER__PORT": str(args.metrics_port),
        "KAFKA_HEALTH__SIGNALS__SCRAPE_INTERVAL_SECONDS": str(args.scrape_interval),
    }
    if watched is not None:
        environ.update({
            "KAFKA_HEALTH__METADATA__ENABLED": "true",
            "KAFKA_HEALTH__METADATA__INTERVAL_SECONDS": str(DEMO_METADATA_INTERVAL),
            "KAFKA_HEALTH__METADATA__TIMEOUT_SECONDS": str(DEMO_METADATA_TIMEOUT),
            "KAFKA_HEALTH__METADATA__CLUSTERS": json.dumps(
                {args.cluster: {"bootstrap_servers": watched}}),
            "KAFKA_HEALTH__PROBE__ENABLED": "true",
            "KAFKA_HEALTH__PROBE__WINDOW_SECONDS": "10",
            "KAFKA_HEALTH__CONSUMER_GROUPS__ENABLED": "true",
            "KAFKA_HEALTH__CONSUMER_GROUPS__INTERVAL_SECONDS": str(DEMO_METADATA_INTERVAL),
            "KAFKA_HEALTH__CONSUMER_GROUPS__TIMEOUT_SECONDS": str(DEMO_METADATA_TIMEOUT),
        })
    return load_config(args.config, environ=environ)


def run_real_demo(args: argparse.Namespace) -> int:
    """The real test bed end to end, narrated: clusters, shipper, acks=all producer, the job
    on local Spark, and a cycle of real faults."""
    from streaming.exporter import Exporter
    from streaming.job import Job

    stop = stop_on_signals()
    data = Path(args.data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    metrics = metrics_cluster(data / "kafka" / "metrics")
    watched = KafkaCluster(3, data / "kafka" / "watched", broker_only=2)
    shipper = producer = late_reader = job = narration = None
    threads: list[threading.Thread] = []
    try:
        say("starting the metrics cluster (1 Kafka node) and the watched cluster (3 KRaft "
            "nodes broker+controller, 2 broker-only; Jolokia and jmx_exporter agents)")
        metrics.start()
        watched.start()
        create_topic(metrics.bootstrap, args.topic, partitions=3)
        # on node 1 and the broker-only nodes 4 and 5, so the faults (4 and 5) leave the
        # controller quorum (1-3) whole
        create_topic(watched.bootstrap, ORDERS, config={"min.insync.replicas": "2"},
                     assignment=[[1, 4, 5], [4, 5, 1], [5, 1, 4]] * 2)
        config = demo_config(args, metrics.bootstrap, data, watched=watched.bootstrap)
        shipper = Shipper(targets(watched), args.cluster, metrics.bootstrap,
                          jolokia_topic=args.topic, prometheus_topic=None,
                          interval=args.scrape_interval).start()
        producer = AcksAllProducer(watched.bootstrap, say).start()
        late_reader = LateReader(watched.bootstrap).start()
        exporter = Exporter(config=config.exporter)
        exporter.start(config.exporter.bind, config.exporter.port)
        job = Job(config, exporter=exporter, printer=batch_printer(args))
        job.start()
        print(f"""
kafka-health demo (Ctrl-C stops everything)
  watched    Kafka {watched.bootstrap}, topic {ORDERS} (RF 3, min.insync.replicas 2),
             an acks=all producer
  shipper    Jolokia bulk reads every {args.scrape_interval:g}s -> {metrics.bootstrap} {args.topic}
  Admin API  polled every {config.metadata.interval_seconds:g}s: the brokers behind a fault
             (the incident's cause, on the page), the durability audit
  probe      acks=all writes through every broker, read back ({config.probe.topic})
  groups     {LATE_GROUP} reads {LATE_TOPIC} (kept {LATE_RETENTION_MS // 1000}s) once and stops:
             retention deletes what it has not read, a loss to retention
  job        local Spark; Delta under {config.delta.path}
  /metrics   http://{config.exporter.bind}:{config.exporter.port}/metrics
  faults     every {args.fault_period:g}s: a follower stopped, a second broker killed, both back
""", flush=True)
        stopped: set[str] = set()
        narrator = IncidentNarrator(config, say, stopped)
        narration = DemoNarration(job, exporter, narrator, say, producer,
                                  clients=ClientsNarrator(config, say)).start()
        cycle = threading.Thread(target=fault_cycle, name="faults", daemon=True,
                                 args=(watched, say, stop, args.fault_period, stopped))
        threads.append(cycle)
        cycle.start()
        if args.duration:
            timer = threading.Timer(args.duration, stop.set)
            timer.daemon = True  # a stop by signal must not wait out the duration
            timer.start()
        while not stop.wait(1.0):
            if not job.query.isActive:
                say(f"the job stopped: {job.query.exception()}")
                return 1
        say("stopping")
        narration.stop()
        narration = None
        print(summary(narrator, config, data) + f"""\
  producer {producer.delivered} acks=all writes delivered, {producer.refused} refused \
(NOT_ENOUGH_REPLICAS, or timed out while a broker went away)
""", flush=True)
        return 0
    finally:
        stop.set()
        if narration:
            narration.stop()
        if job:
            job.stop()
            job.spark.stop()  # its Kafka clients, before the brokers they talk to
        if producer:
            producer.stop()
        if late_reader:
            late_reader.stop()
        if shipper:
            shipper.stop()
        watched.stop()
        metrics.stop()
