"""streaming.exporter: what a scrape sees after the job hands it broker rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from streaming.config import ExporterConfig
from streaming.exporter import Exporter
from streaming.metric_names import UNCLEAN_LEADER_ELECTIONS_WINDOW_INCREASE as UNCLEAN

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def row(minute: int, unclean: float = 0.0, under_min: float = 0.0) -> dict[str, Any]:
    start = T0 + timedelta(minutes=minute)
    return {"cluster": "c1", "broker": "3", "window_start": start,
            "window_end": start + timedelta(minutes=1), "last_sample_ts": start,
            "unclean_elections_increase": unclean, "under_min_isr_last": under_min}


def value(exporter: Exporter, name: str) -> float | None:
    return exporter.registry.get_sample_value(name, {"cluster": "c1", "broker": "3"})


def test_an_unclean_election_is_held_even_when_a_newer_window_comes_in_the_same_batch():
    clock = Clock(T0)
    exporter = Exporter(clock=clock)

    def live(*rows: dict[str, Any]) -> None:  # each batch as its windows end, live
        clock.at = rows[-1]["window_end"] + timedelta(seconds=30)
        exporter.update_brokers(list(rows))

    live(row(0, unclean=2.0), row(1, under_min=4.0))
    assert value(exporter, UNCLEAN) == 2.0, "data loss must reach a scrape"
    assert value(exporter, "kafka_health_under_min_isr_partitions") == 4.0, "levels: newest"
    live(row(2, unclean=1.0))
    assert value(exporter, UNCLEAN) == 3.0
    live(row(4))
    assert value(exporter, UNCLEAN) == 3.0, "held for 5 minutes"
    live(row(6))
    assert value(exporter, UNCLEAN) == 1.0, "minute 0 left the hold"
    live(row(8))
    assert value(exporter, UNCLEAN) == 0.0


def test_an_unclean_election_deep_in_a_catch_up_batch_is_held_for_5_minutes_of_scrapes():
    """A restart after downtime reads a backlog: an election 7 windows before the batch's
    newest is past the event-time hold, yet no scrape has seen it."""
    clock = Clock(T0 + timedelta(minutes=20))
    exporter = Exporter(clock=clock)
    exporter.update_brokers([row(m, unclean=2.0 if m == 1 else 0.0) for m in range(9)])
    assert value(exporter, UNCLEAN) == 2.0, "the backlog's loss must reach a scrape"
    clock.at += timedelta(seconds=240)
    exporter.update_brokers([row(9)])
    assert value(exporter, UNCLEAN) == 2.0, "held 5 minutes of wall clock"
    clock.at += timedelta(seconds=61)
    exporter.update_brokers([row(10)])
    assert value(exporter, UNCLEAN) == 0.0


def test_a_window_sent_again_after_its_hold_pages_only_for_a_new_loss():
    """Late samples recompute a window long after its loss was held and paged: the same
    count again is no new loss (a second page for it); a higher one is."""
    clock = Clock(T0 + timedelta(minutes=1, seconds=30))
    exporter = Exporter(clock=clock)
    exporter.update_brokers([row(0, unclean=2.0)])
    for minute in range(1, 12):
        clock.at = T0 + timedelta(minutes=minute + 1, seconds=30)
        exporter.update_brokers([row(minute)])
    assert value(exporter, UNCLEAN) == 0.0
    exporter.update_brokers([row(0, unclean=2.0), row(12)])
    assert value(exporter, UNCLEAN) == 0.0, "the same loss again"
    exporter.update_brokers([row(0, unclean=3.0), row(12)])
    assert value(exporter, UNCLEAN) == 3.0, "a loss the first count did not hold"


def test_a_late_recomputation_of_a_held_window_replaces_its_count_not_adds_to_it():
    exporter = Exporter()
    exporter.update_brokers([row(0, unclean=1.0), row(1)])
    exporter.update_brokers([row(0, unclean=2.0)])  # late samples for minute 0
    assert value(exporter, UNCLEAN) == 2.0


def samples(exporter: Exporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in exporter.registry.collect() for s in family.samples
            if not s.name.endswith("_created")}


def headroom_row(minute: int, bound: str, ceiling: float | None, days: float | None,
                 broker: str = "3") -> dict[str, Any]:
    return {"cluster": "c1", "broker": broker, "evaluated_at": T0 + timedelta(minutes=minute),
            "ceiling_mmap": ceiling, "ceiling_recovery": 4000.0, "binding_bound": bound,
            "binding_ceiling": ceiling or 0.0, "headroom": (ceiling or 0.0) - 900.0,
            "days_to_ceiling": days}


def test_a_batch_of_rows_leaves_the_series_one_row_at_a_time_would():
    """One update per batch sets each series once, from its last write: the scrape must see
    what handing the same rows over one by one leaves, nulls, removals and rebinds included."""
    brokers = [row(0, unclean=1.0, under_min=3.0), {**row(1), "under_min_isr_last": None},
               row(2, under_min=5.0) | {"broker": "4"}, row(0, under_min=7.0)]
    headroom = [headroom_row(0, "mmap", 5000.0, 9.0), headroom_row(1, "recovery", None, None),
                headroom_row(2, "mmap", 4000.0, 3.0), headroom_row(3, "recovery", None, 1.0),
                headroom_row(1, "mmap", 100.0, None, broker="4"),
                headroom_row(0, "mmap", 200.0, 2.0, broker="4")]
    at_once, one_by_one = Exporter(), Exporter()
    at_once.update_brokers(brokers)
    at_once.update_headroom(headroom)
    for rows, update in ((brokers, "update_brokers"), (headroom, "update_headroom")):
        for one in sorted(rows, key=lambda r: r.get("window_start") or r["evaluated_at"]):
            getattr(one_by_one, update)([one])
    got, want = samples(at_once), samples(one_by_one)
    assert got == want
    assert want[("kafka_health_under_min_isr_partitions", (("broker", "3"), ("cluster", "c1")))
                ] == 7.0, "a null in the newest window keeps the value set before it"
    assert ("kafka_health_partition_headroom_ratio",
            (("binding_bound", "mmap"), ("broker", "3"), ("cluster", "c1"))) not in want
    assert ("kafka_health_days_to_partition_ceiling", (("broker", "4"), ("cluster", "c1"))
            ) not in want, "the newest evaluation has no forecast: the series is dropped"


class Clock:
    """Wall clock the exporter reads, moved by the test."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at.timestamp()


