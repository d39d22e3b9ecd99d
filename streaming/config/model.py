"""The configuration model: every section and key, its type, default and meaning.

Types are checked by pydantic (a number is a number, `true` is not a string); a section's
checks that need more than a type raise `Problems` naming keys within it. The meanings
(`description`) are the ones docs/configuration.md shows (streaming.config.reference).
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, Field, Strict, field_validator, model_validator
from pydantic.dataclasses import dataclass

from streaming.config.checks import (
    headroom_problems,
    librdkafka_refusal,
    regex_problem,
    starting_offsets_valid,
)
from streaming.config.errors import Problems
from streaming.config.migrations import DEFAULT_INSTANCE_REGEX, DEFAULT_KEY_PATTERN, current_default
from streaming.config.secrets import SECTION, SecretRef
from streaming.locations import join, scheme


def _scalar_text(value: Any) -> Any:
    """YAML reads `9092` or `true` as a number or a boolean; a string key takes them as text."""
    return value if value is None or isinstance(value, dict | list) else str(value)


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _empty_is_default(value: Any) -> Any:
    """A section given as `exporter:` with nothing under it is the section's defaults."""
    return {} if value is None else value


Text = Annotated[str, BeforeValidator(_scalar_text)]
Whole = Annotated[int, Strict(), BeforeValidator(_integral)]
Number = Annotated[float, Strict()]
Flag = Annotated[bool, Strict()]
Format = Literal["jolokia", "prometheus", "otlp", "telegraf", "auto"]
FORMATS: tuple[str, ...] = get_args(Format)


def plain_type(hint: Any) -> Any:
    """The type under Annotated, and under Optional: what a key holds when it is set."""
    while True:
        if get_origin(hint) is Annotated:
            hint = get_args(hint)[0]
        elif get_origin(hint) in (Union, types.UnionType):
            hint = next(arg for arg in get_args(hint) if arg is not type(None))
        else:
            return hint


def key_fields(cls: type) -> dict[str, Any]:
    """A section's keys: name -> pydantic FieldInfo (annotation, default, description)."""
    return dict(cls.__pydantic_fields__)  # type: ignore[attr-defined]


@dataclass(config=SECTION)
class TopicConfig:
    name: Text = Field("", description="the metrics topic to read (required)")
    format: Format = Field("auto", description="how its records are encoded; auto detects "
                                               "each record's format")
    cluster: Text | None = Field(None, description="the cluster name for this topic's samples "
                                                   "that carry none of their own")

    @field_validator("name")
    @classmethod
    def _named(cls, name: str) -> str:
        if not name:
            raise ValueError("a topic name is required")
        return name


@dataclass(config=SECTION)
class SparkConfig:
    master: Text | None = Field("local[2]", description="Spark master: local[N], "
                                "spark://host:7077, yarn, k8s://...; null under spark-submit")
    app_name: Text = Field("kafka-health", description="the Spark application's name")
    trigger_seconds: Number = Field(0.5, description="how often a micro-batch may start; 0: as "
                                    "soon as the last one ends")
    checkpoint: Text = Field("data/checkpoint", description="Spark's checkpoint directory (a "
                             "path or URL): the offsets read and the Delta transaction app id")
    shuffle_partitions: Whole = Field(2, description="spark.sql.shuffle.partitions")
    conf: dict[Text, Text] = Field(default_factory=dict, description="extra Spark settings, "
                                   'e.g. {"spark.executor.memory": "4g"}')
    # Renewed every sixth of it; one held by a dead process on the same host is taken
    # over at once.
    lease_timeout_seconds: Number = Field(30.0, description="a second job on the same "
                                          "checkpoint or delta.path refuses to start while the "
                                          "first one's lease heartbeat is younger than this")
    # Keep it under the pod's grace period less the last batch's signals: 20 s fits
    # Kubernetes' default 30 s.
    stop_timeout_seconds: Number = Field(20.0, description="a stop (SIGTERM, Ctrl-C) waits this "
                                         "long for the batch in flight to commit, then cancels "
                                         "it (it runs again at the next start)")
    # With earliest, a new checkpoint would read every record still in Kafka into tables
    # that already hold them.
    accept_new_checkpoint: Flag = Field(False, description="true lets a checkpoint with no "
                                        "offsets start on Delta tables another checkpoint "
                                        "wrote; for one such start, then unset it")

    @model_validator(mode="after")
    def _check(self) -> SparkConfig:
        problems = []
        if not self.trigger_seconds >= 0:
            problems.append(("trigger_seconds", "must be >= 0 seconds (how often a batch may "
                             "start; 0: as soon as the last one ends)"))
        if not self.lease_timeout_seconds > 0:
            problems.append(("lease_timeout_seconds", "must be > 0 seconds"))
        if not self.stop_timeout_seconds >= 0:
            problems.append(("stop_timeout_seconds", "must be >= 0 seconds (0 cancels the "
                             "batch in flight at once)"))
        if problems:
            raise Problems(*problems)
        return self


