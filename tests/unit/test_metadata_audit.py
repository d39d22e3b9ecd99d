"""The durability audit: each rule finds what it should, says it in words with the
effective values, and clears once the cause is fixed (through reconcile)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from streaming.metadata.audit import audit
from streaming.metadata.model import ClusterSnapshot
from streaming.metadata.reconcile import reconcile, still_open
from streaming.metadata.rules import RULES, load_rules
from streaming.schemas import schemas_dir
from tests.unit.metadata_builders import at, part, snapshot, topic

RULES_DATA = load_rules()
RACKS = {1: "az-a", 2: "az-b", 3: "az-c"}


def _with_recovering(state: str | None) -> ClusterSnapshot:
    t = topic("t", [[1, 2, 3]])
    recovering = replace(t, partitions=(part("t", 0, [1, 2, 3], leader=2,
                                             leader_recovery_state=state),))
    return snapshot(recovering)


# rule -> (a snapshot where it fires, the same cluster fixed, what the detail must say)
CASES = {
    "min_isr_above_replication_factor": (
        snapshot(topic("t", [[1, 2]], min_isr=3)),
        snapshot(topic("t", [[1, 2]], min_isr=2)),
        "min.insync.replicas 3 is above the replication factor 2: the broker caps it "
        "silently, so the effective floor is 2"),
    "replication_factor_below_minimum": (
        snapshot(topic("t", [[1]], min_isr=1)),
        snapshot(topic("t", [[1, 2, 3]], min_isr=2)),
        "replication factor 1 is below 3: one broker holds the only copy"),
    "min_isr_below_minimum": (
        snapshot(topic("t", [[1, 2, 3]], min_isr=1)),
        snapshot(topic("t", [[1, 2, 3]], min_isr=2)),
        "min.insync.replicas 1 on replication factor 3"),
    "unclean_leader_election_enabled": (
        snapshot(topic("t", [[1, 2, 3]], unclean=True)),
        snapshot(topic("t", [[1, 2, 3]], unclean=False)),
        "unclean.leader.election.enable is true (the broker or cluster default)"),
    "replicas_share_rack": (
        snapshot(topic("t", [[1, 2, 4]]), brokers=RACKS | {4: "az-a"}),
        snapshot(topic("t", [[1, 2, 3]]), brokers=RACKS | {4: "az-a"}),
        "replicas on brokers 1, 2 and 4 are on racks az-a and az-b only, though 3 racks "
        "are available"),
    "rack_sizes_unequal": (
        snapshot(topic("t", [[1, 2, 3]]), brokers={1: "az-a", 2: "az-a", 3: "az-b"}),
        snapshot(topic("t", [[1, 3]]), brokers={1: "az-a", 3: "az-b"}),
        "brokers per rack differ (az-a 2, az-b 1)"),
    "leader_recovering": (
        _with_recovering("RECOVERING"), _with_recovering("RECOVERED"),
        "leader 2 was elected uncleanly and is still recovering"),
}


def test_every_rule_has_a_case_and_a_public_source() -> None:
    assert set(CASES) == set(RULES) == set(RULES_DATA.rules)
    for rule in RULES_DATA.rules.values():
        assert "KIP-" in rule.source or "kafka.apache.org" in rule.source, rule


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_fires_with_its_values_and_clears_when_fixed(rule: str) -> None:
    broken, fixed, words = CASES[rule]
    found = [f for f in audit(broken, RULES_DATA) if f["rule"] == rule]
    assert len(found) == 1, found
    assert found[0]["severity"] == RULES_DATA[rule].severity
    if words:
        assert words in found[0]["detail"], found[0]["detail"]
    assert [f for f in audit(fixed, RULES_DATA) if f["rule"] == rule] == []

    opened = reconcile([], found, at(0))
    assert opened.num_rows == 1 and opened["resolved_at"][0].as_py() is None
    open_rows = still_open([], opened)
    cleared = reconcile(open_rows, audit(fixed, RULES_DATA), at(30))
    row = next(r for r in cleared.to_pylist() if r["rule"] == rule)
    assert row["resolved_at"] == at(30) and row["opened_at"] == at(0)
    assert row["finding_id"] == opened["finding_id"][0].as_py()
    assert [r for r in still_open(open_rows, cleared) if r["rule"] == rule] == []


def test_silent_cap_reports_the_effective_floor_and_a_single_copy() -> None:
    [cap, low] = audit(snapshot(topic("t", [[1]], min_isr=2)), RULES_DATA)
    assert cap["rule"] == "min_isr_above_replication_factor"
    assert (cap["replication_factor"], cap["min_insync_replicas"], cap["effective_min_isr"]) == \
        (1, 2, 1)
    assert cap["detail"].endswith("the effective floor is 1 (a single copy acknowledges "
                                  "acks=all writes)")
    assert low["rule"] == "replication_factor_below_minimum"


def test_rf_two_says_why_it_is_not_enough() -> None:
    [low] = audit(snapshot(topic("t", [[1, 2]], min_isr=2)), RULES_DATA)
    assert low["detail"] == ("replication factor 2 is below 3: no min.insync.replicas keeps "
                             "it both durable and writable through one broker loss")


def test_min_isr_one_only_from_rf_three() -> None:
    assert [f["rule"] for f in audit(snapshot(topic("t", [[1, 2]], min_isr=1)),
                                     RULES_DATA)] == ["replication_factor_below_minimum"]


def test_unclean_set_on_the_topic_says_so() -> None:
    t = replace(topic("t", [[1, 2, 3]], unclean=True), unclean_leader_election_source="topic")
    [finding] = audit(snapshot(t), RULES_DATA)
    assert "(set on the topic)" in finding["detail"]
    assert finding["unclean_leader_election_enable"] is True


def test_unknown_configs_find_nothing() -> None:
    t = topic("t", [[1, 2, 3]], min_isr=None, unclean=None)
    assert audit(snapshot(t), RULES_DATA) == []


def test_rack_rules_need_every_broker_to_have_a_rack() -> None:
    # 1 and 2 share rack az-a and the racks are unequal, but broker 3 has none: no verdict
    found = audit(snapshot(topic("t", [[1, 2, 3]]), brokers={1: "az-a", 2: "az-a", 3: None}),
                  RULES_DATA)
    assert found == []


def test_shared_rack_is_judged_against_the_racks_there_are() -> None:
    two_racks = {1: "az-a", 2: "az-a", 3: "az-b", 4: "az-b"}
    # RF 3 on 2 racks cannot avoid sharing one: spread over both is the best there is
    assert audit(snapshot(topic("t", [[1, 2, 3]]), brokers=two_racks), RULES_DATA) == []
    [shared] = audit(snapshot(topic("t", [[1, 3, 4]]), brokers={**two_racks, 5: "az-c",
                                                                 6: "az-c"}), RULES_DATA)
    assert shared["rule"] == "replicas_share_rack" and shared["partition"] == 0
    assert shared["detail"].startswith("replicas on brokers 1, 3 and 4 are on racks az-a and "
                                       "az-b only, though 3 racks are available")
    assert shared["evidence"] == {"1": "az-a", "3": "az-b", "4": "az-b"}


def test_a_down_broker_keeps_its_rack_and_its_findings() -> None:
    racks = {1: "az-a", 2: "az-a", 3: "az-b", 4: "az-b"}
    up = audit(snapshot(topic("t", [[1, 2]]), brokers=racks), RULES_DATA)
    down = audit(snapshot(topic("t", [[1, 2]], isr={0: [1]}), brokers=racks, down={2}),
                 RULES_DATA)
    assert [f["rule"] for f in up] == [f["rule"] for f in down]
    assert "replicas_share_rack" in [f["rule"] for f in up]


def test_cluster_wide_finding_has_no_topic_or_partition() -> None:
    [sizes] = audit(snapshot(topic("t", [[1, 2, 3]]), brokers=RACKS | {4: "az-a"}),
                    RULES_DATA)
    assert sizes["rule"] == "rack_sizes_unequal"
    assert (sizes["topic"], sizes["partition"], sizes["replication_factor"]) == (None, None, None)
    assert sizes["evidence"] == {"az-a": "2", "az-b": "1", "az-c": "1"}


def test_findings_are_sorted_and_one_per_rule_topic_partition() -> None:
    snap = snapshot(topic("b", [[1]], min_isr=2, unclean=True), topic("a", [[1, 2, 3]], min_isr=1))
    keys = [(f["rule"], f["topic"], f["partition"]) for f in audit(snap, RULES_DATA)]
    assert keys == sorted(keys) and len(keys) == len(set(keys)) == 4


# --- the rules file ------------------------------------------------------------------


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "durability.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _shipped() -> dict:
    return yaml.safe_load((schemas_dir() / "durability.yaml").read_text())


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d["rules"]["replication_factor_below_minimum"].pop("min_replication_factor"),
     "missing key"),
    (lambda d: d["rules"]["replicas_share_rack"].update(min_racks=2), "unknown key"),
    (lambda d: d["rules"]["leader_recovering"].update(source=" "), "public source"),
    (lambda d: d["rules"]["leader_recovering"].update(severity="page"), "not one of"),
    (lambda d: d["rules"].pop("rack_sizes_unequal"), "missing"),
    (lambda d: d["rules"].update(acks_all=d["rules"]["leader_recovering"]), "unknown"),
    (lambda d: d["rules"]["min_isr_below_minimum"].update(min_insync_replicas="2"),
     "whole number"),
    (lambda d: d.update(top_cause_brokers=0), "top_cause_brokers"),
])
def test_rules_file_is_checked(tmp_path: Path, mutate, message: str) -> None:
    data = _shipped()
    mutate(data)
    with pytest.raises(ValueError, match=message):
        load_rules(_write(tmp_path, data))


def test_thresholds_are_read_from_the_file(tmp_path: Path) -> None:
    data = _shipped()
    data["rules"]["replication_factor_below_minimum"]["min_replication_factor"] = 2
    rules = load_rules(_write(tmp_path, data))
    assert audit(snapshot(topic("t", [[1, 2]], min_isr=2)), rules) == []
