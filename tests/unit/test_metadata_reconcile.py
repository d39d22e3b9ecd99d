"""reconcile: one row per finding episode, written when it opens, changes or resolves."""

from __future__ import annotations

import pyarrow as pa

from streaming.metadata.reconcile import finding_id, reconcile, schema, still_open
from tests.unit.metadata_builders import at


def found(rule: str = "replication_factor_below_minimum", topic: str | None = "t",
          partition: int | None = None, cluster: str = "prod", detail: str = "rf 1",
          evidence: dict[str, str] | None = None) -> dict:
    return {"cluster": cluster, "rule": rule, "severity": "warning", "topic": topic,
            "partition": partition, "detail": detail, "replication_factor": 1,
            "min_insync_replicas": 1, "effective_min_isr": 1,
            "unclean_leader_election_enable": False, "evidence": evidence}


def test_a_new_finding_opens_with_a_stable_id() -> None:
    rows = reconcile([], [found()], at(0))
    assert rows.schema == schema()
    [row] = rows.to_pylist()
    assert (row["opened_at"], row["resolved_at"], row["updated_at"]) == (at(0), None, at(0))
    assert row["finding_id"] == finding_id(found(), at(0))
    assert len(row["finding_id"]) == 16


def test_unchanged_findings_write_nothing() -> None:
    open_rows = still_open([], reconcile([], [found()], at(0)))
    assert reconcile(open_rows, [found()], at(30)).num_rows == 0


def test_a_changed_finding_is_rewritten_in_place() -> None:
    open_rows = still_open([], reconcile([], [found(detail="rf 1")], at(0)))
    [row] = reconcile(open_rows, [found(detail="rf 1, now worse")], at(30)).to_pylist()
    assert row["finding_id"] == open_rows[0]["finding_id"]
    assert (row["detail"], row["opened_at"], row["updated_at"]) == ("rf 1, now worse", at(0), at(30))
    assert row["resolved_at"] is None


def test_evidence_compares_as_a_map_whatever_its_form() -> None:
    first = reconcile([], [found(evidence={"2": "az-a", "1": "az-a"})], at(0))
    open_rows = first.to_pylist()  # as read back from Arrow: a list of pairs
    assert reconcile(open_rows, [found(evidence={"1": "az-a", "2": "az-a"})], at(30)).num_rows == 0


def test_gone_resolves_and_a_recurrence_is_a_new_episode() -> None:
    open_rows = still_open([], reconcile([], [found()], at(0)))
    [resolved] = reconcile(open_rows, [], at(30)).to_pylist()
    assert resolved["resolved_at"] == at(30) and resolved["finding_id"] == open_rows[0]["finding_id"]
    assert still_open(open_rows, pa.Table.from_pylist([resolved], schema=schema())) == []
    [again] = reconcile([], [found()], at(90)).to_pylist()
    assert again["finding_id"] != resolved["finding_id"] and again["opened_at"] == at(90)


def test_keys_include_partition_and_a_missing_topic() -> None:
    rows = reconcile([], [found(partition=0), found(partition=1),
                          found(rule="rack_sizes_unequal", topic=None)], at(0))
    assert len(set(rows["finding_id"].to_pylist())) == 3


def test_only_the_polled_clusters_resolve() -> None:
    open_rows = still_open([], reconcile([], [found(cluster="east"), found(cluster="west")], at(0)))
    rows = reconcile(open_rows, [], at(30), clusters={"east"}).to_pylist()
    assert [(r["cluster"], r["resolved_at"]) for r in rows] == [("east", at(30))]


def test_resolved_rows_passed_in_are_ignored() -> None:
    closed = {**found(), "finding_id": "x", "opened_at": at(0), "resolved_at": at(10),
              "updated_at": at(10)}
    [row] = reconcile([closed], [found()], at(30)).to_pylist()
    assert row["finding_id"] != "x" and row["opened_at"] == at(30)


def test_two_open_rows_of_one_finding_converge_to_one() -> None:
    older = {**found(), "finding_id": "a", "opened_at": at(0), "resolved_at": None,
             "updated_at": at(0)}
    newer = {**older, "finding_id": "b", "opened_at": at(5)}
    rows = reconcile([newer, older], [found()], at(30)).to_pylist()
    assert [(r["finding_id"], r["resolved_at"]) for r in rows] == [("b", at(30))]
    assert [r["finding_id"] for r in still_open([newer, older], pa.Table.from_pylist(
        rows, schema=schema()))] == ["a"]


def test_duplicate_current_findings_count_once() -> None:
    assert reconcile([], [found(), found()], at(0)).num_rows == 1