def test_a_future_dated_window_does_not_hide_later_real_windows():
    """One sample 5 minutes ahead (inside the quarantine's 600 s allowance) used to stay the
    "newest window" and freeze the gauges: a real under-min-ISR of 7 exported 0."""
    clock = Clock(T0 + timedelta(seconds=30))
    exporter = Exporter(clock=clock)
    exporter.update_brokers([row(0), row(5)])  # minute 5 is in the future
    assert value(exporter, "kafka_health_under_min_isr_partitions") == 0.0
    clock.at = T0 + timedelta(seconds=45)
    exporter.update_brokers([row(0, under_min=7.0)])
    assert value(exporter, "kafka_health_under_min_isr_partitions") == 7.0
    clock.at = T0 + timedelta(minutes=1, seconds=10)
    exporter.update_brokers([row(1, under_min=3.0)])
    assert value(exporter, "kafka_health_under_min_isr_partitions") == 3.0
    exporter.update_brokers([row(0, under_min=9.0)])  # a late correction of an older window
    assert value(exporter, "kafka_health_under_min_isr_partitions") == 3.0


def test_a_broker_whose_clock_runs_ahead_still_exports_each_new_window():
    clock = Clock(T0 + timedelta(seconds=10))
    exporter = Exporter(clock=clock)
    for minute in range(3):  # the broker's windows are always 2 minutes ahead
        clock.at = T0 + timedelta(minutes=minute, seconds=10)
        exporter.update_brokers([row(minute + 2, under_min=float(minute))])
        assert value(exporter, "kafka_health_under_min_isr_partitions") == float(minute)


