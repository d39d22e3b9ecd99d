"""Faults whose cause is easy to lose, on the real test bed (conftest: `orders` on 1, 4
and 5, RF 3, min ISR 2; the job polls the Admin API every METADATA_INTERVAL seconds).

- A failed log directory on a broker that stays registered takes its single-replica
  partitions offline: the offline incident and the cause series name that broker's log
  directory, not nothing. Broker 5 keeps the second log directory, repaired, for the
  rest of the session.
- A bootstrap broker killed, and another frozen: every Admin API poll during the fault
  goes through a live broker, the job's pollers' and one of the test's own.
- A follower killed and, while it restarts, the other follower of the same partitions
  frozen out of the ISR: leader 1 under min ISR, one incident per cluster and leader,
  whose cause names both.
"""

from __future__ import annotations

import time

import pandas as pd
from confluent_kafka.admin import AdminClient

from streaming.metadata import MetadataPoller, PollerSettings, PollResult
from streaming.testbed import faults
from streaming.testbed.kafka import create_topic
from tests.conftest import wait_for
from tests.integration.helpers import table
from tests.real_kafka.conftest import METADATA_INTERVAL, NAMES, ORDERS, WINDOW, Bed
from tests.real_kafka.truth_checks import epoch

LOG_DIR_CAUSE = "log directory offline on broker 5"


def _series(bed: Bed, name: str) -> dict[tuple[str, ...], float]:
    exporter = bed.exporter
    return {tuple(s.labels[n] for n in exporter.labelnames[name]): s.value
            for family in exporter.gauges[name].collect() for s in family.samples}


def _incidents(bed: Bed, kind: str, since: float) -> pd.DataFrame:
    rows = table(bed.delta, "incidents")
    if rows.empty:
        return rows
    return rows[(rows.kind == kind) & (rows["started_at"].map(epoch) >= since - 2 * WINDOW)]


