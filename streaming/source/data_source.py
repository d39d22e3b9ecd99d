"""A PySpark streaming data source over confluent-kafka, shaped like Spark's own kafka source.

Used where spark-sql-kafka is not on the classpath (no Maven here). Same output columns
(key, value, topic, partition, offset, timestamp, timestampType, and headers as with
includeHeaders), offsets as JSON in the Spark checkpoint ({"topic": {"0": 42}}), a
per-trigger cap and failOnDataLoss, like `maxOffsetsPerTrigger` / `failOnDataLoss`; with
option `decode`, decoded rows packed for the driver instead (streaming.decode.packing).

The parts, along the seams of Spark's own connector:

| module | side | its one job |
| --- | --- | --- |
| `options.py` | both | the options, parsed once |
| `errors.py` | both | the source's exceptions, librdkafka's error classes, failOnDataLoss |
| `ranges.py` | both | offset ranges and read tasks, handed from the driver to the executors |
| `offsets.py` | driver | partitions, watermarks, topic ids, the checkpoint's last offsets |
| `incarnations.py` | driver | topics deleted and created again |
| `planning.py` | driver | the per-trigger cap, a batch's ranges, the read tasks |
| `stream.py` | driver | the DataSourceStreamReader: each batch's offsets and tasks |
| `partition_reader.py` | executor | a read task's consumer, read loop and stall detection |
| `records.py` | executor | Kafka messages to Arrow record batches |
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

from streaming.decode.packing import PACKED_DDL
from streaming.schemas import spark_ddl
from streaming.source.options import SOURCE_NAME
from streaming.source.stream import KafkaStreamReader


class KafkaHealthKafkaSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        if self.options.get("decode"):
            return PACKED_DDL
        return spark_ddl("kafka_records", optional=True)

    def streamReader(self, schema: Any) -> KafkaStreamReader:
        return KafkaStreamReader(self.options)
