"""Catalog tables (issue 77, delta.catalog): the job, with each Delta engine, registers every
table it writes in Spark's catalog, a Hive metastore on embedded Derby (Spark's own Hive
support, from the pyspark wheel's spark-hive and Derby jars), as an external table at its
path; a table is named only once it exists; a restart registers nothing twice; a new Spark
session on the same metastore, another process, reads every table by name, and its rows
are the rows delta-rs reads by path.

The job and the reader run in processes of their own (tests/integration/
catalog_tables_runs.py): their sessions need the Hive catalog and delta-spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from streaming.config import load_config
from streaming.locations import local_path
from streaming.pipeline.tables import POLLER_TABLES, TABLES
from streaming.runtime.jvm_jars import MissingJars, session_jars
from streaming.runtime.spark_session import hive_support
from streaming.sinks.delta_rs import DeltaRsTable
from tests.integration.helpers import config_file
from tests.integration.test_delta_spark_sink import canonical
from tests.integration.test_skeleton import faulted_simulation

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 240  # seconds for one run's condition: a deadline on a busy 2-core machine
NAMESPACES = {"delta-spark": "kh_spark", "delta-rs": "kh_rs"}  # the first engine builds the session


def test_every_table_is_registered_once_it_exists_and_reads_the_same_by_name_and_by_path(
        broker, topic, tmp_path: Path) -> None:
    if not hive_support():
        pytest.skip("Spark's jars folder has no spark-hive jar")
    try:
        session_jars(load_config(None, environ={"KAFKA_HEALTH__DELTA__CATALOG": "kh"}))
    except MissingJars as err:
        pytest.skip(f"delta-spark is not resolved: {err}")
    started = time.monotonic()
    sim = faulted_simulation(broker.bootstrap, topic, minutes=4)
    print(f"simulation: {time.monotonic() - started:.1f} s")
    metastore = {  # a user's metastore settings, here an embedded Derby under tmp_path
        "spark.sql.warehouse.dir": str(tmp_path / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={tmp_path / 'metastore_db'};create=true",
        # the reader's Delta state rebuilt in 2 tasks a table, not Delta's 50 (2 cores)
        "spark.databricks.delta.snapshotPartitions": "2",
    }
    configs = []
    for engine, namespace in NAMESPACES.items():
        path = config_file(tmp_path / namespace, broker.bootstrap, topic, max_offsets=30,
                           trigger_seconds=0.5, spark={"conf": metastore},
                           delta={"engine": engine, "catalog": namespace})
        config = yaml.safe_load(path.read_text())
        # the Admin API poller creates cluster_metadata at its first poll, after the start
        config["metadata"] = {"enabled": True, "clusters": {"c1": {
            "bootstrap_servers": broker.bootstrap}}}
        path.write_text(yaml.safe_dump(config))
        configs.append(str(path))

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.catalog_tables_runs", str(tmp_path),
         str(sim.truth.samples_total), str(TIMEOUT), *configs],
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT * 3 + 300,
        env={**os.environ, "PYTHONPATH": str(REPO)})  # cwd: Derby's derby.log lands there
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    facts = json.loads((tmp_path / "facts.json").read_text())
    read = facts["read"]
    print(f"{time.monotonic() - started:.0f} s in all; steps:", facts["seconds"],
          "runs:", {ns: [r["seconds"] for r in runs] for ns, runs in facts["runs"].items()})

    assert facts["warnings"] == []
    never_written = {"probe_windows", "probe_losses", "consumer_group_status",
                     "consumer_group_losses"}  # the probe and the group pollers are off
    for engine, namespace in NAMESPACES.items():
        runs = facts["runs"][namespace]
        first = runs[0]
        assert "cluster_metadata" in first["written"], engine
        assert set(first["registered"]) == set(first["written"]), engine
        assert not never_written & set(first["registered"]), engine
        assert set(TABLES) - set(POLLER_TABLES) <= set(first["registered"]), engine
        if len(runs) > 1:  # the restart: the same names, each once, no warning
            assert runs[1]["registered"] == first["registered"], engine
        root = tmp_path / namespace / "delta"
        names = read[namespace]["tables"]
        assert set(names) == set(first["registered"]), engine
        for name in names:
            assert local_path(read[namespace]["locations"][name]) == str(root / name)
            with pa.memory_map(str(tmp_path / namespace / f"{name}.arrow")) as source:
                by_name = pa.ipc.open_file(source).read_all()
            by_path = DeltaRsTable(str(root), name, "reader").read()
            assert canonical(by_name) == canonical(by_path), f"{engine}: {name}"
        bronze = pa.ipc.open_file(pa.memory_map(str(tmp_path / namespace / "bronze.arrow")))
        assert bronze.read_all().num_rows == sim.truth.samples_total, engine
        assert len(canonical(DeltaRsTable(str(root), "broker_signals", "r").read())) > 0
    assert len(facts["runs"]["kh_spark"]) == 2  # the first config ran twice