@dataclass(config=SECTION)
class SourceConfig:
    engine: Literal["python", "spark"] = Field(
        "python", description="python: the confluent-kafka data source (no jars); spark: "
        "Spark's kafka source (needs spark-sql-kafka on the classpath)")
    bootstrap_servers: Text = Field("127.0.0.1:9092", description="the metrics cluster's "
                                    "brokers, host:port[,host:port...]")
    topics: list[TopicConfig] = Field(
        default_factory=lambda: [TopicConfig(name="kafka-metrics")],
        description="the metrics topics to read, each with its format and cluster")
    subscribe_pattern: Text | None = Field(None, description="a regex of topic names to read "
                                           "instead of the topic list (Java regex with the "
                                           "spark engine)")
    starting_offsets: Text = Field("earliest", description="where a new checkpoint starts: "
                                   "earliest, latest, or JSON offsets per topic and partition "
                                   """('{"kafka-metrics": {"0": 42}}', quoted)""")
    # 500k: between two batches' reads the read tasks idle while the driver does its fixed
    # share of a batch (Spark's loop, the bronze commit, the held windows' step). On 2
    # cores a catch-up read 60-65 % of the raw read at 250k, 86-92 % at 500k, 94-96 % at
    # 1M; the peak RSS grows with the cap, at 1M to within 50 MB of the 2.5 GB bar at 100k
    # samples/s (docs/performance.md, "The default batch size").
    max_offsets_per_trigger: Whole | None = Field(500_000, description="the most records one "
                                                  "batch reads; null: no cap")
    max_tasks: Whole | None = Field(None, description="python engine: read tasks per batch; "
                                    "null: Spark's default parallelism (the cores)")
    min_records_per_task: Whole = Field(5000, description="python engine: the fewest records "
                                        "worth a read task of their own (below it, fewer tasks)")
    fail_on_data_loss: Flag = Field(True, description="offsets gone or moved backwards: fail "
                                    "the job (true) or warn and skip ahead (false)")
    kafka: dict[Text, Text] = Field(default_factory=dict, description="Kafka client settings in "
                                    "librdkafka's names (security.protocol, sasl.mechanism, "
                                    "...); the Kafka client checks them at start")
    secrets: dict[Text, SecretRef] = Field(default_factory=dict, description="Kafka client "
                                           "settings whose values are secret, each {file: PATH} "
                                           "or {env: NAME}; they win over the same key in kafka")

    @model_validator(mode="after")
    def _check(self) -> SourceConfig:
        problems = []
        if not self.bootstrap_servers.strip():
            problems.append(("bootstrap_servers", "empty; give the metrics topics' brokers as "
                             "host:port[,host:port...]"))
        if not self.topics and not self.subscribe_pattern:
            problems.append(("topics", "list at least one topic or set subscribe_pattern"))
        if self.engine == "python":  # Spark's is a Java regex, and its client the Java one
            pattern = regex_problem(self.subscribe_pattern)
            if pattern:
                problems.append(("subscribe_pattern", pattern))
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger <= 0:
            problems.append(("max_offsets_per_trigger", "must be > 0 or null (no cap)"))
        if self.max_tasks is not None and self.max_tasks <= 0:
            problems.append(("max_tasks", "must be > 0 or null (Spark's default parallelism)"))
        if self.min_records_per_task <= 0:
            problems.append(("min_records_per_task", "must be > 0"))
        if not starting_offsets_valid(self.starting_offsets):
            problems.append(("starting_offsets", f"{self.starting_offsets!r} is not 'earliest', "
                             "'latest' or a JSON object of offsets per topic and partition, "
                             """quoted in YAML: '{"kafka-metrics": {"0": 42}}'"""))
        if not problems and self.engine == "python":
            refusal = librdkafka_refusal(self.kafka, self.secrets)
            if refusal:
                problems.append(("kafka", f"the Kafka client refuses it: {refusal}"))
        if problems:
            raise Problems(*problems)
        return self

    def client_config(self) -> dict[str, str]:
        """Kafka client settings with secrets resolved; never log the result."""
        from streaming.kafka_client import client_settings

        return client_settings(self.bootstrap_servers, self.kafka, self.secrets, "source")


