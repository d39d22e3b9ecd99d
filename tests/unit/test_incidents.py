import hashlib
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from streaming.config import SignalsConfig
from streaming.schemas import arrow_schema
from streaming.signals.incidents import (
    incident_conditions,
    incident_runs,
    reconcile_incidents,
    stale_rows,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CONFIG = SignalsConfig()  # stale after 3 x 15 s, saturation above 0.8 queue or below 0.2 idle


def w(i: int) -> datetime:
    return T0 + timedelta(minutes=i)


def broker_rows(windows: dict[int, float | None], broker: str = "1", cluster: str = "c",
                column: str = "under_min_isr_max") -> list[dict]:
    """One broker_signals row per window index, `column` set to the given value."""
    return [{"cluster": cluster, "broker": broker, "window_start": w(i), "window_end": w(i + 1),
             "last_sample_ts": w(i) + timedelta(seconds=45), column: value}
            for i, value in windows.items()]


def table(rows: list[dict], name: str = "broker_signals") -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema(name))


def incidents(brokers: list[dict], clusters: list[dict] | None = None) -> list[dict]:
    out = incident_runs(incident_conditions(table(brokers), table(clusters or [], "cluster_signals"),
                                            CONFIG))
    assert out.schema == arrow_schema("incidents")
    return sorted(out.to_pylist(), key=lambda r: (r["kind"], r["broker"], r["started_at"]))


def runs(rows: list[dict], kind: str = "under_min_isr") -> list[tuple]:
    return [(r["started_at"], r["resolved_at"], r["peak_value"]) for r in rows if r["kind"] == kind]


def test_a_gap_in_windows_splits_a_run():
    got = runs(incidents(broker_rows({0: 1, 1: 3, 3: 2, 4: 1})))
    # the first run ends where its data ends (the window after it is missing), the second is open
    assert got == [(w(0), w(2), 3.0), (w(3), None, 2.0)]


def test_resolved_at_the_next_window_when_it_directly_follows_and_is_clear():
    assert runs(incidents(broker_rows({0: 0, 1: 2, 2: 5, 3: 0, 4: 0}))) == [(w(1), w(3), 5.0)]


def test_resolved_at_the_last_end_when_the_next_window_comes_after_a_gap():
    assert runs(incidents(broker_rows({0: 2, 1: 2, 5: 0}))) == [(w(0), w(2), 2.0)]


def test_a_run_active_in_the_newest_window_is_open():
    assert runs(incidents(broker_rows({0: 0, 1: None, 2: 1, 3: 4}))) == [(w(2), None, 4.0)]


def test_unknown_conditions_are_not_active_but_nan_is_above_zero_as_in_spark():
    assert runs(incidents(broker_rows({0: None, 1: 0}))) == []
    got = runs(incidents(broker_rows({0: 1, 1: float("nan"), 2: 0})))
    assert len(got) == 1 and got[0][:2] == (w(0), w(2)) and got[0][2] != got[0][2]  # NaN peak


def test_cluster_wide_kinds_use_the_cluster_rows():
    clusters = [{"cluster": "c", "window_start": w(i), "window_end": w(i + 1),
                 "active_controllers": a, "offline_partitions_max": o}
                for i, (a, o) in enumerate([(1, 0), (0, 0), (2, 3), (1, 0)])]
    got = incidents(broker_rows({0: 0, 1: 0, 2: 0, 3: 0}), clusters)
    assert [(r["kind"], r["broker"], r["started_at"], r["resolved_at"], r["peak_value"])
            for r in got] == [("controller", "*", w(1), w(3), 2.0),
                              ("offline_partitions", "*", w(2), w(3), 3.0)]


def test_a_known_broker_that_goes_silent_is_stale_from_its_first_window():
    rows = broker_rows({i: 0 for i in range(5)}, broker="1")
    rows[3]["last_sample_ts"] = w(3) + timedelta(seconds=50, microseconds=900_000)
    rows += broker_rows({1: 0}, broker="2")  # first seen in window 1, silent after
    rows[-1]["last_sample_ts"] = w(1) + timedelta(seconds=5, microseconds=200_000)
    rows += broker_rows({4: 0}, broker="3")  # first seen in window 4: not stale before
    stale = stale_rows(table(rows), 45.0).to_pylist()
    by_broker = {(r["broker"], r["window_start"]): (r["stale"], r["age"]) for r in stale}
    assert set(by_broker) == {("1", w(i)) for i in range(5)} | {("2", w(i)) for i in range(1, 5)} | {
        ("3", w(4))}
    assert by_broker["2", w(1)] == (False, 40.0)   # 00:01:45 - 00:01:05
    assert by_broker["2", w(2)] == (True, 100.0)   # measured from its newest sample, 00:01:05
    # whole seconds on both ends (Spark's unix_timestamp): 03:50.9 - 01:05.2 -> 165, not 165.7
    assert by_broker["2", w(3)] == (True, 165.0)
    assert by_broker["3", w(4)] == (False, 0.0)
    # windows 2-4 are not settled (a watermark past their end) when the data ends at 00:04:45
    assert runs(incidents(rows), "stale_broker") == []
    rows += broker_rows({5: 0, 6: 0}, broker="1") + broker_rows({5: 0, 6: 0}, broker="3")
    # by 00:06:45 windows 2 and 3 are (ages 100 and 165), later ones hold the incident open
    assert runs(incidents(rows), "stale_broker") == [(w(2), None, 165.0)]


