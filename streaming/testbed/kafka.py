"""Real Apache Kafka on loopback: KRaft nodes in combined broker+controller mode.

`KafkaCluster(size=3)` is the *watched* cluster of the test bed (each node with the Jolokia
and jmx_exporter Java agents attached); `KafkaCluster(size=1, agents=False)` is the
*metrics* cluster that holds the metrics topics. Storage is formatted by Kafka's own
`kafka.tools.StorageTool`; every process is started in its own session and stopped at
interpreter exit.

`KafkaCluster(..., sasl=SaslPlain(...))` secures a cluster: SASL/PLAIN on every listener
and ACLs enforced by KRaft's StandardAuthorizer, for the tests of what a client without
the rights sees (tests/real_kafka/test_metadata_unauthorized.py).

TEST-BED SETTINGS (never copy them to production): faults show within seconds instead of
Kafka's defaults of tens of seconds: `replica.lag.time.max.ms` 3 s (default 30 s), broker
session timeout 6 s (default 9 s), controller election timeout 1 s, 1 MiB segments, retention
checked every 2 s, and small heaps.
"""

from __future__ import annotations

import atexit
import base64
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import ClassVar

from streaming.runtime.class_archive import dump_options, kafka_archive_path, options_for
from streaming.runtime.jvm import agent_jar, classpath, java
from streaming.testbed.secured import SecuredKafka

LOG = logging.getLogger("kafka_health.testbed")

# Test-bed settings: what makes faults fast, documented in docs/getting-started.md (the test bed).
FAST_FAULTS = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "broker.heartbeat.interval.ms": "500",
    # Above replica.lag.time.max.ms, so that a leader may drop a frozen or crashed follower
    # before the controller fences it. It does so only where the partition took writes
    # meanwhile (a follower at the leader's log end counts as caught up however long it is
    # silent: kafka.cluster.Replica.isCaughtUp); in the fault tests the controller's fencing
    # removed every replica first (IsrShrinksPerSec increase 0, IsrExpandsPerSec 5-6 back).
    "broker.session.timeout.ms": "6000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "log.segment.bytes": str(1024 * 1024),
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "leader.imbalance.check.interval.seconds": "30",
    # Retention deletes expired segments within seconds (default: checked every 5 minutes),
    # for the consumer groups' loss to retention.
    "log.retention.check.interval.ms": "2000",
}
HEAP = ["-Xms96m", "-Xmx384m"]
# Client-grade JIT and one GC thread: four JVMs share two cores with Spark.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=2",
             "-Djava.awt.headless=true"]
LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class KafkaError(RuntimeError):
    """A node did not start or stop as asked; the message names its log file."""


def jmx_exporter_rules() -> Path:
    """The jmx_exporter agent's rules, the file the package carries. The agent reads it by
    path; the test bed runs from an installed package or a checkout, where package data are
    files on disk."""
    rules = files("streaming.testbed") / "jmx_exporter_rules.yaml"
    if not isinstance(rules, Path) or not rules.is_file():
        raise KafkaError(f"the jmx_exporter rules {rules} are not a file on disk: run the test "
                         "bed from an installed kafka-health or a checkout")
    return rules


@dataclass(frozen=True)
class SaslPlain:
    """SASL/PLAIN authentication on every listener of a cluster, with ACLs enforced.

    Why every listener, the controller's too: with an authorizer, a combined node's broker
    registers and heartbeats over the controller listener, and those requests need
    ClusterAction; over PLAINTEXT they would come from User:ANONYMOUS. Here they come from
    the super user, as inter-broker requests do, and every other user has only the ACLs a
    test creates (none at first: `allow.everyone.if.no.acl.found` stays false).

    PLAIN keeps the users in the JAAS settings of the listeners (no SCRAM credentials to
    bootstrap into the metadata log at format time). The passwords are written to the
    nodes' server.properties: a test bed's, in its temporary directory, nowhere else.
    """

    users: Mapping[str, str] = field(repr=False)  # user name -> password
    super_user: str = "admin"
    mechanism: ClassVar[str] = "PLAIN"
    authorizer: ClassVar[str] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

    def __post_init__(self) -> None:
        if self.super_user not in self.users:
            raise ValueError(f"super user {self.super_user!r} needs a password in `users`")

    def broker_settings(self, listeners: Iterable[str]) -> dict[str, str]:
        """server.properties entries: the mechanism, each listener's JAAS (the super user
        as the node's own identity, every user as an accepted login), the authorizer."""
        accepted = " ".join(f'user_{name}="{pw}"' for name, pw in self.users.items())
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{self.super_user}" password="{self.users[self.super_user]}" '
                f"{accepted};")
        return {
            "sasl.enabled.mechanisms": self.mechanism,
            "sasl.mechanism.inter.broker.protocol": self.mechanism,
            "sasl.mechanism.controller.protocol": self.mechanism,
            **{f"listener.name.{name.lower()}.{self.mechanism.lower()}.sasl.jaas.config": jaas
               for name in listeners},
            "authorizer.class.name": self.authorizer,
            "super.users": f"User:{self.super_user}",
            "allow.everyone.if.no.acl.found": "false",
        }

    def client_settings(self, user: str | None = None) -> dict[str, str]:
        """librdkafka settings that log in as `user` (the super user by default)."""
        user = user or self.super_user
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": self.mechanism,
                "sasl.username": user, "sasl.password": self.users[user]}


