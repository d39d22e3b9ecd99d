"""A healthy real cluster under a steady acks=all producer load opens no incident.

The run lasts KAFKA_HEALTH_HEALTHY_MINUTES (default 0.5 in the suite: six 5 s windows under
load; a longer run: `KAFKA_HEALTH_HEALTHY_MINUTES=10 bash deploy/test.sh -k
healthy`).
"""

from __future__ import annotations

import os
import threading
import time

import pandas as pd
from confluent_kafka import Producer

from tests.integration.helpers import table
from tests.real_kafka.conftest import NAMES, ORDERS, WINDOW, Bed
from tests.real_kafka.truth_checks import epoch, mismatches, wait_caught_up

MINUTES = float(os.environ.get("KAFKA_HEALTH_HEALTHY_MINUTES", "0.5"))
RATE = 200  # records/s


def test_a_healthy_cluster_under_load_opens_no_incident(healthy: Bed) -> None:
    bed = healthy
    stop = threading.Event()
    sent = {"ok": 0, "failed": 0}

    def load() -> None:
        producer = Producer({"bootstrap.servers": bed.watched.bootstrap, "acks": "all",
                             "linger.ms": 10})

        def done(err, _msg) -> None:  # noqa: ANN001
            sent["failed" if err else "ok"] += 1

        while not stop.wait(0.1):  # RATE/10 records a tick: steady, and cheap to drive
            for _ in range(RATE // 10):
                producer.produce(ORDERS, b"order " * 20, on_delivery=done)
            producer.poll(0)
        producer.flush(10)

    since = time.time()
    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    time.sleep(MINUTES * 60)
    stop.set()
    thread.join(30)
    until = time.time()
    wait_caught_up(bed, until)

    assert sent["failed"] == 0 and sent["ok"] > MINUTES * 60 * RATE * 0.5, sent
    incidents = table(bed.delta, "incidents")
    if not incidents.empty:
        incidents = incidents[incidents["started_at"].map(epoch) >= since - WINDOW]
    assert incidents.empty, (
        f"incidents opened since {since:.0f} (the load's start):\n"
        + incidents[["cluster", "broker", "kind", "started_at", "resolved_at",
                     "peak_value"]].to_string())
    assert mismatches(bed, since, until) == []
    rows = table(bed.delta, "broker_signals")
    rows = rows[rows["window_start"].map(epoch).between(since + WINDOW, until - 2 * WINDOW)]
    for name in NAMES:
        mine = rows[rows.cluster == name]
        per_window = mine.groupby("window_start")["broker"].nunique()
        # every broker in every window: none went quiet
        assert (per_window == len(bed.watched.nodes)).all(), (name, per_window.tolist())
        assert not pd.isna(mine["leader_count_last"]).any()