def test_incident_id_is_stable_and_derived_from_the_run():
    early = incidents(broker_rows({0: 0, 1: 2, 2: 2}))
    later = incidents(broker_rows({0: 0, 1: 2, 2: 2, 3: 5, 4: 0}))  # the same run, recomputed
    expected = hashlib.sha256(b"c|1|under_min_isr|2026-01-01T00:01:00").hexdigest()[:16]
    assert [r["incident_id"] for r in early] == [r["incident_id"] for r in later] == [expected]
    assert later[0]["resolved_at"] == w(4) and later[0]["peak_value"] == 5.0


def test_empty_inputs_give_an_empty_incidents_table():
    empty = incident_runs(incident_conditions(table([]), table([], "cluster_signals"), CONFIG))
    assert empty.num_rows == 0 and empty.schema == arrow_schema("incidents")
    assert incidents(broker_rows({0: 1}), []) != []
    clusters = [{"cluster": "c", "window_start": w(0), "window_end": w(1), "active_controllers": 1}]
    assert incidents([], clusters) == []


def controller_windows(counts: list[float | None]) -> list[dict]:
    return [{"cluster": "c", "window_start": w(i), "window_end": w(i + 1), "active_controllers": a}
            for i, a in enumerate(counts)]


def test_an_unknown_controller_count_neither_opens_nor_resolves_an_incident():
    """Unknown (the last controller's numbers missing from the window) is not 0: no
    incident opens from it, and one already open stays open through it."""
    brokers = broker_rows({i: 0 for i in range(5)})
    assert runs(incidents(brokers, controller_windows([1, None, None, 1, 1])), "controller") == []
    got = runs(incidents(brokers, controller_windows([1, 0, None, None])), "controller")
    assert got == [(w(1), None, 0.0)], "still open, not resolved at the unknown window"
    got = runs(incidents(brokers, controller_windows([0, None, 1, 1])), "controller")
    assert got == [(w(0), w(2), 0.0)], "resolved where the count is known to be 1 again"


def test_a_silent_broker_is_not_stale_in_a_window_other_data_may_still_arrive_for():
    """Window 1 holds broker 1's samples up to 00:01:50 but none of broker 2's yet (in
    flight, or broker 2 died): stale only once the cluster's event time is a watermark
    (120 s) past the window's end, so no stale-broker incident opens and vanishes again."""
    first_batch = broker_rows({0: 0, 1: 0}, broker="1") + broker_rows({0: 0}, broker="2")
    first_batch[1]["last_sample_ts"] = w(1) + timedelta(seconds=50)
    assert runs(incidents(first_batch), "stale_broker") == []
    later = broker_rows({i: 0 for i in range(5)}, broker="1") + broker_rows({0: 0}, broker="2")
    # window 1 is settled by 00:04:45 (>= 00:02:00 + 120 s), windows 2-4 not yet: they hold
    # the incident open, and only settled windows give its peak (window 1's age)
    assert runs(incidents(later), "stale_broker") == [(w(1), None, 60.0)]


def test_one_unclean_election_counted_by_every_controller_is_one_cluster_incident():
    """Every KRaft controller counts the election it applies, some a window later: one
    incident for the cluster (broker "*"), its peak the highest count of a window."""
    rows = [*broker_rows({0: 0, 1: 2, 2: 0, 3: 0}, "1", column="unclean_elections_increase"),
            *broker_rows({0: 0, 1: 2, 2: 0, 3: 0}, "2", column="unclean_elections_increase"),
            *broker_rows({0: 0, 1: 0, 2: 2, 3: 0}, "3", column="unclean_elections_increase")]
    got = [(r["broker"], r["started_at"], r["resolved_at"], r["peak_value"])
           for r in incidents(rows) if r["kind"] == "unclean_election"]
    assert got == [("*", w(1), w(3), 2.0)]


