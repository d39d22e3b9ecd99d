"""streaming.paging.alerts and .opened: incidents as Alertmanager alerts, and the open
incidents the early push reads off a batch's broker rows."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from streaming import paging
from streaming.paging import build_alerts
from tests.unit.paging_builders import (
    T0,
    committed_rules,  # noqa: F401 - an autouse fixture
    config,
    incident,
    parse,
)


def test_naive_and_string_timestamps_are_utc() -> None:
    [alert] = build_alerts(config("http://x"), [
        incident(started=datetime(2024, 5, 1, 12, 0), resolved="2024-05-01T12:01:00+00:00")],
        now=T0 + timedelta(minutes=2))
    assert alert["startsAt"] == "2024-05-01T12:00:00.000Z"
    assert alert["endsAt"] == "2024-05-01T12:01:00.000Z"



# --- early push from a batch's broker rows -------------------------------------------------


def signal_row(broker: str, minute: int, unclean: float = 0.0, under_min: float = 0.0
               ) -> dict[str, Any]:
    start = T0 + timedelta(minutes=minute)
    return {"cluster": "c1", "broker": broker, "window_start": start,
            "window_end": start + timedelta(minutes=1), "unclean_elections_increase": unclean,
            "under_min_isr_max": under_min}


def test_early_push_reads_each_brokers_newest_fresh_window() -> None:
    now = T0 + timedelta(minutes=3, seconds=10)
    rows = [
        signal_row("3", 1, unclean=2.0),   # older window of broker 3: a late recomputation
        signal_row("3", 2),                # broker 3's newest window: nothing
        signal_row("1", 2, unclean=1.0, under_min=4.0),
        # another controller counting the same election: one incident for the cluster
        signal_row("4", 2, unclean=1.0),
        signal_row("2", -5, unclean=1.0),  # ended long ago: never re-opened by a late sample
    ]
    opened = paging.opened_in_signals(rows, fresh_seconds=180, now=now)
    assert sorted((o["kind"], o["broker"], o["peak_value"]) for o in opened) == [
        ("unclean_election", "*", 1.0), ("under_min_isr", "1", 4.0)]
    [alert] = build_alerts(config("http://x"), opened, now=now)  # only the pushed kind
    assert alert["labels"]["alertname"] == "KafkaUncleanLeaderElection"
    assert parse(alert["startsAt"]) == T0 + timedelta(minutes=2)
    assert parse(alert["endsAt"]) > now, "open until the incidents step says otherwise"


def test_the_early_unclean_page_says_whether_elr_was_on_from_the_feature_level() -> None:
    """The rows' eligible.leader.replicas.version says whether the cluster had ELR on, as
    kafka_health_elr_enabled does for the rule (off where only metadata.version's level is
    published); rows with no feature level leave it unsaid."""
    now = T0 + timedelta(minutes=2, seconds=40)
    for level, metadata, said, sentence in ((1.0, 33.0, 1.0, "were on"),
                                            (None, 33.0, 0.0, "were off"),  # unpublished at 0
                                            (None, None, None, None)):
        levels = {"elr_version_last": level, "metadata_version_last": metadata}
        rows = [signal_row("1", 2, unclean=1.0) | levels, signal_row("4", 2) | levels]
        [opened] = paging.opened_in_signals(rows, fresh_seconds=180, now=now)
        assert opened["elr_enabled"] == said
        [alert] = build_alerts(config("http://x"), [opened], now=now)
        description = alert["annotations"]["description"]
        if sentence is None:
            assert "KIP-966" not in description
        else:
            assert f"Eligible leader replicas (KIP-966) {sentence} in this cluster" in description


def test_early_push_is_not_hidden_by_a_window_ahead_of_the_wall_clock() -> None:
    """A sample dated minutes ahead made its window the broker's "newest": the real
    under-min-ISR of 7 in the current window was not pushed."""
    now = T0 + timedelta(minutes=2, seconds=40)
    rows = [signal_row("1", 2, under_min=7.0), signal_row("1", 6)]
    opened = paging.opened_in_signals(rows, fresh_seconds=180, now=now)
    assert [(o["kind"], o["peak_value"], o["started_at"]) for o in opened] == [
        ("under_min_isr", 7.0, T0 + timedelta(minutes=2))]
