"""Paging end to end, every piece real, on loopback.

    simulator (realtime, 1 s scrapes) -> the metrics cluster (real Kafka)
      -> streaming job (0.5 s trigger, in-process)
      -> Exporter /metrics -> prometheus (scrape + evaluation every 1 s, the committed
      alerts/kafka-health.rules.yml) -> alertmanager (alerts/alertmanager.yml rendered with
      PagerDuty pointed at a local receiver, group_interval 2 s) -> PagerDutyReceiver

Each scenario runs on its own cluster name, so each has its own Alertmanager groups
(group_by alertname, cluster) and therefore its own PagerDuty dedup_keys. One cluster is
simulated at a time (see RealtimeDriver); the healthy one must never page, not even
after the others faulted.

Timings the assertions are built on (read from the rules): KafkaUnderMinIsrPartitions
has `for: 10s`, KafkaUncleanLeaderElection fires on the first evaluation and keeps firing
2 min past the exporter's 5-minute hold of the election; the exporter's under-min-ISR
gauge is the newest window's *last* value, so it drops as soon as a healed scrape is
processed. Rules are shortened for the test
(RULE_CHANGES): KafkaClusterDark's 120 s / 1m (8 production scrapes) become 10 s / 2s
(10 one-second scrapes); KafkaHealthPipelineDown's `for: 2m` becomes 20s (a loaded
machine can miss a few one-second scrapes of a live job in a row; each miss makes its
series stale, which the rule's vanished-pipeline branch reads as down); and the pages
that resolve here keep firing 5 s instead of 3m after a heal (`keep_firing_for`: as in
production, several missed scrapes, so a missed scrape still neither resolves nor re-pages).

A cluster a scenario stops simulating goes dark by design; `only()` silences
KafkaClusterDark for it in Alertmanager first, as an operator does for a cluster removed
on purpose. The heartbeat webhook goes to its own recorder (`heartbeats`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from streaming.simulate.model import ClusterModel, Partition
from tests.conftest import wait_for
from tests.e2e.stack import (
    ROUTING_KEY,
    PagerDutyEvent,
    PagerDutyReceiver,
    RealtimeDriver,
    drain,
    free_port,
    get_json,
    job_environment,
    post_json,
    prom_query,
    rules_with,
    start_alertmanager,
    start_prometheus,
    which,
)

pytestmark = pytest.mark.integration
ALERTMANAGER_YML = Path(__file__).resolve().parents[2] / "alerts" / "alertmanager.yml"
HEALTHY = "e2e-healthy"
QUIET = 5.0  # seconds (2.5 group_intervals) in which no further event may arrive
RULE_CHANGES = {
    "KafkaClusterDark": {"for": "2s", "expr": ("> 120", "> 10"), "keep_firing_for": "5s"},
    "KafkaHealthPipelineDown": {"for": "20s"},
    "KafkaUnderMinIsrPartitions": {"keep_firing_for": "5s"},
}


def hold(seconds: float, check) -> None:
    """Keep asserting `check()` for `seconds` (a polled invariant, not a sleep)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        check()
        time.sleep(0.25)
    check()


