"""A daemon thread that runs one object's loop from `start()` until `stop()`.

Why a base of its own: the clients of a watched cluster (the durability probe, the
consumer-group poller) each own their state on one thread; they start and stop it the
same way, and a stop must wait for the work in progress, bounded by its own timeouts.
"""

from __future__ import annotations

import threading
from typing import Self


class BackgroundLoop:
    """Subclasses implement `_run` (looping until `self._stop` is set) and say in
    `join_seconds` how long a stop may wait for the work in progress."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def join_seconds(self) -> float:
        raise NotImplementedError

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.join_seconds)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
