"""The durability probe's ledger: windows per leader broker, losses decided by a later read,
duplicates by a second offset; each window written once."""

from __future__ import annotations

from streaming.clients.probe_ledger import ProbeLedger, error_class


def ledger() -> ProbeLedger:
    return ProbeLedger("prod", "probe", window_seconds=10, settle_seconds=5)


def test_writes_count_for_the_leader_and_window_of_their_send() -> None:
    book = ledger()
    book.sent(0, 0, "1", 100.0)
    book.sent(1, 0, "2", 101.0)
    book.sent(0, 1, "1", 109.0)
    book.acked(0, 0, 10, 100.5)
    book.failed(1, 0, "NOT_ENOUGH_REPLICAS", 104.0)
    book.acked(0, 1, 11, 111.0)  # acked after its window ended: still its window's
    book.read(0, 0, 10, 100.7)
    book.read(0, 1, 11, 111.2)
    rows, losses = book.close(114.0)
    assert rows == [] and losses == []  # 100-110 settles at 115
    rows, losses = book.close(115.0)
    by_broker = {r.broker: r for r in rows}
    assert set(by_broker) == {"1", "2"} and losses == []
    assert (by_broker["1"].attempted, by_broker["1"].acked, by_broker["1"].failed) == (2, 2, 0)
    assert by_broker["1"].ack_p50_ms == 500.0 and by_broker["1"].ack_p99_ms == 2000.0
    assert by_broker["2"].failed_by_class == {"not_enough_replicas": 1}
    assert by_broker["2"].availability == 0.0
    assert book.close(200.0) == ([], [])  # each window once
    assert book.pending == 0


def test_an_acked_record_not_read_while_a_later_one_is_is_lost() -> None:
    book = ledger()
    for seq in range(4):
        book.sent(0, seq, "3", 100.0 + seq)
        book.acked(0, seq, 40 + seq, 100.2 + seq)
    book.read(0, 0, 40, 101.0)
    book.read(0, 2, 42, 102.5)  # 1 was not in the log the consumer read
    book.sent(0, 4, "3", 104.0)
    book.acked(0, 4, 44, 104.1)
    assert book.close(104.2)[1][0].sequence == 1
    assert book.close(105.0)[1] == []  # 3 and 4: nothing after them read yet, late only
    book.read(0, 4, 44, 125.0)
    rows, losses = book.close(140.0)
    assert [(x.sequence, x.offset, x.broker, x.found_after_offset) for x in losses] == [
        (3, 43, "3", 44)]
    lost = {(r.broker, r.window_start.timestamp()): r.lost for r in rows if r.lost}
    assert lost == {("3", 100.0): 1, ("3", 120.0): 1}  # counted when found


def test_an_offset_acked_again_for_a_later_record_loses_what_was_acked_from_it_on() -> None:
    book = ledger()
    for seq in range(4):
        book.sent(0, seq, "3", 100.0 + seq)
        book.acked(0, seq, 40 + seq, 100.2 + seq)
    book.read(0, 0, 40, 101.0)
    # an unclean election truncated offsets 41-43; the new leader writes seq 4 at offset 41
    book.sent(0, 4, "2", 120.0)
    book.acked(0, 4, 41, 120.1)
    rows, losses = book.close(140.0)
    assert [(x.sequence, x.offset, x.broker, x.found_after_offset) for x in losses] == [
        (1, 41, "3", 41), (2, 42, "3", 41), (3, 43, "3", 41)]
    lost = {(r.broker, r.window_start.timestamp()): r.lost for r in rows if r.lost}
    assert lost == {("3", 120.0): 3}  # counted when found, for the broker that acked them


def test_a_delivery_report_after_a_later_read_still_finds_the_loss() -> None:
    book = ledger()
    book.sent(0, 0, "1", 100.0)
    book.sent(0, 1, "1", 100.5)
    book.read(0, 1, 7, 101.0)  # read before the probe thread served the reports
    book.acked(0, 1, 7, 101.1)
    book.acked(0, 0, 6, 101.2)
    assert [x.sequence for x in book.close(101.5)[1]] == [0]


def test_a_record_read_twice_at_two_offsets_is_a_duplicate_and_a_reread_is_not() -> None:
    book = ledger()
    book.sent(0, 0, "1", 100.0)
    book.acked(0, 0, 5, 100.1)
    book.read(0, 0, 5, 100.2)
    book.read(0, 0, 5, 130.0)  # read again from the earliest after a reset: same offset
    book.read(0, 0, 9, 130.1)
    rows, losses = book.close(200.0)
    assert sum(r.duplicates for r in rows) == 1 and losses == []


def test_failed_writes_are_not_lost_and_errors_fold_into_bounded_classes() -> None:
    book = ledger()
    book.sent(0, 0, "1", 100.0)
    book.failed(0, 0, "_MSG_TIMED_OUT", 103.0)
    book.sent(0, 1, "1", 104.0)
    book.acked(0, 1, 3, 104.1)
    book.read(0, 1, 3, 104.2)
    rows, losses = book.close(120.0)
    assert losses == [] and rows[0].failed_by_class == {"timeout": 1}
    assert error_class("SOMETHING_NEW") == "other"


def test_records_read_then_truncated_are_lost_when_their_offsets_hold_later_records() -> None:
    book = ledger()
    for seq in range(5):
        book.sent(0, seq, "4", 100.0 + seq)
        book.acked(0, seq, 20 + seq, 100.1 + seq)
        book.read(0, seq, 20 + seq, 100.2 + seq)  # read from the old leader, then gone
    # the new leader's log ends at offset 22: its first write is acked at offset 22
    book.sent(0, 5, "5", 120.0)
    book.acked(0, 5, 22, 120.1)
    losses = book.close(121.0)[1]
    assert [(x.sequence, x.offset, x.broker) for x in losses] == [
        (2, 22, "4"), (3, 23, "4"), (4, 24, "4")]
    book.read(0, 5, 22, 121.5)  # the read of the same record finds nothing more
    book.sent(0, 6, "5", 122.0)
    book.acked(0, 6, 23, 122.1)
    book.read(0, 6, 23, 122.2)
    assert book.close(200.0)[1] == []