@pytest.fixture(scope="module")
def chain(broker, spark, tmp_path_factory) -> Iterator[SimpleNamespace]:
    if which("prometheus") is None or which("alertmanager", "prometheus-alertmanager") is None:
        pytest.skip("prometheus/alertmanager not on PATH: run deploy/install-prometheus.sh")
    from streaming.config import load_config
    from streaming.exporter import Exporter
    from streaming.job import Job
    from streaming.testbed.kafka import create_topic

    tmp = tmp_path_factory.mktemp("paging")
    topic = f"paging-{int(time.time())}"
    create_topic(broker.bootstrap, topic, partitions=3)
    with ExitStack() as stack:
        receiver = PagerDutyReceiver()
        stack.callback(receiver.close)
        heartbeats = PagerDutyReceiver()  # records any JSON POST: here the webhook's
        stack.callback(heartbeats.close)
        am, am_url, _ = start_alertmanager(
            tmp / "alertmanager", receiver.url, "2s",
            heartbeat_url=f"http://127.0.0.1:{heartbeats.server.server_port}/heartbeat")
        stack.callback(am.stop)
        exporter = Exporter()
        port = free_port()
        exporter.start("127.0.0.1", port)
        stack.callback(exporter.stop)
        driver = RealtimeDriver(broker.bootstrap, topic, interval=1.0)
        driver.add(ClusterModel(HEALTHY, [1, 2, 3], {"orders": 3}))
        env = job_environment(broker.bootstrap, topic, tmp / "job", trigger=0.5,
                              scrape_interval=1.0)
        job = Job(load_config(None, environ=env), spark=spark, exporter=exporter, printer=None)
        job.start()
        stack.callback(job.stop)
        # scraped once the query runs: with PipelineDown's `for` at 5s, a Spark start
        # scraped as pipeline_up 0 would page (the listener's started event can lag)
        wait_for(lambda: exporter.registry.get_sample_value("kafka_health_pipeline_up") == 1,
                 60, "the query's started event (pipeline_up 1)")
        # stopped before the job: with no new records the trigger goes idle, and the job
        # stops between batches (stopping inside a batch can crash the JVM: see Job.stop)
        driver.start()
        stack.callback(driver.stop)
        # Rules run once the healthy cluster's newest sample is fresh: the job's first
        # batches (tables created, workers started) can take longer than the shortened
        # KafkaClusterDark threshold, which would page the healthy cluster as dark.
        wait_for(lambda: time.time() - (exporter.registry.get_sample_value(
            "kafka_health_cluster_last_sample_timestamp_seconds", {"cluster": HEALTHY})
            or 0) < 3, 90, "the healthy cluster's fresh samples on /metrics", every=0.2)
        prom, prom_url = start_prometheus(tmp / "prometheus", f"127.0.0.1:{port}", am_url, "1s",
                                          rules_file=rules_with(tmp / "rules.yml", RULE_CHANGES))
        stack.callback(prom.stop)

        def alive() -> None:
            am.check()
            prom.check()
            driver.check()
            if not job.query.isActive:
                raise AssertionError(f"streaming query stopped: {job.query.exception()}")

        def flowing() -> bool:
            alive()
            rows = prom_query(prom_url, f'kafka_health_brokers_reporting{{cluster="{HEALTHY}"}}')
            return bool(rows) and float(rows[0]["value"][1]) == 3

        wait_for(flowing, 90, "the healthy cluster's 3 brokers in Prometheus")
        yield SimpleNamespace(receiver=receiver, am_url=am_url, prom_url=prom_url,
                              driver=driver, alive=alive, job=job, exporter=exporter,
                              port=port, heartbeats=heartbeats)
        # the healthy cluster ran through every scenario: it never paged
        assert receiver.matching(cluster=HEALTHY) == []


def only(chain: SimpleNamespace, cluster: str, model: ClusterModel | None = None) -> None:
    """Stop simulating `cluster` and let the job read all of it; then start `model`.
    One cluster per micro-batch: see RealtimeDriver (a job bug with two at once).
    The stopped cluster goes dark on purpose: its KafkaClusterDark is silenced first."""
    silence_dark(chain, cluster)
    chain.driver.remove(cluster)
    drain(chain.driver, chain.exporter, alive=chain.alive)
    if model is not None:
        chain.driver.add(model)
        wait_for(lambda: prom_query(
            chain.prom_url, f'kafka_health_brokers_reporting{{cluster="{model.name}"}} '
                            f'== {len(model.brokers)}'), 60, f"{model.name} in Prometheus")


def silence_dark(chain: SimpleNamespace, cluster: str) -> None:
    now = datetime.now(UTC)
    post_json(f"{chain.am_url}/api/v2/silences", {
        "matchers": [{"name": "alertname", "value": "KafkaClusterDark", "isRegex": False},
                     {"name": "cluster", "value": cluster, "isRegex": False}],
        "startsAt": now.isoformat(), "endsAt": (now + timedelta(hours=1)).isoformat(),
        "createdBy": "test_paging", "comment": f"{cluster} stopped on purpose"})


def wait_events(chain: SimpleNamespace, what: str, timeout: float = 60, **match: str
                ) -> list[PagerDutyEvent]:
    def found() -> list[PagerDutyEvent]:
        chain.alive()
        return chain.receiver.matching(**match)

    return wait_for(found, timeout, what, every=0.2)


def inject(chain: SimpleNamespace, cluster: str, action, label: str) -> float:
    injection = chain.driver.inject(cluster, action, label)
    wait_for(lambda: injection.done.is_set() or chain.driver.check(), 10, f"injection {label}")
    return injection.produced


def assert_pagerduty_event(event: PagerDutyEvent, action: str, cluster: str, alertname: str
                           ) -> None:
    body = event.body
    assert event.path == "/v2/enqueue"
    assert body["routing_key"] == ROUTING_KEY, "routing key read from the key file"
    assert body["event_action"] == action
    assert re.fullmatch(r"[0-9a-f]{64}", body["dedup_key"]), body["dedup_key"]
    assert event.payload["severity"] == "critical"
    assert event.payload.get("group", "") == cluster  # Alertmanager omits an empty group
    assert event.payload["class"] == alertname
    assert event.payload["custom_details"]["cluster"] == cluster
    assert body["links"][0]["href"].endswith(f"/alerts/runbooks/{alertname}.md")


