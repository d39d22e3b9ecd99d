"""Each incident's `cause`: the brokers the Admin API blames, kept once known.

Incidents are recomputed from the signal rows every batch, and the metrics know nothing
of causes, so each recomputed row arrives without one. An open incident takes the cause
of the newest fresh Admin API view (it follows the fault as it changes: a third broker
lost joins the sentence); when that view names none (healed, not polled, stale), and
always once resolved, the row keeps the cause it was last written with, so history
says why each incident happened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

# (cluster, kind, broker) -> the brokers to blame, or None.
CauseLookup = Callable[[str, str, str], str | None]


def stored_causes(rows: pa.Table) -> dict[str, str]:
    """incident_id -> cause of the stored incident rows that have one."""
    if "cause" not in rows.column_names or rows.num_rows == 0:
        return {}
    known = rows.filter(pc.is_valid(rows["cause"]))
    return dict(zip(known["incident_id"].to_pylist(), known["cause"].to_pylist(), strict=True))


def with_causes(incidents: pa.Table, stored: Mapping[str, str],
                cause_of: CauseLookup | None) -> pa.Table:
    """`incidents` with their `cause` column filled: a fresh cause for open ones when
    `cause_of` names one, else the row's own or the stored one."""
    if incidents.num_rows == 0:
        return incidents
    columns = ["incident_id", "cluster", "kind", "broker", "resolved_at", "cause"]
    causes = []
    for row in incidents.select(columns).to_pylist():
        fresh = None
        if cause_of is not None and row["resolved_at"] is None:
            fresh = cause_of(row["cluster"], row["kind"], row["broker"])
        causes.append(fresh or row["cause"] or stored.get(row["incident_id"]))
    index = incidents.schema.get_field_index("cause")
    return incidents.set_column(index, incidents.schema.field(index),
                                pa.array(causes, pa.string()))
