"""Every dashboard query against a real Prometheus scraping the running pipeline.

    `kafka-health demo`'s model (streaming.cli.parser defaults: 3 brokers, 4 topics x 6 partitions,
      RF 3, min ISR 2) -> RealtimeDriver (1 s scrapes)
      -> the metrics cluster (real Kafka) -> the streaming job
      (in-process on the session's local Spark, 0.5 s trigger) -> Exporter /metrics
      -> prometheus (scrape every 1 s) -> tests/dashboards/validator.run_panel_queries

The scenario is the fault half of the demo's first cycle
(streaming.testbed.simulated_demo.demo_events, in the demo's order: partitions added,
broker 3 down, broker 2 down so broker 1's partitions are under min ISR, partitions added
again), plus one malformed record as any real topic
eventually carries. Time is compressed: each event is applied as soon as Prometheus shows
the previous one, not at its demo second, and the signal window is 10 s instead of 60 s so
the headroom forecast (>= 3 windows of partition history) exists within the test.

The validator then runs every panel target and template-variable query of every
dashboard, as Grafana would with the cluster selected and every broker ("All"). Any
PromQL error fails; so does an empty result, except for the panels listed under
`live_demo` in dashboards/expectations.yaml, each with the reason this scenario leaves
it empty - and each of those must really be empty, so the list cannot go stale.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streaming.cli import build_parser
from streaming.cli.simulate import cluster_model as demo_model
from streaming.exporter import Exporter
from streaming.testbed.kafka import create_topic, free_port
from streaming.testbed.simulated_demo import demo_events
from tests.conftest import wait_for
from tests.dashboards import validator as v
from tests.e2e.stack import RealtimeDriver, job_environment, prom_query, start_prometheus, which
from tests.integration.helpers import running_job

pytestmark = pytest.mark.integration
CLUSTER = "live-demo"
PERIOD = 300.0  # the demo's fault cycle (streaming.testbed.simulated_demo.demo_events)
WINDOW_SECONDS = 10  # the job's signal window here: >= 3 windows of history within the test
DASHBOARDS = sorted(v.DASHBOARD_DIR.glob("*.json"))
# exported gauge -> the model's value for a broker: "Prometheus shows this step"
SHOWN = {
    "kafka_health_partitions": "PartitionCount",
    "kafka_health_under_replicated_partitions": "UnderReplicatedPartitions",
    "kafka_health_under_min_isr_partitions": "UnderMinIsrPartitionCount",
}


def test_every_dashboard_query_against_the_live_pipeline(broker, spark, tmp_path: Path,
                                                         query_report: list[str]) -> None:
    if which("prometheus") is None:
        pytest.skip("prometheus not on PATH: run deploy/install-prometheus.sh")
    live = v.load_expectations(section="live_demo")
    assert v.validate_expectations(live, [d for _, d in v.load_dashboards(DASHBOARDS)]) == []
    started = time.monotonic()
    args = build_parser().parse_args(["demo", "--cluster", CLUSTER])
    model = demo_model(args)
    # the first cycle up to the first broker coming back (the demo's recovery half)
    events = sorted((e for e in demo_events(args.brokers, PERIOD) if e.at < PERIOD),
                    key=lambda e: e.at)
    fault_half = events[:next((i for i, e in enumerate(events) if e.label.endswith(" up")),
                              len(events))]

    topic = f"dash-live-{int(time.time())}"
    create_topic(broker.bootstrap, topic, partitions=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"this is not json {", partition=0)  # for the quarantine
    producer.flush(10)
    del producer
    with ExitStack() as stack:
        exporter = Exporter()
        port = free_port()
        exporter.start("127.0.0.1", port)
        stack.callback(exporter.stop)
        target = f"127.0.0.1:{port}"
        prom, prom_url = start_prometheus(tmp_path / "prometheus", target, None, "1s")
        stack.callback(prom.stop)
        env = job_environment(broker.bootstrap, topic, tmp_path / "job", trigger=0.5,
                              scrape_interval=1.0)
        env["KAFKA_HEALTH__SIGNALS__WINDOW_SECONDS"] = str(WINDOW_SECONDS)
        job = stack.enter_context(running_job(spark, env, exporter))
        driver = RealtimeDriver(broker.bootstrap, topic, interval=1.0)
        driver.add(model)
        # stopped before the job, so the job stops between batches (see test_paging)
        driver.start()
        stack.callback(driver.stop)

        def alive() -> None:
            prom.check()
            driver.check()
            if not job.query.isActive:
                raise AssertionError(f"streaming query stopped: {job.query.exception()}")

        def query(expr: str) -> list[dict]:
            alive()
            return prom_query(prom_url, expr)

        def shows_model() -> bool:
            """Prometheus holds the model's current state for every reporting broker."""
            with driver.lock:
                want = {(metric, str(b)): float(model.broker_values(b)[key])
                        for b, state in model.brokers.items() if state.up and state.reporting
                        for metric, key in SHOWN.items()}
            names = "|".join(SHOWN)
            rows = query(f'{{__name__=~"{names}",cluster="{CLUSTER}"}}')
            got = {(r["metric"]["__name__"], r["metric"]["broker"]): float(r["value"][1])
                   for r in rows}
            return all(got.get(k) == value for k, value in want.items())

        def reached(what: str) -> None:
            print(f"  {time.monotonic() - started:5.1f} s  {what}")

        wait_for(shows_model, 120, f"{CLUSTER}'s healthy state in Prometheus", every=0.5)
        reached("healthy cluster in Prometheus")
        # The forecast fits a slope to one partition count per window: the growth must
        # start in a later window than the healthy samples, or a history whose first window
        # already holds every added partition is flat (the driver stamps wall time).
        healthy_window = time.time() // WINDOW_SECONDS
        wait_for(lambda: time.time() // WINDOW_SECONDS > healthy_window, WINDOW_SECONDS + 5,
                 "the next signal window", every=0.1)
        for event in fault_half:
            injection = driver.inject(CLUSTER, event.action, event.label)
            wait_for(lambda i=injection: i.done.is_set() or driver.check(), 10, event.label)
            wait_for(shows_model, 60, f"'{event.label}' in Prometheus", every=0.5)
            reached(event.label)

        # What the validator needs to find, each waited for, not slept on: the incident
        # the fault opened, the forecast of the grown partitions, and 3 scrapes of the
        # quarantine counter, enough for rate() over $__rate_interval.
        for what, expr in (
            ("the open under-min-ISR incident",
             f'kafka_health_open_incidents{{cluster="{CLUSTER}",kind="under_min_isr"}} > 0'),
            ("a days-to-ceiling forecast",
             f'kafka_health_days_to_partition_ceiling{{cluster="{CLUSTER}"}}'),
            ("3 scrapes of the quarantined record's counter",
             "count_over_time(kafka_health_pipeline_quarantined_records_total[1m]) >= 3"),
        ):
            wait_for(lambda e=expr: query(e), 60, what, every=0.5)
            reached(what)

        results = v.run_panel_queries(prom_url, DASHBOARDS, {"cluster": CLUSTER, "instance": target},
                                      expectations=live)
        elapsed = time.monotonic() - started
        alive()

    errors = [r for r in results if r.status == "error"]
    allowed = [r for r in results if r.status == "empty" and r.may_be_empty]
    variables = sum(r.panel_id is None for r in results)
    summary = (f"validator: {len(results)} queries against the live pipeline "
               f"({len(results) - variables} panel targets, {variables} template variables), "
               f"{len(errors)} errors, {len(allowed)} allowed-empty "
               f"(scenario and queries: {elapsed:.0f} s)")
    print(summary)
    for r in allowed:
        print(f"  allowed-empty {r.dashboard_uid} panel {r.panel_id} {r.panel_title!r} "
              f"{r.ref_id}: {r.may_be_empty_reason}")
    query_report.append(summary)
    assert len(results) >= 100
    assert [r for r in results if r.problem] == [], v.summarize(results)
    stale = [e for e in live
             if not any(r.status == "empty" and (r.dashboard_uid, r.panel_id) ==
                        (e.dashboard_uid, e.panel_id) and e.ref_id in (None, r.ref_id)
                        for r in results)]
    assert stale == [], "listed as empty in this scenario, but returned data"
