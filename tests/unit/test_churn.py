from datetime import UTC, datetime, timedelta

from streaming.signals.churn import unmatched_shrinks

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def windows(shrinks: list[float], expands: list[float]) -> list[dict]:
    return [{"cluster": "c", "broker": "1", "window_end": T0 + timedelta(minutes=i + 1),
             "isr_shrinks_increase": s, "isr_expands_increase": e}
            for i, (s, e) in enumerate(zip(shrinks, expands, strict=True))]


def test_recent_shrinks_are_given_time_to_match():
    assert unmatched_shrinks(windows([0, 0, 0, 4], [0, 0, 0, 0]), 300) == {("c", "1"): 0.0}


def test_old_shrinks_without_expands_are_unmatched():
    rows = windows([4, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0])
    assert unmatched_shrinks(rows, 300) == {("c", "1"): 3.0}


def test_flapping_follower_is_balanced():
    rows = windows([2] * 10, [2] * 10)
    assert unmatched_shrinks(rows, 300) == {("c", "1"): 0.0}


def test_expands_before_a_shrink_do_not_hide_it():
    # A KRaft restart: the controller took the broker's replicas out of the ISRs (no shrink
    # counted anywhere), the leader counted 50 expands when they caught up; then a follower
    # really lags and its 3 shrinks stay unmatched.
    rows = windows([0, 0, 0, 3, 0, 0, 0, 0, 0, 0], [50, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    assert unmatched_shrinks(rows, 300) == {("c", "1"): 3.0}


def test_expands_beyond_the_open_shrinks_match_no_later_one():
    rows = windows([2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0],
                   [0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    assert unmatched_shrinks(rows, 300) == {("c", "1"): 2.0}


def test_expands_match_the_oldest_shrinks_first():
    # 2 shrinks, 3 more, then 2 expands: the 3 newer ones are still open, and only they
    # are recent enough to be given time.
    rows = windows([2, 0, 0, 3, 0, 0, 0, 0, 0], [0, 0, 0, 0, 2, 0, 0, 0, 0])
    assert unmatched_shrinks(rows, 300) == {("c", "1"): 3.0}
    assert unmatched_shrinks(rows, 330) == {("c", "1"): 0.0}


def test_rows_in_any_order_pair_in_time_order():
    rows = windows([0, 0, 3, 0, 0, 0, 0, 0, 0], [3, 0, 0, 0, 0, 0, 0, 0, 0])
    assert unmatched_shrinks(list(reversed(rows)), 300) == {("c", "1"): 3.0}


def test_a_missing_or_not_finite_increase_counts_nothing():
    rows = windows([float("nan"), None, 2, 0, 0, 0, 0, 0, 0],
                   [0, float("inf"), None, 0, 0, 0, 0, 0, 0])
    assert unmatched_shrinks(rows, 300) == {("c", "1"): 2.0}
