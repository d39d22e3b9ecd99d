"""Stops the Python daemons Spark keeps for planning the data source, once it is planned.

Spark plans a Python data source in Python: it looks the source up, creates it and plans
its read, each step in a worker forked from a daemon of its own (`pyspark.daemon` with the
step's module, `pyspark.sql.worker.*`). The workers go after a minute idle; the three
daemons stay for the life of the application. A streaming query plans once, when it
starts, so after its first micro-batch the daemons only hold memory (tens of MB each).

They are stopped with Spark's own `PythonWorkerFactory.stop()`, which kills the daemon
and forgets it: should the same application plan again, the factory starts a new one. The
factories are reached by reflection (SparkEnv keeps them in a private map); on a Spark
whose internals differ nothing is stopped and the job goes on as before.
"""

from __future__ import annotations

import logging

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

LOG = logging.getLogger("kafka_health.planning_daemons")
PLANNING_MODULES = "pyspark.sql.worker."  # lookup_data_sources, create_data_source, ...


def stop_planning_daemons(spark: SparkSession) -> list[str]:
    """Stop the daemons of the planning workers; returns the worker modules stopped."""
    gateway = spark.sparkContext._gateway
    jvm = spark.sparkContext._jvm
    if gateway is None or jvm is None:
        return []
    try:
        env = jvm.org.apache.spark.SparkEnv.get()
        getter = env.getClass().getDeclaredMethod(
            "pythonWorkers", gateway.new_array(jvm.java.lang.Class, 0))
        getter.setAccessible(True)
        factories = getter.invoke(env, gateway.new_array(jvm.java.lang.Object, 0))
        stopped = []
        keys = factories.keysIterator()
        while keys.hasNext():
            key = keys.next()
            module = str(key.workerModule())
            if module.startswith(PLANNING_MODULES):
                factories.apply(key).stop()
                stopped.append(module)
    except (Py4JError, AttributeError, TypeError) as error:  # internals differ, env is None
        LOG.info("Spark's planning daemons left running (its internals differ): %s",
                 str(error).splitlines()[0] if str(error) else type(error).__name__)
        return []
    if stopped:
        LOG.debug("stopped the idle planning daemons of %s", ", ".join(sorted(stopped)))
    return stopped
