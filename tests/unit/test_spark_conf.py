"""The session settings the job derives from its config."""

from __future__ import annotations

import json

import pytest

from streaming.config import load_config
from streaming.runtime.spark_session import DELTA_SPARK_CONF, spark_conf

MANAGER = "spark.sql.streaming.checkpointFileManagerClass"


@pytest.mark.parametrize("checkpoint", ["data/checkpoint", "/var/lib/kh/ckpt", "file:///ckpt"])
def test_a_local_checkpoint_writes_its_logs_through_the_file_system_api(checkpoint):
    conf = spark_conf(load_config(None, environ={"KAFKA_HEALTH__SPARK__CHECKPOINT": checkpoint}))
    assert conf[MANAGER].endswith(".FileSystemBasedCheckpointFileManager")


@pytest.mark.parametrize("checkpoint", ["hdfs://nn:8020/kh/ckpt", "s3a://bucket/kh/ckpt"])
def test_a_remote_checkpoint_keeps_sparks_own_choice(checkpoint):
    conf = spark_conf(load_config(None, environ={"KAFKA_HEALTH__SPARK__CHECKPOINT": checkpoint}))
    assert MANAGER not in conf


def test_the_configs_spark_conf_wins_over_the_jobs_settings():
    conf = spark_conf(load_config(None, environ={
        "KAFKA_HEALTH__SPARK__CONF": json.dumps({MANAGER: "x.Mine", "spark.driver.memory": "2g"})}))
    assert conf[MANAGER] == "x.Mine" and conf["spark.driver.memory"] == "2g"


@pytest.mark.parametrize("memory", [None, "512m", "3g"])
def test_the_driver_heap_starts_at_its_cap(memory):
    """-Xms follows spark.driver.memory (a larger one would stop the JVM from starting), and
    the young generation is a share of it, not a size that could exceed a small heap."""
    environ = {"KAFKA_HEALTH__SPARK__CONF": json.dumps({"spark.driver.memory": memory})
               } if memory else {}
    conf = spark_conf(load_config(None, environ=environ))
    options = conf["spark.driver.extraJavaOptions"].split()
    assert f"-Xms{conf['spark.driver.memory']}" in options
    assert [o for o in options if o.startswith("-Xms")] == [f"-Xms{memory or '1g'}"]
    assert not [o for o in options if o.startswith(("-Xmn", "-XX:NewSize", "-XX:MaxNewSize"))]


def test_delta_spark_gets_deltas_extension_catalog_int64_timestamps_and_c2(monkeypatch):
    """Delta's SQL extension and catalog only with delta-spark; its Spark-written files
    store timestamps as delta-rs does; its JVM keeps C2 (a C1-only code cache fills up)."""
    monkeypatch.setattr("streaming.runtime.spark_session.session_jars", lambda config: [])
    delta = spark_conf(load_config(None, environ={"KAFKA_HEALTH__DELTA__ENGINE": "delta-spark"}))
    assert {key: delta.get(key) for key in DELTA_SPARK_CONF} == DELTA_SPARK_CONF
    assert delta["spark.sql.parquet.outputTimestampType"] == "TIMESTAMP_MICROS"
    assert "TieredStopAtLevel" not in delta["spark.driver.extraJavaOptions"]
    rs = spark_conf(load_config(None, environ={}))
    assert not set(DELTA_SPARK_CONF) & set(rs)
    assert "-XX:TieredStopAtLevel=1" in rs["spark.driver.extraJavaOptions"].split()


@pytest.mark.parametrize("master, key, separator", [
    ("local[2]", "spark.driver.extraClassPath", ":"),
    ("spark://127.0.0.1:7077", "spark.jars", ","),
])
def test_the_jars_go_on_the_class_path_in_local_mode_and_to_the_executors_elsewhere(
        monkeypatch, master, key, separator):
    """In local mode the driver's JVM runs the tasks, so the jars need no copy (a copy per
    start would outlive a killed job); a cluster's executors fetch them. A user's own
    entries are kept, after ours."""
    monkeypatch.setattr("streaming.runtime.spark_session.session_jars",
                        lambda config: ["/cache/a.jar", "/cache/b.jar"])
    conf = spark_conf(load_config(None, environ={
        "KAFKA_HEALTH__SPARK__CHECKPOINT": "s3a://bucket/ckpt",
        "KAFKA_HEALTH__SPARK__MASTER": master,
        "KAFKA_HEALTH__SPARK__CONF": json.dumps({key: "/mine.jar"})}))
    assert conf[key].split(separator) == ["/cache/a.jar", "/cache/b.jar", "/mine.jar"]
    other = ({"spark.jars", "spark.driver.extraClassPath"} - {key}).pop()
    assert other not in conf


def test_the_driver_maps_the_archive_of_its_class_path_unless_the_user_sets_its_options(
        monkeypatch):
    """The archive that fits the driver's class path (the jars included) goes on the
    driver's options; a user's own spark.driver.extraJavaOptions replace ours whole."""
    monkeypatch.setattr("streaming.runtime.spark_session.session_jars",
                        lambda config: ["/cache/a.jar"])
    asked: list[list[str]] = []

    def options(classpath: list[str]) -> list[str]:
        asked.append(classpath)
        return ["-XX:SharedArchiveFile=/cache/x.jsa"]

    monkeypatch.setattr("streaming.runtime.spark_session.sharing_options", options)
    environ = {"KAFKA_HEALTH__SPARK__CHECKPOINT": "s3a://bucket/ckpt"}
    conf = spark_conf(load_config(None, environ=environ))
    assert asked == [["/cache/a.jar"]]
    assert "-XX:SharedArchiveFile=/cache/x.jsa" in conf["spark.driver.extraJavaOptions"].split()
    mine = spark_conf(load_config(None, environ={
        **environ, "KAFKA_HEALTH__SPARK__CONF": json.dumps(
            {"spark.driver.extraJavaOptions": "-Dmine=1"})}))
    assert mine["spark.driver.extraJavaOptions"] == "-Dmine=1"