def _until_incidents(bed: Bed, kind: str, since: float, broker: str | None,
                     wanted: set[tuple[str, str]], timeout: float) -> None:
    """Until the (cluster, cause) of the incidents of `kind` since the fault (of `broker`
    when given) are `wanted`; the failure says what they were."""
    seen: list[set[tuple[str, str | None]]] = [set()]

    def found() -> bool:
        rows = _incidents(bed, kind, since)
        if broker is not None and not rows.empty:
            rows = rows[rows.broker == broker]
        seen[0] = {(r.cluster, r.cause) for r in rows.itertuples()}
        return seen[0] == wanted
    try:
        wait_for(found, timeout, f"the {kind} incidents' cause", every=1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the incidents: {sorted(seen[0], key=str)}") from None


def test_a_failed_log_directory_is_named_as_the_cause_of_its_offline_partitions(
        healthy: Bed) -> None:
    bed = healthy
    directory = faults.add_log_dir(bed.watched, 5)
    topic = f"disk-{int(time.time())}"
    create_topic(bed.watched.bootstrap, topic, assignment=[[5], [5]],
                 config={"min.insync.replicas": "1"})
    # Kafka puts a new replica in the log directory holding the fewest, the empty one,
    # once broker 5 has caught up with the metadata that creates it
    faults.wait_until(lambda: {f"{topic}-0", f"{topic}-1"} <= {p.name for p in
                                                               directory.iterdir()}, 30,
                      f"{topic}'s replicas in {directory}")
    since = time.time()
    faults.fail_log_dir(directory)
    try:
        faults.wait_until(lambda: all(p.leader is None for p in faults.snapshot(bed.watched)
                                      .partitions if p.topic == topic), 60,
                          f"{topic} offline")
        offline = time.time()
        assert 5 in bed.watched.alive_brokers(), "broker 5 left the cluster"

        # the bed's job is slow to open incidents on two shared cores (batches fall behind)
        _until_incidents(bed, "offline_partitions", since, None,
                         {(name, LOG_DIR_CAUSE) for name in NAMES}, 180)
        named = time.time()
        info = _series(bed, "kafka_health_metadata_cause_info")
        assert {k: v for k, v in info.items() if k[1] == "offline"} == {
            (name, "offline", "none", LOG_DIR_CAUSE): 1.0 for name in NAMES}
        brokers = _series(bed, "kafka_health_metadata_cause_broker_partitions")
        assert {k: v for k, v in brokers.items() if k[1] == "offline"} == {
            (name, "offline", "5"): 2.0 for name in NAMES}
    finally:
        faults.repair_log_dir(bed.watched, 5, directory)
        admin = AdminClient({"bootstrap.servers": bed.watched.bootstrap})
        for future in admin.delete_topics([topic]).values():
            future.result(timeout=30)
    print(f"\nlog directory failed: partitions offline after {offline - since:.0f}s, "
          f"the incidents' cause after {named - since:.0f}s")


def test_every_poll_goes_through_while_a_bootstrap_broker_is_down_or_frozen(
        healthy: Bed) -> None:
    bed = healthy
    results: list[PollResult] = []
    # As the job polls (conftest), with every broker bootstrap, each of them a fault below.
    poller = MetadataPoller("faults", {"bootstrap.servers": bed.watched.bootstrap},
                            PollerSettings(METADATA_INTERVAL, timeout_seconds=3),
                            on_poll=results.append)
    jobs = bed.job.metadata.pollers
    assert len(jobs) == len(NAMES)
    poller.start()
    try:
        wait_for(lambda: any(r.snapshot is not None for r in results), 30, "a first poll")
        for broker, how in ((4, "kill"), (5, "freeze")):
            failures = [p.health.failures for p in jobs]
            first = len(results)
            started = time.monotonic()
            faults.stop_broker(bed.watched, broker, how)

            def gone(broker: int = broker, first: int = first) -> bool:
                """Three polls after the first that no longer lists the broker: the
                fault from both sides of the controller fencing it."""
                seen = [i for i, r in enumerate(results[first:]) if r.snapshot is not None
                        and not r.snapshot.brokers[broker].live]
                return bool(seen) and len(results) - first > seen[0] + 3
            wait_for(gone, 90, f"polls while broker {broker} is {how}ed", every=0.5)
            during = results[first:]
            faults.start_broker(bed.watched, broker)
            failed = [(r.polled_at.isoformat(), r.health.error, r.health.error_code)
                      for r in during if r.snapshot is None]
            assert failed == [], f"broker {broker} {how}: polls failed: {failed}"
            assert [p.health.failures for p in jobs] == failures, (
                f"broker {broker} {how}: the job's polls failed: "
                f"{[(p.cluster, p.health) for p in jobs]}")
            print(f"\nbroker {broker} {how}: {len(during)} polls in "
                  f"{time.monotonic() - started:.0f}s, every one through")
    finally:
        poller.stop()


def test_a_follower_frozen_while_another_restarts_names_both(healthy: Bed) -> None:
    bed = healthy
    since = time.time()
    faults.stop_broker(bed.watched, 4, "kill")
    faults.wait_isr_without(bed.watched, 4, ORDERS)
    faults.stop_broker(bed.watched, 5, "freeze")
    frozen = time.monotonic()
    faults.wait_isr_without(bed.watched, 5, ORDERS)
    # broker 4 restarts while 5 is frozen out of the ISR: leader 1 alone, under min ISR
    bed.watched.node(4).start()

    _until_incidents(bed, "under_min_isr", since, "1",
                     {(name, "brokers 4 and 5 out of ISR") for name in NAMES}, 120)
    bed.watched.wait_brokers([4], 90)
    faults.wait_until(lambda: time.monotonic() - frozen > 20, 30, "broker 5 frozen 20 s")
    faults.start_broker(bed.watched, 5)
    faults.wait_fully_replicated(bed.watched)

    def resolved() -> pd.DataFrame | None:
        rows = _incidents(bed, "under_min_isr", since)
        return None if rows.empty or rows["resolved_at"].isna().any() else rows
    rows = wait_for(lambda: (found := resolved()) is not None and (found,), 120,
                    "the under-min-ISR incidents resolved", every=1)[0]
    per_leader = rows.groupby(["cluster", "broker"]).size().to_dict()
    assert {k: n for k, n in per_leader.items() if n != 1} == {}, rows
    assert {(name, "1") for name in NAMES} <= set(per_leader), rows
    leader_1 = rows[rows.broker == "1"]
    assert set(leader_1.cause) == {"brokers 4 and 5 out of ISR"}, leader_1
