"""What the driver hands the executors: offset ranges, grouped into read tasks (pickled
into each Spark task; plain data on both sides)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition


@dataclass(frozen=True)
class KafkaRange:
    """Offsets [start, end) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


class ReadTask(InputPartition):
    """One Spark task: offset ranges read in order through one consumer."""

    def __init__(self, ranges: list[KafkaRange]) -> None:
        super().__init__(tuple(ranges))
        self.ranges = ranges
