"""The Python source's options, parsed once. Both sides: the driver plans with them, and
each read task reads with them (they travel to the executors pickled with the reader, so
they hold plain data only, and the secrets as references that each side resolves).

The names are Spark's kafka source's where it has them (`subscribe`, `subscribePattern`,
`startingOffsets`, `maxOffsetsPerTrigger`, `failOnDataLoss`, `kafka.*`), the rest the
source's own (`maxTasks`, `minRecordsPerTask`, `decode`, `writeTables`, `signals`,
`checkpointLocation`, `checkpointStorage*.*`). Spark hands a Python data source its options
with the keys lowercased (`CaseInsensitiveDict`); every name is looked up in any case.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import CaseInsensitiveDict

from streaming.config import SecretRef, SignalsConfig
from streaming.decode.records import DecodeContext
from streaming.sinks.task_files import TaskWriter
from streaming.source.planning import MIN_RECORDS_PER_TASK

SOURCE_NAME = "kafka_health_kafka"


def _as_bool(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() in ("1", "true", "yes")


def checkpoint_storage(options: Mapping[str, str]) -> dict[str, str] | None:
    """Storage options for reading a remote checkpoint's offset log (locations' names, e.g.
    AWS_ENDPOINT_URL): checkpointStorage.* as given, checkpointStorageSecretFile.* and
    checkpointStorageSecretEnv.* as references read here, as the Kafka secrets are.

    Prefixes match in any case: Spark hands a Python data source its options with the
    keys lowercased (the option names' own case does not matter to streaming.locations)."""
    kinds = (("checkpointstoragesecretfile.", "file"), ("checkpointstoragesecretenv.", "env"),
             ("checkpointstorage.", None))
    out: dict[str, str] = {}
    for key, value in options.items():
        for prefix, ref in kinds:
            if key.lower().startswith(prefix):
                name = key[len(prefix):]
                out[name] = value if ref is None else SecretRef(**{ref: value}).read(
                    f"delta.storage_secrets.{name}")
                break
    return out or None


@dataclass(frozen=True)
class SourceOptions:
    """What the options say, with `options` themselves for the Kafka clients' settings
    (streaming.kafka_client.source_client_settings reads the kafka.* ones)."""

    options: Mapping[str, str]
    topics: tuple[str, ...]
    pattern: str | None
    max_per_trigger: int | None
    fail_on_data_loss: bool
    starting: str
    # None: one task per topic-partition range, as Spark's own source plans
    max_tasks: int | None
    min_records_per_task: int
    decode: DecodeContext | None
    # a TaskWriter: the task writes its chunks' bronze and quarantine files and yields
    # their add actions (streaming.sinks.task_files)
    writer: TaskWriter | None
    signals: SignalsConfig
    checkpoint: str | None

    @classmethod
    def parse(cls, given: Mapping[str, str]) -> SourceOptions:
        # A reader made from a plain dict (a test, a caller of its own) looks the options
        # up in any case, as one made by Spark does.
        options = CaseInsensitiveDict(given)
        topics = tuple(t for t in options.get("subscribe", "").split(",") if t)
        pattern = options.get("subscribePattern")
        if not topics and not pattern:
            raise ValueError("kafka_health_kafka source: set option subscribe or subscribePattern")
        cap = options.get("maxOffsetsPerTrigger")
        return cls(
            options=options,
            topics=topics,
            pattern=pattern,
            max_per_trigger=int(cap) if cap else None,
            fail_on_data_loss=_as_bool(options.get("failOnDataLoss"), True),
            starting=options.get("startingOffsets", "earliest"),
            max_tasks=int(options["maxTasks"]) if options.get("maxTasks") else None,
            min_records_per_task=int(options.get("minRecordsPerTask", MIN_RECORDS_PER_TASK)),
            decode=(DecodeContext.from_json(options["decode"])
                    if options.get("decode") else None),
            writer=(TaskWriter.from_json(options["writeTables"])
                    if options.get("writeTables") else None),
            signals=SignalsConfig(**json.loads(options.get("signals") or "{}")),
            checkpoint=options.get("checkpointLocation") or None,
        )

    @property
    def bootstrap(self) -> str:
        return self.options.get("kafka.bootstrap.servers", "?")

    def checkpoint_storage(self) -> dict[str, str] | None:
        return checkpoint_storage(self.options)
