"""Named crash points for the crash-safety tests; inert unless the environment arms them.

KAFKA_HEALTH_FAILPOINTS="bronze_committed:3,signals_committed:2" kills the whole process
group with SIGKILL the 3rd time the job passes `bronze_committed`, and so on: a crash at
an exact place between two Delta commits, which random kills rarely hit.
KAFKA_HEALTH_POISON_VALUE makes one record's samples fail the driver stages (`poisoned`).
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

_ARMED: dict[str, int] = {}
_HITS: Counter[str] = Counter()
for _item in filter(None, os.environ.get("KAFKA_HEALTH_FAILPOINTS", "").split(",")):
    _name, _, _nth = _item.partition(":")
    _ARMED[_name.strip()] = int(_nth or 1)


def hit(name: str, ready: Callable[[], bool] | None = None) -> None:
    """At the armed hit, kill once `ready()` holds (waited for up to 60 s): a crash after
    something another thread does, e.g. Spark committing the batch."""
    if name not in _ARMED:
        return
    _HITS[name] += 1
    if _HITS[name] == _ARMED[name]:
        deadline = time.monotonic() + 60
        while ready is not None and not ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.killpg(os.getpgrp(), signal.SIGKILL)


class InjectedPoison(ValueError):
    """What `poisoned` raises: a stand-in for a driver stage failing on one record's data."""


def poisoned(samples: pa.Table) -> None:
    """KAFKA_HEALTH_POISON_VALUE=<number> makes the driver stages raise on samples holding
    that value (tests only: unset, it does nothing), as a bug tripped by one record would."""
    marker = os.environ.get("KAFKA_HEALTH_POISON_VALUE")
    if marker and samples.num_rows and pc.any(
            pc.equal(samples["value"], float(marker))).as_py():
        raise InjectedPoison("a sample holds the armed poison value")
