"""What the job and its batches tell each other: a stop requested or under way, and why
the signals writer stopped, if it did."""

from __future__ import annotations

import threading


class PreviousBatchFailed(RuntimeError):
    """This batch fails because an earlier batch's Delta signals did: not its data."""


class JobControl:
    """The job's stop and the signals writer's failure, in one place the job owns.

    Owner: the job's main thread, which creates it, requests and begins a stop and resets
    it at each start (its signal handler runs on that thread too). The batch thread reads
    it; the signals writer reports its failure (through PendingBatches, under that
    ledger's lock). Each field is one reference, written whole: no lock of its own, which
    a signal handler must not wait on anyway.
    """

    def __init__(self) -> None:
        self._stop_requested = threading.Event()
        self._stopping = False
        self._signals_error: BaseException | None = None

    def request_stop(self) -> None:
        """Ask the job's main loop to stop after the batch in flight."""
        self._stop_requested.set()

    def wait_for_stop_request(self, timeout: float) -> bool:
        """Whether a stop was requested, waiting for one up to `timeout` seconds."""
        return self._stop_requested.wait(timeout)

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested.is_set()

    def begin_stop(self) -> None:
        """From now on a batch that fails was cancelled by the stop (its Spark job), not by
        its data: it is not noted as a failed attempt."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        return self._stopping

    def report_signals_failure(self, error: BaseException) -> None:
        self._signals_error = error

    @property
    def signals_error(self) -> BaseException | None:
        """Why the signals writer stopped, if it did: the next batch fails for it."""
        return self._signals_error

    def raise_if_signals_failed(self) -> None:
        """An earlier batch's signals failed: this batch fails too (the pending marker
        stays, so the restarted job recomputes them)."""
        if self._signals_error is not None:
            raise PreviousBatchFailed(
                "the previous batch's signals failed (see the log above); its bronze is "
                "committed and its signals are recomputed from bronze when the job starts "
                "again") from self._signals_error

    def reset(self) -> None:
        """A new run: no stop under way and no signals failure (an earlier run's,
        recovered from the pending marker). A requested stop stays requested."""
        self._stopping = False
        self._signals_error = None
