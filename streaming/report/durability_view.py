"""The durability audit's open findings (Admin API poller, streaming/metadata) for the report.

Open findings are shown whatever their age: a topic with replication factor 2 created a
month ago is as unsafe today, so the report window does not apply. A fleet can hold
thousands (every RF 2 topic is one), so the rows come counted per rule first, worst
severity first, and the report lists only the first `limit` findings in full.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.dataset as pads

from streaming.report.tables import TableRead, read_table

SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
COLUMNS = ["cluster", "rule", "severity", "topic", "partition", "detail", "opened_at",
           "updated_at", "finding_id"]


def read_open_findings(delta_root: str | Path, cluster: str | None = None) -> TableRead:
    """The findings still open (resolved_at null), worst severity, then rule, then topic
    first; one row per finding_id."""
    read = read_table(delta_root, "durability_audit", columns=COLUMNS,
                      filter=pads.field("resolved_at").is_null(), cluster=cluster,
                      window_text="that are open (resolved_at null)"
                      + (f" for cluster {cluster}" if cluster else "")
                      + ": the audit finds nothing to fix")
    if read.ok:
        frame = read.frame.sort_values("updated_at", kind="stable").drop_duplicates(
            "finding_id", keep="last")
        frame = frame.assign(_rank=frame["severity"].map(SEVERITY_ORDER).fillna(9))
        read.frame = frame.sort_values(["_rank", "rule", "cluster", "topic", "partition"],
                                       na_position="first").drop(columns="_rank").reset_index(
            drop=True)
    return read


def per_rule(findings: pd.DataFrame) -> pd.DataFrame:
    """Open findings counted per (cluster, rule, severity), in the findings' order."""
    if findings.empty:
        return pd.DataFrame(columns=["cluster", "rule", "severity", "findings"])
    return (findings.groupby(["cluster", "rule", "severity"], sort=False, dropna=False)
            .size().rename("findings").reset_index())
