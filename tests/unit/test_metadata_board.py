"""The causes handed from the pollers to the pipeline, and their series for the rules."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from streaming.exporter import Exporter
from streaming.metadata.board import CauseBoard, cause_view
from streaming.metadata.export import export_cause_info
from streaming.metadata.handler import PollHandler
from streaming.metadata.health import PollerHealth
from streaming.metadata.poller import PollResult
from streaming.metadata.rules import load_rules
from streaming.metric_names import METADATA_CAUSE_INFO
from tests.unit.metadata_builders import T0, at, snapshot, topic

BROKERS = {b: None for b in range(1, 6)}
# orders on 1, 4 and 5 with min ISR 2; brokers 4 and 5 stopped: leader 1 alone in the ISR
TWO_DOWN = snapshot(topic("orders", [[1, 4, 5]] * 3, isr={0: [1], 1: [1], 2: [1]}),
                    brokers=BROKERS, down={4, 5})
# one follower stopped: under-replicated on leader 1, offline where 5 was the last ISR member
ONE_DOWN = snapshot(topic("orders", [[1, 4, 5]] * 2, isr={0: [1, 4]}),
                    topic("solo", [[5]], isr={0: [5]}, leaders={0: None}),
                    brokers=BROKERS, down={5})


def series(exporter: Exporter) -> set[tuple[str, ...]]:
    return {tuple(s.labels.values()) for family in exporter.gauges[METADATA_CAUSE_INFO].collect()
            for s in family.samples}


def test_a_view_blames_the_brokers_out_of_isr_per_leader_and_kind() -> None:
    view = cause_view(TWO_DOWN)
    assert view.blame == {("1", "under_min_isr"): "brokers 4 and 5 out of ISR"}
    assert view.under_min_isr == 3
    view = cause_view(ONE_DOWN)
    assert view.blame == {("none", "offline"): "broker 5 unavailable",
                          ("1", "under_replicated"): "broker 5 out of ISR"}
    assert view.under_min_isr == 0


def test_the_board_names_an_incidents_cause_by_kind_and_leader() -> None:
    board = CauseBoard(90, clock=lambda: at(30).timestamp())
    board.publish(cause_view(ONE_DOWN))
    assert board.cause("prod", "offline_partitions", "*") == "broker 5 unavailable"
    assert board.cause("prod", "under_min_isr", "1") is None  # under-replicated only
    board.publish(cause_view(TWO_DOWN))
    assert board.cause("prod", "under_min_isr", "1") == "brokers 4 and 5 out of ISR"
    assert board.cause("prod", "under_min_isr", "4") is None  # not a leader in trouble
    assert board.cause("prod", "under_min_isr", "*") is None
    assert board.cause("prod", "stale_broker", "1") is None  # no cause kind for it
    assert board.cause("other", "under_min_isr", "1") is None


def test_a_stale_view_names_no_cause() -> None:
    now = [at(30).timestamp()]
    board = CauseBoard(90, clock=lambda: now[0])
    board.publish(cause_view(TWO_DOWN))
    assert board.cause("prod", "under_min_isr", "1") is not None
    now[0] = at(91).timestamp()
    assert board.cause("prod", "under_min_isr", "1") is None
    assert board.view("prod").polled_at == T0  # still there for the views check


def test_the_info_series_follows_the_cause_and_goes_when_it_clears() -> None:
    exporter = Exporter(CollectorRegistry())
    export_cause_info(exporter, cause_view(ONE_DOWN))
    assert series(exporter) == {("prod", "offline", "none", "broker 5 unavailable"),
                                ("prod", "under_replicated", "1", "broker 5 out of ISR")}
    export_cause_info(exporter, cause_view(TWO_DOWN))
    assert series(exporter) == {("prod", "under_min_isr", "1", "brokers 4 and 5 out of ISR")}
    export_cause_info(exporter, cause_view(snapshot(topic("orders", [[1, 4, 5]]),
                                                    brokers=BROKERS)))
    assert series(exporter) == set()


def test_the_info_series_of_one_cluster_leave_the_others_alone() -> None:
    exporter = Exporter(CollectorRegistry())
    export_cause_info(exporter, cause_view(TWO_DOWN))
    healthy = snapshot(topic("orders", [[1, 4, 5]]), brokers=BROKERS, cluster="other")
    export_cause_info(exporter, cause_view(healthy))
    assert series(exporter) == {("prod", "under_min_isr", "1", "brokers 4 and 5 out of ISR")}


def test_the_handler_publishes_and_exports_each_successful_poll() -> None:
    exporter = Exporter(CollectorRegistry())
    board = CauseBoard(90, clock=lambda: at(1).timestamp())
    handler = PollHandler(None, exporter, load_rules(), board)
    handler(PollResult("prod", T0, TWO_DOWN, None,
                       PollerHealth("prod", up=True, last_success_at=T0)))
    assert board.cause("prod", "under_min_isr", "1") == "brokers 4 and 5 out of ISR"
    assert len(series(exporter)) == 1
    # a failed poll keeps both (the rules gate the series on kafka_health_metadata_up)
    handler(PollResult("prod", at(30), None, TWO_DOWN,
                       PollerHealth("prod", up=False, error="timeout")))
    assert board.cause("prod", "under_min_isr", "1") is not None
    assert len(series(exporter)) == 1
