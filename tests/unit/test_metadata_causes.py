"""Cause ranking: which brokers are missing from the partitions in trouble."""

from __future__ import annotations

from streaming.metadata.causes import (
    OFFLINE,
    UNDER_MIN_ISR,
    UNDER_REPLICATED,
    partition_kind,
    rank_causes,
    top_brokers_by_kind,
)
from tests.unit.metadata_builders import snapshot, topic


def test_brokers_out_of_isr_named_on_their_leader() -> None:
    # leader 1 alone in the ISR of 4 partitions: 2 and 3 are the culprits, not 1
    orders = topic("orders", [[1, 2, 3]] * 4, isr={i: [1] for i in range(4)})
    [cause] = rank_causes(snapshot(orders))
    assert (cause.leader, cause.kind, cause.partitions) == (1, UNDER_MIN_ISR, 4)
    assert cause.brokers == ((2, 4), (3, 4))
    assert cause.sentence == "4 partitions under min ISR on leader 1: brokers 2 and 3 out of ISR"


def test_ranked_by_partitions_missing_them_and_cut_at_top_n() -> None:
    placement = [[1, 2, 3, 4, 5, 6]] * 3
    isr = {0: [1, 2, 3, 4], 1: [1, 3, 4, 5], 2: [1, 2, 4, 6]}  # 6 missing 2x, 5 2x, 2 1x, 3 1x
    t = topic("wide", placement, min_isr=2, isr=isr)
    [cause] = rank_causes(snapshot(t, brokers={b: None for b in range(1, 7)}), top_n=2)
    assert cause.kind == UNDER_REPLICATED
    assert cause.brokers == ((5, 2), (6, 2))
    assert cause.more_brokers == 2
    assert cause.sentence == ("3 partitions under-replicated on leader 1: brokers 5 and 6 out "
                              "of ISR (and 2 more)")


def test_one_partition_one_broker_reads_singular() -> None:
    t = topic("t", [[2, 3, 1]], isr={0: [2, 3]})
    [cause] = rank_causes(snapshot(t))
    assert cause.sentence == "1 partition under-replicated on leader 2: broker 1 out of ISR"


def test_a_partition_counts_in_its_worst_kind_only() -> None:
    t = topic("t", [[1, 2, 3], [1, 2, 3], [2, 3, 1]], isr={0: [1], 1: [1, 2], 2: [3]},
              leaders={2: None})
    snap = snapshot(t, down={3})
    kinds = [(c.kind, c.leader, c.partitions) for c in rank_causes(snap)]
    assert kinds == [(OFFLINE, None, 1), (UNDER_MIN_ISR, 1, 1), (UNDER_REPLICATED, 1, 1)]


def test_offline_names_the_isr_members_that_are_down() -> None:
    # KRaft keeps the last ISR member of a partition whose leader died: 3 holds the data,
    # 1 and 2 are live but out of sync, so only 3 brings it back without loss
    t = topic("t", [[3, 1, 2]] * 2, isr={0: [3], 1: [3]}, leaders={0: None, 1: None})
    [cause] = rank_causes(snapshot(t, down={3}))
    assert cause.brokers == ((3, 2),)
    assert cause.sentence == "2 partitions offline (no leader): broker 3 unavailable"


def test_offline_without_isr_names_replicas_not_live() -> None:
    t = topic("t", [[2, 3]], isr={0: []}, leaders={0: None})
    [cause] = rank_causes(snapshot(t, down={2, 3}))
    assert cause.brokers == ((2, 1), (3, 1))


def test_under_min_isr_uses_the_effective_floor() -> None:
    # min.insync.replicas 3 on RF 2: the leader enforces 2, so ISR 2 is not under it
    capped = topic("capped", [[1, 2]], min_isr=3)
    assert partition_kind(capped, capped.partitions[0]) is None
    short = topic("short", [[1, 2]], min_isr=3, isr={0: [1]})
    assert partition_kind(short, short.partitions[0]) == UNDER_MIN_ISR


def test_unknown_min_isr_counts_a_short_isr_as_under_replicated() -> None:
    t = topic("t", [[1, 2, 3]], min_isr=None, isr={0: [1]})
    assert partition_kind(t, t.partitions[0]) == UNDER_REPLICATED


def test_healthy_cluster_has_no_causes() -> None:
    snap = snapshot(topic("a", [[1, 2, 3]] * 3))
    assert rank_causes(snap) == []
    assert top_brokers_by_kind(snap) == {}


def test_top_brokers_by_kind_sums_over_leaders() -> None:
    t = topic("t", [[1, 2, 3], [2, 1, 3], [3, 1, 2]], isr={0: [1, 2], 1: [2, 1], 2: [3, 2]})
    # leader 1 and 2 miss broker 3; leader 3 misses 1
    assert top_brokers_by_kind(snapshot(t), top_n=1) == {UNDER_REPLICATED: [(3, 2)]}
    assert top_brokers_by_kind(snapshot(t)) == {UNDER_REPLICATED: [(3, 2), (1, 1)]}


def test_offline_on_a_live_broker_names_its_log_directory() -> None:
    # broker 5 is registered, yet its single replicas lead nothing: Kafka took them offline,
    # which on a live broker is a failed log directory (the ISR is empty under KIP-966)
    t = topic("disk", [[5], [5]], min_isr=1, isr={0: [], 1: []}, leaders={0: None, 1: None})
    [cause] = rank_causes(snapshot(t, brokers={1: None, 5: None}))
    assert (cause.kind, cause.brokers, cause.registered) == (OFFLINE, ((5, 2),), (5,))
    assert cause.blame == "log directory offline on broker 5"
    assert cause.sentence == "2 partitions offline (no leader): log directory offline on broker 5"
    assert top_brokers_by_kind(snapshot(t, brokers={1: None, 5: None})) == {OFFLINE: [(5, 2)]}


def test_offline_names_a_live_isr_member_over_the_replicas_that_are_down() -> None:
    # 3 is the last ISR member and is up: 1 and 2 being down is not why there is no leader
    t = topic("t", [[3, 1, 2]], isr={0: [3]}, leaders={0: None})
    [cause] = rank_causes(snapshot(t, down={1, 2}))
    assert cause.blame == "log directory offline on broker 3"


def test_offline_says_of_each_candidate_why_it_cannot_lead() -> None:
    t = topic("t", [[4, 5, 1]] * 2, isr={0: [4, 5], 1: [4, 5]}, leaders={0: None, 1: None})
    snap = snapshot(t, brokers={b: None for b in (1, 4, 5, 6)}, down={4})
    [cause] = rank_causes(snap)
    assert cause.blame == "broker 4 unavailable, log directory offline on broker 5"
    t = topic("t", [[4, 5, 6]], isr={0: [4, 5, 6]}, leaders={0: None})
    [cause] = rank_causes(snapshot(t, brokers={b: None for b in (1, 4, 5, 6)}))
    assert cause.blame == "log directories offline on brokers 4, 5 and 6"
