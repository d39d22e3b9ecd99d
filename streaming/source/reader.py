"""Pick the source by config; downstream stages see the same columns either way."""

from __future__ import annotations

import dataclasses
import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streaming.config import Config
from streaming.decode.records import DecodeContext
from streaming.decode.stage import decode_stage
from streaming.kafka_client import SECRETS_OPTION, java_options, secret_references
from streaming.locations import is_local
from streaming.sinks.task_files import TaskWriter
from streaming.source.data_source import KafkaHealthKafkaSource
from streaming.source.options import SOURCE_NAME

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
    if config.source.engine == "spark":
        reader = spark.readStream.format("kafka").options(**spark_source_options(config))
        return reader.load().select(*[F.col(c) for c in KAFKA_COLUMNS])
    options = python_source_options(config, spark.sparkContext.defaultParallelism, decode,
                                    writer)
    spark.dataSource.register(KafkaHealthKafkaSource)
    return spark.readStream.format(SOURCE_NAME).options(**options).load()


def spark_source_options(config: Config) -> dict[str, str]:
    """Spark's kafka source's options. It runs the Java client, which takes the secrets'
    values as kafka.* options (Spark redacts them in its UI and logs) under the Java
    client's names (streaming.kafka_client.java_options)."""
    src = config.source
    options = {k: v for k, v in source_options(config).items() if not k.startswith("kafka.")}
    options.update(java_options(src.bootstrap_servers, src.kafka, src.secrets, "source"))
    options["includeHeaders"] = "true"
    return options


def python_source_options(config: Config, parallelism: int,
                          decode: DecodeContext | None = None,
                          writer: TaskWriter | None = None) -> dict[str, str]:
    """The Python source's options: what both engines share, and its own. Every value may
    show in Spark's plan and UI, so secrets go as references (streaming.kafka_client)."""
    options = source_options(config)
    if config.source.secrets:  # references only: each read task reads the values
        options[SECRETS_OPTION] = secret_references(config.source.secrets)
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
    options["maxTasks"] = str(config.source.max_tasks or parallelism)
    options["minRecordsPerTask"] = str(config.source.min_records_per_task)
    if decode is not None:
        options["decode"] = decode.to_json()
    if decode is not None and writer is not None:
        options["writeTables"] = writer.to_json()  # secrets as references, never values
        options["signals"] = json.dumps(dataclasses.asdict(config.signals))
    return options
