"""A condition worth a log line when it starts, again now and then while it lasts, and
once when it ends: an outage, a subscription with nothing to read, a push that fails.
Said on every check it would flood the log; said once it would look over by the next
screen. The project's one way to rate-limit a warning: one RepeatedWarning per
condition, or per key (`RepeatedWarnings`) when the same condition holds for many
topics, clusters or endpoints at once."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable


class RepeatedWarning:
    """When to say a lasting condition again: once it has lasted `grace` seconds (at once
    by default), then every `every` seconds."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic,
                 grace: float = 0.0) -> None:
        self.every = every
        self.clock = clock
        self.grace = grace
        self.since: float | None = None
        self._said: float | None = None

    def due(self) -> float | None:
        """The condition holds now: how long it has (0.0 at its start) when it is time to
        say so, else None."""
        now = self.clock()
        if self.since is None:
            self.since, self._said = now, None
        if not self._due_at(now):
            return None
        self._said = now
        return now - self.since

    def would_say(self) -> bool:
        """Whether due() would say it now, without counting it said (to look for what the
        line should name only when it is said)."""
        return self._due_at(self.clock())

    def ended(self) -> float | None:
        """The condition no longer holds: how long it lasted, or None when it did not or
        was never said."""
        if self.since is None:
            return None
        lasted, said = self.clock() - self.since, self._said is not None
        self.since, self._said = None, None
        return lasted if said else None

    def _due_at(self, now: float) -> bool:
        if self.since is None:
            return self.grace <= 0
        if self._said is None:
            return now - self.since >= self.grace
        return now - self._said >= self.every


class RepeatedWarnings:
    """A RepeatedWarning per key (a topic, a cluster, an endpoint), made on first use."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self._keys: dict[Hashable, RepeatedWarning] = {}

    def due(self, key: Hashable) -> float | None:
        """RepeatedWarning.due() of the key's condition."""
        warning = self._keys.get(key)
        if warning is None:
            warning = self._keys[key] = RepeatedWarning(self.every, self.clock)
        return warning.due()

    def ended(self, key: Hashable) -> float | None:
        """RepeatedWarning.ended() of the key's condition."""
        warning = self._keys.pop(key, None)
        return None if warning is None else warning.ended()