def test_a_future_dated_sample_does_not_make_the_other_brokers_stale():
    clock = Clock(T0 + timedelta(seconds=50))
    exporter = Exporter(clock=clock)
    ahead = row(5) | {"broker": "4", "last_sample_ts": T0 + timedelta(minutes=5)}
    exporter.update_brokers([row(0) | {"last_sample_ts": T0 + timedelta(seconds=45)}, ahead])
    assert exporter.update_staleness(45.0) == []
    assert value(exporter, "kafka_health_broker_stale") == 0.0
    assert value(exporter, "kafka_health_broker_last_sample_age_seconds") == 5.0


def test_a_broker_whose_clock_runs_ahead_goes_stale_when_it_goes_dark():
    """Broker 4's samples are dated 5 minutes ahead, within the quarantine's allowance;
    it stops reporting while broker 3 goes on. It is stale once broker 3's samples are
    more than the threshold past the moment broker 4's last one came, not 5 minutes
    later, and a recomputation sending its old row again does not refresh it."""
    clock = Clock(T0 + timedelta(seconds=50))
    exporter = Exporter(clock=clock)
    ahead = row(5) | {"broker": "4", "last_sample_ts": T0 + timedelta(minutes=5)}
    exporter.update_brokers([row(0) | {"last_sample_ts": T0 + timedelta(seconds=45)}, ahead])
    clock.at = T0 + timedelta(minutes=2)
    exporter.update_brokers([row(1) | {"last_sample_ts": T0 + timedelta(seconds=115)}, ahead])
    assert [(b, age) for _, b, age in exporter.update_staleness(45.0)] == [("4", 65.0)]
    assert exporter.registry.get_sample_value(
        "kafka_health_broker_stale", {"cluster": "c1", "broker": "4"}) == 1.0


def test_a_broker_whose_clock_is_stepped_back_stays_fresh_while_it_reports():
    """Broker 4 ran 5 minutes ahead, then NTP stepped its clock back: its new samples are
    dated before the one it sent last, and are still news."""
    clock = Clock(T0 + timedelta(seconds=50))
    exporter = Exporter(clock=clock)
    ahead = row(5) | {"broker": "4", "last_sample_ts": T0 + timedelta(minutes=5)}
    exporter.update_brokers([row(0) | {"last_sample_ts": T0 + timedelta(seconds=45)}, ahead])
    clock.at = T0 + timedelta(minutes=2)
    exporter.update_brokers([row(1) | {"last_sample_ts": T0 + timedelta(seconds=115)},
                             row(1) | {"broker": "4",
                                       "last_sample_ts": T0 + timedelta(seconds=118)}])
    assert exporter.update_staleness(45.0) == []


def broker_row(cluster: str, broker: str, at: datetime) -> dict[str, Any]:
    start = at.replace(second=0, microsecond=0)
    return {"cluster": cluster, "broker": broker, "window_start": start,
            "window_end": start + timedelta(minutes=1), "last_sample_ts": at,
            "under_min_isr_last": 0.0, "partition_count_last": 10.0}


def test_one_record_naming_many_brokers_creates_at_most_the_batch_budget_of_series():
    clock = Clock(T0)
    exporter = Exporter(clock=clock, config=ExporterConfig(max_new_series_per_batch=200))
    exporter.begin_batch()
    exporter.update_brokers([broker_row("c1", str(b), T0) for b in range(100_000)])
    exporter.update_staleness(45.0)
    held = exporter.registry.get_sample_value("kafka_health_pipeline_exported_series")
    assert held == len(samples(exporter)), "every series served, its own included"
    assert held < 200 + 20, "only the budget's worth of new series"
    brokers = {dict(labels)["broker"] for name, labels in samples(exporter)
               if name == "kafka_health_partitions"}
    assert 0 < len(brokers) < 20
    dropped = exporter.registry.get_sample_value(
        "kafka_health_pipeline_series_dropped_total", {"reason": "new_series_cap"})
    assert dropped is not None and dropped >= (100_000 - len(brokers)) * 10
    exporter.begin_batch()  # a new batch, a new budget: known brokers keep their series
    exporter.update_brokers([broker_row("c1", b, T0) for b in sorted(brokers)])
    assert {dict(labels)["broker"] for name, labels in samples(exporter)
            if name == "kafka_health_partitions"} == brokers


