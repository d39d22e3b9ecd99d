"""A lasting condition is said at its start, every so often while it lasts, and at its end."""

from __future__ import annotations

from streaming.common.repeated_warning import RepeatedWarning, RepeatedWarnings


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


def test_a_grace_holds_the_first_line_until_the_condition_has_lasted_it() -> None:
    clock = Clock()
    stall = RepeatedWarning(60.0, clock, grace=60.0)
    assert not stall.would_say()
    said = []
    for _ in range(26):  # a check every 5 s for 125 s
        said.append(stall.due())
        clock.now += 5
    assert [(i * 5, held) for i, held in enumerate(said) if held is not None] == [
        (60, 60.0), (120, 120.0)]
    assert stall.ended() == 130.0
    stall.due()
    clock.now += 30
    assert stall.ended() is None  # over before it was ever said: nothing to say at its end


def test_each_key_is_its_own_condition() -> None:
    clock = Clock()
    topics = RepeatedWarnings(300.0, clock)
    assert topics.due("a") == 0.0
    clock.now += 1
    assert topics.due("a") is None  # said a second ago
    assert topics.due("b") == 0.0  # another topic: said at once
    clock.now += 300
    assert topics.due("a") == 301.0
    assert topics.due("b") == 300.0
    assert topics.ended("a") == 301.0
    assert topics.ended("a") is None
    assert topics.due("a") == 0.0
