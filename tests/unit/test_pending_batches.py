"""The pending batches kept equal to their marker, refused once the signals writer has
failed; a batch's facts taken once by the progress listener."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streaming.pipeline.control import JobControl, PreviousBatchFailed
from streaming.pipeline.pending import PendingBatches
from streaming.pipeline.recovery import Pending, PendingMarker
from streaming.pipeline.stats import FACTS_KEPT, BatchHistory, BatchStats

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def pending(batch_id: int, cluster: str, minute: int) -> Pending:
    return Pending("app", batch_id, [cluster], [(AT + minute * MINUTE, AT + (minute + 1) * MINUTE)])


def test_the_marker_names_every_pending_batch_until_each_is_written(tmp_path: Path) -> None:
    marker = PendingMarker(tmp_path / "pending.json")
    batches = PendingBatches(marker, JobControl())
    batches.add(pending(3, "east", 0))
    batches.add(pending(4, "west", 5))
    named = marker.read()
    assert (named.batch_id, named.clusters, len(named.spans), len(batches)) == (
        4, ["east", "west"], 2, 2)
    batches.remove([3])
    assert marker.read() == pending(4, "west", 5) and len(batches) == 1
    batches.remove([4])
    assert not marker.exists() and len(batches) == 0


def test_no_batch_is_added_once_the_writer_failed(tmp_path: Path) -> None:
    marker = PendingMarker(tmp_path / "pending.json")
    control = JobControl()
    batches = PendingBatches(marker, control)
    batches.add(pending(7, "east", 0))
    error = OSError("No space left on device")
    assert batches.writer_failed(error) == 7
    assert control.signals_error is error
    with pytest.raises(PreviousBatchFailed):
        batches.add(pending(8, "east", 1))
    assert marker.read().batch_id == 7  # the batch the failure's note names
    control.reset()
    batches.forget()
    assert marker.read().batch_id == 7 and len(batches) == 0  # the marker is recovered
    batches.clear()
    assert not marker.exists()


def test_a_batchs_facts_are_taken_once_and_old_ones_dropped() -> None:
    history = BatchHistory()
    history.publish(BatchStats(batch_id=0, records=5))
    assert history.take(0).records == 5 and history.take(0) is None
    for batch_id in range(1, FACTS_KEPT + 3):
        history.publish(BatchStats(batch_id=batch_id))
    assert history.take(1) is None and history.take(FACTS_KEPT + 2) is not None
    done = history.finish(BatchStats(batch_id=9), {"page": 0.1})
    assert history.newest_finished is done and done.signal_timings == {"page": 0.1}
    assert [stats.batch_id for stats in history.finished] == [9]