@dataclass(config=SECTION)
class IdentityConfig:
    """How a sample finds its cluster and broker.

    Cluster, first found wins: a `cluster_labels` label of the sample, then of its record
    (OTLP resource attributes), the record header `cluster`, the `cluster` group of
    `key_pattern` in the record key, the topic's own `cluster` (source.topics), and last
    `default_cluster`. Broker: a `broker_labels` label (sample, then record), the header
    `broker`, the key's `broker` group (a broker id: see DEFAULT_KEY_PATTERN), then the
    first `instance_labels` label that is not a loopback address (a Telegraf beside its
    broker polls http://localhost:8778) nor a UUID or container id (the OpenTelemetry Java
    agent's random service.instance.id), mapped by
    `instance_map` or else its digits by `broker_from_instance_regex` (Strimzi pod names
    end in the broker id: my-cluster-kafka-0, my-cluster-broker-3; the default regex never
    reads an IP address's digits). A sample without a
    broker is quarantined (no_broker_identity); there is no default broker. A sample whose
    cluster is `default_cluster` for want of any of the above is kept, counted on
    kafka_health_pipeline_identity_defaulted_samples_total{field="cluster"} and warned
    about with its topic (a topic's own cluster is configuration, not counted).

    The defaults cover the common shippers: Strimzi's PodMonitor labels
    (strimzi_io_cluster, strimzi_io_pod_name, kubernetes_pod_name), Confluent's
    jmx-monitoring-stacks (hostname), Prometheus' `pod`, OTel resource attributes and
    Telegraf's jolokia_agent_url ahead of its `host` (a central Telegraf's own machine).
    """

    default_cluster: Text = Field("default", description="the cluster of a sample nothing else "
                                  "names one for (counted and warned about)")
    cluster_labels: list[Text] = Field(
        default_factory=lambda: ["cluster", "kafka_cluster", "kafka.cluster.alias", "cluster_name",
                                 "strimzi_io_cluster"],
        description="labels naming the cluster, first found wins (the sample's, then its "
        "record's)")
    broker_labels: list[Text] = Field(
        default_factory=lambda: ["broker", "broker_id", "kafka.broker.id", "broker.id"],
        description="labels naming the broker id, first found wins")
    instance_labels: list[Text] = Field(
        default_factory=lambda: [
            "strimzi_io_pod_name", "kubernetes_pod_name", "pod", "jolokia_agent_url",
            "hostname", "instance", "host", "service.instance.id", "host.name",
        ],
        description="labels naming the broker's host, tried when no broker label is found "
        "(loopback addresses and UUIDs are passed over)")
    instance_map: dict[Text, Text] = Field(default_factory=dict, description="instance label "
                                           "value -> broker id, for hosts whose names carry "
                                           "no broker id")
    broker_from_instance_regex: Text | None = Field(
        DEFAULT_INSTANCE_REGEX, description="a regex whose first group reads the broker id "
        "from an instance label; the default reads a host name's digits, never a port's or "
        "an IP address's; null: none")
    key_pattern: Text | None = Field(
        DEFAULT_KEY_PATTERN, description="a regex of the record key with named groups "
        "cluster and broker; the default reads cluster/<broker id> or <broker id>; null: "
        "keys are not read")

    @field_validator("broker_from_instance_regex", "key_pattern")
    @classmethod
    def _regex(cls, pattern: str | None) -> str | None:
        pattern = current_default(pattern)
        problem = regex_problem(pattern)
        if problem:
            raise ValueError(problem)
        return pattern


@dataclass(config=SECTION)
class QualityConfig:
    max_timestamp_skew_seconds: Number = Field(900.0, description="a sample time further than "
                                               "this from its record's Kafka timestamp fails "
                                               "the timestamp expectation")
    # A producer with a broken clock would otherwise open windows decades away, which every
    # later batch then reads around.
    max_ahead_of_wall_clock_seconds: Number | None = Field(
        600.0, description="a sample time this far ahead of the wall clock is quarantined "
        "(timestamp_out_of_range); null: no limit")
    max_behind_wall_clock_seconds: Number | None = Field(
        7 * 86400.0, description="a sample time this far behind the wall clock is quarantined "
        "(timestamp_out_of_range); null: no limit")
    max_message_bytes: Whole = Field(10 * 1024 * 1024, description="a larger record is "
                                     "quarantined (message_too_large)")
    # Decoding stops at the first sample past the cap, so a hostile record costs a bounded
    # amount of worker memory (about 1.2 KB a sample in flight: 850k samples took +1 GB).
    # 100k: a broker with 4,000 partitions read with per-partition Log and Partition MBeans
    # (4 + 5 numeric attributes each) is about 36k samples in one Jolokia bulk read, so
    # 2.5x margin.
    max_samples_per_record: Whole = Field(100_000, description="a record with more samples is "
                                          "quarantined whole (too_many_samples)")
    max_labels_per_sample: Whole = Field(64, description="a sample with more labels (identity "
                                         "labels count) is quarantined (too_many_labels)")
    max_label_chars: Whole = Field(1024, description="a sample with a longer label key or value "
                                   "is quarantined (label_too_long)")
    # So that made-up brokers cannot create state.
    max_brokers_per_cluster: Whole = Field(2000, description="distinct brokers a cluster may "
                                           "have since the job started; samples naming a new "
                                           "one past it are quarantined (too_many_brokers)")
    # 1000: a pipeline watches tens of clusters, so a large fleet fits with room, while
    # the state made-up names can take stays bounded (at most this many clusters' windows
    # and series, each with at most max_brokers_per_cluster brokers).
    max_clusters: Whole = Field(1000, description="distinct clusters since the job started; "
                                "samples naming a new one past it are quarantined "
                                "(too_many_clusters)")
    validate_every_n_batches: Whole = Field(10, description="run the data-quality expectations "
                                            "on every n-th batch's bronze rows")
    sample_rows: Whole = Field(5000, description="bronze rows the expectations check per run")

    @model_validator(mode="after")
    def _check(self) -> QualityConfig:
        problems = [(name, "must be > 0 seconds or null (no limit)")
                    for name in ("max_ahead_of_wall_clock_seconds", "max_behind_wall_clock_seconds")
                    if getattr(self, name) is not None and not getattr(self, name) > 0]
        problems += [(name, "must be a whole number > 0")
                     for name in ("max_message_bytes", "max_samples_per_record",
                                  "max_labels_per_sample", "max_label_chars",
                                  "max_brokers_per_cluster", "max_clusters")
                     if not getattr(self, name) > 0]
        if problems:
            raise Problems(*problems)
        return self


