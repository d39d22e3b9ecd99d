"""The job killed with SIGKILL mid-stream, stopped with SIGTERM under load (to the job's
process, then to its whole process group), and restarted from its checkpoint: no loss, no
doubles."""

from __future__ import annotations

import os
import re
import signal

import pytest

from tests.conftest import wait_for
from tests.integration.helpers import config_file, count, start_job, table, truth_mismatches
from tests.integration.test_skeleton import faulted_simulation

pytestmark = pytest.mark.integration


def test_sigkill_sigterm_under_load_and_restart_keep_exactly_n_rows(broker, topic, tmp_path):
    """SIGKILL mid-stream, then SIGTERM while batches run back to back (the backlog is many
    triggers long): the second stop comes at a batch's end, not when the backlog is drained,
    and a third run ends with every sample once."""
    sim = faulted_simulation(broker.bootstrap, topic)
    expected = sim.truth.samples_total
    root = tmp_path / "delta"
    config = config_file(tmp_path, broker.bootstrap, topic, max_offsets=4, trigger_seconds=0.1)
    log = tmp_path / "job.log"

    first = start_job(config, log)
    try:
        wait_for(lambda: count(root, "bronze") > 0, 180, "the first batches in bronze")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    after_kill = count(root, "bronze")
    assert after_kill < expected, "killed too late to test a restart"

    second = start_job(config, log)
    try:
        wait_for(lambda: count(root, "bronze") > after_kill, 180, "the restarted job's batches")
    finally:
        second.send_signal(signal.SIGTERM)
        code = second.wait(120)
    assert code == 0, log.read_text()[-3000:]
    assert count(root, "bronze") < expected, "the SIGTERM waited for the backlog to drain"
    assert not re.search(r"batch \d+ failed \(", log.read_text()), "a stop noted as a failure"

    third = start_job(config, log)
    try:
        wait_for(lambda: count(root, "bronze") >= expected, 240, f"{expected} bronze rows")
        wait_for(lambda: len(table(root, "broker_signals")) == len(sim.truth.rows())
                 and not truth_mismatches(table(root, "broker_signals"), sim.truth.rows()),
                 60, "signals equal to the ground truth")
    finally:
        # to the whole process group, as systemd's default KillMode=control-group sends
        # it: the driver JVM gets it too and stops first, and the job still ends cleanly
        os.killpg(third.pid, signal.SIGTERM)
        code = third.wait(120)
    assert code == 0, log.read_text()[-3000:]
    assert not re.search(r"batch \d+ failed \(", log.read_text()), "a stop noted as a failure"

    bronze = table(root, "bronze")
    assert len(bronze) == expected
    key = ["source_partition", "source_offset", "metric", "attribute", "labels"]
    assert not bronze[key].astype(str).duplicated().any()
