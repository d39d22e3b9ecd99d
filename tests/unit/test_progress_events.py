"""Progress events read from their JSON give the listener what PySpark's own bridge gives."""

from __future__ import annotations

import json

from streaming.runtime.progress import offsets_json, offsets_lost
from streaming.runtime.progress_events import progress_from_json

# Two progress events of the job as Spark's StreamingQueryProgress.json() wrote them
# (a 5 M-record run over the embedded broker): the first batch has no start offset.
FIRST = """\
{
 "id": "960706dd-3015-4317-a9af-80d85722e60d",
 "runId": "1fa63adc-00e9-4599-8dc3-fc2deca8d451",
 "name": "kafka_health",
 "timestamp": "2026-11-24T18:49:09.675Z",
 "batchId": 0,
 "batchDuration": 4301,
 "numInputRows": 28,
 "inputRowsPerSecond": 0.0,
 "processedRowsPerSecond": 6.5,
 "durationMs": {
  "addBatch": 3659,
  "commitOffsets": 257,
  "getBatch": 7,
  "latestOffset": 99,
  "queryPlanning": 213,
  "triggerExecution": 4296,
  "walCommit": 47
 },
 "stateOperators": [],
 "sources": [
  {
   "description": "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream@a781768",
   "startOffset": null,
   "endOffset": {
    "bench-metrics": {
     "0": 83333,
     "1": 83333,
     "2": 83333
    }
   },
   "latestOffset": {
    "bench-metrics": {
     "0": 83333,
     "1": 83333,
     "2": 83333
    }
   },
   "numInputRows": 28,
   "inputRowsPerSecond": 0.0,
   "processedRowsPerSecond": 6.5
  }
 ],
 "sink": {
  "description": "ForeachBatchSink",
  "numOutputRows": -1
 }
}
"""
SECOND = """\
{
 "id": "960706dd-3015-4317-a9af-80d85722e60d",
 "runId": "1fa63adc-00e9-4599-8dc3-fc2deca8d451",
 "name": "kafka_health",
 "timestamp": "2026-11-24T18:49:14.038Z",
 "batchId": 1,
 "batchDuration": 1930,
 "numInputRows": 28,
 "inputRowsPerSecond": 6.4,
 "processedRowsPerSecond": 14.5,
 "durationMs": {
  "addBatch": 1754,
  "commitOffsets": 50,
  "getBatch": 0,
  "latestOffset": 15,
  "queryPlanning": 28,
  "triggerExecution": 1930,
  "walCommit": 80
 },
 "stateOperators": [],
 "sources": [
  {
   "description": "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream@a781768",
   "startOffset": {
    "bench-metrics": {
     "0": 83333,
     "1": 83333,
     "2": 83333
    }
   },
   "endOffset": {
    "bench-metrics": {
     "0": 166666,
     "1": 166666,
     "2": 166666
    }
   },
   "latestOffset": {
    "bench-metrics": {
     "0": 166666,
     "1": 166666,
     "2": 166666
    }
   },
   "numInputRows": 28,
   "inputRowsPerSecond": 6.4,
   "processedRowsPerSecond": 14.5
  }
 ],
 "sink": {
  "description": "ForeachBatchSink",
  "numOutputRows": -1
 }
}
"""


def test_source_offsets_come_back_as_json_text_the_listener_parses() -> None:
    progress = progress_from_json(SECOND)
    source = progress.sources[0]
    start, end = offsets_json(source.startOffset), offsets_json(source.endOffset)
    assert start == {"bench-metrics": {"0": 83333, "1": 83333, "2": 83333}}
    assert end == {"bench-metrics": {"0": 166666, "1": 166666, "2": 166666}}
    assert offsets_lost(start, end) == 0
    assert (progress.batchId, progress.batchDuration) == (1, 1930)
    assert progress.durationMs["addBatch"] == 1754


def test_the_first_batch_has_no_start_offset() -> None:
    progress = progress_from_json(FIRST)
    assert progress.sources[0].startOffset == "None"  # as str(None) from the JVM object
    assert offsets_json(progress.sources[0].startOffset) is None
    assert offsets_json(progress.sources[0].endOffset) == json.loads(FIRST)["sources"][0][
        "endOffset"]