def test_series_of_a_broker_or_cluster_silent_past_the_ttl_are_removed():
    clock = Clock(T0)
    exporter = Exporter(clock=clock, config=ExporterConfig(series_ttl_seconds=600))
    exporter.begin_batch()
    exporter.update_brokers([broker_row("c1", "1", T0), broker_row("c1", "2", T0),
                             broker_row("c2", "1", T0)])
    exporter.update_clusters([{"cluster": "c2", "window_start": T0, "window_end": T0 + timedelta(minutes=1),
                               "active_controllers": 1.0, "brokers_reporting": 1}])
    exporter.update_staleness(45.0)
    exporter.update_open_incidents(["c1", "c2"], [])
    for minute in range(1, 12):  # broker 1 of c1 keeps reporting, the rest fall silent
        clock.at = T0 + timedelta(minutes=minute)
        exporter.begin_batch()
        exporter.update_brokers([broker_row("c1", "1", clock.at)])
    names = samples(exporter)
    remaining = {dict(labels).get("cluster") for _, labels in names}
    assert remaining == {"c1", None}, "cluster c2 went silent: none of its series is left"
    assert {dict(labels).get("broker") for _, labels in names if dict(labels).get("broker")} == {"1"}
    assert exporter.holds("c1") and not exporter.holds("c2")
    exporter.update_open_incidents(["c2"], [{"cluster": "c2", "kind": "controller"}])
    assert not any(dict(labels).get("cluster") == "c2" for _, labels in samples(exporter)), \
        "a cluster whose series are gone does not come back through the incidents gauge"


def test_an_unknown_controller_count_is_exported_as_no_series_not_zero():
    exporter = Exporter(clock=Clock(T0 + timedelta(minutes=3)))

    def cluster(minute: int, controllers: float | None) -> dict[str, Any]:
        start = T0 + timedelta(minutes=minute)
        return {"cluster": "c1", "window_start": start, "window_end": start + timedelta(minutes=1),
                "active_controllers": controllers, "brokers_reporting": 2}

    get = exporter.registry.get_sample_value
    exporter.update_clusters([cluster(0, 1.0)])
    assert get("kafka_health_active_controllers", {"cluster": "c1"}) == 1.0
    exporter.update_clusters([cluster(1, None)])
    assert get("kafka_health_active_controllers", {"cluster": "c1"}) is None
    assert get("kafka_health_brokers_reporting", {"cluster": "c1"}) == 2.0
    exporter.update_clusters([cluster(2, 0.0)])
    assert get("kafka_health_active_controllers", {"cluster": "c1"}) == 0.0


def test_the_batch_paging_step_reads_only_the_columns_it_hands_over():
    """The batch step pages from broker_signals rows cut to PAGE_ROW_COLUMNS: a column the
    exporter or the direct push reads and the cut left out would read as None, silently
    (a gauge never set, an incident never pushed)."""
    import pyarrow as pa

    from streaming.paging import opened_in_signals
    from streaming.pipeline.signal_stages import PAGE_ROW_COLUMNS
    from streaming.schemas import arrow_schema

    schema = arrow_schema("broker_signals")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    rows = []
    for minute, broker in ((-2, "1"), (-1, "1"), (-1, "2")):
        start = now + timedelta(minutes=minute)
        full: dict[str, Any] = {}
        for position, field in enumerate(schema):
            if pa.types.is_timestamp(field.type):
                full[field.name] = start + timedelta(seconds=position % 60)
            elif pa.types.is_string(field.type):
                full[field.name] = f"{field.name}-{minute}"
            elif pa.types.is_integer(field.type) or pa.types.is_floating(field.type):
                full[field.name] = float(position + 1 - minute)
        full.update({"cluster": "c1", "broker": broker, "window_start": start,
                     "window_end": start + timedelta(minutes=1)})
        rows.append(full)
    table = pa.Table.from_pylist(rows, schema=schema)
    whole, cut = Exporter(), Exporter()
    whole.update_brokers(table.to_pylist())
    cut.update_brokers(table.select(PAGE_ROW_COLUMNS).to_pylist())
    assert samples(cut) == samples(whole)
    assert len(samples(whole)) > 10
    pushed = opened_in_signals(table.to_pylist(), 600)
    assert pushed and opened_in_signals(table.select(PAGE_ROW_COLUMNS).to_pylist(), 600) == pushed
