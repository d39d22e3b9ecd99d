"""Pick the source by config; downstream stages see the same columns either way."""

from __future__ import annotations

import dataclasses
import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streaming.config import Config
from streaming.decode.records import DecodeContext
from streaming.decode.stage import decode_stage
from streaming.locations import is_local
from streaming.sinks.task_files import TaskWriter
from streaming.source.kafka_python import SOURCE_NAME, KafkaHealthKafkaSource

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                 "headers")  # headers (includeHeaders): the identity headers cluster, broker


def source_options(config: Config) -> dict[str, str]:
    """Options in Spark's kafka-source vocabulary, shared by both engines."""
    src = config.source
    options = {"kafka.bootstrap.servers": src.bootstrap_servers,
               "startingOffsets": src.starting_offsets,
               "failOnDataLoss": str(src.fail_on_data_loss).lower()}
    if src.subscribe_pattern:
        options["subscribePattern"] = src.subscribe_pattern
    else:
        options["subscribe"] = ",".join(t.name for t in src.topics)
    if src.max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(src.max_offsets_per_trigger)
    options.update({f"kafka.{k}": v for k, v in src.kafka.items()})
    return options


def read_decoded_stream(spark: SparkSession, config: Config) -> DataFrame:
    """Decoded rows from either engine: the Python source decodes in its own read tasks,
    Spark's kafka source hands its records to the mapInArrow decode stage."""
    context = DecodeContext.from_config(config)
    writer = (TaskWriter.from_config(config.delta)
              if config.delta.writers() == "read_tasks" else None)
    if config.source.engine == "spark":
        return decode_stage(read_metrics_stream(spark, config), context, writer, config.signals)
    return read_metrics_stream(spark, config, decode=context, writer=writer)


def read_metrics_stream(spark: SparkSession, config: Config,
                        decode: DecodeContext | None = None,
                        writer: TaskWriter | None = None) -> DataFrame:
    """Kafka records (Spark's kafka-source columns), or decoded rows from the Python source
    when `decode` is given (with `writer`, the files its tasks wrote)."""
    options = source_options(config)
    if config.source.engine == "spark":
        # Spark's own source: secrets go as kafka.* options, which Spark redacts in its UI/logs.
        options.update({f"kafka.{k}": ref.read(f"source.secrets.{k}")
                        for k, ref in config.source.secrets.items()})
        reader = spark.readStream.format("kafka").options(**options).option("includeHeaders",
                                                                            "true")
        return reader.load().select(*[F.col(c) for c in KAFKA_COLUMNS])
    for key, ref in config.source.secrets.items():
        if ref.file:
            options[f"secretFile.{key}"] = ref.file
        elif ref.env:
            options[f"secretEnv.{key}"] = ref.env
    options["checkpointLocation"] = config.spark.checkpoint
    if not is_local(config.spark.checkpoint):
        # The source reads the checkpoint's offset log on a restart; a remote one with
        # delta.storage_options (the S3 endpoint and keys), secrets as references.
        options.update({f"checkpointStorage.{k}": v
                        for k, v in config.delta.storage_options.items()})
        for key, ref in config.delta.storage_secrets.items():
            if ref.file:
                options[f"checkpointStorageSecretFile.{key}"] = ref.file
            elif ref.env:
                options[f"checkpointStorageSecretEnv.{key}"] = ref.env
    options["maxTasks"] = str(config.source.max_tasks or spark.sparkContext.defaultParallelism)
    options["minRecordsPerTask"] = str(config.source.min_records_per_task)
    if decode is not None:
        options["decode"] = decode.to_json()
    if decode is not None and writer is not None:
        options["writeTables"] = writer.to_json()  # secrets as references, never values
        options["signals"] = json.dumps(dataclasses.asdict(config.signals))
    spark.dataSource.register(KafkaHealthKafkaSource)
    return spark.readStream.format(SOURCE_NAME).options(**options).load()
