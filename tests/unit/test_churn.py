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
