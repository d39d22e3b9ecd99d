"""Query progress events for a Python listener, built from the event's JSON.

Why: PySpark's own bridge builds each progress event field by field over py4j
(`StreamingQueryProgress.fromJObject`: a JVM round trip per field, per source, per
duration and metric), and the JVM side of py4j resolves a member it has not seen by trying
it as a class name in every jar of the class path. A Java Flight Recorder profile of the
job over 5 M records put 16 % of the JVM's CPU samples in those jar lookups (the listener
bus and py4j threads), every batch. One call for the progress's JSON and a parse here give
the listener the same object.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import (
    JStreamingQueryListener,
    QueryProgressEvent,
    StreamingQueryProgress,
)

LOG = logging.getLogger("kafka_health.progress")


def progress_from_json(text: str) -> StreamingQueryProgress:
    """The progress as PySpark's own bridge gives it: source offsets stay JSON text (the
    JSON form nests them as objects), absent offsets are "None" as there."""
    raw = json.loads(text)
    for source in raw.get("sources", []):
        for key in ("startOffset", "endOffset", "latestOffset"):
            value = source.get(key)
            source[key] = json.dumps(value) if isinstance(value, dict | list) else value
    return StreamingQueryProgress.fromJson(raw)


class _JsonBridge(JStreamingQueryListener):
    """The JVM's listener callbacks; progress events go through their JSON."""

    def onQueryProgress(self, jevent: Any) -> None:
        try:
            event = QueryProgressEvent(progress=progress_from_json(jevent.progress().json()))
        except (ValueError, KeyError, TypeError):  # a shape this parse does not know
            LOG.warning("progress JSON not understood; reading the event field by field",
                        exc_info=True)
            event = QueryProgressEvent.fromJObject(jevent)
        self.pylistener.onQueryProgress(event)


class JsonProgressListener(StreamingQueryListener):
    """A StreamingQueryListener whose progress events cost one JVM call each."""

    @property
    def _jlistener(self) -> Any:  # what StreamingQueryManager.addListener registers
        from pyspark import SparkContext

        if not hasattr(self, "_jlistenerobj"):
            jvm = SparkContext._jvm
            assert jvm is not None, "a SparkContext must be running"
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonBridge(self))
        return self._jlistenerobj