_HANDED_OUT: set[int] = set()  # ports free_port() gave in this process


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 unless configured)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback port that is free now, for a server that binds it later, from below the
    kernel's ephemeral range and never one this process gave before. Why not bind(0): that
    hands out an ephemeral port, the pool every outgoing connection's local port comes
    from, so in the seconds before a Kafka node (or Prometheus) binds it a client
    connection could take it and the server would exit with "Address already in use"."""
    low = _ephemeral_low()
    chooser = random.SystemRandom()
    for _ in range(200) if low > 11_000 else ():
        port = chooser.randint(10_000, low - 1)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket() as sock:  # a kernel whose ephemeral range starts low
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _HANDED_OUT.add(port)
    return port


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def port_open(port: int) -> bool:
    """Whether something accepts connections on the loopback port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class KafkaNode:
    """One KRaft node (broker and controller in one JVM)."""

    node_id: int
    directory: Path
    roles: str = "broker,controller"
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    jolokia_port: int | None = None
    jmx_exporter_port: int | None = None
    sasl: SaslPlain | None = None
    # SCRAM over TLS and a mutual-TLS listener on `mtls_port` (streaming.testbed.secured)
    secured: SecuredKafka | None = None
    mtls_port: int | None = None
    process: subprocess.Popen[bytes] | None = None
    # Where this node's JVM writes a class-data archive at its exit (the archive builder's
    # node, streaming/testbed/class_archive.py); others map the one built, if any.
    archive_to: Path | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def jolokia_url(self) -> str | None:
        return f"http://127.0.0.1:{self.jolokia_port}/jolokia/" if self.jolokia_port else None

    @property
    def jmx_exporter_url(self) -> str | None:
        return (f"http://127.0.0.1:{self.jmx_exporter_port}/metrics"
                if self.jmx_exporter_port else None)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_evidence(self, first_errors: int = 6, last: int = 5) -> str:
        """Why a node that exited did, for the error itself (a test's temporary directory
        is gone once it ends): the first ERROR and exception lines of its logs, where
        Kafka names the cause, and their last lines."""
        found = []
        for path in (self.directory / "stdout.log", self.log_path):
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            errors = [line for line in lines
                      if " ERROR " in line or " FATAL " in line or "Exception:" in line]
            found.append(f"--- {path.name}\n" + "\n".join(
                [*errors[:first_errors], "...", *lines[-last:]] if errors else lines[-last:]))
        return "\n".join(found)

    def write_config(self, voters: str, settings: dict[str, str]) -> Path:
        # The client listener is named after its protocol; with `sasl` the controller's
        # listener authenticates too (see SaslPlain).
        protocol = "SASL_PLAINTEXT" if self.sasl else "PLAINTEXT"
        listeners = f"{protocol}://127.0.0.1:{self.port}"
        if "controller" in self.roles:
            listeners += f",CONTROLLER://127.0.0.1:{self.controller_port}"
        props = {
            "process.roles": self.roles,
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": f"{protocol}://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": protocol,
            "listener.security.protocol.map": f"CONTROLLER:{protocol},{protocol}:{protocol}",
            "log.dirs": str(self.directory / "data"),
            **(self.sasl.broker_settings([protocol, "CONTROLLER"]) if self.sasl else {}),
            **(self.secured.node_properties(self.port, self.mtls_port or 0, self.controller_port,
                                            "controller" in self.roles)
               if self.secured else {}),
            **settings,
        }
        path = self.directory / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.directory / "log4j2.properties").write_text(LOG4J.format(path=self.log_path))
        return path

    def format_storage(self, cluster_id: str) -> None:
        """Kafka's own format step; skipped when the log dir is formatted already."""
        if (self.directory / "data" / "meta.properties").exists():
            return
        result = subprocess.run(
            [java(), *HEAP, *JVM_FLAGS, *options_for(kafka_archive_path()),
             "-cp", classpath("kafka"),
             f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
             # --cluster-id=: an id is URL-safe base64, and one starting with "-" given as
             # a separate argument reads as an option (argparse: "expected one argument")
             "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
             "-c", str(self.directory / "server.properties"),
             *(self.secured.format_arguments() if self.secured else [])],
            capture_output=True, text=True, timeout=120,
        )
        if result.returncode != 0:
            raise KafkaError(f"formatting node {self.node_id} failed: "
                             f"{(result.stdout + result.stderr)[-1500:]}")

    def start(self) -> None:
        if self.running():
            return
        agents: list[str] = []
        if self.jolokia_port:
            agents.append(f"-javaagent:{agent_jar('jolokia')}=port={self.jolokia_port},"
                          "host=127.0.0.1,discoveryEnabled=false")
        if self.jmx_exporter_port:
            agents.append(f"-javaagent:{agent_jar('jmx-exporter')}="
                          f"127.0.0.1:{self.jmx_exporter_port}:{jmx_exporter_rules()}")
        sharing = (dump_options(self.archive_to) if self.archive_to
                   else options_for(kafka_archive_path()))
        out = open(self.directory / "stdout.log", "ab")  # noqa: SIM115 (the child keeps it)
        self.process = subprocess.Popen(
            [java(), *HEAP, *JVM_FLAGS, *sharing, *agents,
             f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
             f"-Dkafka.logs.dir={self.directory}",
             "-cp", classpath("kafka"), "kafka.Kafka", str(self.directory / "server.properties")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        out.close()

    def signal(self, sig: signal.Signals) -> None:
        if self.running():
            assert self.process is not None
            os.kill(self.process.pid, sig)

    def stop(self, timeout: float = 20.0) -> None:
        """A clean stop (SIGTERM: Kafka's controlled shutdown), SIGKILL past the timeout."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGCONT)  # a frozen node cannot handle SIGTERM
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            LOG.warning("node %d did not stop within %.0fs; killing it", self.node_id, timeout)
            proc.kill()
            proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL: a crash, no controlled shutdown."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


class KafkaCluster:
    """`size` KRaft nodes in combined broker+controller mode (ids 1..size) and
    `broker_only` nodes that are brokers alone (ids after them), on loopback; a context
    manager. With `sasl` every listener needs a SASL/PLAIN login and ACLs are enforced;
    `client_config()` holds the settings of a client that logs in.

    The broker-only nodes are where faults that take two brokers down belong: with three
    combined nodes, a second stopped broker is also a second lost controller voter, the
    quorum is gone, and with it every ISR change (a leader cannot shrink its ISR without
    the controller), so under min ISR never shows. `agents=True` attaches the Jolokia and
    jmx_exporter agents to every node (the watched cluster); the metrics cluster runs
    without them. `directory` keeps the data (a temporary one, removed on exit, when not
    given).
    """

    def __init__(self, size: int = 3, directory: str | Path | None = None, agents: bool = True,
                 settings: dict[str, str] | None = None, name: str = "watched",
                 broker_only: int = 0, sasl: SaslPlain | None = None,
                 secured: SecuredKafka | None = None) -> None:
        self.name = name
        self.sasl = sasl
        self.secured = secured
        self._tmp = None if directory else tempfile.mkdtemp(prefix=f"kafka-health-{name}-")
        self.directory = Path(directory or self._tmp or "")
        self.cluster_id = _cluster_id()
        self._exit_hook = False
        replicas = str(min(size, 3))
        self.settings = {
            **FAST_FAULTS,
            "num.partitions": "1",
            "default.replication.factor": replicas,
            "min.insync.replicas": str(min(size, 2)),
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": str(min(size, 2)),
            **(settings or {}),
        }
        self.nodes = [
            KafkaNode(node_id=i, directory=self.directory / f"node-{i}",
                      roles="broker,controller" if i <= size else "broker",
                      jolokia_port=free_port() if agents else None,
                      jmx_exporter_port=free_port() if agents else None, sasl=sasl,
                      secured=secured, mtls_port=free_port() if secured else None)
            for i in range(1, size + broker_only + 1)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def client_config(self, user: str | None = None) -> dict[str, str]:
        """librdkafka settings of a client of this cluster: the bootstrap servers, and on a
        `sasl` or `secured` cluster the login of `user` (the super user by default)."""
        login = (self.sasl.client_settings(user) if self.sasl
                 else self.secured.client_settings(user) if self.secured else {})
        return {"bootstrap.servers": self.bootstrap, **login}

    @property
    def mtls_bootstrap(self) -> str:
        """The mutual-TLS listeners of a `secured` cluster."""
        return ",".join(f"127.0.0.1:{node.mtls_port}" for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        """Format what is not formatted yet (a fresh cluster id when nothing is) and start
        every node on its ports, waiting until all brokers are registered."""
        if not any((n.directory / "data" / "meta.properties").exists() for n in self.nodes):
            self.cluster_id = _cluster_id()
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes
                          if "controller" in n.roles)
        if self.secured:
            self.secured.prepare(self.directory)
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            node.write_config(voters, self.settings)
            node.format_storage(self.cluster_id)
        if not self._exit_hook:
            atexit.register(self.stop)
            self._exit_hook = True
        started = time.monotonic()
        for node in self.nodes:
            node.start()
        self.wait_brokers([n.node_id for n in self.nodes], timeout)
        LOG.info("%s cluster of %d node(s) up on %s in %.1fs", self.name, len(self.nodes),
                 self.bootstrap, time.monotonic() - started)
        return self

    def alive_brokers(self) -> set[int]:
        """Broker ids the cluster's metadata lists now (registered and unfenced)."""
        from confluent_kafka.admin import AdminClient

        live = [n.bootstrap for n in self.nodes if n.running() and port_open(n.port)]
        if not live:
            return set()
        admin = AdminClient({**self.client_config(), "bootstrap.servers": ",".join(live)})
        try:
            return {b.id for b in admin.list_topics(timeout=3).brokers.values()}
        except Exception:
            return set()

    def wait_brokers(self, ids: Iterable[int], timeout: float = 60.0) -> None:
        wanted = set(ids)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.node_id in wanted and node.process and node.process.poll() is not None:
                    raise KafkaError(f"{self.name} node {node.node_id} exited with code "
                                     f"{node.process.returncode}; see {node.log_path} and "
                                     f"{node.directory / 'stdout.log'}:\n{node.exit_evidence()}")
            if wanted <= self.alive_brokers():
                return
            time.sleep(0.3)
        raise KafkaError(f"{self.name} brokers {sorted(wanted)} not all up within "
                         f"{timeout:.0f}s; see the server.log files under {self.directory}")

    def stop(self, keep_data: bool = False) -> None:
        """Stop every node (all at once: a lone survivor would wait for a lost quorum).

        The data goes unless `keep_data`: a temporary directory is removed, a given one
        has its nodes' folders removed, so the next start() is a new, empty cluster on
        the same ports."""
        for node in self.nodes:
            if node.running():
                node.signal(signal.SIGCONT)
                node.signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.kill()
        if not keep_data:
            for node in self.nodes:
                shutil.rmtree(node.directory, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


def metrics_cluster(directory: str | Path | None = None, port: int | None = None,
                    secured: SecuredKafka | None = None) -> KafkaCluster:
    """The single-node cluster that holds the metrics topics (no agents: nobody watches it
    through its own JMX here), on `port` when given, `secured` when given."""
    cluster = KafkaCluster(size=1, directory=directory, agents=False, name="metrics",
                           secured=secured)
    if port:
        cluster.nodes[0].port = port
    return cluster


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication: int = 1,
                 config: dict[str, str] | None = None,
                 assignment: list[list[int]] | None = None,
                 client_config: Mapping[str, str] | None = None) -> None:
    """Create a topic if missing and wait until every partition has a leader.
    `assignment` places each partition's replicas (the first is its preferred leader) and
    then sets the partition count and replication factor. `client_config` adds client
    settings (a secured cluster's login: `KafkaCluster.client_config()`)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**(client_config or {}), "bootstrap.servers": bootstrap})
    if assignment:
        partitions = len(assignment)
        topic = NewTopic(name, num_partitions=partitions, replication_factor=-1,
                         replica_assignment=assignment, config=config or {})
    else:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication,
                         config=config or {})
    futures = admin.create_topics([topic])
    for future in futures.values():
        try:
            future.result(timeout=30)
        except Exception as err:
            if "TOPIC_ALREADY_EXISTS" not in str(err):
                raise
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=5).topics.get(name)
        if meta and meta.error is None and len(meta.partitions) == partitions and all(
                p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.2)
    raise KafkaError(f"topic {name} has no leader for every partition after 30s")