@dataclass(config=SECTION)
class SignalsConfig:
    window_seconds: Whole = Field(60, description="the signal window; must divide a day "
                                  "evenly (60, 300, ...)")
    watermark_seconds: Whole = Field(120, description="how late a sample may arrive and still "
                                     "count in its window")
    counter_lookback_seconds: Whole = Field(300, description="how far back a counter's rate "
                                            "looks for its previous sample")
    queued_max_requests: Whole = Field(500, description="the brokers' queued.max.requests; the "
                                       "request queue's saturation is measured against it")
    scrape_interval_seconds: Number = Field(15.0, description="how often the shippers sample a "
                                            "broker")
    stale_after_intervals: Whole = Field(3, description="a broker with no sample for this many "
                                         "scrape intervals is stale")
    isr_churn_match_seconds: Whole = Field(300, description="an ISR shrink and expand this close "
                                           "together count as one churn")
    incident_horizon_seconds: Whole = Field(900, description="an incident with no new evidence "
                                            "for this long resolves")
    saturation_queue_ratio: Number = Field(0.8, description="request queue fill (of "
                                           "queued_max_requests) above which a broker is "
                                           "saturated")
    saturation_idle_ratio: Number = Field(0.2, description="request handler idle ratio below "
                                          "which a broker is saturated")
    incremental: Flag = Field(True, description="keep the open windows' partials between "
                              "batches; false recomputes every touched window from bronze "
                              "each batch")

    @model_validator(mode="after")
    def _check(self) -> SignalsConfig:
        problems = []
        if self.window_seconds <= 0 or 86400 % self.window_seconds:
            problems.append(("window_seconds", "must divide a day evenly (e.g. 60, 300)"))
        if self.queued_max_requests <= 0:
            problems.append(("queued_max_requests", "the broker's setting, > 0 (default 500)"))
        if problems:
            raise Problems(*problems)
        return self


RetainedTable = Literal["bronze", "quarantine", "dq_results"]


