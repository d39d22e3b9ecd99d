"""Small but realistic Delta tables for report tests, written with delta-rs from tables.yaml schemas.

Cluster ``prod-east``, brokers 1 and 2, four hours of 1-minute windows ending at NOW:

* broker 1 loses a follower at 09:28: under-replicated from 09:28, under-min-ISR (3
  partitions) from 09:30 to 09:52 -> one *resolved* under_min_isr incident;
* broker 2 has a request-plane spike around 11:15 and an unclean leader election at
  11:20 -> one *open* unclean_election incident;
* partition_headroom grows on both: broker 1 bound by recovery (3,000), broker 2 by
  file descriptors (2,950);
* a handful of quarantined records in three reason categories.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from streaming.schemas import arrow_schema

CLUSTER = "prod-east"
BROKERS = ("1", "2")
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
START = NOW - timedelta(hours=4)
MINUTE = timedelta(minutes=1)

UMI_START = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
UMI_END = datetime(2026, 3, 2, 9, 52, tzinfo=UTC)
URP_START = datetime(2026, 3, 2, 9, 28, tzinfo=UTC)
URP_END = datetime(2026, 3, 2, 9, 55, tzinfo=UTC)
CAUSE = "broker 3 out of ISR"  # the Admin API's cause of the under-min-ISR incident
UNCLEAN_AT = datetime(2026, 3, 2, 11, 20, tzinfo=UTC)
SPIKE_START = datetime(2026, 3, 2, 11, 14, tzinfo=UTC)
SPIKE_END = datetime(2026, 3, 2, 11, 24, tzinfo=UTC)

# Headroom: partitions at START and growth per minute, per broker.
PARTITIONS0 = {"1": 1800.0, "2": 2400.0}
GROWTH_PER_MIN = {"1": 0.1, "2": 0.2}
CEILINGS = {
    "1": {"mmap": 21843.0, "file_descriptors": 310_000.0, "recovery": 3000.0,
          "max_broker_partitions": None, "baseline": 4000.0},
    "2": {"mmap": 21843.0, "file_descriptors": 2950.0, "recovery": 3000.0,
          "max_broker_partitions": None, "baseline": 4000.0},
}


def windows() -> list[datetime]:
    n = int((NOW - START) / MINUTE)
    return [START + i * MINUTE for i in range(n)]


def _write(root: Path, table: str, rows: list[dict]) -> None:
    write_deltalake(str(root / table), pa.Table.from_pylist(rows, schema=arrow_schema(table)), mode="append")


def partitions_at(broker: str, ws: datetime) -> float:
    minutes = (ws - START) / MINUTE
    return float(math.floor(PARTITIONS0[broker] + GROWTH_PER_MIN[broker] * minutes))


def broker_signal_rows() -> list[dict]:
    rows = []
    for i, ws in enumerate(windows()):
        for b in BROKERS:
            wave = 0.5 + 0.5 * math.sin(i / 17.0 + (0 if b == "1" else 1.3))
            umi = 3.0 if b == "1" and UMI_START <= ws < UMI_END else 0.0
            urp = (5.0 if b == "1" else 2.0) if URP_START <= ws < URP_END else 0.0
            shrinks = 3.0 if b == "1" and ws in (URP_START, UMI_START) else 0.0
            expands = 2.0 if b == "1" and ws in (UMI_END, URP_END) else 0.0
            spike = b == "2" and SPIKE_START <= ws < SPIKE_END
            queue = 0.86 if spike else 0.05 + 0.2 * wave
            idle = 0.15 if spike else 0.62 + 0.15 * wave
            parts = partitions_at(b, ws)
            rows.append({
                "cluster": CLUSTER, "broker": b, "window_start": ws, "window_end": ws + MINUTE,
                "samples": 240, "last_sample_ts": ws + timedelta(seconds=55),
                "under_min_isr_max": umi, "under_min_isr_last": umi,
                "at_min_isr_max": 1.0 if umi else 0.0, "at_min_isr_last": 1.0 if umi else 0.0,
                "under_replicated_max": urp, "under_replicated_last": urp,
                "offline_partitions_max": 0.0, "active_controller_last": 1.0 if b == "1" else 0.0,
                "isr_shrinks_increase": shrinks, "isr_expands_increase": expands,
                "unclean_elections_increase": 1.0 if b == "2" and ws == UNCLEAN_AT else 0.0,
                "request_queue_size_max": queue * 500, "request_queue_utilization_max": queue,
                "request_queue_utilization_p95": queue * 0.9, "response_queue_size_max": 3.0,
                "request_handler_idle_min": idle - 0.05, "request_handler_idle_mean": idle,
                "network_processor_idle_min": 0.78, "network_processor_idle_mean": 0.83 + 0.05 * wave,
                "partition_count_last": parts, "leader_count_last": math.floor(parts / 3),
                "log_segments_last": parts * 1.5, "open_fds_last": parts * 4.5 + 350,
                "max_fds_last": 1_048_576.0 if b == "1" else 13_625.0,
                "updated_at": ws + timedelta(minutes=1, seconds=5),
            })
    return rows


def cluster_signal_rows(broker_rows: list[dict]) -> list[dict]:
    by_ws: dict[datetime, list[dict]] = {}
    for r in broker_rows:
        by_ws.setdefault(r["window_start"], []).append(r)
    return [{
        "cluster": CLUSTER, "window_start": ws, "window_end": ws + MINUTE,
        "brokers_reporting": len(rs),
        "offline_partitions_max": max(r["offline_partitions_max"] for r in rs),
        "active_controllers": sum(r["active_controller_last"] for r in rs),
        "under_min_isr_total": sum(r["under_min_isr_max"] for r in rs),
        "under_replicated_total": sum(r["under_replicated_max"] for r in rs),
        "unclean_elections_increase": sum(r["unclean_elections_increase"] for r in rs),
        "updated_at": ws + timedelta(minutes=1, seconds=5),
    } for ws, rs in sorted(by_ws.items())]


def incident_rows() -> list[dict]:
    return [
        {"incident_id": "9f1c2d0a4b7e", "cluster": CLUSTER, "broker": "1", "kind": "under_min_isr",
         "started_at": UMI_START, "resolved_at": UMI_END, "peak_value": 3.0,
         "updated_at": UMI_END + timedelta(minutes=1), "cause": CAUSE},
        {"incident_id": "4e8a51c93d20", "cluster": CLUSTER, "broker": "2", "kind": "unclean_election",
         "started_at": UNCLEAN_AT, "resolved_at": None, "peak_value": 1.0,
         "updated_at": NOW - timedelta(seconds=30)},
    ]


def durability_rows() -> list[dict]:
    """Two open findings and one resolved (which the report must leave out)."""
    opened = START + timedelta(minutes=5)
    base = {"cluster": CLUSTER, "severity": "warning", "partition": None,
            "replication_factor": 2, "min_insync_replicas": 2, "effective_min_isr": 2,
            "unclean_leader_election_enable": False, "evidence": None, "opened_at": opened,
            "resolved_at": None, "updated_at": opened}
    return [
        {**base, "finding_id": "a1", "rule": "replication_factor_below_minimum", "topic": "payments",
         "detail": "replication factor 2 < 3"},
        {**base, "finding_id": "a2", "rule": "unclean_leader_election_enabled", "topic": "clicks",
         "severity": "critical", "detail": "unclean.leader.election.enable is true (topic)"},
        {**base, "finding_id": "a3", "rule": "min_isr_below_minimum", "topic": "gone",
         "detail": "min.insync.replicas 1 on RF 3", "resolved_at": opened + MINUTE},
    ]


def headroom_rows() -> list[dict]:
    rows = []
    for ws in windows():
        for b in BROKERS:
            parts = partitions_at(b, ws)
            ceilings = CEILINGS[b]
            binding = min((v, k) for k, v in ceilings.items() if v is not None)
            headroom = binding[0] - parts
            growth = GROWTH_PER_MIN[b] * 1440
            rows.append({
                "cluster": CLUSTER, "broker": b, "evaluated_at": ws, "partitions": parts,
                "leaders": float(math.floor(parts / 3)), "log_segments": parts * 1.5,
                **{f"ceiling_{k}": v for k, v in ceilings.items()},
                "leader_ceiling": 1000.0, "binding_bound": binding[1], "binding_ceiling": binding[0],
                "headroom": headroom, "headroom_pct": 100.0 * headroom / binding[0],
                # The model needs a few points before it fits a slope.
                "growth_per_day": growth if ws >= START + 10 * MINUTE else None,
                "days_to_ceiling": headroom / growth if ws >= START + 10 * MINUTE else None,
                "updated_at": ws + timedelta(minutes=1, seconds=5),
            })
    return rows


def quarantine_rows() -> list[dict]:
    reasons = (
        ["not JSON: Expecting value: line 1 column 1 (char 0)"] * 5
        + ["NaN value: kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"] * 2
        + ["unknown format"]
    )
    return [{
        "ingest_ts": NOW - timedelta(minutes=90 - 7 * i), "source_topic": "kafka-metrics",
        "source_partition": i % 3, "source_offset": 1000 + i,
        "source_format": "jolokia" if "NaN" in reason else "auto", "reason": reason,
        "raw": b"\x00garbage" if "JSON" in reason else b'{"value": "NaN"}',
    } for i, reason in enumerate(reasons)]


def build(root: Path) -> Path:
    """Write all report tables under ``root`` (the Delta root) and return it."""
    root.mkdir(parents=True, exist_ok=True)
    broker_rows = broker_signal_rows()
    _write(root, "broker_signals", broker_rows)
    _write(root, "cluster_signals", cluster_signal_rows(broker_rows))
    _write(root, "incidents", incident_rows())
    _write(root, "partition_headroom", headroom_rows())
    _write(root, "quarantine", quarantine_rows())
    _write(root, "durability_audit", durability_rows())
    return root


def build_empty(root: Path) -> Path:
    """Every table exists with its schema but no rows (a job that started and saw nothing)."""
    root.mkdir(parents=True, exist_ok=True)
    for table in ("broker_signals", "cluster_signals", "incidents", "partition_headroom", "quarantine",
                  "durability_audit"):
        _write(root, table, [])
    return root