def test_saturation_names_and_peaks_the_measure_that_opened_it():
    """Handlers busy while the queue reads 0.0: the incident is opened by the idle fraction
    and its peak is the lowest idle fraction, not the queue ratio."""
    rows = [{**row, "request_handler_idle_min": idle}
            for row, idle in zip(broker_rows({0: 0.0, 1: 0.0, 2: 0.9, 3: 0.0},
                                             column="request_queue_utilization_max"),
                                 (0.7, 0.19, 0.05, 0.8), strict=True)]
    [got] = [r for r in incidents(rows) if r["kind"] == "saturation"]
    assert (got["opened_by"], got["peak_value"]) == ("request_handler_idle_min", 0.05)
    assert (got["started_at"], got["resolved_at"]) == (w(1), w(3))
    [queue] = [r for r in incidents(broker_rows({0: 0.9, 1: 0.95},
                                                column="request_queue_utilization_max"))
               if r["kind"] == "saturation"]
    assert (queue["opened_by"], queue["peak_value"]) == ("request_queue_utilization_max", 0.95)


def stored(rows: list[dict], **changes) -> pa.Table:  # noqa: ANN003
    return pa.Table.from_pylist([{**r, **changes} for r in rows], schema=arrow_schema("incidents"))


def test_an_incident_the_recomputation_no_longer_bears_out_is_withdrawn_not_deleted():
    shown = incident_runs(incident_conditions(
        table(broker_rows({0: 0, 1: 3, 2: 3})), table([], "cluster_signals"), CONFIG))
    [open_one] = shown.to_pylist()
    # late samples: the windows were healthy after all
    computed = incident_runs(incident_conditions(
        table(broker_rows({0: 0, 1: 0, 2: 0})), table([], "cluster_signals"), CONFIG))
    found_at = w(10)
    [kept] = reconcile_incidents(computed, shown, horizon=w(0), now=found_at).to_pylist()
    assert kept["incident_id"] == open_one["incident_id"]
    assert (kept["started_at"], kept["resolved_at"], kept["withdrawn_at"]) == (
        w(1), w(1), found_at)
    # written once: once withdrawn, the next recomputation leaves the row as it is
    assert reconcile_incidents(computed, stored([kept]), horizon=w(0)).num_rows == 0


def test_a_recomputed_run_that_moved_keeps_the_id_it_was_shown_with():
    shown = incident_runs(incident_conditions(
        table(broker_rows({0: 0, 1: 3, 2: 3})), table([], "cluster_signals"), CONFIG))
    computed = incident_runs(incident_conditions(  # its first window corrected to healthy
        table(broker_rows({0: 0, 1: 0, 2: 4})), table([], "cluster_signals"), CONFIG))
    [got] = reconcile_incidents(computed, shown, horizon=w(0)).to_pylist()
    assert got["incident_id"] == shown["incident_id"][0].as_py()
    assert (got["started_at"], got["resolved_at"], got["peak_value"], got["withdrawn_at"]) == (
        w(2), None, 4.0, None)


def test_an_incident_older_than_the_horizon_is_continued_or_closed_at_it():
    shown = incident_runs(incident_conditions(
        table(broker_rows({0: 5, 1: 3})), table([], "cluster_signals"), CONFIG))
    continued = incident_runs(incident_conditions(
        table(broker_rows({2: 2, 3: 1})), table([], "cluster_signals"), CONFIG))
    [got] = reconcile_incidents(continued, shown, horizon=w(2)).to_pylist()
    assert (got["incident_id"], got["started_at"], got["peak_value"]) == (
        shown["incident_id"][0].as_py(), w(0), 5.0)
    [closed] = reconcile_incidents(incident_runs(incident_conditions(
        table(broker_rows({2: 0})), table([], "cluster_signals"), CONFIG)), shown,
        horizon=w(2)).to_pylist()
    assert (closed["resolved_at"], closed["withdrawn_at"]) == (w(2), None)


def test_no_incident_id_is_written_twice():
    """A MERGE refuses a source key twice (the job stopped on it): two runs that come to
    the same id, with or without stored incidents, are written under two ids."""
    [run] = incident_runs(incident_conditions(
        table(broker_rows({0: 0, 1: 3})), table([], "cluster_signals"), CONFIG)).to_pylist()
    twice = stored([run, {**run, "peak_value": 5.0}])
    for earlier in (stored([]), stored([run], started_at=w(0))):
        ids = [r["incident_id"] for r in reconcile_incidents(twice, earlier, horizon=w(0))
               .to_pylist()]
        assert len(ids) == 2 and len(set(ids)) == 2 and run["incident_id"] in ids, ids
