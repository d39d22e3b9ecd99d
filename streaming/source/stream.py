"""The micro-batch stream, on the driver: which offsets each batch ends at, and the read
tasks that read it (PySpark's DataSourceStreamReader, as Spark's KafkaMicroBatchStream).

Spark calls initialOffset(), latestOffset(), partitions(), commit() and stop() from the one
thread that plans the query's batches, which owns everything here: the last end planned,
the metadata clients (streaming.source.offsets) and the topics' incarnations
(streaming.source.incarnations). Spark calls read() on the executors, from a copy of the
reader pickled with the read function: it takes only the parsed options along, and hands
each task to streaming.source.partition_reader.

PySpark 4.1 facts this is built around: latestOffset() is given neither the start nor a
limit and may be called before initialOffset(), so the cap remembers the last end it
planned (or reads the checkpoint's offset log on restart); read() runs on executors from
a pickled reader, so no live client may be pickled.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader

from streaming.common.repeated_warning import RepeatedWarning
from streaming.source.errors import KafkaUnavailableError, data_loss
from streaming.source.incarnations import TopicIncarnations
from streaming.source.offsets import KafkaOffsetReader, last_checkpointed_offsets
from streaming.source.options import SourceOptions
from streaming.source.partition_reader import read_task
from streaming.source.planning import batch_ranges, capped, plan_tasks
from streaming.source.ranges import ReadTask

LOG = logging.getLogger("kafka_health.source")
# How often an outage of the metrics Kafka is said again.
UNREACHABLE_EVERY = 60.0


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.source = SourceOptions.parse(options)
        self.offsets = KafkaOffsetReader(self.source)
        self.incarnations = TopicIncarnations(self.source)
        self._last_end: dict[str, dict[str, int]] | None = last_checkpointed_offsets(
            self.source.checkpoint, self.source.checkpoint_storage())
        self._initial: dict[str, dict[str, int]] | None = None
        self._unreachable = RepeatedWarning(UNREACHABLE_EVERY)

    @property
    def options(self) -> Mapping[str, str]:
        return self.source.options

    def __getstate__(self) -> dict[str, Any]:
        # what read() needs on an executor: the driver's clients and state stay behind
        return {"source": self.source}

    # ---- offsets (driver side) ----
    def initialOffset(self) -> dict:
        # PySpark asks latestOffset() before initialOffset() on a fresh start: "latest" read
        # twice could start a busy topic after the first batch's end (a false data loss),
        # so both answer from the one snapshot latestOffset took.
        if self._initial is not None:
            return self._initial
        if self.source.starting in ("earliest", "latest"):
            return self.offsets.offsets(self.source.starting)
        return json.loads(self.source.starting)

    def latestOffset(self) -> dict:
        from confluent_kafka import KafkaException

        start = self._last_end
        try:
            latest = self.offsets.offsets("latest")
            if start is None:
                if self.source.starting == "latest":
                    self._initial = latest
                start = self.initialOffset()
            recreated = self.incarnations.check(start, latest, self.offsets)
            if recreated:
                self.incarnations.mark_restart(recreated, start, None)
            reading_from = self.incarnations.reading_from(start, latest, self._last_end, self.offsets)
        except KafkaException as err:
            why = self.offsets.explained(err)
            if start is None:
                raise KafkaUnavailableError(
                    f"cannot read offsets from Kafka at {self.source.bootstrap} "
                    f"(source.bootstrap_servers) to start from: {why}. Once the query has "
                    f"its first offsets it waits out an outage; before, it stops") from err
            # An unreachable broker is an outage to wait out, not a reason to kill an
            # always-on query (and crash-loop its pod): no new end, so no batch is planned.
            self._warn_unreachable(why)
            self.offsets.drop_clients()
            return start
        self.offsets.answered()
        lasted = self._unreachable.ended()
        if lasted is not None:
            LOG.warning("Kafka at %s reachable again after %.0fs", self.source.bootstrap, lasted)
        vanished = sorted(f"{topic}-{p}" for topic, parts in start.items() for p in parts
                          if p not in latest.get(topic, {}))
        if vanished:
            data_loss(self.source.fail_on_data_loss,
                      f"partition(s) {', '.join(vanished)} no longer exist: the topic "
                      "was deleted or the broker lost its data")
        cap = self.source.max_per_trigger
        end = capped(reading_from, latest, cap) if cap else latest
        self.incarnations.planned_end(end)
        return end

    def _warn_unreachable(self, err: Exception | str) -> None:
        lasted = self._unreachable.due()
        if lasted == 0.0:
            LOG.warning("Kafka at %s unreachable (%s); the query waits for it",
                        self.source.bootstrap, err)
        elif lasted is not None:
            LOG.warning("Kafka at %s still unreachable after %.0fs (%s)", self.source.bootstrap,
                        lasted, err)

    def partitions(self, start: dict, end: dict) -> list[ReadTask]:
        if not self.incarnations.checked:  # a batch planned before a restart, replayed
            self.incarnations.check_replayed_batch(start, end, self.offsets)
        if start == end:  # Spark's call for the batch it committed before a restart
            self._last_end = end
            return []
        ranges = batch_ranges(start, end, self.incarnations.restarting(end), self.offsets.log_start,
                              self.source.fail_on_data_loss)
        self._last_end = end
        if self.source.max_tasks is None:
            return [ReadTask([r]) for r in ranges]
        return [ReadTask(task) for task in plan_tasks(ranges, self.source.max_tasks,
                                                      self.source.min_records_per_task)]

    def commit(self, end: dict) -> None:
        self._last_end = end

    def stop(self) -> None:
        self.offsets.close()

    # ---- data (executor side) ----
    # Spark hands back the partitions partitions() made: ReadTasks, not any InputPartition
    def read(self, partition: ReadTask) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return read_task(self.source, partition)
