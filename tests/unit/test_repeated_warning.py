"""A lasting condition is said at its start, every so often while it lasts, and at its end."""

from __future__ import annotations

from streaming.runtime.repeated_warning import RepeatedWarning


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_said_at_the_start_then_every_period_then_its_length_at_the_end() -> None:
    clock = Clock()
    outage = RepeatedWarning(60.0, clock)
    assert outage.ended() is None  # nothing held: nothing to say
    said = []
    for _ in range(26):  # a check every 5 s for 125 s
        said.append(outage.due())
        clock.now += 5
    assert [(i * 5, held) for i, held in enumerate(said) if held is not None] == [
        (0, 0.0), (60, 60.0), (120, 120.0)]
    assert outage.ended() == 130.0
    assert outage.ended() is None
    assert outage.due() == 0.0  # a new outage starts over
