"""A failed query's cause, found in the text Spark hands the driver."""

from __future__ import annotations

from streaming.runtime.failure import own_cause

# The shape of a query stopped by the source at start (kafka-health run against a closed
# port), its Java frames and plan cut short.
SPARK_TEXT = """\
[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source \
perform latestOffset: Traceback (most recent call last):
  File ".../pyspark/sql/streaming/python_streaming_source_runner.py", line 172, in main
  File "/work/main/streaming/source/stream.py", line 77, in latestOffset
    latest = self.offsets.offsets("latest")
cimpl.KafkaException: KafkaError{code=_TRANSPORT,val=-195,str="Failed to get metadata: \
Local: Broker transport failure"}

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/main/streaming/source/stream.py", line 88, in latestOffset
    raise KafkaUnavailableError(
streaming.source.errors.KafkaUnavailableError: cannot read offsets from Kafka at \
127.0.0.1:1 (source.bootstrap_servers) to start from: KafkaError{code=_TRANSPORT}
 SQLSTATE: 38000
=== Streaming Query ===
Identifier: kafka_health [id = 522c7ff0, runId = 358bb4d5]
Current Committed Offsets: {}
"""


def test_the_projects_exception_is_found_in_sparks_text() -> None:
    assert own_cause(SPARK_TEXT) == (
        "KafkaUnavailableError: cannot read offsets from Kafka at 127.0.0.1:1 "
        "(source.bootstrap_servers) to start from: KafkaError{code=_TRANSPORT}")


def test_the_last_one_when_several_and_none_without() -> None:
    text = ("streaming.pipeline.batch.FirstError: one\n...\n"
            "streaming.sinks.delta_rs.SecondError: two\n")
    assert own_cause(text) == "SecondError: two"
    assert own_cause("java.lang.IllegalStateException: boom\n  at org.apache...") is None
    assert own_cause("streaming.pipeline.batch: a logger's line, not an exception") is None


def test_without_the_projects_own_the_python_exception_is_the_cause() -> None:
    """Tables the job may not write: the read task's PermissionError, in 433 lines of
    Spark's text, was the one line that said why."""
    text = ("org.apache.spark.sql.execution.streaming.sources.ForeachBatchUserFuncException: "
            "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred\n"
            "pyspark.errors.exceptions.captured.PythonException: \n"
            "  An exception was thrown from the Python worker. Please see the stack trace below.\n"
            "Traceback (most recent call last):\n"
            '  File "/x/task_files.py", line 80, in write\n'
            "PermissionError: [Errno 1] Failed to open local file '/d/bronze/p.parquet'\n"
            "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException\n"
            "Caused by: java.lang.IllegalStateException: boom\n")
    assert own_cause(text) == ("PermissionError: [Errno 1] Failed to open local file "
                               "'/d/bronze/p.parquet'")
