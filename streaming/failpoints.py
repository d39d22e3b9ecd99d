"""Named crash points for the crash-safety tests; inert unless the environment arms them.

KAFKA_HEALTH_FAILPOINTS="bronze_committed:3,signals_committed:2" kills the whole process
group with SIGKILL the 3rd time the job passes `bronze_committed`, and so on: a crash at
an exact place between two Delta commits, which random kills rarely hit.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_ARMED: dict[str, int] = {}
_HITS: Counter[str] = Counter()
for _item in filter(None, os.environ.get("KAFKA_HEALTH_FAILPOINTS", "").split(",")):
    _name, _, _nth = _item.partition(":")
    _ARMED[_name.strip()] = int(_nth or 1)


def hit(name: str) -> None:
    if name not in _ARMED:
        return
    _HITS[name] += 1
    if _HITS[name] == _ARMED[name]:
        os.killpg(os.getpgrp(), signal.SIGKILL)