@dataclass(config=SECTION)
class DeltaConfig:
    engine: Literal["delta-rs", "delta-spark"] = Field(
        "delta-rs", description="delta-rs: the driver writes, with delta.storage_options; "
        "delta-spark: Spark's executors write, through Spark's Hadoop file systems")
    path: Text = Field("data/delta", description="the tables' root: a path or a URL (s3://, "
                       "s3a:// with delta-spark, ...)")
    # A namespace, not a catalog of our own: which catalog and metastore is Spark's
    # configuration (spark.conf); see streaming/pipeline/catalog_tables.py.
    catalog: Text | None = Field(None, description="register every table in Spark's catalog "
                                 "under this schema or catalog.schema (kafka_health: "
                                 "kafka_health.broker_signals, ...), external at its path; "
                                 "null: the tables are paths only")
    bronze_writers: Literal["driver", "read_tasks"] | None = Field(
        None, description="who writes bronze and quarantine: read_tasks (each writes its own "
        "files, the driver commits them) or driver (every sample crosses to it); null: "
        "read_tasks with delta-rs, driver with delta-spark")
    compact_every_n_batches: Whole = Field(200, description="compact the tables' small files "
                                           "every n batches")
    # A round costs about as much for one batch as for several, so on a short trigger this
    # frees CPU for the read; gauges and pages never wait for it.
    signals_every_seconds: Number = Field(2.0, description="the signal tables are written at "
                                          "most this often, the batches meanwhile together; 0: "
                                          "a round as soon as a batch is handed over")
    # Behind the stream anyway; whatever this says, at most
    # streaming.pipeline.batch.MAX_OWED_BATCHES batches wait for a round.
    signals_every_seconds_catching_up: Number = Field(
        15.0, description="the same while the job catches up (its batches read up to "
        "source.max_offsets_per_trigger)")
    retention_days: dict[RetainedTable, Number | None] = Field(
        default_factory=lambda: dict.fromkeys(get_args(RetainedTable), 30),
        description="days bronze, quarantine and dq_results keep; a table left out or null "
        "keeps everything")
    retention_every_seconds: Number = Field(3600.0, description="run the retention's delete and "
                                            "vacuum at most this often")
    vacuum_retain_hours: Whole = Field(24, description="the vacuum removes files unreferenced "
                                       "for longer; readers of an older version keep working "
                                       "this long")
    # A delta-rs commit to a local table lists its whole _delta_log folder, a stat a file,
    # about three times (its refresh, its commit, the expired-log cleanup it runs after
    # every commit), so its cost grows with the commits the log keeps: at a commit a 0.5 s
    # trigger, a bronze commit costs 28-32 ms with this default after a day or a week,
    # 2.2 s with a week's retention after a day (174,523 files) and 14.5 s after a week
    # (tests/benchmarks/results/delta-log-week.json). Checkpoints (every 100 commits)
    # hold the tables' state and the batches' app transactions. Spark's Delta refuses a
    # log retention shorter than the deleted files' (7 days).
    log_retention_minutes: Number = Field(
        2.0, description="delta-rs: how long each table's Delta log keeps a commit "
        "(delta.logRetentionDuration); time travel and Delta streams reach back this far")
    storage_options: dict[Text, Text] = Field(
        default_factory=dict, description="delta-rs storage options for a remote delta.path, "
        "in delta-rs' names (AWS_ENDPOINT_URL, AWS_REGION, ...); empty: the environment's")
    storage_secrets: dict[Text, SecretRef] = Field(
        default_factory=dict, description="storage options whose values are secret "
        "(AWS_SECRET_ACCESS_KEY, ...), each {file: PATH} or {env: NAME}; they win over "
        "storage_options")

    @model_validator(mode="after")
    def _check(self) -> DeltaConfig:
        problems = [(f"retention_days.{table}", "must be > 0 days or null (keep everything)")
                    for table, days in self.retention_days.items()
                    if days is not None and not days > 0]
        problems += [(name, "must be >= 0 (0: a round of signal writes as soon as a batch is "
                      "handed over)")
                     for name in ("signals_every_seconds", "signals_every_seconds_catching_up")
                     if not getattr(self, name) >= 0]
        if not self.log_retention_minutes >= 1:
            problems.append(("log_retention_minutes", "must be >= 1 (minutes the tables' Delta "
                             "logs keep a commit)"))
        if not self.retention_every_seconds > 0:
            problems.append(("retention_every_seconds", "must be > 0"))
        if self.vacuum_retain_hours < 0:
            problems.append(("vacuum_retain_hours", "must be >= 0"))
        if self.catalog is not None and not (
                self.catalog.count(".") <= 1
                and all(p.isascii() and p.isidentifier() for p in self.catalog.split("."))):
            problems.append(("catalog", f"{self.catalog!r} is not schema or catalog.schema "
                             "(letters, digits and underscores, not starting with a digit)"))
        if self.engine == "delta-spark" and scheme(self.path) == "s3":
            # Hadoop has no s3:// file system; its S3 connector is s3a://
            problems.append(("path", "delta-spark writes through Hadoop, which reads S3 as "
                             f"s3a://, not s3://: use {'s3a' + self.path[2:]!r}"))
        if self.bronze_writers == "read_tasks" and self.engine != "delta-rs":
            problems.append(("bronze_writers", "read_tasks commits the tasks' files with "
                             "delta-rs: it needs delta.engine: delta-rs"))
        elif self.writers() == "read_tasks" and self.vacuum_retain_hours < 1:
            # the vacuum removes files no commit references: with less, it could remove
            # the files the read tasks are writing for a batch not yet committed
            problems.append(("vacuum_retain_hours", "must be >= 1 while the read tasks write "
                             "bronze (delta.bronze_writers: read_tasks, the default with "
                             "delta-rs); or set bronze_writers: driver"))
        if problems:
            raise Problems(*problems)
        return self

    def writers(self) -> str:
        """Who writes bronze and quarantine: bronze_writers, or its default for the engine."""
        if self.bronze_writers is not None:
            return self.bronze_writers
        return "read_tasks" if self.engine == "delta-rs" else "driver"

    def storage(self) -> dict[str, str]:
        """delta-rs storage options with secrets resolved; never log the result."""
        options = dict(self.storage_options)
        for key, ref in self.storage_secrets.items():
            options[key] = ref.read(f"delta.storage_secrets.{key}")
        return options


@dataclass(config=SECTION)
class ExporterConfig:
    enabled: Flag = Field(True, description="serve /metrics for Prometheus")
    bind: Text = Field("127.0.0.1", description="the address /metrics listens on (0.0.0.0: "
                       "every interface)")
    port: Whole = Field(9464, description="the TCP port /metrics listens on")
    # A decommissioned broker, or names from a bad record, must not be served forever.
    series_ttl_seconds: Number = Field(900.0, description="a broker or cluster no row has named "
                                       "for this long (wall clock) loses its series")
    # So one hostile record cannot make a scrape of millions of series.
    max_new_series_per_batch: Whole = Field(10000, description="new series one batch may "
                                            "create; beyond it new brokers and clusters wait "
                                            "(kafka_health_pipeline_series_dropped_total)")

    @model_validator(mode="after")
    def _check(self) -> ExporterConfig:
        problems = []
        if not 1 <= self.port <= 65535:
            problems.append(("port", f"{self.port} is not a TCP port (1-65535)"))
        if not self.series_ttl_seconds > 0:
            problems.append(("series_ttl_seconds", "must be > 0 seconds"))
        if self.max_new_series_per_batch < 0:
            problems.append(("max_new_series_per_batch", "must be >= 0"))
        if problems:
            raise Problems(*problems)
        return self


