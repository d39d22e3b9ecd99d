"""DeltaSparkTable against DeltaRsTable, call for call (tests/integration/delta_engines_scenario.py
in a process of its own): a batch id appended or upserted twice writes once, also when the
sink's own check is bypassed (Delta's app transaction skips it); both engines end with the
same rows; each reads what the other wrote, and continues its transactions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from streaming.config import load_config
from streaming.runtime.jvm_jars import MissingJars, session_jars
from streaming.sinks.delta_rs import DeltaRsTable
from tests.integration.delta_engines_scenario import AWKWARD, ENGINES, TABLES

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 900


def canonical(table: pa.Table) -> list[tuple]:
    """Rows in a fixed order, each value by its repr (maps as their item lists)."""
    return sorted(tuple((k, repr(v)) for k, v in row.items()) for row in table.to_pylist())


def read_by_spark(out: Path, root: str, name: str) -> pa.Table:
    with pa.memory_map(str(out / "read-by-spark" / root / f"{name}.arrow")) as source:
        return pa.ipc.open_file(source).read_all()


def test_both_engines_write_once_per_batch_and_read_each_others_tables(tmp_path: Path) -> None:
    try:
        session_jars(load_config(None, environ={"KAFKA_HEALTH__DELTA__ENGINE": "delta-spark"}))
    except MissingJars as err:
        pytest.skip(f"delta-spark is not resolved: {err}")
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.delta_engines_scenario", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    facts = json.loads((tmp_path / "facts.json").read_text())

    for engine in ENGINES:
        mine = facts[engine]
        assert mine["added_columns"] == ["cause"], engine
        assert mine["bronze"] == [True, False, True, True], engine
        assert mine["poison"] == [True, False], engine
        assert mine["broker_signals"] == [True, False, True], engine
        assert mine["incidents"] == [True, True], engine
        assert mine["retention"] == {"bronze": 6, "quarantine": 1}, engine
        assert mine["transactions"] == {"bronze": 2, "quarantine": 0, "broker_signals": 1,
                                        "incidents": 1, "dq_results": 0}, engine
    assert facts["delta-rs"]["log_retention"] == {"incidents": "interval 120 seconds",
                                                  "cluster_signals": "interval 120 seconds"}
    assert facts["delta-spark"]["log_retention"] == {"incidents": None, "cluster_signals": None}
    # Delta itself refuses a batch id already committed under the app id
    assert facts["delta-spark"]["bronze_replay_committed_nothing"]
    assert facts["delta-spark"]["merge_replay_committed_nothing"]
    assert facts["delta-spark"]["filtered"] == facts["delta-rs"]["filtered"]
    assert [row["samples"] for row in facts["delta-rs"]["filtered"]] == [23, 24, 25]
    assert facts["mixed"] == {
        "rs_appends_0": True, "spark_sees_0": True, "spark_appends_0_again": False,
        "spark_appends_1": True, "rs_sees_1": True, "spark_upserts_0": True,
        "rs_upserts_1": True, "spark_upserts_1_again": False}

    for name in TABLES:
        by_rs = {root: DeltaRsTable(str(tmp_path / root), name, "reader").read()
                 for root in ENGINES}
        assert canonical(by_rs["delta-spark"]) == canonical(by_rs["delta-rs"]), name
        for root in ENGINES:  # each engine reads the other's table as its own
            assert canonical(read_by_spark(tmp_path, root, name)) == canonical(by_rs[root]), (
                f"{name} under {root}")
    incidents = DeltaRsTable(str(tmp_path / "delta-spark"), "incidents", "reader").read()
    assert sorted(incidents["incident_id"].to_pylist()) == sorted(
        [f"{AWKWARD}/5", f"{AWKWARD}/11", "c2/12", "c3/13", f"{AWKWARD}/14"])
    bronze = DeltaRsTable(str(tmp_path / "delta-spark"), "bronze", "reader").read()
    assert sorted(bronze["source_offset"].to_pylist()) == [6, 8, 9, 10, 11]
    for name in ("bronze", "broker_signals"):
        mixed = DeltaRsTable(str(tmp_path / "mixed"), name, "reader").read()
        assert canonical(read_by_spark(tmp_path, "mixed", name)) == canonical(mixed), name
    signals = DeltaRsTable(str(tmp_path / "mixed"), "broker_signals", "reader").read()
    assert sorted(signals["samples"].to_pylist()) == sorted([10, 11, 22, 23, 24, 25] * 2)
