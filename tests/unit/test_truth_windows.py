"""Which windows the real-Kafka tests may compare against the Admin API's truth: only those
whose truth held from a margin before to a margin (plus the scrapes' reading lag) after."""

from __future__ import annotations

from streaming.testbed.truth import PartitionState, Snapshot, TruthSampler

WINDOW = 5


def sampler(isr_shrinks_at: float, until: float, skip: tuple[float, ...] = ()) -> TruthSampler:
    """One-second samples from t=0 of a partition led by broker 1 whose ISR loses broker 2
    at `isr_shrinks_at`; samples at the times in `skip` failed."""
    truth = TruthSampler("unused:9092", [1, 2])
    t = 0.0
    while t <= until:
        if t not in skip:
            isr = (1,) if t >= isr_shrinks_at else (1, 2)
            truth.snapshots.append(Snapshot(t, [PartitionState("t", 0, 1, (1, 2), isr, 1)],
                                            frozenset({1, 2})))
        t += 1.0
    return truth


def under_replicated(windows: dict, start: float) -> int:
    return windows[start][1][1]["under_replicated"]


def test_a_window_is_stable_when_the_truth_held_a_margin_around_it() -> None:
    windows = sampler(isr_shrinks_at=13.5, until=30).stable_windows(WINDOW)
    assert under_replicated(windows, 0.0) == 0
    assert 5.0 in windows  # the change came 3.5 s after its end: outside the 2 s margin
    assert 10.0 not in windows  # it changed inside
    assert 15.0 not in windows  # 1.5 s before it
    assert under_replicated(windows, 20.0) == 1


def test_a_slow_scrape_widens_the_span_after_its_window() -> None:
    # a jmx_exporter scrape stamped in [5, 10) read its gauges up to 2.5 s late: the
    # change at 13.5 s may be in what it read
    windows = sampler(isr_shrinks_at=13.5, until=30).stable_windows(
        WINDOW, reading_lag={5.0: 2.5})
    assert 5.0 not in windows
    assert 0.0 in windows


def test_a_window_whose_trailing_margin_went_unsampled_is_not_stable() -> None:
    # the sampler stalled from 10 s to 12 s: nothing says the truth held past the window
    windows = sampler(isr_shrinks_at=11.0, until=30, skip=(10.0, 11.0, 12.0)).stable_windows(
        WINDOW)
    assert 5.0 not in windows
    assert 0.0 in windows