def test_healthy_cluster_pages_nobody(chain: SimpleNamespace) -> None:
    batches_before = chain.job.processor.history.newest_finished.batch_id

    def no_page() -> None:
        chain.alive()
        assert chain.receiver.events == [], "a healthy cluster paged"

    hold(15, no_page)  # and through every other scenario: the chain fixture's last check
    finished = chain.job.processor.history.newest_finished.batch_id
    assert finished > batches_before + 2, "the job kept processing"
    # Pending is allowed only for the pipeline's own alert: one missed scrape of a loaded
    # job makes its series absent for a scrape, which KafkaHealthPipelineDown's `for` is for.
    firing = prom_query(chain.prom_url, 'ALERTS{severity="critical",alertstate="firing"}'
                        f' or ALERTS{{severity="critical",cluster="{HEALTHY}"}}')
    assert firing == [], f"critical alerts firing, or pending on a healthy cluster: {firing}"


def min_isr_model(name: str) -> ClusterModel:
    """RF3/minISR2. Brokers 2 and 3 are followers of broker 1's partitions (orders-*); broker 4
    leads payments-0 with followers 5 and 2, so losing 5 as well repeats the fault on broker 4
    while broker 1's stays open."""
    model = ClusterModel(name, [1, 2, 3, 4, 5], {})
    model.partitions = [
        Partition("orders", 0, [1, 2, 3], [1, 2, 3], 1),
        Partition("orders", 1, [1, 3, 2], [1, 3, 2], 1),
        Partition("payments", 0, [4, 5, 2], [4, 5, 2], 4),
        Partition("payments", 1, [5, 4, 1], [5, 4, 1], 5),
    ]
    return model


def test_under_min_isr_pages_once_with_a_stable_dedup_key_and_resolves(
        chain: SimpleNamespace) -> None:
    cluster = "e2e-minisr"
    only(chain, HEALTHY, min_isr_model(cluster))
    alertname = "KafkaUnderMinIsrPartitions"
    expected = (f"{alertname} [{cluster}]: Partitions under min.insync.replicas on broker 1 "
                f"of Kafka cluster {cluster}")

    # fault: both followers of broker 1's partitions go down
    inject(chain, cluster, lambda m: (m.broker_down(2), m.broker_down(3)), "2 and 3 down")
    [first] = wait_events(chain, "the under-min-ISR trigger", cluster=cluster)
    assert_pagerduty_event(first, "trigger", cluster, alertname)
    assert first.payload["summary"] == expected
    assert first.payload["custom_details"]["brokers"] == "1"
    key = first.dedup_key

    def exactly(count: int) -> None:
        chain.alive()
        events = chain.receiver.matching(cluster=cluster)
        assert len(events) == count, [(e.action, e.alertname) for e in events]

    hold(QUIET, lambda: exactly(1))

    # the fault repeats on another leader while the incident is open: same group, same key
    inject(chain, cluster, lambda m: m.broker_down(5), "5 down")
    wait_for(lambda: len(chain.receiver.matching(cluster=cluster)) >= 2, 60,
             "a second trigger for the repeated fault")
    events = chain.receiver.matching(cluster=cluster)
    assert [e.action for e in events] == ["trigger", "trigger"]
    second = events[1]
    assert_pagerduty_event(second, "trigger", cluster, alertname)
    assert second.dedup_key == key, "the repeated fault joins the open incident"
    assert second.payload["summary"].endswith("(2 firing)")
    assert sorted(second.payload["custom_details"]["brokers"].split(", ")) == ["1", "4"]

    # healing: every broker back and caught up -> one resolve with the same key
    inject(chain, cluster, lambda m: (m.broker_up(2), m.broker_up(3), m.broker_up(5)), "heal")
    [resolve] = wait_events(chain, "the resolve", cluster=cluster, action="resolve")
    assert_pagerduty_event(resolve, "resolve", cluster, alertname)
    assert resolve.dedup_key == key
    count = len(chain.receiver.matching(cluster=cluster))
    hold(QUIET, lambda: exactly(count))
    events = chain.receiver.matching(cluster=cluster)
    assert {e.dedup_key for e in events} == {key}, "one PagerDuty incident for the whole fault"
    assert events[-1].action == "resolve"
    assert all(e.action == "trigger" for e in events[:-1])


