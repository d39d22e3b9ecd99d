"""Stopping Spark's idle planning daemons is best effort: other internals, no harm.

(That they are stopped on this Spark, and that batches go on without them, is shown by
the walking-skeleton integration test.)"""

from __future__ import annotations

from types import SimpleNamespace

from py4j.protocol import Py4JError

from streaming.runtime.planning_daemons import stop_planning_daemons


def session_whose_spark_env(get) -> SimpleNamespace:
    spark_env = SimpleNamespace(get=get)
    jvm = SimpleNamespace(org=SimpleNamespace(apache=SimpleNamespace(
        spark=SimpleNamespace(SparkEnv=spark_env))))
    return SimpleNamespace(sparkContext=SimpleNamespace(_gateway=object(), _jvm=jvm))


def test_a_spark_without_the_expected_internals_leaves_the_daemons_and_goes_on(caplog):
    def missing() -> None:
        raise Py4JError("org.apache.spark.SparkEnv.get does not exist in the JVM")

    caplog.set_level("INFO", logger="kafka_health.planning_daemons")
    assert stop_planning_daemons(session_whose_spark_env(missing)) == []
    assert stop_planning_daemons(session_whose_spark_env(lambda: None)) == []
    assert "left running" in caplog.text
