"""The durability audit: what in a cluster's configuration and placement would lose
acknowledged data, or stop writes, sooner than its owners believe.

Pure: a snapshot and the rules (metrics_schemas/durability.yaml) in, finding rows out.
Each finding says what is wrong with the effective values, never only the configured
ones: min.insync.replicas 3 on an RF 2 topic reads safe and is a floor of 2.
`reconcile` (streaming/metadata/reconcile.py) turns successive audits into table rows.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from streaming.metadata.model import ClusterSnapshot, PartitionInfo, TopicInfo
from streaming.metadata.phrases import and_list, brokers
from streaming.metadata.rules import AuditRules

RECOVERING = "RECOVERING"


def _finding(snapshot: ClusterSnapshot, rules: AuditRules, rule: str, detail: str,
             topic: TopicInfo | None = None, partition: int | None = None,
             evidence: dict[str, str] | None = None) -> dict[str, Any]:
    """A finding row: where, which rule, why in words, and the effective values."""
    return {
        "cluster": snapshot.cluster, "rule": rule, "severity": rules[rule].severity,
        "topic": None if topic is None else topic.name, "partition": partition,
        "detail": detail,
        "replication_factor": None if topic is None else topic.replication_factor,
        "min_insync_replicas": None if topic is None else topic.min_insync_replicas,
        "effective_min_isr": None if topic is None else topic.effective_min_isr,
        "unclean_leader_election_enable":
            None if topic is None else topic.unclean_leader_election_enable,
        "evidence": evidence,
    }


def _topic_findings(snapshot: ClusterSnapshot, rules: AuditRules,
                    topic: TopicInfo) -> list[dict[str, Any]]:
    out = []
    rf, min_isr = topic.replication_factor, topic.min_insync_replicas
    if rf is not None and min_isr is not None and min_isr > rf:
        floor = topic.effective_min_isr
        alone = " (a single copy acknowledges acks=all writes)" if floor == 1 else ""
        out.append(_finding(snapshot, rules, "min_isr_above_replication_factor",
                            f"min.insync.replicas {min_isr} is above the replication factor "
                            f"{rf}: the broker caps it silently, so the effective floor is "
                            f"{floor}{alone}", topic))
    floor_rf = rules["replication_factor_below_minimum"].params["min_replication_factor"]
    if rf is not None and rf < floor_rf:
        why = ("one broker holds the only copy" if rf == 1 else
               "no min.insync.replicas keeps it both durable and writable through one "
               "broker loss")
        out.append(_finding(snapshot, rules, "replication_factor_below_minimum",
                            f"replication factor {rf} is below {floor_rf}: {why}", topic))
    low = rules["min_isr_below_minimum"].params
    if (rf is not None and min_isr is not None and rf >= low["from_replication_factor"]
            and min_isr < low["min_insync_replicas"]):
        out.append(_finding(snapshot, rules, "min_isr_below_minimum",
                            f"min.insync.replicas {min_isr} on replication factor {rf}: once "
                            f"the ISR shrinks to {min_isr}, that many copies acknowledge "
                            f"an acks=all write (at least {low['min_insync_replicas']} "
                            "wanted)", topic))
    if topic.unclean_leader_election_enable:
        where = {"topic": "set on the topic", "broker": "the broker or cluster default",
                 "default": "Kafka's default"}.get(topic.unclean_leader_election_source or "",
                                                   "source unknown")
        out.append(_finding(snapshot, rules, "unclean_leader_election_enabled",
                            "unclean.leader.election.enable is true (" + where + "): when "
                            "the whole ISR is down an out-of-sync replica may become leader "
                            "and every record past its log end is lost", topic))
    return out


def _racks(snapshot: ClusterSnapshot) -> dict[int, str] | None:
    """Broker -> rack when every broker of the cluster has one, else None (the rack
    rules then stay silent: there is no placement to judge)."""
    racks = {b.id: b.rack for b in snapshot.brokers.values()}
    if not racks or any(r is None for r in racks.values()):
        return None
    return {b: r for b, r in racks.items() if r is not None}


def _shared_rack(snapshot: ClusterSnapshot, rules: AuditRules, racks: dict[int, str],
                 topic: TopicInfo, p: PartitionInfo) -> dict[str, Any] | None:
    available = len(set(racks.values()))
    used = {racks[r] for r in p.replicas if r in racks}
    if len(used) >= min(len(p.replicas), available):
        return None
    names = sorted(used)
    spread = (f"all in rack {names[0]}" if len(names) == 1
              else f"on racks {and_list(names)} only")
    return _finding(snapshot, rules, "replicas_share_rack",
                    f"replicas on {brokers(list(p.replicas))} are {spread}, though "
                    f"{available} racks are available: one rack failure takes more copies "
                    "than it has to", topic, p.partition,
                    {str(r): racks[r] for r in p.replicas if r in racks})


def _rack_sizes(snapshot: ClusterSnapshot, rules: AuditRules,
                racks: dict[int, str]) -> dict[str, Any] | None:
    sizes = Counter(racks.values())
    allowed = rules["rack_sizes_unequal"].params["max_broker_count_difference"]
    if len(sizes) < 2 or max(sizes.values()) - min(sizes.values()) <= allowed:
        return None
    listed = ", ".join(f"{rack} {count}" for rack, count in sorted(sizes.items()))
    return _finding(snapshot, rules, "rack_sizes_unequal",
                    f"brokers per rack differ ({listed}): rack-aware placement puts a "
                    "replica in every rack, so the brokers of the smaller racks carry more "
                    "replicas", evidence={rack: str(n) for rack, n in sorted(sizes.items())})


def audit(snapshot: ClusterSnapshot, rules: AuditRules) -> list[dict[str, Any]]:
    """Every finding in `snapshot`, one row per (rule, topic, partition), sorted by rule,
    topic and partition. Rows have no id or times yet; `reconcile` gives them those.

    A rule whose input is unknown (a config not read, a rack not set) finds nothing
    rather than guessing.
    """
    findings: list[dict[str, Any]] = []
    racks = _racks(snapshot)
    if racks is not None:
        sizes = _rack_sizes(snapshot, rules, racks)
        if sizes is not None:
            findings.append(sizes)
    for name in sorted(snapshot.topics):
        findings += _topic_findings(snapshot, rules, snapshot.topics[name])
    for topic, p in snapshot.partitions():
        if racks is not None:
            shared = _shared_rack(snapshot, rules, racks, topic, p)
            if shared is not None:
                findings.append(shared)
        if p.leader_recovery_state == RECOVERING:
            findings.append(_finding(
                snapshot, rules, "leader_recovering",
                f"leader {p.leader} was elected uncleanly and is still recovering (leader "
                "recovery state RECOVERING): records past its log end were lost", topic,
                p.partition, {"leader": str(p.leader),
                              "leader_recovery_state": p.leader_recovery_state}))
    findings.sort(key=lambda f: (f["rule"], f["topic"] or "", -1 if f["partition"] is None
                                 else f["partition"]))
    return findings
