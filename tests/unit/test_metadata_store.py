"""MetadataStore on real Delta tables (delta-rs, a temporary folder): changes appended,
findings opened and resolved in place, and a restarted store continuing them."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable

from streaming.metadata.store import MetadataStore
from tests.unit.metadata_builders import at, snapshot, topic


def rows(root: Path, table: str) -> list[dict]:
    return DeltaTable(str(root / table)).to_pyarrow_table().to_pylist()


def test_changes_then_findings_opened_and_resolved(tmp_path: Path) -> None:
    store = MetadataStore(str(tmp_path), "app")
    broken = snapshot(topic("orders", [[1, 2, 3]], min_isr=1), polled_at=at(0))
    first = store.record(broken)
    assert first.changes.num_rows == 5 and first.audit_rows.num_rows == 1
    assert {r["change"] for r in rows(tmp_path, "cluster_metadata")} == {"baseline"}

    assert store.record(snapshot(topic("orders", [[1, 2, 3]], min_isr=1),
                                 polled_at=at(30))).audit_rows.num_rows == 0
    assert len(rows(tmp_path, "cluster_metadata")) == 5  # nothing changed, nothing written

    fixed = store.record(snapshot(topic("orders", [[1, 2, 3]], min_isr=2), polled_at=at(60)))
    assert fixed.changes.to_pylist()[0]["changed_fields"] == "min_insync_replicas,effective_min_isr"
    [finding] = rows(tmp_path, "durability_audit")
    assert (finding["rule"], finding["opened_at"], finding["resolved_at"]) == (
        "min_isr_below_minimum", at(0), at(60))


def test_a_restarted_store_continues_the_open_findings(tmp_path: Path) -> None:
    MetadataStore(str(tmp_path), "app").record(
        snapshot(topic("orders", [[1]], min_isr=1), polled_at=at(0)))
    again = MetadataStore(str(tmp_path), "app")
    assert again.record(snapshot(topic("orders", [[1]], min_isr=1),
                                 polled_at=at(30))).audit_rows.num_rows == 0
    assert len(rows(tmp_path, "durability_audit")) == 1
    again.record(snapshot(topic("orders", [[1, 2, 3]], min_isr=2), polled_at=at(60)))
    [finding] = rows(tmp_path, "durability_audit")
    assert finding["resolved_at"] == at(60)
    # the restart wrote a new baseline: the table alone rebuilds the state
    assert [r["change"] for r in rows(tmp_path, "cluster_metadata")].count("baseline") == 2 * 5


def test_clusters_write_under_their_own_transactions(tmp_path: Path) -> None:
    store = MetadataStore(str(tmp_path), "app")
    store.record(snapshot(topic("a", [[1]], min_isr=1), cluster="east", polled_at=at(60)))
    # a later poll of another cluster stamped earlier must not read as already written
    store.record(snapshot(topic("a", [[1]], min_isr=1), cluster="west", polled_at=at(0)))
    assert {r["cluster"] for r in rows(tmp_path, "durability_audit")} == {"east", "west"}
    assert {r["cluster"] for r in rows(tmp_path, "cluster_metadata")} == {"east", "west"}
    # and a clock that steps back still writes
    store.record(snapshot(topic("a", [[1, 2, 3]], min_isr=2), cluster="east", polled_at=at(30)))
    east = [r for r in rows(tmp_path, "durability_audit") if r["cluster"] == "east"]
    assert [r["resolved_at"] for r in east] == [at(30)]
