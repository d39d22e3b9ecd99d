"""The poller against a fake AdminClient: what it builds from the Admin API's answers, and
that every failure becomes reported state, classified, with no secret in the logs."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclOperation, ConfigSource

from streaming.metadata.admin import BLIND
from streaming.metadata.health import (
    MISCONFIGURED,
    TIMEOUT,
    UNAUTHORIZED,
    UNREACHABLE,
    classify,
    describe,
)
from streaming.metadata.poller import ATTEMPTS, MetadataPoller, PollerSettings, PollResult
from tests.conftest import wait_for

SECRET = "hunter2-very-secret"
CONFIG = {"bootstrap.servers": "kafka-1:9093", "security.protocol": "SASL_SSL",
          "sasl.mechanism": "PLAIN", "sasl.username": "monitor", "sasl.password": SECRET}


def _done(value: Any = None, error: BaseException | None = None) -> Future:
    future: Future = Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


def _entry(value: str, source: ConfigSource) -> SimpleNamespace:
    """A ConfigEntry as confluent-kafka returns it: the source as a plain int."""
    return SimpleNamespace(value=value, source=source.value)


class FakeAdmin:
    """Answers like confluent-kafka's AdminClient for a 3-broker cluster."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.racks: dict[int, str | None] = {1: "az-a", 2: "az-b", 3: None}
        self.partitions = {"orders": [(0, 1, [1, 2, 3], [1, 2]), (1, -1, [2, 3], [3])],
                           "empty-meta": []}
        self.configs = {"orders": {
            "min.insync.replicas": _entry("3", ConfigSource.DYNAMIC_TOPIC_CONFIG),
            "unclean.leader.election.enable": _entry("false", ConfigSource.DEFAULT_CONFIG),
            "retention.ms": _entry("1", ConfigSource.STATIC_BROKER_CONFIG)}}
        # What DescribeCluster lists when asked: the principal's rights on the cluster.
        self.cluster_operations: list[AclOperation] | None = [AclOperation.DESCRIBE]
        self.asked_operations: list[bool] = []  # include_authorized_operations, per call
        self.fail: dict[str, BaseException] = {}
        self.polled = 0

    def describe_cluster(self, request_timeout: float,
                         include_authorized_operations: bool = False) -> Future:
        self.asked_operations.append(include_authorized_operations)
        if "describe_cluster" in self.fail:
            return _done(error=self.fail["describe_cluster"])
        nodes = [SimpleNamespace(id=b, rack=r, host=f"kafka-{b}", port=9093)
                 for b, r in self.racks.items()]
        operations = self.cluster_operations if include_authorized_operations else None
        return _done(SimpleNamespace(nodes=nodes, controller=nodes[0],
                                     authorized_operations=operations))

    def list_topics(self, timeout: float) -> Any:
        if "list_topics" in self.fail:
            raise self.fail["list_topics"]
        topics = {name: SimpleNamespace(partitions={
            p: SimpleNamespace(id=p, leader=leader, replicas=replicas, isrs=isr)
            for p, leader, replicas, isr in parts}) for name, parts in self.partitions.items()}
        return SimpleNamespace(topics=topics)

    def describe_configs(self, resources: list, request_timeout: float) -> dict:
        out = {}
        for resource in resources:
            error = self.fail.get(f"configs:{resource.name}")
            out[resource] = _done(self.configs.get(resource.name), error)
        return out

    def poll(self, timeout: float) -> int:
        self.polled += 1
        return 0


