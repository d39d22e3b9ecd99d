"""Bronze, quarantine and dq_results keep `delta.retention_days` days; older rows go.

Without it the tables grow forever (bronze: every sample ever read) and every read that
cannot prune files costs more each day. At most once per `delta.retention_every_seconds`
(the first one interval after the job starts), on the driver after a batch's paging and
merges, rows older than the cut-off are deleted and files no version younger than
`delta.vacuum_retain_hours` reads are vacuumed. A failure is logged and retried at the
next due time: maintenance never stops the stream.

The delete predicates are built from our own column names and a cut-off this module
formats (an ISO date or time), never from data.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

from streaming.config import DeltaConfig
from streaming.sinks.base import DeltaSink

LOG = logging.getLogger("kafka_health.retention")
# The time column each table ages by: bronze by its date partition (a delete of whole
# partitions rewrites no file), the others by their own timestamps.
AGE_COLUMNS = {"bronze": "date", "quarantine": "ingest_ts", "dq_results": "evaluated_at"}


def predicate(table: str, cutoff: datetime) -> str:
    """Rows of `table` older than `cutoff`, as a Delta SQL condition both engines parse."""
    column = AGE_COLUMNS[table]
    if column == "date":
        return f"`date` < '{cutoff.strftime('%Y-%m-%d')}'"
    return f"`{column}` < '{cutoff.astimezone(UTC).isoformat()}'"


class Retention:
    def __init__(self, config: DeltaConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        # The first run one interval after the job starts: a job replaying or backfilling
        # must not delete what it is about to read, and a restart must not run it again.
        self.last_run: float | None = clock()

    def due(self) -> bool:
        days = self.config.retention_days
        if not any(v is not None for v in days.values()):
            return False
        return (self.last_run is None
                or self.clock() - self.last_run >= self.config.retention_every_seconds)

    def run(self, tables: Mapping[str, DeltaSink]) -> dict[str, int]:
        """Delete and vacuum each table with a retention; rows deleted per table."""
        self.last_run = self.clock()
        now = datetime.fromtimestamp(self.last_run, UTC)
        deleted: dict[str, int] = {}
        for name, days in self.config.retention_days.items():
            if days is None:
                continue
            try:
                table = tables[name]
                deleted[name] = table.delete_where(predicate(name, now - timedelta(days=days)))
                table.vacuum(self.config.vacuum_retain_hours,
                             untracked=self.config.writers() == "read_tasks")
            except Exception as err:  # maintenance must never stop the stream
                LOG.warning("retention of %s failed (tried again in %.0f s): %s", name,
                            self.config.retention_every_seconds, err)
        if any(deleted.values()):
            LOG.info("retention: deleted %s", ", ".join(
                f"{n} {name} rows" for name, n in deleted.items() if n))
        return deleted
