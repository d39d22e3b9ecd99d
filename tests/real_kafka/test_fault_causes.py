"""Faults whose cause is easy to lose, on the real test bed (conftest: `orders` on 1, 4
and 5, RF 3, min ISR 2; the job polls the Admin API every METADATA_INTERVAL seconds).

- A failed log directory on a broker that stays registered takes its single-replica
  partitions offline: the offline incident and the cause series name that broker's log
  directory, not nothing. Broker 5 keeps the second log directory, repaired, for the
  rest of the session.
"""

from __future__ import annotations

import time

import pandas as pd
from confluent_kafka.admin import AdminClient

from streaming.testbed import faults
from streaming.testbed.kafka import create_topic
from tests.conftest import wait_for
from tests.integration.helpers import table
from tests.real_kafka.conftest import NAMES, WINDOW, Bed
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
