"""The signals writer's thread: batches in order, grouped when it falls behind, and nothing
more after a failure (streaming/pipeline/signals_writer.py)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from streaming.pipeline.batch import reads_at_cap
from streaming.pipeline.recovery import Pending
from streaming.pipeline.signals_writer import Owed, SignalsWriter, newest_rows
from streaming.pipeline.stats import BatchStats
from tests.conftest import wait_for

AT = datetime(2026, 3, 1, tzinfo=UTC)


def owed(batch_id: int) -> Owed:
    empty = pa.table({"x": pa.array([], pa.int64())})
    return Owed(Pending("app", batch_id, ["c"], [(AT, AT)]), empty, empty,
                BatchStats(batch_id=batch_id))


def test_batches_queued_while_it_writes_are_written_next_as_one_group() -> None:
    release, groups = threading.Event(), []

    def write(group: list[Owed]) -> None:
        groups.append([o.pending.batch_id for o in group])
        assert release.wait(30)

    writer = SignalsWriter(write, lambda group, err: None)
    writer.submit(owed(0))
    wait_for(lambda: groups == [[0]], 10, "the first round")
    for batch_id in (1, 2, 3):
        writer.submit(owed(batch_id))
    release.set()
    writer.wait()
    assert groups == [[0], [1, 2, 3]]


def test_a_failed_round_hands_over_every_owed_batch_and_writes_nothing_more() -> None:
    release, written, failures = threading.Event(), [], []

    def write(group: list[Owed]) -> None:
        written.append([o.pending.batch_id for o in group])
        assert release.wait(30)
        if group[0].pending.batch_id == 0:
            raise OSError("No space left on device")

    writer = SignalsWriter(write, lambda group, err: failures.append(
        ([o.pending.batch_id for o in group], str(err))))
    writer.submit(owed(0))
    wait_for(lambda: written == [[0]], 10, "the first round")
    writer.submit(owed(1))
    release.set()
    writer.wait()
    assert failures == [([0, 1], "No space left on device")]
    writer.submit(owed(2))
    writer.wait()
    assert written == [[0]]
    writer.reset()  # recovered from the marker: the writer takes batches again
    writer.submit(owed(3))
    writer.wait()
    assert written == [[0], [3]]


@pytest.mark.parametrize("tables", [1, 3])
def test_newest_rows_keep_the_last_batch_row_of_each_key(tables: int) -> None:
    parts = [pa.table({"cluster": ["a", "a", "b"], "window_start": [1, 2, 1],
                       "value": [10 * i + 1, 10 * i + 2, 10 * i + 3]}) for i in range(tables)]
    parts.append(pa.table({"cluster": ["c"], "window_start": [1], "value": [99]}))
    got = newest_rows(parts, ("cluster", "window_start")).sort_by(
        [("cluster", "ascending"), ("window_start", "ascending")])
    last = 10 * (tables - 1)
    assert got.to_pylist() == [
        {"cluster": "a", "window_start": 1, "value": last + 1},
        {"cluster": "a", "window_start": 2, "value": last + 2},
        {"cluster": "b", "window_start": 1, "value": last + 3},
        {"cluster": "c", "window_start": 1, "value": 99}]


def test_rounds_are_paced_but_a_waiter_gets_one_at_once() -> None:
    """With `every`, batches handed over within it wait for the next round together; a
    batch or a stop that waits for the writer starts that round at once."""
    groups: list[list[int]] = []
    writer = SignalsWriter(lambda group: groups.append([o.pending.batch_id for o in group]),
                           lambda group, err: None, every=600.0)
    writer.submit(owed(0))
    wait_for(lambda: groups == [[0]], 10, "the first round")
    writer.submit(owed(1))
    writer.submit(owed(2))
    writer.wait()  # 600 s early
    assert groups == [[0], [1, 2]]


def test_a_catch_up_paces_rounds_longer_until_a_batch_that_is_not_one() -> None:
    """While the batches handed over are a catch-up's, the rounds wait `catching_up_every`;
    the first batch that is not one ends the wait for everything queued."""
    groups: list[list[int]] = []
    writer = SignalsWriter(lambda group: groups.append([o.pending.batch_id for o in group]),
                           lambda group, err: None, every=0.0, catching_up_every=600.0)
    writer.submit(owed(0), catching_up=True)
    wait_for(lambda: groups == [[0]], 10, "the first round")
    writer.submit(owed(1), catching_up=True)
    writer.submit(owed(2), catching_up=True)
    writer.submit(owed(3))
    wait_for(lambda: len(groups) == 2, 10, "the round after the catch-up")
    assert groups == [[0], [1, 2, 3]]


def test_a_batch_read_up_to_the_cap_is_a_catch_up() -> None:
    cap = 250_000
    # the Python source's split of the cap over three partitions' backlogs, rounded down
    split = sum(int(cap * backlog / 3_000_001) for backlog in (1_000_000, 1_000_000, 1_000_001))
    assert split < cap and reads_at_cap(split, cap)
    assert not reads_at_cap(cap // 2, cap)
    assert not reads_at_cap(10 ** 9, None)  # no cap: every batch reads what there is


def test_a_full_group_starts_a_round_before_the_interval() -> None:
    groups: list[list[int]] = []
    writer = SignalsWriter(lambda group: groups.append([o.pending.batch_id for o in group]),
                           lambda group, err: None, every=600.0, group=3)
    writer.submit(owed(0))
    wait_for(lambda: groups == [[0]], 10, "the first round")
    for batch_id in (1, 2, 3):
        writer.submit(owed(batch_id))
    wait_for(lambda: len(groups) == 2, 10, "the round of a full group")
    assert groups == [[0], [1, 2, 3]]
