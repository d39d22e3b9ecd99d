"""Cluster metadata from the Admin API: what the JMX metrics cannot say.

The broker metrics count partitions in trouble per leader; the Admin API says which
partitions, which brokers are missing from their ISR, and how each topic is configured.
Per watched cluster a poller thread (`poller`) fetches a snapshot (`admin`, `model`)
every 30 s; pure functions turn snapshots into table rows (`changes` for
cluster_metadata, `audit` + `reconcile` for durability_audit), rank the brokers behind
the trouble (`causes`), and set the exporter's gauges (`export`); `store` writes the two
tables, `board` hands the ranked causes to the pipeline's signals writer (incidents'
`cause`), and `handler.PollHandler` is the one callback that does all of it per poll;
`service.MetadataService` builds and runs it all from the job's config.
Thresholds live in metrics_schemas/durability.yaml; docs/metadata.md says how to run it
and what confluent-kafka does not expose (eligible leader replicas, leader recovery
state).
"""

from streaming.metadata.audit import audit
from streaming.metadata.board import CauseBoard, CauseView, cause_view
from streaming.metadata.causes import KINDS, Cause, rank_causes, top_brokers_by_kind
from streaming.metadata.changes import snapshot_changes
from streaming.metadata.export import (
    export_cause_info,
    export_causes,
    export_findings,
    export_health,
    export_poll,
)
from streaming.metadata.handler import PollHandler
from streaming.metadata.health import ERROR_CLASSES, PollerHealth
from streaming.metadata.model import BrokerInfo, ClusterSnapshot, PartitionInfo, TopicInfo
from streaming.metadata.poller import MetadataPoller, PollerSettings, PollResult
from streaming.metadata.reconcile import reconcile, still_open
from streaming.metadata.rules import RULES, AuditRules, load_rules
from streaming.metadata.store import MetadataStore, Recorded

__all__ = [
    "ERROR_CLASSES",
    "KINDS",
    "RULES",
    "AuditRules",
    "BrokerInfo",
    "Cause",
    "CauseBoard",
    "CauseView",
    "ClusterSnapshot",
    "MetadataPoller",
    "MetadataStore",
    "PartitionInfo",
    "PollHandler",
    "PollResult",
    "PollerHealth",
    "PollerSettings",
    "Recorded",
    "TopicInfo",
    "audit",
    "cause_view",
    "export_cause_info",
    "export_causes",
    "export_findings",
    "export_health",
    "export_poll",
    "load_rules",
    "rank_causes",
    "reconcile",
    "snapshot_changes",
    "still_open",
    "top_brokers_by_kind",
]
