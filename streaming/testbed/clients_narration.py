"""The demo's voice for the clients' truth: when the durability probe's acks=all writes
through a broker start and stop failing, each acked record it finds lost, and each
consumer group's loss to retention, read from the job's tables as an operator would."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from streaming.config import Config


def _rows(path: str, since: datetime | None, column: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    try:
        rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    except Exception:  # not written yet: the probe has closed no window
        return []
    return [r for r in rows if since is None or r[column] > since]


class ClientsNarrator:
    """`poll()` says what changed since the last poll; it owns what it has said."""

    def __init__(self, config: Config, say: Callable[[str], None]) -> None:
        self.root = config.delta.path
        self.say = say
        self.failing: dict[tuple[str, str], bool] = {}
        self._windows_seen: datetime | None = None
        self._losses_seen: datetime | None = None
        self._group_losses: dict[tuple[str, str, str, int, int], int] = {}
        self.probe_failures = self.probe_losses = self.retention_losses = 0

    def poll(self) -> None:
        windows = sorted(_rows(f"{self.root}/probe_windows", self._windows_seen,
                               "window_start"), key=lambda r: r["window_start"])
        for w in windows:
            key = (w["cluster"], w["broker"])
            failed = w["failed"] > 0
            if failed and not self.failing.get(key):
                self.probe_failures += 1
                classes = ", ".join(f"{k.upper()} x{v}" for k, v in
                                    dict(w["failed_by_class"] or {}).items())
                self.say(f"PROBE: acks=all writes through broker {w['broker']} of "
                         f"{w['cluster']} failing since {w['window_start']:%H:%M:%S}Z "
                         f"({w['failed']} of {w['attempted']}: {classes})")
            elif not failed and self.failing.get(key) and w["acked"] > 0:
                self.say(f"PROBE: writes through broker {w['broker']} of {w['cluster']} "
                         f"acked again from {w['window_start']:%H:%M:%S}Z")
            self.failing[key] = failed
            self._windows_seen = w["window_start"]
        for loss in sorted(_rows(f"{self.root}/probe_losses", self._losses_seen, "found_at"),
                           key=lambda r: r["found_at"]):
            self.probe_losses += 1
            self.say(f"DATA LOSS (probe): the record acked by broker {loss['broker']} at "
                     f"{loss['acked_at']:%H:%M:%S}Z, {loss['topic']}[{loss['partition']}] "
                     f"offset {loss['offset']}, is gone")
            self._losses_seen = loss["found_at"]
        for row in _rows(f"{self.root}/consumer_group_losses", None, "last_seen"):
            group_key = (row["cluster"], row["group"], row["topic"], row["partition"],
                         row["committed"])
            if row["lost"] > self._group_losses.get(group_key, 0):
                self.retention_losses += 1
                self.say(f"LOSS TO RETENTION: group {row['group']} of {row['cluster']} lost "
                         f"{row['lost']:,} records of {row['topic']}[{row['partition']}] "
                         f"(committed {row['committed']:,}, log start {row['log_start']:,})")
                self._group_losses[group_key] = row["lost"]
