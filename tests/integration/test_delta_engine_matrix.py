"""The engine matrix (issue 28): `kafka-health run` over one topic of the one-node metrics
cluster with each source.engine (python, spark) and each delta.engine (delta-rs,
delta-spark), and with bronze written by the read tasks (delta.bronze_writers, issue 29),
ends with the same rows in every table.

Compared as tests/integration/helpers.assert_same_tables does: every table the job derives
from its input, rows sorted, without the wall-clock columns (ingest_ts: when a record was
decoded; updated_at: when a row was last upserted). Incident ids are a function of the
cluster, broker, kind and start window, so they must match too. dq_results is left out: it
records when each validation ran.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.config import load_config
from streaming.runtime.jvm_jars import MissingJars, session_jars
from tests.integration.helpers import assert_same_tables, comparable, config_file
from tests.integration.test_skeleton import faulted_simulation

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SOURCES = ("python", "spark")
SINKS = ("delta-rs", "delta-spark")
# Who writes bronze and quarantine: the driver, or the read tasks (delta-rs commits their
# files); the runs are named source-sink, plus "-read_tasks" for the latter.
RUNS = [(source, sink, "driver") for source in SOURCES for sink in SINKS] + [
    (source, "delta-rs", "read_tasks") for source in SOURCES]


def run_name(source: str, sink: str, writers: str) -> str:
    return f"{source}-{sink}" + ("" if writers == "driver" else f"-{writers}")
TIMEOUT = 600  # seconds for one pair's run: a deadline, on a busy 2-core machine


def test_every_source_and_delta_engine_write_the_same_tables(broker, topic, tmp_path: Path):
    try:
        session_jars(load_config(None, environ={"KAFKA_HEALTH__SOURCE__ENGINE": "spark",
                                                "KAFKA_HEALTH__DELTA__ENGINE": "delta-spark"}))
    except MissingJars as err:
        pytest.skip(f"a JVM component is not resolved: {err}")
    sim = faulted_simulation(broker.bootstrap, topic, minutes=6)
    # 40 records a batch: two batches, and the second MERGEs into windows of the first
    configs = [config_file(tmp_path / run_name(*run), broker.bootstrap, topic,
                           max_offsets=40, trigger_seconds=0.5, source={"engine": run[0]},
                           delta={"engine": run[1], "bronze_writers": run[2]})
               for run in RUNS]
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.engine_matrix_runs", str(tmp_path),
         str(sim.truth.samples_total), str(TIMEOUT), *map(str, configs)],
        cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT * len(configs) + 120)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    print("seconds per run:", json.loads((tmp_path / "seconds.json").read_text()))

    baseline = tmp_path / "python-delta-rs" / "delta"
    assert len(comparable(baseline, "incidents")) > 0, "the scenario must open incidents"
    assert len(comparable(baseline, "broker_signals")) > 0
    for run in RUNS[1:]:
        try:
            assert_same_tables(tmp_path / run_name(*run) / "delta", baseline)
        except AssertionError as err:
            raise AssertionError(f"source {run[0]}, delta {run[1]}, bronze written by "
                                 f"{run[2]}: {err}") from err