@dataclass(config=SECTION)
class AlertPushConfig:
    """Optional direct push of incidents to Alertmanager, skipping Prometheus scrape + rule
    evaluation for the events where seconds matter (data loss).

    Every alert goes to every member of the Alertmanager cluster (they do not forward alerts
    to each other). `alertmanager_url` (one URL, or several comma-separated) is still read
    so older configs keep working; it is merged with `alertmanager_urls`.
    """

    alertmanager_urls: list[Text] = Field(default_factory=list, description="every member of "
                                          "the Alertmanager cluster (http:// or https://); "
                                          "empty: no push")
    alertmanager_url: Text | None = Field(None, description="one URL, or several "
                                          "comma-separated; merged with alertmanager_urls")
    kinds: list[Text] = Field(default_factory=lambda: ["unclean_election"], description="the "
                              "incident kinds pushed directly")
    timeout_seconds: Number = Field(2.0, description="each push request's timeout")
    username: Text | None = Field(None, description="basic auth user (with password)")
    password: SecretRef | None = Field(None, description="basic auth password, {file: PATH} or "
                                       "{env: NAME}")
    bearer_token: SecretRef | None = Field(None, description="a bearer token instead of basic "
                                           "auth, {file: PATH} or {env: NAME}")
    ca_file: Text | None = Field(None, description="a PEM CA bundle to verify Alertmanager's "
                                 "certificate with")
    # Beyond it data loss goes first and the rest waits for the Prometheus rules, so a
    # flood of made-up brokers cannot page thousands of times.
    max_alerts_per_push: Whole = Field(50, description="alerts one push may carry (a batch "
                                       "pushes at most twice)")

    def urls(self) -> list[str]:
        """Every configured member once, without a trailing slash."""
        single = (self.alertmanager_url or "").split(",")
        merged = [u.strip().rstrip("/") for u in [*single, *self.alertmanager_urls]]
        return list(dict.fromkeys(u for u in merged if u))

    @model_validator(mode="after")
    def _check(self) -> AlertPushConfig:
        named = [(f"alertmanager_urls[{i}]", u) for i, u in enumerate(self.alertmanager_urls)]
        named += [("alertmanager_url", u) for u in (self.alertmanager_url or "").split(",")
                  if u.strip()]
        # No URL in the message: it may carry a password in its user info.
        problems = [(key, "must start with http:// or https://") for key, url in named
                    if not url.strip().lower().startswith(("http://", "https://"))]
        if self.password is not None and not self.username:
            problems.append(("password", "needs alert_push.username (basic auth)"))
        if self.bearer_token is not None and self.password is not None:
            problems.append(("bearer_token", "give either basic auth (username + password) or "
                             "bearer_token, not both"))
        if self.timeout_seconds <= 0:
            problems.append(("timeout_seconds", "must be > 0"))
        if self.max_alerts_per_push < 1:
            problems.append(("max_alerts_per_push", "must be >= 1"))
        if problems:
            raise Problems(*problems)
        return self


@dataclass(config=SECTION)
class MetadataClusterConfig:
    """How to reach one watched cluster's Admin API: the same kind of client settings as
    the metrics source (`source.kafka`, `source.secrets`), for another cluster."""

    bootstrap_servers: Text = Field("", description="the watched cluster's brokers (not the "
                                    "metrics cluster's), host:port[,host:port...]")
    kafka: dict[Text, Text] = Field(default_factory=dict, description="Kafka client settings "
                                    "in librdkafka's names, as source.kafka")
    secrets: dict[Text, SecretRef] = Field(default_factory=dict, description="secret client "
                                           "settings, as source.secrets")

    def problems(self) -> list[tuple[str, str]]:
        if not self.bootstrap_servers.strip():
            return [("bootstrap_servers", "required (host:port of the watched cluster, not of "
                     "the metrics cluster)")]
        refusal = librdkafka_refusal(self.kafka, self.secrets)
        return [("kafka", f"the Kafka client refuses it: {refusal}")] if refusal else []

    def client_config(self, path: str) -> dict[str, str]:
        """librdkafka settings with secrets resolved; never log the result."""
        from streaming.kafka_client import client_settings

        return client_settings(self.bootstrap_servers, self.kafka, self.secrets, path)


