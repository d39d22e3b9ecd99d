"""Rows to upsert into `durability_audit`: findings opened, changed and resolved.

One row per finding for as long as it holds, not one per poll: a MERGE on `finding_id`
updates it in place. A finding no longer found is resolved (resolved_at set), and one
that comes back later is a new row with a new id, so the table keeps each episode.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

import pyarrow as pa

from streaming.schemas import arrow_schema

TABLE = "durability_audit"
# What a finding is: the same key in two polls is the same finding.
KEY = ("cluster", "rule", "topic", "partition")
# What may change while it holds; a change rewrites the row (updated_at).
VALUES = ("severity", "detail", "replication_factor", "min_insync_replicas",
          "effective_min_isr", "unclean_leader_election_enable", "evidence")


def schema() -> pa.Schema:
    """The table's Arrow schema (metrics_schemas/tables.yaml)."""
    return arrow_schema(TABLE)


def finding_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(k) for k in KEY)


def finding_id(row: Mapping[str, Any], opened_at: datetime) -> str:
    """First 16 hex digits of sha256("cluster|rule|topic|partition|opened_at"), an
    absent topic or partition written as empty: stable for an episode, new for the next."""
    parts = ["" if v is None else str(v) for v in finding_key(row)]
    text = "|".join([*parts, opened_at.isoformat()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _evidence(value: Any) -> dict[str, str] | None:
    """Evidence as a dict whichever way it arrives (Arrow reads a map as pairs)."""
    if value is None:
        return None
    return dict(value.items() if isinstance(value, Mapping) else value)


def _same(open_row: Mapping[str, Any], found: Mapping[str, Any]) -> bool:
    return all((_evidence(open_row.get(v)) == _evidence(found.get(v))) if v == "evidence"
               else open_row.get(v) == found.get(v) for v in VALUES)


def reconcile(open_findings: Iterable[Mapping[str, Any]],
              current_findings: Iterable[Mapping[str, Any]], now: datetime,
              clusters: Collection[str] | None = None) -> pa.Table:
    """The rows to upsert so the table matches `current_findings` at `now`.

    `open_findings` are the table's rows with resolved_at null (resolved ones passed in are
    ignored); `current_findings` are `audit` rows. New findings open at `now`, findings
    whose values changed are rewritten, open findings not found any more resolve at
    `now`; unchanged ones write nothing. Only open findings of `clusters` may resolve
    (default: every cluster): pass the clusters this audit really polled, so a cluster
    whose poll failed keeps its findings open instead of reading as clean.

    Two open rows with one key (a crash between writes) keep the older and resolve the
    other, so the table converges to one row per open finding.
    """
    open_by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for row in sorted((dict(r) for r in open_findings if r.get("resolved_at") is None),
                      key=lambda r: r["opened_at"]):
        if clusters is not None and row["cluster"] not in clusters:
            continue
        key = finding_key(row)
        if key in open_by_key:
            rows.append({**row, "resolved_at": now, "updated_at": now})
        else:
            open_by_key[key] = row
    seen: set[tuple[Any, ...]] = set()
    for found in current_findings:
        key = finding_key(found)
        if key in seen:
            continue
        seen.add(key)
        held = open_by_key.get(key)
        if held is None:
            rows.append({**found, "evidence": _evidence(found.get("evidence")),
                         "finding_id": finding_id(found, now), "opened_at": now,
                         "resolved_at": None, "updated_at": now})
        elif not _same(held, found):
            rows.append({**held, **{v: found.get(v) for v in VALUES},
                         "evidence": _evidence(found.get("evidence")), "updated_at": now})
    for key, held in open_by_key.items():
        if key not in seen:
            rows.append({**held, "evidence": _evidence(held.get("evidence")),
                         "resolved_at": now, "updated_at": now})
    for row in rows:
        evidence = _evidence(row.get("evidence"))
        row["evidence"] = None if evidence is None else sorted(evidence.items())
    return pa.Table.from_pylist(rows, schema=schema())


def still_open(open_findings: Iterable[Mapping[str, Any]],
               upserted: pa.Table) -> list[dict[str, Any]]:
    """The open findings once `upserted` (a `reconcile` result) is applied: what to pass
    as `open_findings` next time without reading the table back."""
    by_id = {r["finding_id"]: dict(r) for r in open_findings if r.get("resolved_at") is None}
    for row in upserted.to_pylist():
        if row["resolved_at"] is None:
            by_id[row["finding_id"]] = row
        else:
            by_id.pop(row["finding_id"], None)
    return sorted(by_id.values(), key=lambda r: (r["opened_at"], r["finding_id"]))
