"""The Admin API poller against a real secured KRaft node: what a monitoring user without
the rights it needs sees, on the gauges, and that it recovers once granted them.

One node (broker+controller) with SASL/PLAIN on every listener and KRaft's
StandardAuthorizer: `admin` is the super user (also the node's own identity on the
inter-broker and controller listeners), `reader` and `nobody` monitoring users. `reader`
may Describe every topic but not DescribeConfigs them, so the Metadata request lists
`orders` and the poll's DescribeConfigs is refused (TOPIC_AUTHORIZATION_FAILED). `nobody`
has no ACL at all: the Metadata request silently lists no topic, and DescribeCluster
withholds the cluster's authorized operations, so the poll reports it cannot see instead
of auditing an empty cluster. The super user, on the node before `orders` exists, polls a
genuinely empty cluster: up.

The poller is built the way the job builds it: a config file's `metadata.clusters`
section (the password in a secret file) through `MetadataService`, whose handler puts
every poll on the exporter's gauges, read here from its CollectorRegistry. Every wait has
a deadline. The node is stopped at the end of the module.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from prometheus_client import CollectorRegistry, generate_latest

from streaming.config import Config, load_config
from streaming.exporter import Exporter
from streaming.metadata import MetadataPoller, PollerSettings, export_poll
from streaming.metadata.admin import BLIND
from streaming.metadata.health import UNAUTHORIZED
from streaming.metadata.service import MetadataService
from streaming.testbed.kafka import KafkaCluster, SaslPlain, create_topic
from tests.conftest import wait_for

CLUSTER = "secured"
READER, NOBODY = "reader", "nobody"
# Fresh passwords per run, so finding one in a log can only mean it leaked from here.
SASL = SaslPlain({"admin": f"admin-{secrets.token_hex(8)}",
                  READER: f"reader-{secrets.token_hex(8)}",
                  NOBODY: f"nobody-{secrets.token_hex(8)}"})
INTERVAL, TIMEOUT = 2.0, 1.8  # seconds (production: 30 and 10)
UP = "kafka_health_metadata_up"
ERROR = "kafka_health_metadata_error"


@pytest.fixture(scope="module")
def node() -> Iterator[KafkaCluster]:
    """The node without topics (tests run in file order: the empty cluster's first)."""
    with KafkaCluster(size=1, agents=False, name="secured", sasl=SASL) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def secured(node: KafkaCluster) -> KafkaCluster:
    """The node with `orders`."""
    create_topic(node.bootstrap, "orders", client_config=node.client_config())
    return node


def _config(cluster: KafkaCluster, root: Path, password: str, user: str = READER) -> Config:
    """The job's config as an operator writes it: the login under `kafka`, the password in
    a secret file."""
    secret = root / f"{user}.password"
    secret.write_text(password + "\n")
    data = {
        "delta": {"path": str(root / "delta")},
        "metadata": {
            "enabled": True, "interval_seconds": INTERVAL, "timeout_seconds": TIMEOUT,
            "clusters": {CLUSTER: {
                "bootstrap_servers": cluster.bootstrap,
                "kafka": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                          "sasl.username": user},
                "secrets": {"sasl.password": {"file": str(secret)}},
            }},
        },
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path, environ={})


def _allow(admin: AdminClient, operation: AclOperation) -> None:
    """`reader` may `operation` every topic (the admin's CreateAcls, as kafka-acls does)."""
    binding = AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL,
                         f"User:{READER}", "*", operation, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(timeout=30)


def _series(registry: CollectorRegistry, name: str) -> dict[tuple[str, ...], float]:
    """The gauge's samples of this module's cluster, by their labels after `cluster`."""
    return {tuple(v for k, v in sorted(s.labels.items()) if k != "cluster"): s.value
            for family in registry.collect() if family.name == name
            for s in family.samples if s.labels.get("cluster") == CLUSTER}


def _thread(cluster: str) -> threading.Thread | None:
    return next((t for t in threading.enumerate()
                 if t.name == f"kafka-health-metadata-{cluster}"), None)


def test_an_empty_cluster_polled_by_the_super_user_is_up(node: KafkaCluster) -> None:
    """Nothing to list, and the poller's principal may describe the cluster: the cluster
    is empty, not hidden."""
    assert not AdminClient(node.client_config()).list_topics(timeout=10).topics, (
        "runs on the node before `orders` is created")
    poller = MetadataPoller(CLUSTER, node.client_config(), PollerSettings(INTERVAL, TIMEOUT))
    result = poller.poll_once()
    assert (result.health.up, result.health.error) == (True, None)
    assert result.snapshot.topics == {} and list(result.snapshot.brokers) == [1]