@dataclass(config=SECTION)
class MetadataConfig:
    """The Admin API poller of each watched cluster (streaming/metadata, docs/metadata.md).

    Keyed by the cluster name the metrics carry, so a poll's causes land on the incidents,
    gauges and pages of that cluster. Off by default: it needs a route and, on a secured
    cluster, ACLs (Describe on the cluster, Describe and DescribeConfigs on every topic)
    that the metrics path does not.
    """

    enabled: Flag = Field(False, description="poll the watched clusters' Admin API")
    interval_seconds: Number = Field(30.0, description="how often each cluster is polled")
    timeout_seconds: Number = Field(10.0, description="each Admin API request's timeout (a poll "
                                    "makes three or more requests)")
    describe_configs_batch: Whole = Field(500, description="topics per DescribeConfigs request")
    clusters: dict[Text, Annotated[MetadataClusterConfig, BeforeValidator(_empty_is_default)]] = (
        Field(default_factory=dict, description="the watched clusters to poll, keyed by the "
              "cluster name their metrics carry"))

    @model_validator(mode="after")
    def _check(self) -> MetadataConfig:
        # The clusters' problems are found here, not by the clusters themselves, so that
        # they are said with the section's own.
        problems = []
        if not self.interval_seconds > 0:
            problems.append(("interval_seconds", "must be > 0 seconds"))
        if not self.timeout_seconds > 0:
            problems.append(("timeout_seconds", "must be > 0 seconds"))
        elif self.interval_seconds > 0 and self.timeout_seconds >= self.interval_seconds:
            problems.append(("timeout_seconds", "must be below interval_seconds "
                             f"({self.interval_seconds:g}); a poll makes three or more requests"))
        if self.describe_configs_batch < 1:
            problems.append(("describe_configs_batch", "must be a whole number >= 1"))
        if self.enabled and not self.clusters:
            problems.append(("clusters", "name at least one watched cluster to poll (keyed by "
                             "the cluster name its metrics carry), or set metadata.enabled: "
                             "false"))
        for name, cluster in self.clusters.items():
            problems += [(f"clusters.{name}.{key}", text) for key, text in cluster.problems()]
        if problems:
            raise Problems(*problems)
        return self

    def polled(self) -> dict[str, MetadataClusterConfig]:
        """The clusters to poll: none unless enabled."""
        return dict(self.clusters) if self.enabled else {}


@dataclass(config=SECTION)
class ProbeConfig:
    """The durability probe (streaming/clients/probe.py): acks=all writes through every
    broker of each watched cluster, read back. It reaches a cluster with that cluster's
    client settings under metadata.clusters, and needs Create, Describe, Write and Read on
    its topic, Alter on it to spread its leaders, and Describe on the cluster."""

    enabled: Flag = Field(False, description="write and read back the probe's records on the "
                          "watched clusters")
    clusters: list[Text] = Field(default_factory=list, description="which of metadata.clusters "
                                 "to probe (empty: all of them)")
    topic: Text = Field("kafka-health-probe", description="the probe topic, created when "
                        "missing (replication factor min(3, brokers), min.insync.replicas 2, "
                        "unclean leader election off, a partition led by every broker)")
    interval_seconds: Number = Field(5.0, description="seconds between two writes to each "
                                     "partition of the probe topic")
    window_seconds: Number = Field(60.0, description="the windows its writes are counted in "
                                   "(probe_windows, the probe's series)")
    timeout_seconds: Number = Field(10.0, description="a write not acked within it fails "
                                    "(librdkafka's delivery timeout)")
    retention_ms: Whole = Field(3_600_000, description="retention.ms of the probe topic")
    topic_check_seconds: Number = Field(60.0, description="seconds between checks that every "
                                        "broker leads a partition of the probe topic")

    @model_validator(mode="after")
    def _check(self) -> ProbeConfig:
        problems = [(name, "must be > 0 seconds") for name in
                    ("interval_seconds", "window_seconds", "timeout_seconds",
                     "topic_check_seconds") if not getattr(self, name) > 0]
        if self.retention_ms < 60_000:
            problems.append(("retention_ms", "must be >= 60000 (the probe reads its records "
                             "back within seconds, but a minute of them helps a diagnosis)"))
        if not self.topic.strip():
            problems.append(("topic", "required"))
        if problems:
            raise Problems(*problems)
        return self


@dataclass(config=SECTION)
class ConsumerGroupsConfig:
    """Consumer groups' lag, status and loss to retention (streaming/clients/groups.py),
    read through the Admin API of each watched cluster with the client settings under
    metadata.clusters; needs Describe on the groups and the topics they commit."""

    enabled: Flag = Field(False, description="read the watched clusters' consumer groups")
    clusters: list[Text] = Field(default_factory=list, description="which of metadata.clusters "
                                 "to read (empty: all of them)")
    interval_seconds: Number = Field(30.0, description="how often each cluster's groups are read")
    timeout_seconds: Number = Field(10.0, description="each Admin API request's timeout")
    include: list[Text] = Field(default_factory=lambda: [".*"], description="regexes; a group "
                                "whose whole name matches one is read")
    exclude: list[Text] = Field(default_factory=lambda: ["kafka-health-.*"],
                                description="regexes; a group whose whole name matches one is "
                                "not read (wins over include)")
    max_partitions: Whole = Field(10_000, description="group-partitions read per poll at most "
                                  "(the groups in name order; the rest are counted in "
                                  "kafka_health_consumer_group_partitions_left_out)")
    window_polls: Whole = Field(10, description="polls a status is judged over (stalled: the "
                                "committed offset stayed this many polls while records came)")

    @model_validator(mode="after")
    def _check(self) -> ConsumerGroupsConfig:
        problems = [(name, "must be > 0 seconds") for name in
                    ("interval_seconds", "timeout_seconds") if not getattr(self, name) > 0]
        if self.timeout_seconds >= self.interval_seconds > 0:
            problems.append(("timeout_seconds", "must be below interval_seconds"))
        if self.max_partitions < 1:
            problems.append(("max_partitions", "must be >= 1"))
        if self.window_polls < 2:
            problems.append(("window_polls", "must be >= 2 (a status compares polls)"))
        for key in ("include", "exclude"):
            problems += [(f"{key}[{i}]", text) for i, pattern in enumerate(getattr(self, key))
                         if (text := regex_problem(pattern))]
        if problems:
            raise Problems(*problems)
        return self


