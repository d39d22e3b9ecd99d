"""Real faults on the watched cluster, one function each, for the tests and the demo.

Each acts on real processes (SIGSTOP, SIGKILL, SIGTERM) or through the Admin API and waits
until Kafka itself shows the effect, so a caller can go straight to checking the pipeline.
"""

from __future__ import annotations

import base64
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from streaming.runtime.jvm import classpath, java
from streaming.testbed.kafka import KafkaCluster, KafkaError
from streaming.testbed.truth import Snapshot, active_controller, admin_snapshot

STOPS = ("clean", "kill", "freeze")


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:  # the cluster is mid-change; ask again
            pass
        time.sleep(0.5)
    raise KafkaError(f"timed out after {timeout:.0f}s waiting for {what}")


def live_bootstrap(cluster: KafkaCluster) -> str:
    return ",".join(n.bootstrap for n in cluster.nodes if n.running())


def snapshot(cluster: KafkaCluster) -> Snapshot:
    return admin_snapshot(live_bootstrap(cluster), internal=True)


def stop_broker(cluster: KafkaCluster, broker: int, how: str = "clean") -> None:
    """Stop a broker: `clean` (SIGTERM, controlled shutdown), `kill` (SIGKILL, a crash) or
    `freeze` (SIGSTOP: the process lives but answers nothing, like a long GC pause)."""
    node = cluster.node(broker)
    if how == "clean":
        node.stop()
    elif how == "kill":
        node.kill()
    elif how == "freeze":
        node.signal(signal.SIGSTOP)
    else:
        raise ValueError(f"how must be one of {STOPS}")


def start_broker(cluster: KafkaCluster, broker: int, timeout: float = 90.0) -> None:
    """Thaw a frozen broker or start a stopped one, and wait until it is registered again."""
    node = cluster.node(broker)
    if node.running():
        node.signal(signal.SIGCONT)
    else:
        node.start()
    cluster.wait_brokers([broker], timeout)


def wait_isr_without(cluster: KafkaCluster, broker: int, topic: str, timeout: float = 60) -> None:
    """Until no partition of `topic` has `broker` in its ISR (replica.lag.time.max.ms later)."""
    wait_until(lambda: all(broker not in p.isr for p in snapshot(cluster).partitions
                           if p.topic == topic), timeout, f"broker {broker} out of {topic}'s ISR")


def wait_fully_replicated(cluster: KafkaCluster, timeout: float = 120) -> None:
    """Until every partition's ISR is its whole replica set."""
    wait_until(lambda: all(len(p.isr) == len(p.replicas) and p.leader is not None
                           for p in snapshot(cluster).partitions), timeout,
               "every partition fully replicated")


def kill_active_controller(cluster: KafkaCluster, leader: int | None = None) -> int:
    """SIGKILL the KRaft quorum leader (`leader`, when the caller looked it up beforehand
    to kill at a chosen instant: the lookup starts a JVM, seconds on a loaded machine);
    returns its id once another node leads."""
    if leader is None:
        leader = active_controller(live_bootstrap(cluster))
    if leader is None:
        raise KafkaError("no active controller to kill")
    cluster.node(leader).kill()
    wait_until(lambda: active_controller(live_bootstrap(cluster)) not in (None, leader), 60,
               "a new active controller")
    return leader


def unclean_election(cluster: KafkaCluster, topic: str, leader: int, follower: int,
                     produce: Callable[[], None]) -> None:
    """An unclean leader election on `topic` (one partition, replicas [leader, follower],
    unclean.leader.election.enable=true, min.insync.replicas 1): the follower is stopped,
    records are written to the leader alone (`produce`), the leader is stopped, and the
    out-of-sync follower is started alone; the controller must elect it from outside the
    ISR. Returns once the follower leads. The leader stays stopped."""
    stop_broker(cluster, follower, "clean")
    wait_isr_without(cluster, follower, topic)
    produce()
    stop_broker(cluster, leader, "clean")
    start_broker(cluster, follower)
    wait_until(lambda: any(p.topic == topic and p.leader == follower
                           for p in snapshot(cluster).partitions), 120,
               f"broker {follower} elected leader of {topic} uncleanly")


def add_log_dir(cluster: KafkaCluster, broker: int, name: str = "data-2") -> Path:
    """Give `broker` a second log directory and restart it on both; returns the directory.
    The first stays where the KRaft metadata log is (metadata.log.dir defaults to the first
    entry), so failing the second leaves the broker registered. Nothing happens when the
    broker has it already."""
    node = cluster.node(broker)
    second = node.directory / name
    config = node.directory / "server.properties"
    lines = config.read_text().splitlines()
    dirs = next(line for line in lines if line.startswith("log.dirs=")).split("=", 1)[1]
    if str(second) in dirs.split(","):
        return second
    second.mkdir(exist_ok=True)
    # Formatted as Kafka's storage tool would: the first directory's meta.properties (node
    # and cluster id) with an id of its own; a broker refuses to start on an unformatted one.
    meta = (Path(dirs.split(",")[0]) / "meta.properties").read_text()
    directory_id = "-"
    while directory_id.startswith("-"):  # as Kafka's Uuid.randomUuid: never a leading "-"
        directory_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    (second / "meta.properties").write_text(
        re.sub(r"(?m)^directory\.id=.*$", f"directory.id={directory_id}", meta))
    config.write_text("".join(
        (f"log.dirs={dirs},{second}" if line.startswith("log.dirs=") else line) + "\n"
        for line in lines))
    node.stop()
    start_broker(cluster, broker)
    return second


def fail_log_dir(directory: Path) -> None:
    """A failed disk: the log directory is replaced by a file. Kafka notices at its next
    write there (the high-watermark checkpoint, every 5 s), takes the directory offline
    and, under KRaft, tells the controller, which takes its replicas offline while the
    broker stays registered."""
    directory.rename(directory.with_name(directory.name + ".failed"))
    directory.write_text("not a directory: a failed disk\n")


def repair_log_dir(cluster: KafkaCluster, broker: int, directory: Path) -> None:
    """The disk replaced with the data it had: the broker is stopped, the directory put
    back, and the broker started again (Kafka takes a failed directory back only at start)."""
    cluster.node(broker).stop()
    failed = directory.with_name(directory.name + ".failed")
    if failed.exists():
        if directory.is_file():
            directory.unlink()
        failed.rename(directory)
    start_broker(cluster, broker)


def set_feature(cluster: KafkaCluster, feature: str, level: int) -> None:
    """Finalize a cluster feature at `level` with Kafka's own kafka-features.sh (upgrade or
    downgrade), e.g. eligible.leader.replicas.version=0 to turn ELR (KIP-966) off."""
    result = subprocess.run(
        [java(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
         "-Dlog4j2.level=ERROR", "-cp", classpath("kafka"),
         "org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", live_bootstrap(cluster),
         "downgrade" if level == 0 else "upgrade", "--feature", f"{feature}={level}"],
        capture_output=True, text=True, timeout=60,
    )
    if result.returncode != 0:
        raise KafkaError(f"setting {feature}={level} failed: "
                         f"{(result.stdout + result.stderr)[-1000:]}")
