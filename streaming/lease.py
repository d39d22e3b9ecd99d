"""One writer per checkpoint and per Delta root: a lease file its job renews while alive.

Two jobs pointed at the same checkpoint or tables would both write bronze and signals
(the Delta transactions are keyed by the checkpoint's app id, so neither skips the other's
batches) and page twice. The first job to start writes `kafka_health_lease.json` (owner
id, host, pid, heartbeat) into each directory and a thread renews it; a second job refuses
to start while a lease is fresh, naming its holder. A lease whose heartbeat is older than
`spark.lease_timeout_seconds` belongs to a job that died or froze and is taken over (with
a warning); so is one held by a dead process on this host (a job restarted after a
crash need not wait the timeout out). A job that finds its lease taken over stops.

Local paths only (read-modify-write under flock(2)); an object-store path (s3a://, abfss://)
is not guarded and says so in the log.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from streaming.refusal import NotStarted

LOG = logging.getLogger("kafka_health.lease")
LEASE_FILE = "kafka_health_lease.json"


class LeaseHeld(NotStarted):
    """Another live job holds the lease."""


class LeaseLost(RuntimeError):
    """The running job's lease is no longer its own: another job took it over (it thought
    this one dead), or its folder or file is gone."""


def local_dir(path: str) -> Path | None:
    """The directory of a local path or file:// URL; None for an object store."""
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return Path(parsed.path)
    return Path(path) if parsed.scheme == "" else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process, alive
        return True
    return True


class Lease:
    """The lease in one directory; `acquire` at start, `renew` while running, `release`
    at a clean stop."""

    def __init__(self, directory: Path, timeout_seconds: float, owner: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = directory / LEASE_FILE
        self.timeout = timeout_seconds
        self.clock = clock
        self.me = {"owner": owner or str(uuid.uuid4()), "host": socket.gethostname(),
                   "pid": os.getpid()}

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(LEASE_FILE + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict[str, Any] | None:
        try:
            held = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except ValueError:  # a torn or foreign file: nobody's lease
            return None
        return held if isinstance(held, dict) else None

    def _write(self) -> None:
        partial = self.path.with_name(LEASE_FILE + ".tmp")
        partial.write_text(json.dumps({**self.me, "heartbeat": self.clock()}))
        os.replace(partial, self.path)

    def _ours(self, held: dict[str, Any] | None) -> bool:
        return held is not None and held.get("owner") == self.me["owner"]

    def describe(self, held: dict[str, Any]) -> str:
        age = self.clock() - float(held.get("heartbeat", 0))
        return (f"owner {held.get('owner')} on host {held.get('host')} pid {held.get('pid')}, "
                f"heartbeat {age:.0f} s ago")

    def _dead_here(self, held: dict[str, Any]) -> bool:
        """Held by a process of this host that is gone (or is this very process under an
        earlier owner id: a container's restarted job gets the same pid)."""
        if held.get("host") != self.me["host"]:
            return False
        pid = held.get("pid")
        return isinstance(pid, int) and (pid == self.me["pid"] or not _alive(pid))

    def acquire(self) -> None:
        """Take the lease; LeaseHeld naming the holder while another live job has it."""
        with self._locked():
            held = self._read()
            if held is not None and not self._ours(held):
                stale = self.clock() - float(held.get("heartbeat", 0)) > self.timeout
                if not (stale or self._dead_here(held)):
                    raise LeaseHeld(
                        f"{self.path.parent} is in use by another kafka-health job "
                        f"({self.describe(held)}); stop it first, or point this job at its "
                        f"own spark.checkpoint and delta.path. A lease whose heartbeat is "
                        f"older than spark.lease_timeout_seconds ({self.timeout:.0f} s) is "
                        "taken over")
                LOG.warning("%s: taking over the lease of a job that is gone (%s)",
                            self.path.parent, self.describe(held))
            self._write()

    def renew(self) -> None:
        """Refresh the heartbeat; LeaseLost when another job has taken the lease over, or
        when the folder or the lease file is gone: deleted or moved under the running job,
        which Spark does not notice (it goes on writing a new, empty checkpoint, and a
        restart from that reads the topics again)."""
        if not self.path.parent.is_dir():
            raise LeaseLost(f"{self.path.parent} is gone (deleted or moved while the job "
                            "ran); this job stops writing")
        with self._locked():
            held = self._read()
            if held is None:
                raise LeaseLost(f"{self.path} is gone or unreadable (the folder was emptied, "
                                "or replaced, while the job ran); this job stops writing")
            if not self._ours(held):
                raise LeaseLost(f"{self.path.parent}: the lease was taken over by another job "
                                f"({self.describe(held)}); this job stops writing")
            self._write()

    def release(self) -> None:
        """Give the lease up if still ours. A disk that refuses (read-only, full) leaves it
        in place: the next start on this host takes it over, its process being gone."""
        if not self.path.parent.is_dir():  # gone under the job: not made again for a lock
            return
        try:
            with self._locked():
                if self._ours(self._read()):
                    self.path.unlink(missing_ok=True)
        except OSError as err:
            LOG.warning("%s: the lease could not be released (%s); the next start takes it "
                        "over", self.path.parent, err)


class Leases:
    """The job's leases (checkpoint and Delta root) and the thread that renews them."""

    def __init__(self, paths: list[str], timeout_seconds: float) -> None:
        owner = str(uuid.uuid4())
        self.leases: list[Lease] = []
        for path in dict.fromkeys(paths):
            directory = local_dir(path)
            if directory is None:
                LOG.warning("%s is not a local path: no lease guards it against a second job",
                            path)
            else:
                self.leases.append(Lease(directory, timeout_seconds, owner))
        self.every = timeout_seconds / 6
        self.lost: LeaseLost | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        """All or none: a refused one releases those already taken."""
        taken: list[Lease] = []
        try:
            for lease in self.leases:
                lease.acquire()
                taken.append(lease)
        except BaseException:
            for lease in taken:
                lease.release()
            raise
        self._stop.clear()
        self._thread = threading.Thread(target=self._heartbeat, name="kafka-health-lease",
                                        daemon=True)
        self._thread.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.every):
            try:
                for lease in self.leases:
                    lease.renew()
            except LeaseLost as err:
                self.lost = err
                LOG.error("%s", err)
                return
            except OSError as err:  # a full or flaky disk: the next tick tries again
                LOG.warning("lease heartbeat failed: %s", err)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for lease in self.leases:  # each only while still ours
            lease.release()
