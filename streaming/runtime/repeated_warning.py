"""A condition worth a log line when it starts, again now and then while it lasts, and
once when it ends: an outage, a subscription with nothing to read. Said on every check
it would flood the log; said once it would look over by the next screen."""

from __future__ import annotations

import time
from collections.abc import Callable


class RepeatedWarning:
    """When to say a lasting condition again: at its start and every `every` seconds."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self.since: float | None = None
        self._said = 0.0

    def due(self) -> float | None:
        """The condition holds now: how long it has (0.0 at its start) when it is time to
        say so, else None."""
        now = self.clock()
        if self.since is None:
            self.since = self._said = now
            return 0.0
        if now - self._said < self.every:
            return None
        self._said = now
        return now - self.since

    def would_say(self) -> bool:
        """Whether due() would say it now, without counting it said (to look for what the
        line should name only when it is said)."""
        return self.since is None or self.clock() - self._said >= self.every

    def ended(self) -> float | None:
        """The condition no longer holds: how long it lasted, or None when it did not."""
        if self.since is None:
            return None
        lasted, self.since = self.clock() - self.since, None
        return lasted