def test_unclean_leader_election_pages_once_and_is_not_auto_resolved(
        chain: SimpleNamespace) -> None:
    cluster = "e2e-unclean"
    only(chain, "e2e-minisr", ClusterModel(cluster, [1, 2, 3], {"orders": 3}))

    # 3 and 2 die, 3 returns without catching up, then the last ISR member (1) dies:
    # every partition is offline and only an out-of-sync replica is alive
    inject(chain, cluster, lambda m: (m.broker_down(3), m.broker_down(2),
                                      m.broker_up(3, caught_up=False), m.broker_down(1)),
           "offline, only an out-of-sync replica alive")
    wait_for(lambda: prom_query(chain.prom_url,
                                f'kafka_health_offline_partitions{{cluster="{cluster}"}} > 0'),
             60, "offline partitions in Prometheus")
    inject(chain, cluster, lambda m: m.unclean_election(), "unclean election")

    alertname = "KafkaUncleanLeaderElection"
    [page] = wait_events(chain, "the data-loss trigger", cluster=cluster, alertname=alertname)
    assert_pagerduty_event(page, "trigger", cluster, alertname)
    assert page.payload["summary"] == (
        f"{alertname} [{cluster}]: Unclean leader election (data loss) in Kafka cluster "
        f"{cluster}")
    key = page.dedup_key
    other_keys = {e.dedup_key for e in chain.receiver.matching(cluster=cluster)
                  if e.alertname != alertname}
    assert key not in other_keys, "data loss is its own incident, not merged into other pages"

    # after an unclean election the new leader is alone in its ISR: under-min-ISR pages too
    under = "KafkaUnderMinIsrPartitions"
    wait_events(chain, "the under-min-ISR page of the new leader", cluster=cluster,
                alertname=under, action="trigger")

    # heal: both brokers back, broker 3 catches up
    inject(chain, cluster, lambda m: (m.broker_up(1), m.broker_up(2), m.catch_up(3)), "heal")
    wait_events(chain, "under-min-ISR resolved (resolves do flow for this cluster)",
                cluster=cluster, alertname=under, action="resolve")

    # alerts/alertmanager.yml: data loss goes to a receiver that never sends resolved, so
    # a human closes the PagerDuty incident; the exporter holds the election 5 min
    am_cfg = yaml.safe_load(ALERTMANAGER_YML.read_text())
    [data_loss] = [r for r in am_cfg["receivers"] if r["name"] == "pagerduty-data-loss"]
    assert all(pd["send_resolved"] is False for pd in data_loss["pagerduty_configs"])

    def still_one_open_page() -> None:
        chain.alive()
        pages = chain.receiver.matching(cluster=cluster, alertname=alertname)
        assert [(e.action, e.dedup_key) for e in pages] == [("trigger", key)]

    hold(QUIET, still_one_open_page)
    active = get_json(f"{chain.am_url}/api/v2/alerts?active=true&filter="
                      f"alertname%3D%22{alertname}%22&filter=cluster%3D%22{cluster}%22")
    assert [a["status"]["state"] for a in active] == ["active"], \
        "the data-loss alert stays active in Alertmanager after the cluster healed"