def test_an_acl_refusing_describe_configs_is_unauthorized_until_granted(
        secured: KafkaCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, librdkafka's too
    escaped: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)
    admin = AdminClient(secured.client_config())
    _allow(admin, AclOperation.DESCRIBE)
    # CreateAcls returns once the controller has committed the ACL; the broker's authorizer
    # applies it from the metadata log a moment later. Until then `reader` sees no topic and
    # the poll is refused for the cluster, not for the configs this test is about.
    reader = AdminClient(secured.client_config(READER))
    wait_for(lambda: "orders" in reader.list_topics(timeout=10).topics, 30,
             "the broker applying reader's Describe")

    registry = CollectorRegistry()
    service = MetadataService(_config(secured, tmp_path, SASL.users[READER]),
                              Exporter(registry))
    service.start("it-unauthorized")
    try:
        poller = service.pollers[0]
        wait_for(lambda: poller.health.failures >= 1
                 and _series(registry, ERROR) == {(UNAUTHORIZED,): 1.0}, 30,
                 "the first refused poll, exported")
        health = poller.health
        assert (health.up, health.error, health.error_code) == (
            False, UNAUTHORIZED, "TOPIC_AUTHORIZATION_FAILED")
        assert _series(registry, UP) == {(): 0.0}
        assert _series(registry, ERROR) == {(UNAUTHORIZED,): 1.0}
        # the thread lives on and polls again: a second refusal is recorded, same class
        wait_for(lambda: poller.health.failures >= 2, 30, "a second refused poll")
        assert _thread(CLUSTER) is not None and _thread(CLUSTER).is_alive()
        assert (poller.health.error, poller.health.consecutive_failures) == (UNAUTHORIZED, 2)
        assert poller.snapshot is None
        assert "poll failed (unauthorized): TOPIC_AUTHORIZATION_FAILED" in caplog.text

        _allow(admin, AclOperation.DESCRIBE_CONFIGS)
        # the health changes before the poll's gauges are set: wait for both
        wait_for(lambda: poller.health.up is True and _series(registry, UP) == {(): 1.0}, 30,
                 "a poll succeeding after the grant, exported")
        assert _series(registry, ERROR) == {}  # the error series is gone, not left at 1
        assert "orders" in poller.snapshot.topics
        assert poller.snapshot.topics["orders"].min_insync_replicas == 1
        assert f"answers again after {poller.health.failures} failed poll(s)" in caplog.text
        assert _thread(CLUSTER).is_alive()
    finally:
        service.stop()
    assert _thread(CLUSTER) is None
    assert escaped == []
    assert not [r for r in caplog.records if r.exc_info]  # nothing raised and logged either
    exported = generate_latest(registry).decode()
    for password in SASL.users.values():
        assert password not in caplog.text
        assert password not in exported
        assert password not in repr(poller.health)


def test_a_principal_without_any_acl_is_unauthorized_not_an_empty_cluster(
        secured: KafkaCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG)
    escaped: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)
    # What the broker gives `nobody`: no topic, though `orders` exists, and no rights on
    # the cluster.
    blind = AdminClient(secured.client_config(NOBODY))
    assert blind.list_topics(timeout=10).topics == {}
    described = blind.describe_cluster(include_authorized_operations=True,
                                       request_timeout=10).result(timeout=15)
    assert described.authorized_operations is None
    assert "orders" in AdminClient(secured.client_config()).list_topics(timeout=10).topics

    registry = CollectorRegistry()
    service = MetadataService(_config(secured, tmp_path, SASL.users[NOBODY], NOBODY),
                              Exporter(registry))
    service.start("it-no-acl")
    try:
        poller = service.pollers[0]
        wait_for(lambda: poller.health.failures >= 2, 30, "two refused polls")
        health = poller.health
        assert (health.up, health.error, health.error_code, health.consecutive_failures) == (
            False, UNAUTHORIZED, "CLUSTER_AUTHORIZATION_FAILED", health.failures)
        assert poller.snapshot is None  # never an empty cluster to audit
        assert _series(registry, UP) == {(): 0.0}
        assert _series(registry, ERROR) == {(UNAUTHORIZED,): 1.0}
        # never succeeded: no last success to show
        assert _series(registry, "kafka_health_metadata_last_success_timestamp_seconds") == {}
        assert _thread(CLUSTER) is not None and _thread(CLUSTER).is_alive()
        # a warning once, not once per poll
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
            f"metadata {CLUSTER}: poll failed (unauthorized): CLUSTER_AUTHORIZATION_FAILED: "
            f"{BLIND}"]
    finally:
        service.stop()
    assert _thread(CLUSTER) is None
    assert escaped == []
    assert not [r for r in caplog.records if r.exc_info]
    exported = generate_latest(registry).decode()
    for password in SASL.users.values():
        assert password not in caplog.text
        assert password not in exported


def test_a_refused_login_is_unauthorized(secured: KafkaCluster, tmp_path: Path,
                                         caplog: pytest.LogCaptureFixture) -> None:
    """A wrong password: the broker closes the connection after the SASL handshake, the
    request fails in transport, and the client's error callback says why."""
    caplog.set_level(logging.DEBUG)
    wrong = f"wrong-{secrets.token_hex(8)}"
    config = _config(secured, tmp_path, wrong)
    poller = MetadataPoller(CLUSTER, config.metadata.clusters[CLUSTER].client_config(
        f"metadata.clusters.{CLUSTER}"), PollerSettings(INTERVAL, TIMEOUT))
    first = poller.poll_once()
    assert (first.snapshot, first.health.up, first.health.error) == (None, False, UNAUTHORIZED)
    assert poller.poll_once().health.consecutive_failures == 2
    registry = CollectorRegistry()
    export_poll(Exporter(registry), poller.health, None, None)
    assert _series(registry, UP) == {(): 0.0}
    assert _series(registry, ERROR) == {(UNAUTHORIZED,): 1.0}
    # the log names the refused login first, not the transport failure it surfaced as
    assert "poll failed (unauthorized): _AUTHENTICATION: " in caplog.text, caplog.text
    assert poller.health.error_code == "_AUTHENTICATION"
    for password in (wrong, *SASL.users.values()):
        assert password not in caplog.text
        assert password not in repr(poller.health)
