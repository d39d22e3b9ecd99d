"""pyarrow's allocator setting, given to this process and the processes it starts.

pyarrow's allocator (mimalloc) returns freed pages to the system after a delay (10 ms by
default). A batch's Arrow tables come and go in the driver and in every Python worker once
or more a second, so pages returned at once (0) are faulted back in by the next batch: a
page fault per 4 KiB of every large table, most of the cost of a batch's sorts and
group-bys in a catch-up. Kept a second, the pages of one batch serve the next; an idle
process still returns them within a second (tests/benchmarks/results/
purge-delay-same-hour.json).

mimalloc reads the variable once, when pyarrow loads, so it is set by the functions that
start things (streaming.cli.main before any pyarrow import, the Spark session before its
JVM and Python workers start), never by importing the package: a library user's
environment is theirs.
"""

from __future__ import annotations

import os

PURGE_DELAY_ENV = "MIMALLOC_PURGE_DELAY"
PURGE_DELAY_MS = "1000"


def set_purge_delay() -> None:
    """The purge delay for this process and its children, unless the environment has one."""
    os.environ.setdefault(PURGE_DELAY_ENV, PURGE_DELAY_MS)
