"""What to do with each poll: the one callback the job hands every poller.

Kept here so the order is right in one place: the health gauges first (a failing write
must not hide a failing cluster), then the tables, then the findings and causes on the
gauges, computed even when the write failed (the next poll writes what this one
could not: the store's state only moves past what was written), and last the causes
published for the pipeline (`board`), which fills incidents' causes from them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from streaming.metadata.audit import audit
from streaming.metadata.board import CauseBoard, cause_view
from streaming.metadata.export import (
    export_cause_info,
    export_causes,
    export_findings,
    export_health,
)
from streaming.metadata.poller import PollResult
from streaming.metadata.rules import AuditRules

if TYPE_CHECKING:
    from streaming.exporter import Exporter
    from streaming.metadata.store import MetadataStore

LOG = logging.getLogger("kafka_health.metadata")


class PollHandler:
    """`MetadataPoller(..., on_poll=PollHandler(store, exporter, rules, board))`. Any of
    `store`, `exporter` and `board` may be None (tables only, gauges only, ...). Never
    raises: a failing write is logged and retried by the next poll."""

    def __init__(self, store: MetadataStore | None, exporter: Exporter | None,
                 rules: AuditRules, board: CauseBoard | None = None) -> None:
        self.store = store
        self.exporter = exporter
        self.rules = rules
        self.board = board
        self.write_failures = 0

    def __call__(self, result: PollResult) -> None:
        if self.exporter is not None:
            export_health(self.exporter, result.health)
        snapshot = result.snapshot
        if snapshot is None:
            return
        findings = None
        if self.store is not None:
            try:
                findings = self.store.record(snapshot).findings
            except Exception:
                self.write_failures += 1
                LOG.exception("metadata %s: writing the poll's rows failed; the next poll "
                              "writes them", result.cluster)
        view = cause_view(snapshot, self.rules.top_cause_brokers)
        if self.exporter is not None:
            if findings is None:
                findings = audit(snapshot, self.rules)
            export_findings(self.exporter, snapshot.cluster, findings, self.rules.rules)
            export_causes(self.exporter, snapshot, self.rules.top_cause_brokers)
            export_cause_info(self.exporter, view)
        if self.board is not None:
            self.board.publish(view)