def kafka(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


def make(**kwargs: Any) -> tuple[MetadataPoller, list[FakeAdmin]]:
    """A poller whose clients all fail as `built[0].fail` says: the cluster fails so,
    through whichever broker a new client reaches."""
    built: list[FakeAdmin] = []

    def factory(config: dict[str, Any]) -> FakeAdmin:
        built.append(FakeAdmin(config))
        if len(built) > 1:
            built[-1].fail = built[0].fail
        return built[-1]

    poller = MetadataPoller("prod", CONFIG, PollerSettings(interval_seconds=0.05,
                                                           timeout_seconds=1),
                            admin_factory=factory, clock=lambda: 1_767_614_400.0, **kwargs)
    return poller, built


def test_a_poll_builds_the_snapshot() -> None:
    poller, built = make()
    result = poller.poll_once()
    assert result.health.up is True and result.health.error is None
    snap = result.snapshot
    assert snap is not None and poller.snapshot is snap
    assert {b.id: b.rack for b in snap.brokers.values()} == {1: "az-a", 2: "az-b", 3: None}
    assert snap.controller == 1
    assert list(snap.topics) == ["orders"]  # a topic without partitions is left out
    orders = snap.topics["orders"]
    assert (orders.min_insync_replicas, orders.min_insync_replicas_source) == (3, "topic")
    assert (orders.unclean_leader_election_enable,
            orders.unclean_leader_election_source) == (False, "default")
    assert orders.replication_factor == 2 and orders.effective_min_isr == 2
    p0, p1 = orders.partitions
    assert (p0.leader, p0.replicas, p0.isr) == (1, (1, 2, 3), (1, 2))
    assert p1.leader is None  # -1 from Kafka: no leader
    assert (p0.elr, p0.last_known_elr, p0.leader_recovery_state) == (None, None, None)
    # the client got the settings as given, plus the logger and the error callback
    config = built[0].config
    assert {k: config[k] for k in CONFIG} == CONFIG and "logger" in config and "error_cb" in config
    assert {b.id: b.endpoint for b in snap.brokers.values()} == {
        1: "kafka-1:9093", 2: "kafka-2:9093", 3: "kafka-3:9093"}


def test_a_topic_deleted_during_the_poll_is_left_out() -> None:
    poller, built = make()
    poller.poll_once()
    built[0].partitions["gone"] = [(0, 1, [1], [1])]
    built[0].fail["configs:gone"] = kafka(KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert list(poller.poll_once().snapshot.topics) == ["orders"]


def test_a_stopped_broker_is_remembered_with_its_rack() -> None:
    poller, built = make()
    poller.poll_once()
    del built[0].racks[2]
    snap = poller.poll_once().snapshot
    assert (snap.brokers[2].rack, snap.brokers[2].live) == ("az-b", False)


@pytest.mark.parametrize(("where", "error", "expected"), [
    ("describe_cluster", kafka(KafkaError._TRANSPORT), UNREACHABLE),
    ("describe_cluster", kafka(KafkaError._ALL_BROKERS_DOWN), UNREACHABLE),
    ("list_topics", kafka(KafkaError._TIMED_OUT), TIMEOUT),
    ("describe_cluster", kafka(KafkaError.SASL_AUTHENTICATION_FAILED), UNAUTHORIZED),
    ("configs:orders", kafka(KafkaError.TOPIC_AUTHORIZATION_FAILED), UNAUTHORIZED),
    ("list_topics", RuntimeError("boom"), "error"),
])
def test_failures_are_state_with_a_class(where: str, error: BaseException, expected: str) -> None:
    poller, built = make()
    assert poller.poll_once().health.up is True
    built[0].fail[where] = error
    result = poller.poll_once()
    assert result.snapshot is None and result.previous is not None
    health = result.health
    assert (health.up, health.error, health.consecutive_failures, health.failures,
            health.polls) == (False, expected, 1, 1, 2)
    assert health.last_success_at is not None
    assert poller.snapshot is result.previous  # the last good snapshot is kept
    del built[0].fail[where]
    assert poller.poll_once().health == poller.health
    assert (poller.health.up, poller.health.error, poller.health.consecutive_failures) == (
        True, None, 0)


def test_a_timeout_is_sharpened_by_what_the_client_reported() -> None:
    poller, built = make()
    poller.poll_once()
    admin = built[0]
    admin.fail["describe_cluster"] = kafka(KafkaError._TIMED_OUT)

    def poll(timeout: float) -> int:  # librdkafka serves error_cb from poll()
        admin.config["error_cb"](KafkaError(KafkaError._AUTHENTICATION))
        return 1

    admin.poll = poll
    assert poller.poll_once().health.error == UNAUTHORIZED


def test_classify_prefers_unauthorized_over_unreachable_hints() -> None:
    reported = [KafkaError(KafkaError._TRANSPORT), KafkaError(KafkaError._AUTHENTICATION)]
    assert classify(kafka(KafkaError._TIMED_OUT), reported) == UNAUTHORIZED
    # a broker that refused the login closed the connection: the transport failure's cause
    assert classify(kafka(KafkaError._TRANSPORT), reported) == UNAUTHORIZED
    assert classify(kafka(KafkaError._TRANSPORT), reported[:1]) == UNREACHABLE
    assert classify(kafka(KafkaError._TRANSPORT)) == UNREACHABLE


# What a real SASL/PLAIN broker (Kafka 4.x, StandardAuthorizer) gave the poller, in
# tests/real_kafka/test_metadata_unauthorized.py: a wrong password fails the Metadata
# request in transport while the error callback reports the refused login; an ACL that
# allows Describe but not DescribeConfigs on a topic fails that topic's future.
WRONG_PASSWORD = KafkaException(KafkaError(
    KafkaError._TRANSPORT, "Failed to get metadata: Local: Broker transport failure"))
WRONG_PASSWORD_REPORTED = [
    KafkaError(KafkaError._AUTHENTICATION, "sasl_plaintext://127.0.0.1:9092/bootstrap: SASL "
               "authentication error: Authentication failed: Invalid username or password "
               "(after 301ms in state AUTH_REQ)"),
    KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
]
NO_DESCRIBE_CONFIGS = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                "Topic authorization failed."))