def _section(cls: type) -> Any:
    return Annotated[cls, BeforeValidator(_empty_is_default)]


@dataclass(config=SECTION)
class Config:
    spark: _section(SparkConfig) = Field(default_factory=SparkConfig,  # type: ignore[valid-type]
                                         description="the Spark application")
    source: _section(SourceConfig) = Field(  # type: ignore[valid-type]
        default_factory=SourceConfig, description="the metrics topics and how to read them")
    identity: _section(IdentityConfig) = Field(  # type: ignore[valid-type]
        default_factory=IdentityConfig, description="how a sample finds its cluster and broker")
    quality: _section(QualityConfig) = Field(  # type: ignore[valid-type]
        default_factory=QualityConfig, description="the bounds past which samples are "
        "quarantined, and the data-quality expectations")
    signals: _section(SignalsConfig) = Field(  # type: ignore[valid-type]
        default_factory=SignalsConfig, description="the signal windows and thresholds")
    delta: _section(DeltaConfig) = Field(  # type: ignore[valid-type]
        default_factory=DeltaConfig, description="the Delta tables")
    exporter: _section(ExporterConfig) = Field(  # type: ignore[valid-type]
        default_factory=ExporterConfig, description="the Prometheus /metrics endpoint")
    alert_push: _section(AlertPushConfig) = Field(  # type: ignore[valid-type]
        default_factory=AlertPushConfig, description="the direct push of incidents to "
        "Alertmanager")
    clusters: dict[Text, dict[Text, Any]] = Field(
        default_factory=dict, description="per cluster, headroom facts over the defaults in "
        "metrics_schemas/headroom_defaults.yaml (vm_max_map_count, max_broker_partitions, ...)")
    metadata: _section(MetadataConfig) = Field(  # type: ignore[valid-type]
        default_factory=MetadataConfig, description="the Admin API poller of each watched "
        "cluster")
    probe: _section(ProbeConfig) = Field(  # type: ignore[valid-type]
        default_factory=ProbeConfig, description="the acks=all durability probe of the watched "
        "clusters")
    consumer_groups: _section(ConsumerGroupsConfig) = Field(  # type: ignore[valid-type]
        default_factory=ConsumerGroupsConfig, description="consumer groups' lag, status and "
        "loss to retention on the watched clusters")

    @model_validator(mode="after")
    def _check(self) -> Config:
        problems = [(f"clusters.{name}", text) for name, text in
                    headroom_problems(self.clusters)]
        for section in ("probe", "consumer_groups"):
            chosen = getattr(self, section)
            if not chosen.enabled:
                continue
            if not self.metadata.clusters:
                problems.append((f"{section}.enabled", "needs the watched clusters' client "
                                 "settings under metadata.clusters (metadata.enabled may stay "
                                 "false)"))
            problems += [(f"{section}.clusters", f"{name!r} is not under metadata.clusters")
                         for name in chosen.clusters if name not in self.metadata.clusters]
        if problems:
            raise Problems(*problems)
        return self

    def client_clusters(self, section: str) -> dict[str, MetadataClusterConfig]:
        """The watched clusters the `probe` or `consumer_groups` section reaches: none
        unless enabled; its `clusters`, or every one under metadata.clusters."""
        chosen = getattr(self, section)
        if not chosen.enabled:
            return {}
        names = chosen.clusters or list(self.metadata.clusters)
        return {name: self.metadata.clusters[name] for name in names}

    def secret_refs(self) -> dict[str, SecretRef]:
        """Every secret reference in the config by its dotted key, plus the push's CA file:
        the files and variables the job must be able to read once it runs."""
        refs = {f"source.secrets.{key}": ref for key, ref in self.source.secrets.items()}
        refs.update({f"delta.storage_secrets.{key}": ref
                     for key, ref in self.delta.storage_secrets.items()})
        refs.update({f"metadata.clusters.{name}.secrets.{key}": ref
                     for name, cluster in {**self.metadata.polled(),
                                           **self.client_clusters("probe"),
                                           **self.client_clusters("consumer_groups")}.items()
                     for key, ref in cluster.secrets.items()})
        push = self.alert_push
        for name in ("password", "bearer_token"):
            ref = getattr(push, name)
            if ref is not None:
                refs[f"alert_push.{name}"] = ref
        if push.ca_file:
            refs["alert_push.ca_file"] = SecretRef(file=push.ca_file)
        return refs

    def check_secrets(self) -> None:
        """Read every secret once, so a missing file or variable fails the check with its
        key instead of failing the job later, deep in a read task."""
        for path, ref in self.secret_refs().items():
            ref.read(path)

    def table_path(self, table: str) -> str:
        """The table's location under delta.path (a path or a URL: s3a://b/kh -> s3a://b/kh/t)."""
        return join(self.delta.path, table)

    def topic_formats(self) -> dict[str, str]:
        return {t.name: t.format for t in self.source.topics}

    def topic_clusters(self) -> dict[str, str]:
        return {t.name: t.cluster for t in self.source.topics if t.cluster}