def test_push_and_rule_for_the_same_fault_make_one_pagerduty_incident(
        tmp_path: Path) -> None:
    """The direct push (streaming.paging) and the Prometheus rule's alert for the same
    unclean election, sent to a real Alertmanager: one dedup_key, no second incident."""
    if which("alertmanager", "prometheus-alertmanager") is None:
        pytest.skip("alertmanager not on PATH: run deploy/install-prometheus.sh")
    from streaming.config import AlertPushConfig
    from streaming.paging import AlertPusher

    receiver = PagerDutyReceiver()
    am, am_url, _ = start_alertmanager(tmp_path, receiver.url, "2s")
    try:
        cluster, now = "e2e-push", datetime.now(UTC)
        pusher = AlertPusher(AlertPushConfig(alertmanager_url=am_url, kinds=["unclean_election"]))
        pusher.push(
            [{"incident_id": "abc", "cluster": cluster, "broker": "3",
              "kind": "unclean_election", "started_at": now - timedelta(seconds=20),
              "resolved_at": None, "peak_value": 1.0}])
        assert pusher.stats.failures == 0 and pusher.stats.alerts_sent == 1
        [pushed] = wait_events(SimpleNamespace(alive=am.check, receiver=receiver),
                               "the pushed page", 20, cluster=cluster)
        assert_pagerduty_event(pushed, "trigger", cluster, "KafkaUncleanLeaderElection")
        # the rule's alert as Prometheus sends it (rule labels + series labels job/instance)
        rule_alert = [{
            "labels": {"alertname": "KafkaUncleanLeaderElection", "severity": "critical",
                       "team": "kafka", "category": "data_loss", "cluster": cluster,
                       "broker": "3", "job": "kafka-health", "instance": "127.0.0.1:9464"},
            "annotations": {"summary": "from the rule"},
            "startsAt": (now - timedelta(seconds=15)).isoformat().replace("+00:00", "Z"),
        }]
        post_json(f"{am_url}/api/v2/alerts", rule_alert)

        def grouped() -> list[dict]:  # Alertmanager groups a posted alert a moment later
            groups = get_json(f"{am_url}/api/v2/alerts/groups")
            mine = [g for g in groups if g["labels"].get("cluster") == cluster]
            return mine if sum(len(g["alerts"]) for g in mine) == 2 else []
        mine = wait_for(grouped, 20, "both alerts in Alertmanager's groups")
        assert len(mine) == 1 and len(mine[0]["alerts"]) == 2, "both alerts in one group"
        # Alertmanager re-notifies the changed group after group_interval: same dedup_key
        wait_for(lambda: len(receiver.matching(cluster=cluster)) >= 2, 20, "the group update")
        hold(QUIET, am.check)
        events = receiver.matching(cluster=cluster)
        assert {e.dedup_key for e in events} == {pushed.dedup_key}
        assert {e.action for e in events} == {"trigger"}
    finally:
        am.stop()
        receiver.close()


def test_the_heartbeat_reaches_its_webhook_and_never_pagerduty(chain: SimpleNamespace) -> None:
    def beat() -> list[dict]:
        chain.alive()
        return [e.body for e in chain.heartbeats.matching() if e.path == "/heartbeat"]

    # 90 s: Prometheus drops alerts sent before it has found Alertmanager and resends
    # firing ones only every minute (--rules.alert.resend-delay)
    [first, *_] = wait_for(beat, 90, "a heartbeat webhook call", every=0.2)
    assert first["receiver"] == "kafka-health-heartbeat"
    assert first["status"] == "firing"
    assert [a["labels"]["alertname"] for a in first["alerts"]] == ["KafkaHealthWatchdog"]
    assert chain.receiver.matching(alertname="KafkaHealthWatchdog") == []


def test_a_dark_cluster_pages_and_resolves_when_it_reports_again(chain: SimpleNamespace) -> None:
    cluster = "e2e-dark"
    model = ClusterModel(cluster, [1, 2, 3], {"orders": 3})
    only(chain, "e2e-unclean", model)
    chain.driver.remove(cluster)  # every broker silent; the pipeline keeps running (idle)
    alertname = "KafkaClusterDark"
    [page] = wait_events(chain, "the cluster-dark page", cluster=cluster, alertname=alertname)
    assert_pagerduty_event(page, "trigger", cluster, alertname)
    assert page.payload["summary"].startswith(
        f"{alertname} [{cluster}]: No metrics from any broker of Kafka cluster {cluster} for ")
    chain.driver.add(model)
    [resolve] = wait_events(chain, "the cluster-dark resolve", cluster=cluster,
                            alertname=alertname, action="resolve")
    assert resolve.dedup_key == page.dedup_key


def test_a_stopped_pipeline_pages_critical_and_resolves(chain: SimpleNamespace) -> None:
    """Last: /metrics disappears (the driver as Prometheus sees a dead one) and comes back."""
    only(chain, "e2e-dark")
    alertname = "KafkaHealthPipelineDown"
    server = chain.exporter.server
    chain.exporter.stop()
    server.server_close()  # stop() leaves the port bound; start() below binds it again
    try:
        [page] = wait_events(chain, "the pipeline-down page", alertname=alertname)
    finally:
        chain.exporter.start("127.0.0.1", chain.port)
    assert_pagerduty_event(page, "trigger", "", alertname)
    # absent() and the vanished series are two alerts of one group: one incident
    assert page.payload["summary"].startswith(
        f"{alertname}: kafka-health pipeline is not running"), page.payload["summary"]
    wait_events(chain, "the pipeline-down resolve", alertname=alertname, action="resolve")
    hold(QUIET, chain.alive)
    events = chain.receiver.matching(alertname=alertname)
    assert {e.dedup_key for e in events} == {page.dedup_key}, "one incident for the outage"
    assert events[-1].action == "resolve", [(e.action, e.payload.get("summary")) for e in events]
    # one page for the outage: no cluster paged while its pipeline was gone
    assert {e.alertname for e in chain.receiver.matching(cluster="")} == {alertname}