def test_the_real_brokers_refusals_are_unauthorized() -> None:
    assert classify(WRONG_PASSWORD, WRONG_PASSWORD_REPORTED) == UNAUTHORIZED
    assert classify(NO_DESCRIBE_CONFIGS) == UNAUTHORIZED


def test_a_refused_login_is_unauthorized_through_the_poller(caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    poller, built = make()
    poller.poll_once()
    admin = built[0]
    admin.fail["list_topics"] = WRONG_PASSWORD

    def poll(timeout: float) -> int:  # librdkafka serves error_cb from poll()
        for error in WRONG_PASSWORD_REPORTED:
            admin.config["error_cb"](error)
        return 1

    admin.poll = poll
    with caplog.at_level(logging.WARNING, logger="kafka_health.metadata"):
        health = poller.poll_once().health
    # the code and the log name the refused login, the transport failure comes second
    assert (health.up, health.error, health.error_code) == (False, UNAUTHORIZED,
                                                            "_AUTHENTICATION")
    assert ("poll failed (unauthorized): _AUTHENTICATION: sasl_plaintext://127.0.0.1:9092/"
            "bootstrap: SASL authentication error: Authentication failed") in caplog.text
    assert "(the request: _TRANSPORT: Failed to get metadata" in caplog.text


def test_a_poll_that_lists_topics_does_not_ask_for_the_principals_rights() -> None:
    poller, built = make()
    assert poller.poll_once().health.up is True
    assert built[0].asked_operations == [False]


def _sees(topics: list[str], operations: list[AclOperation] | None
          ) -> tuple[MetadataPoller, FakeAdmin]:
    """A poller whose every client lists only `topics` and gets `operations` on the
    cluster."""
    admin = FakeAdmin(CONFIG)
    admin.partitions = {name: [(0, 1, [1], [1])] for name in topics}
    admin.cluster_operations = operations
    return MetadataPoller("prod", CONFIG, PollerSettings(interval_seconds=0.05,
                                                         timeout_seconds=1),
                          admin_factory=lambda _config: admin), admin


# What a real SASL/PLAIN broker (Kafka 4.x, StandardAuthorizer) answered a principal with
# no ACL at all (tests/real_kafka/test_metadata_unauthorized.py): a listing without the
# cluster's topics, and DescribeCluster asked for the authorized operations giving None.
@pytest.mark.parametrize(("topics", "operations"), [
    ([], None),
    (["__consumer_offsets"], None),  # rights on Kafka's own topics say nothing of the rest
    ([], []),
    ([], [AclOperation.IDEMPOTENT_WRITE]),
])
def test_a_principal_that_sees_nothing_and_may_not_describe_the_cluster_is_unauthorized(
        topics: list[str], operations: list[AclOperation] | None, caplog) -> None:
    poller, admin = _sees(topics, operations)
    with caplog.at_level(logging.INFO, logger="kafka_health.metadata"):
        result = poller.poll_once()
        assert poller.poll_once().health.consecutive_failures == 2
    assert (result.snapshot, poller.snapshot) == (None, None)  # no empty cluster audited
    health = result.health
    assert (health.up, health.error, health.error_code) == (
        False, UNAUTHORIZED, "CLUSTER_AUTHORIZATION_FAILED")
    assert admin.asked_operations == [True, True]
    assert [r.getMessage() for r in caplog.records] == [
        f"metadata prod: poll failed (unauthorized): CLUSTER_AUTHORIZATION_FAILED: {BLIND}"]


@pytest.mark.parametrize("operations", [
    [AclOperation.DESCRIBE],
    [AclOperation.ALTER, AclOperation.DESCRIBE],  # the broker lists what Alter implies
])
def test_an_empty_cluster_polled_by_a_principal_that_may_describe_it_is_up(
        operations: list[AclOperation]) -> None:
    poller, admin = _sees([], operations)
    result = poller.poll_once()
    assert (result.health.up, result.snapshot.topics) == (True, {})
    assert admin.asked_operations == [True]


def test_a_principal_that_loses_its_rights_turns_unauthorized_and_back() -> None:
    poller, admin = _sees(["orders"], None)
    assert poller.poll_once().health.up is True  # sees a topic: its rights are not asked
    admin.partitions = {}
    assert poller.poll_once().health.error == UNAUTHORIZED
    admin.cluster_operations = [AclOperation.DESCRIBE]
    admin.partitions = {"orders": [(0, 1, [1], [1])]}
    assert poller.poll_once().health.up is True
    assert admin.asked_operations == [False, True, False]


def test_settings_the_client_refuses_are_misconfigured_and_rebuilt(caplog) -> None:
    attempts: list[dict] = []

    def factory(config: dict[str, Any]) -> FakeAdmin:
        attempts.append(config)
        if len(attempts) == 1:
            raise KafkaException(KafkaError(
                KafkaError._INVALID_ARG,
                f'Invalid value "{SECRET}" for configuration property "sasl.mechanism"'))
        return FakeAdmin(config)

    poller = MetadataPoller("prod", CONFIG, admin_factory=factory)
    with caplog.at_level(logging.DEBUG, logger="kafka_health"):
        first = poller.poll_once()
    assert (first.health.up, first.health.error, first.health.error_code) == (
        False, MISCONFIGURED, "_INVALID_ARG")
    assert "property sasl.mechanism" in caplog.text and SECRET not in caplog.text
    assert poller.poll_once().health.up is True and len(attempts) == 2


def test_no_secret_reaches_logs_or_state(caplog) -> None:
    poller, built = make()
    poller.poll_once()
    built[0].fail["describe_cluster"] = kafka(KafkaError._TRANSPORT)
    with caplog.at_level(logging.DEBUG):
        result = poller.poll_once()
    assert "poll failed (unreachable)" in caplog.text
    assert SECRET not in caplog.text and SECRET not in repr(result)
    assert SECRET not in repr(poller.__dict__.get("_health"))


def test_a_failed_poll_builds_a_new_client() -> None:
    """A client waits for the broker it last learnt was the controller, down or not: the
    next poll starts from a new one, which learns a live one."""
    poller, built = make()
    poller.poll_once()
    built[0].fail["describe_cluster"] = kafka(KafkaError._TIMED_OUT)
    assert poller.poll_once().health.up is False
    assert len(built) == ATTEMPTS  # the first attempt on the client of the last poll
    del built[0].fail["describe_cluster"]
    assert poller.poll_once().health.up is True
    assert len(built) == ATTEMPTS + 1


@pytest.mark.parametrize("error", [KafkaError._TRANSPORT, KafkaError._TIMED_OUT])
def test_a_client_stuck_on_a_broker_that_stopped_answering_is_replaced_within_the_poll(
        error: int) -> None:
    """What a real client does while a broker is down or frozen: the request it sent there,
    or to the broker it learnt was the controller, fails or times out. A new client
    reaches a live one, and the poll goes through."""
    built: list[FakeAdmin] = []

    def factory(config: dict[str, Any]) -> FakeAdmin:
        built.append(FakeAdmin(config))
        return built[-1]

    poller = MetadataPoller("prod", CONFIG, PollerSettings(interval_seconds=4,
                                                           timeout_seconds=3),
                            admin_factory=factory)
    assert poller.poll_once().health.up is True
    built[0].fail["configs:orders"] = kafka(error)  # the first client's controller is gone
    result = poller.poll_once()
    assert (result.health.up, result.health.failures, len(built)) == (True, 0, 2)
    # the new client bootstraps from the configured servers and every broker listed
    assert built[1].config["bootstrap.servers"] == (
        "kafka-1:9093,kafka-2:9093,kafka-3:9093")
    assert built[1].config["socket.connection.setup.timeout.ms"] == 3000


def test_refusals_are_not_retried_and_attempts_are_bounded() -> None:
    poller, built = make()
    poller.poll_once()
    built[0].fail["list_topics"] = kafka(KafkaError.SASL_AUTHENTICATION_FAILED)
    assert poller.poll_once().health.error == UNAUTHORIZED
    assert len(built) == 1  # the same login fails through any broker
    built[0].fail["list_topics"] = kafka(KafkaError._ALL_BROKERS_DOWN)
    assert poller.poll_once().health.error == UNREACHABLE
    assert len(built) == 1 + ATTEMPTS


def test_requests_end_by_the_polls_deadline() -> None:
    timeouts: list[float] = []

    class Slow(FakeAdmin):
        def list_topics(self, timeout: float) -> Any:
            timeouts.append(timeout)
            time.sleep(0.3)
            raise kafka(KafkaError._TIMED_OUT)

    poller = MetadataPoller("prod", CONFIG, PollerSettings(interval_seconds=0.5,
                                                           timeout_seconds=0.25),
                            admin_factory=Slow)
    started = time.monotonic()
    assert poller.poll_once().health.error == TIMEOUT
    # the deadline is a request timeout per attempt here (the interval is shorter): every
    # attempt fits, and the last is given only what is left of it
    assert time.monotonic() - started < 1.2
    assert len(timeouts) == 3 and timeouts[0] == 0.25 and timeouts[2] < 0.25


def test_a_failing_cluster_warns_once_per_change_of_state(caplog) -> None:
    built_admin = FakeAdmin(CONFIG)  # every rebuilt client: the same failing cluster
    poller = MetadataPoller("prod", CONFIG, PollerSettings(interval_seconds=0.05,
                                                           timeout_seconds=1),
                            admin_factory=lambda _config: built_admin,
                            clock=lambda: 1_767_614_400.0)
    poller.poll_once()
    built_admin.fail["describe_cluster"] = kafka(KafkaError._TRANSPORT)
    with caplog.at_level(logging.INFO, logger="kafka_health.metadata"):
        for _ in range(3):
            poller.poll_once()
        built_admin.fail["describe_cluster"] = kafka(KafkaError.SASL_AUTHENTICATION_FAILED)
        poller.poll_once()
        del built_admin.fail["describe_cluster"]
        poller.poll_once()
    levels = [(r.levelname, r.getMessage().split(":")[1].strip()) for r in caplog.records]
    assert levels == [("WARNING", "poll failed (unreachable)"),
                      ("WARNING", "poll failed (unauthorized)"),
                      ("INFO", "the Admin API answers again after 4 failed poll(s)")]


def test_on_poll_gets_every_result_and_its_errors_are_swallowed(caplog) -> None:
    seen: list[PollResult] = []

    def on_poll(result: PollResult) -> None:
        seen.append(result)
        raise RuntimeError("the sink is down")

    poller, _ = make(on_poll=on_poll)
    with caplog.at_level(logging.ERROR, logger="kafka_health.metadata"):
        result = poller.poll_once()
    assert seen == [result] and "handling the poll's result failed" in caplog.text


def test_the_thread_polls_until_stopped() -> None:
    results: list[PollResult] = []
    poller, _ = make(on_poll=results.append)
    poller.start()
    try:
        wait_for(lambda: len(results) >= 3, 10, "three polls", every=0.02)
        assert any(t.name == "kafka-health-metadata-prod" for t in threading.enumerate())
    finally:
        poller.stop()
    count = len(results)
    assert not any(t.name == "kafka-health-metadata-prod" for t in threading.enumerate())
    assert len(results) == count


def test_describe_keeps_kafka_text_and_masks_user_info() -> None:
    error = KafkaException(KafkaError(KafkaError._TRANSPORT, "GET http://u:pw@host/ failed"))
    assert describe(error) == "_TRANSPORT: GET http://***@host/ failed"
    assert describe(ValueError(SECRET)) == "ValueError"


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        PollerSettings(interval_seconds=0)
    with pytest.raises(ValueError):
        PollerSettings(describe_configs_batch=0)
