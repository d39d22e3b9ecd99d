"""Job configuration: one YAML file, environment overrides, validated before anything starts.

A bad key or value fails at start with the key's dotted path and the fix, because an
always-on job that dies an hour later on a typo pages someone for nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import yaml

from streaming.locations import join, scheme
from streaming.redact import redact_tree

ENV_PREFIX = "KAFKA_HEALTH__"
FORMATS = ("jolokia", "prometheus", "otlp", "telegraf", "auto")


class ConfigError(ValueError):
    """A configuration problem, phrased as key + what is wrong + how to fix it."""


@dataclass
class SecretRef:
    """Where a secret lives; its value is read late and never logged."""

    file: str | None = None
    env: str | None = None

    def read(self, path: str) -> str:
        """The secret's value; `path` is the dotted key it was configured under, which names
        it in the error (the value itself never appears in one)."""
        if self.file:
            try:
                return Path(self.file).read_text().strip()
            except OSError as err:
                raise ConfigError(
                    f"{path}: file {self.file} cannot be read ({err.strerror})") from err
        if self.env:
            if self.env not in os.environ:
                raise ConfigError(f"{path}: environment variable {self.env} is not set")
            return os.environ[self.env]
        raise ConfigError(f"{path}: give either 'file' or 'env'")


# What librdkafka says of settings no deployment can run with; other errors at a client's
# creation (a PEM or keystore checked with a placeholder secret) are not the config's.
_REFUSALS = ("No such configuration property", "Invalid value", "is not supported",
             "No provider for SASL mechanism", "must be set")


def librdkafka_refusal(kafka: Mapping[str, Any], secrets: Iterable[str]) -> str | None:
    """What librdkafka (confluent-kafka's client) says of these settings, None when it takes
    them: a misspelt name, a value of the wrong kind, a Java client's setting, a SASL
    mechanism this build lacks. Secrets are checked by name only (a placeholder value),
    and the files that `*.location` settings name are not opened: they may exist only
    where the job runs. No connection is made (no bootstrap servers)."""
    from confluent_kafka import Consumer, KafkaException

    from streaming.kafka_client import consumer_config

    conf = {key: value if isinstance(value, str) else json.dumps(value)
            for key, value in kafka.items()}
    conf.update(dict.fromkeys(secrets, "x"))
    files = {key: value for key, value in conf.items() if key.endswith(".location")}
    rest = {key: value for key, value in conf.items() if key not in files}
    for part in (rest, files):
        try:
            Consumer(consumer_config("check-config", {**part, "log_level": 0})).close()
        except KafkaException as err:
            said = err.args[0].str()
            if not any(refusal in said for refusal in _REFUSALS):
                continue
            # librdkafka quotes a value it refuses, and a value may be a secret
            for value in sorted(set(part.values()), key=len, reverse=True):
                if len(value) >= 3:
                    said = said.replace(value, "<the value set>")
            return said
    return None


@dataclass
class TopicConfig:
    name: str = ""
    format: str = "auto"
    cluster: str | None = None

    def validate(self, path: str) -> None:
        if not self.name:
            raise ConfigError(f"{path}.name: a topic name is required")
        if self.format not in FORMATS:
            raise ConfigError(f"{path}.format: {self.format!r} is not one of {', '.join(FORMATS)}")


@dataclass
class SparkConfig:
    master: str | None = "local[2]"
    app_name: str = "kafka-health"
    trigger_seconds: float = 0.5
    checkpoint: str = "data/checkpoint"
    shuffle_partitions: int = 2
    conf: dict[str, str] = field(default_factory=dict)
    # A second job refuses to start while the lease in the checkpoint and the Delta root
    # has a heartbeat younger than this (renewed every sixth of it); an older one is taken
    # over. One held by a dead process on the same host is taken over at once.
    lease_timeout_seconds: float = 30.0
    # A stop (SIGTERM, Ctrl-C) waits this long for the batch in flight to commit, then
    # cancels it (it runs again at the next start). Keep it under the pod's grace period
    # less the last batch's signals: 20 s fits Kubernetes' default 30 s.
    stop_timeout_seconds: float = 20.0
    # A checkpoint with no offsets refuses to start on Delta tables another checkpoint
    # wrote, unless it starts at the topics' ends: with earliest it would read every record
    # still in Kafka into them a second time. True lets one such start go ahead.
    accept_new_checkpoint: bool = False

    def validate(self, path: str) -> None:
        if not self.trigger_seconds >= 0:
            raise ConfigError(f"{path}.trigger_seconds: must be >= 0 seconds (how often a "
                              "batch may start; 0: as soon as the last one ends)")
        if not self.lease_timeout_seconds > 0:
            raise ConfigError(f"{path}.lease_timeout_seconds: must be > 0 seconds")
        if not self.stop_timeout_seconds >= 0:
            raise ConfigError(f"{path}.stop_timeout_seconds: must be >= 0 seconds (0 cancels "
                              "the batch in flight at once)")


@dataclass
class SourceConfig:
    engine: str = "python"
    bootstrap_servers: str = "127.0.0.1:9092"
    topics: list[TopicConfig] = field(default_factory=lambda: [TopicConfig(name="kafka-metrics")])
    subscribe_pattern: str | None = None
    starting_offsets: str = "earliest"
    # 500k: between two batches' reads the read tasks idle while the driver does its fixed
    # share of a batch (Spark's loop, the bronze commit, the held windows' step). On 2
    # cores a catch-up read 60-65 % of the raw read at 250k, 86-92 % at 500k, 94-96 % at
    # 1M; the peak RSS grows with the cap, at 1M to within 50 MB of the 2.5 GB bar at 100k
    # samples/s (tests/benchmarks/results/batch-size-same-hour.json).
    max_offsets_per_trigger: int | None = 500_000
    # Python source only: read tasks per batch (null: Spark's default parallelism, the
    # cores) and the fewest records worth a task of their own (below it, fewer tasks).
    max_tasks: int | None = None
    min_records_per_task: int = 5000
    fail_on_data_loss: bool = True
    kafka: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, SecretRef] = field(default_factory=dict)

    def validate(self, path: str) -> None:
        if self.engine not in ("python", "spark"):
            raise ConfigError(
                f"{path}.engine: {self.engine!r} is not valid; use 'python' (confluent-kafka "
                "data source, no jars) or 'spark' (Spark's kafka source, needs spark-sql-kafka "
                "on the classpath)"
            )
        if not self.bootstrap_servers.strip():
            raise ConfigError(f"{path}.bootstrap_servers: empty; give the metrics topics' "
                              "brokers as host:port[,host:port...]")
        if not self.topics and not self.subscribe_pattern:
            raise ConfigError(f"{path}.topics: list at least one topic or set subscribe_pattern")
        if self.subscribe_pattern and self.engine == "python":  # Spark's is a Java regex
            try:
                re.compile(self.subscribe_pattern)
            except re.error as err:
                raise ConfigError(f"{path}.subscribe_pattern: not a valid regex ({err})") from err
        for i, topic in enumerate(self.topics):
            topic.validate(f"{path}.topics[{i}]")
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger <= 0:
            raise ConfigError(f"{path}.max_offsets_per_trigger: must be > 0 or null (no cap)")
        if self.max_tasks is not None and self.max_tasks <= 0:
            raise ConfigError(f"{path}.max_tasks: must be > 0 or null (Spark's default "
                              "parallelism)")
        if self.min_records_per_task <= 0:
            raise ConfigError(f"{path}.min_records_per_task: must be > 0")
        if self.engine == "python":  # the Java client's names are Spark's to check
            refusal = librdkafka_refusal(self.kafka, self.secrets)
            if refusal:
                raise ConfigError(f"{path}.kafka: the Kafka client refuses it: {refusal}")
        if not starting_offsets_valid(self.starting_offsets):
            raise ConfigError(
                f"{path}.starting_offsets: {self.starting_offsets!r} is not 'earliest', "
                "'latest' or a JSON object of offsets per topic and partition, quoted in "
                """YAML: '{"kafka-metrics": {"0": 42}}'""")

    def client_config(self) -> dict[str, str]:
        """Kafka client settings with secrets resolved; never log the result."""
        from streaming.kafka_client import client_settings

        return client_settings(self.bootstrap_servers, self.kafka, self.secrets, "source")


def starting_offsets_valid(value: str) -> bool:
    """'earliest', 'latest', or a JSON object of whole offsets per topic and partition (the
    form Spark's kafka source takes, which the Python source reads too)."""
    if value in ("earliest", "latest"):
        return True
    try:
        offsets = json.loads(value)
    except ValueError:
        return False
    return isinstance(offsets, dict) and all(
        isinstance(parts, dict) and all(
            isinstance(offset, int) and not isinstance(offset, bool) for offset in parts.values())
        for parts in offsets.values())


# The digits before a separator in a host name: kafka-12.prod:9404 is broker 12. Not a
# port's digits (after a colon): kafka-a:9404 and kafka-b:9404 are no broker 9404. The
# look-behind also starts a match only at a digit run's start, which keeps the search
# linear (without it, quadratic in a long digit run). An IP address's digits name no
# broker either (10.0.0.7 and 10.0.0.8 would both read as 10): with this regex the
# resolver reads no IP address instance, instance_map names its broker. A regex of the
# user's own is applied to IP addresses too (a fleet whose broker ids are the last octet).
DEFAULT_INSTANCE_REGEX = r"(?<![\d:])(\d+)(?:[.:/]|$)"
# The default before it, which read a port's digits: a config that names it means the
# default (IdentityConfig.validate).
EARLIER_DEFAULT_INSTANCE_REGEX = r"(?<!\d)(\d+)(?:[.:/]|$)"
# A record key names the broker only as its number, a Kafka broker id: "prod/3" or "3". Other
# keys are how a shipper partitions, not identity: Telegraf's routing_tag (a central
# Telegraf's own host name), routing_key "random" (a UUID), the OpenTelemetry Collector's
# hash of the resource attributes (16 raw bytes); read as a broker they would move every
# sample to a broker of that name. Such a key is passed over for the instance labels.
DEFAULT_KEY_PATTERN = r"^(?:(?P<cluster>[^/]+)/)?(?P<broker>\d+)$"
EARLIER_DEFAULT_KEY_PATTERN = r"^(?:(?P<cluster>[^/]+)/)?(?P<broker>[^/]+)$"


@dataclass
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

    default_cluster: str = "default"
    cluster_labels: list[str] = field(
        default_factory=lambda: ["cluster", "kafka_cluster", "kafka.cluster.alias", "cluster_name",
                                 "strimzi_io_cluster"]
    )
    broker_labels: list[str] = field(
        default_factory=lambda: ["broker", "broker_id", "kafka.broker.id", "broker.id"]
    )
    instance_labels: list[str] = field(
        default_factory=lambda: [
            "strimzi_io_pod_name", "kubernetes_pod_name", "pod", "jolokia_agent_url",
            "hostname", "instance", "host", "service.instance.id", "host.name",
        ]
    )
    instance_map: dict[str, str] = field(default_factory=dict)
    # The digits of a host name (see DEFAULT_INSTANCE_REGEX).
    broker_from_instance_regex: str | None = DEFAULT_INSTANCE_REGEX
    # "cluster/<broker id>" or "<broker id>" (see DEFAULT_KEY_PATTERN).
    key_pattern: str | None = DEFAULT_KEY_PATTERN

    def validate(self, path: str) -> None:
        # a config copied from the example, which showed the earlier defaults as defaults
        if self.broker_from_instance_regex == EARLIER_DEFAULT_INSTANCE_REGEX:
            self.broker_from_instance_regex = DEFAULT_INSTANCE_REGEX
        if self.key_pattern == EARLIER_DEFAULT_KEY_PATTERN:
            self.key_pattern = DEFAULT_KEY_PATTERN
        for name in ("broker_from_instance_regex", "key_pattern"):
            pattern = getattr(self, name)
            if pattern is None:
                continue
            try:
                re.compile(pattern)
            except re.error as err:
                raise ConfigError(f"{path}.{name}: not a valid regex ({err})") from err


@dataclass
class QualityConfig:
    max_timestamp_skew_seconds: float = 900.0
    # A sample time this far from the wall clock is quarantined (timestamp_out_of_range):
    # a producer with a broken clock would otherwise open windows decades away, which every
    # later batch then reads around. Null: no limit that way.
    max_ahead_of_wall_clock_seconds: float | None = 600.0
    max_behind_wall_clock_seconds: float | None = 7 * 86400.0
    max_message_bytes: int = 10 * 1024 * 1024
    # One record's bounds, each its own quarantine reason; decoding stops at the first
    # sample past the cap, so a hostile record costs a bounded amount of worker memory
    # (about 1.2 KB a sample in flight: 850k samples took +1 GB). 100k: a broker with
    # 4,000 partitions read with per-partition Log and Partition MBeans (4 + 5 numeric
    # attributes each) is about 36k samples in one Jolokia bulk read, so 2.5x margin.
    max_samples_per_record: int = 100_000  # too_many_samples: the record, whole
    max_labels_per_sample: int = 64  # too_many_labels: that sample (identity labels count)
    max_label_chars: int = 1024  # label_too_long: a key or value longer, that sample
    # Distinct brokers a cluster may have since the job started; samples naming a new one
    # past it are quarantined (too_many_brokers), so made-up brokers cannot create state.
    max_brokers_per_cluster: int = 2000
    # Distinct clusters since the job started; samples naming a new one past it are
    # quarantined (too_many_clusters), so made-up cluster names cannot create state either.
    # 1000: a pipeline watches tens of clusters, so a large fleet fits with room, while
    # the state made-up names can take stays bounded (at most this many clusters' windows
    # and series, each with at most max_brokers_per_cluster brokers).
    max_clusters: int = 1000
    validate_every_n_batches: int = 10
    sample_rows: int = 5000

    def validate(self, path: str) -> None:
        for name in ("max_ahead_of_wall_clock_seconds", "max_behind_wall_clock_seconds"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"{path}.{name}: must be > 0 seconds or null (no limit)")
        for name in ("max_message_bytes", "max_samples_per_record", "max_labels_per_sample",
                     "max_label_chars", "max_brokers_per_cluster", "max_clusters"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{path}.{name}: must be a whole number > 0")


@dataclass
class SignalsConfig:
    window_seconds: int = 60
    watermark_seconds: int = 120
    counter_lookback_seconds: int = 300
    queued_max_requests: int = 500
    scrape_interval_seconds: float = 15.0
    stale_after_intervals: int = 3
    isr_churn_match_seconds: int = 300
    incident_horizon_seconds: int = 900
    saturation_queue_ratio: float = 0.8
    saturation_idle_ratio: float = 0.2
    # Keep the open windows' partials between batches (a batch aggregates only its own
    # samples); false recomputes every touched window from bronze on every batch.
    incremental: bool = True

    def validate(self, path: str) -> None:
        if self.window_seconds <= 0 or 86400 % self.window_seconds:
            raise ConfigError(f"{path}.window_seconds: must divide a day evenly (e.g. 60, 300)")
        if self.queued_max_requests <= 0:
            raise ConfigError(f"{path}.queued_max_requests: the broker's setting, > 0 (default 500)")


@dataclass
class DeltaConfig:
    engine: str = "delta-rs"
    path: str = "data/delta"
    # Who writes bronze and quarantine: the read tasks (each writes its own Parquet files
    # and reduces its signal samples to partials; the driver commits the files' add actions
    # in one transaction) or the driver (every decoded sample crosses to it). Unset: the
    # read tasks with delta-rs, the driver with delta-spark.
    bronze_writers: str | None = None
    compact_every_n_batches: int = 200
    # The signals writer starts a round of Delta writes (broker_signals, cluster_signals,
    # partition_headroom, incidents) at most this often; batches that arrive meanwhile are
    # written together in the next round. A round costs about as much for one batch as for
    # several, so on a short trigger this frees CPU for the read; gauges and pages never
    # wait for it. 0: a round as soon as a batch is handed over.
    signals_every_seconds: float = 2.0
    # The same while the job catches up (its batches read up to source.max_offsets_per_
    # trigger): behind the stream anyway, the Delta signals then trail by up to this much,
    # and the CPU of the rounds saved goes to the read (whatever this says, at most
    # streaming.pipeline.batch.MAX_OWED_BATCHES batches wait for a round).
    signals_every_seconds_catching_up: float = 15.0
    # Days each table keeps (bronze by its date partition, quarantine by ingest_ts,
    # dq_results by evaluated_at); a table left out or null keeps everything.
    retention_days: dict[str, float | None] = field(default_factory=lambda: {
        "bronze": 30, "quarantine": 30, "dq_results": 30})
    retention_every_seconds: float = 3600.0  # delete + vacuum at most this often
    # Files unreferenced for longer are removed by the vacuum: readers of an older version
    # (a report running meanwhile) keep working for this long.
    vacuum_retain_hours: int = 24
    # How long each table's Delta log keeps a commit (delta.logRetentionDuration, set on
    # the tables the job opens): each delta-rs commit costs more the more commit files the
    # log holds, and at a commit a batch Delta's own 30 days would slow the job by the hour
    # (docs/performance.md). Checkpoints hold the tables' state and the batches' app
    # transactions; what a shorter log loses is time travel to older versions, and a
    # Delta stream reading a table must not fall further behind than this. delta-rs only:
    # Spark's Delta refuses a log retention shorter than the deleted files' (7 days).
    log_retention_minutes: float = 2.0
    # delta-rs storage options for a remote delta.path, in delta-rs' own names: for S3
    # AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_ALLOW_HTTP, AWS_S3_LOCKING_PROVIDER,
    # ...; a secret value (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) goes under
    # storage_secrets as {file: ...} or {env: ...}, read when the tables are opened. Left
    # empty, delta-rs takes the store's defaults from the environment (AWS_*, instance role).
    # A key in both: the secret wins, as with source.secrets over source.kafka.
    storage_options: dict[str, str] = field(default_factory=dict)
    storage_secrets: dict[str, SecretRef] = field(default_factory=dict)

    def validate(self, path: str) -> None:
        for table, days in self.retention_days.items():
            if table not in ("bronze", "quarantine", "dq_results"):
                raise ConfigError(f"{path}.retention_days.{table}: only bronze, quarantine "
                                  "and dq_results have a retention")
            if days is not None and not days > 0:
                raise ConfigError(f"{path}.retention_days.{table}: must be > 0 days or null "
                                  "(keep everything)")
        for name in ("signals_every_seconds", "signals_every_seconds_catching_up"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{path}.{name} must be >= 0 (0: a round of signal writes "
                                  "as soon as a batch is handed over)")
        if not self.log_retention_minutes >= 1:
            raise ConfigError(f"{path}.log_retention_minutes must be >= 1 (minutes the "
                              "tables' Delta logs keep a commit)")
        if not self.retention_every_seconds > 0 or self.vacuum_retain_hours < 0:
            raise ConfigError(f"{path}.retention_every_seconds must be > 0 and "
                              f"{path}.vacuum_retain_hours >= 0")
        if self.engine not in ("delta-rs", "delta-spark"):
            raise ConfigError(
                f"{path}.engine: {self.engine!r} is not valid; use 'delta-rs' (the default: "
                "the driver writes, with delta.storage_options) or 'delta-spark' (Spark's "
                "executors write, through Spark's Hadoop file systems)")
        if self.engine == "delta-spark" and scheme(self.path) == "s3":
            # Hadoop has no s3:// file system; its S3 connector is s3a://
            raise ConfigError(f"{path}.path: delta-spark writes through Hadoop, which reads "
                              f"S3 as s3a://, not s3://: use {'s3a' + self.path[2:]!r}")
        if self.bronze_writers not in (None, "driver", "read_tasks"):
            raise ConfigError(
                f"{path}.bronze_writers: {self.bronze_writers!r} is not valid; use "
                "'read_tasks' (the read tasks write bronze and quarantine files, the driver "
                "commits them: the per-sample work leaves the driver; the default with "
                "delta-rs) or 'driver' (every sample crosses to the driver, which writes)")
        if self.bronze_writers == "read_tasks" and self.engine != "delta-rs":
            raise ConfigError(f"{path}.bronze_writers: read_tasks commits the tasks' files "
                              "with delta-rs: it needs delta.engine: delta-rs")
        if self.writers() == "read_tasks" and self.vacuum_retain_hours < 1:
            # the vacuum removes files no commit references: with less, it could remove
            # the files the read tasks are writing for a batch not yet committed
            raise ConfigError(f"{path}.vacuum_retain_hours: must be >= 1 while the read "
                              f"tasks write bronze ({path}.bronze_writers: read_tasks, the "
                              "default with delta-rs); or set bronze_writers: driver")

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


@dataclass
class ExporterConfig:
    enabled: bool = True
    bind: str = "127.0.0.1"
    port: int = 9464
    # A broker or cluster no row has named for this long (wall clock) loses its series: a
    # decommissioned broker, or names from a bad record, must not be served forever.
    series_ttl_seconds: float = 900.0
    # New series one batch may create; beyond it new brokers and clusters are not exported
    # that batch (kafka_health_pipeline_series_dropped_total), so one hostile record cannot
    # make a scrape of millions of series.
    max_new_series_per_batch: int = 10000

    def validate(self, path: str) -> None:
        if not 1 <= self.port <= 65535:
            raise ConfigError(f"{path}.port: {self.port} is not a TCP port (1-65535)")
        if not self.series_ttl_seconds > 0:
            raise ConfigError(f"{path}.series_ttl_seconds: must be > 0 seconds")
        if self.max_new_series_per_batch < 0:
            raise ConfigError(f"{path}.max_new_series_per_batch: must be >= 0")


@dataclass
class AlertPushConfig:
    """Optional direct push of incidents to Alertmanager, skipping Prometheus scrape + rule
    evaluation for the events where seconds matter (data loss).

    Every alert goes to every member of the Alertmanager cluster (they do not forward alerts
    to each other). `alertmanager_url` (one URL, or several comma-separated) is still read
    so older configs keep working; it is merged with `alertmanager_urls`.
    """

    alertmanager_urls: list[str] = field(default_factory=list)
    alertmanager_url: str | None = None
    kinds: list[str] = field(default_factory=lambda: ["unclean_election"])
    timeout_seconds: float = 2.0
    username: str | None = None
    password: SecretRef | None = None
    bearer_token: SecretRef | None = None
    ca_file: str | None = None
    # Alerts one push may carry (a batch pushes at most twice); beyond it data loss goes
    # first and the rest waits for the Prometheus rules, so a flood of made-up brokers
    # cannot page thousands of times.
    max_alerts_per_push: int = 50

    def urls(self) -> list[str]:
        """Every configured member once, without a trailing slash."""
        single = (self.alertmanager_url or "").split(",")
        merged = [u.strip().rstrip("/") for u in [*single, *self.alertmanager_urls]]
        return list(dict.fromkeys(u for u in merged if u))

    def validate(self, path: str) -> None:
        named = [(f"{path}.alertmanager_urls[{i}]", u) for i, u in enumerate(self.alertmanager_urls)]
        named += [(f"{path}.alertmanager_url", u) for u in (self.alertmanager_url or "").split(",")
                  if u.strip()]
        for key, url in named:
            if not url.strip().lower().startswith(("http://", "https://")):
                # No URL in the message: it may carry a password in its user info.
                raise ConfigError(f"{key}: must start with http:// or https://")
        if self.password is not None and not self.username:
            raise ConfigError(f"{path}.password: needs {path}.username (basic auth)")
        if self.bearer_token is not None and self.password is not None:
            raise ConfigError(f"{path}.bearer_token: give either basic auth (username + "
                              "password) or bearer_token, not both")
        if self.timeout_seconds <= 0:
            raise ConfigError(f"{path}.timeout_seconds: must be > 0")
        if self.max_alerts_per_push < 1:
            raise ConfigError(f"{path}.max_alerts_per_push: must be >= 1")


@dataclass
class MetadataClusterConfig:
    """How to reach one watched cluster's Admin API: the same kind of client settings as
    the metrics source (`source.kafka`, `source.secrets`), for another cluster."""

    bootstrap_servers: str = ""
    kafka: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, SecretRef] = field(default_factory=dict)

    def problems(self, path: str) -> list[str]:
        if not self.bootstrap_servers.strip():
            return [f"{path}.bootstrap_servers: required (host:port of the watched cluster, "
                    "not of the metrics cluster)"]
        refusal = librdkafka_refusal(self.kafka, self.secrets)
        return [f"{path}.kafka: the Kafka client refuses it: {refusal}"] if refusal else []

    def client_config(self, path: str) -> dict[str, str]:
        """librdkafka settings with secrets resolved; never log the result."""
        from streaming.kafka_client import client_settings

        return client_settings(self.bootstrap_servers, self.kafka, self.secrets, path)


@dataclass
class MetadataConfig:
    """The Admin API poller of each watched cluster (streaming/metadata, docs/metadata.md).

    Keyed by the cluster name the metrics carry, so a poll's causes land on the incidents,
    gauges and pages of that cluster. Off by default: it needs a route and, on a secured
    cluster, ACLs (Describe on the cluster, Describe and DescribeConfigs on every topic)
    that the metrics path does not.
    """

    enabled: bool = False
    interval_seconds: float = 30.0
    # Each Admin API request's timeout; a poll makes three or more requests.
    timeout_seconds: float = 10.0
    describe_configs_batch: int = 500  # topics per DescribeConfigs request
    clusters: dict[str, MetadataClusterConfig] = field(default_factory=dict)

    def validate(self, path: str) -> None:
        """Every problem of the section at once: an operator fixes one file edit, not one
        restart per typo."""
        problems = []
        if not self.interval_seconds > 0:
            problems.append(f"{path}.interval_seconds: must be > 0 seconds")
        if not self.timeout_seconds > 0:
            problems.append(f"{path}.timeout_seconds: must be > 0 seconds")
        elif self.interval_seconds > 0 and self.timeout_seconds >= self.interval_seconds:
            problems.append(f"{path}.timeout_seconds: must be below interval_seconds "
                            f"({self.interval_seconds:g}); a poll makes three or more requests")
        if self.describe_configs_batch < 1:
            problems.append(f"{path}.describe_configs_batch: must be a whole number >= 1")
        if self.enabled and not self.clusters:
            problems.append(f"{path}.clusters: name at least one watched cluster to poll "
                            f"(keyed by the cluster name its metrics carry), or set "
                            f"{path}.enabled: false")
        for name, cluster in self.clusters.items():
            problems += cluster.problems(f"{path}.clusters.{name}")
        if problems:
            raise ConfigError("\n".join(problems))

    def polled(self) -> dict[str, MetadataClusterConfig]:
        """The clusters to poll: none unless enabled."""
        return dict(self.clusters) if self.enabled else {}


@dataclass
class Config:
    spark: SparkConfig = field(default_factory=SparkConfig)
    source: SourceConfig = field(default_factory=SourceConfig)
    identity: IdentityConfig = field(default_factory=IdentityConfig)
    quality: QualityConfig = field(default_factory=QualityConfig)
    signals: SignalsConfig = field(default_factory=SignalsConfig)
    delta: DeltaConfig = field(default_factory=DeltaConfig)
    exporter: ExporterConfig = field(default_factory=ExporterConfig)
    alert_push: AlertPushConfig = field(default_factory=AlertPushConfig)
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    metadata: MetadataConfig = field(default_factory=MetadataConfig)

    def validate(self) -> Config:
        for f in dataclasses.fields(self):
            section = getattr(self, f.name)
            if hasattr(section, "validate"):
                section.validate(f.name)
        self._validate_clusters()
        return self

    def _validate_clusters(self) -> None:
        """Each cluster's headroom facts as the headroom stage will build them: a misspelt
        key (vm_max_mapcount) or a bad value fails at start with its dotted path, not when
        a batch first reaches the cluster, and never leaves a default silently in force."""
        from streaming.headroom.model import load_defaults, make_config

        if not self.clusters:
            return
        defaults = load_defaults()  # its own errors name its file
        for name, overrides in self.clusters.items():  # each a dict: _convert checked
            try:
                make_config(overrides, defaults)
            except (TypeError, ValueError) as err:
                raise ConfigError(f"clusters.{name}: {err}") from err

    def secret_refs(self) -> dict[str, SecretRef]:
        """Every secret reference in the config by its dotted key, plus the push's CA file:
        the files and variables the job must be able to read once it runs."""
        refs = {f"source.secrets.{key}": ref for key, ref in self.source.secrets.items()}
        refs.update({f"delta.storage_secrets.{key}": ref
                     for key, ref in self.delta.storage_secrets.items()})
        refs.update({f"metadata.clusters.{name}.secrets.{key}": ref
                     for name, cluster in self.metadata.polled().items()
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


def _convert(value: Any, hint: Any, path: str) -> Any:
    """Build a typed value from YAML data, failing with the dotted key on a mismatch."""
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is None and dataclasses.is_dataclass(hint):
        return _build(hint, value, path)
    if type(None) in args:
        if value is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(value, inner[0], path)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{path}: expected a list, got {type(value).__name__}")
        return [_convert(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {type(value).__name__}")
        return {str(k): _convert(v, args[1], f"{path}.{k}") for k, v in value.items()}
    if hint is Any:
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{path}: expected true or false, got {value!r}")
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        if hint is int and not float(value).is_integer():
            raise ConfigError(f"{path}: expected a whole number, got {value!r}")
        return hint(value)
    if hint is str:
        if isinstance(value, dict | list):
            raise ConfigError(f"{path}: expected a string, got {type(value).__name__}")
        return str(value)
    return value


def _build(cls: type, data: Any, path: str) -> Any:
    if data is None:
        return cls()
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(data).__name__}")
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ConfigError(
                f"{key_path}: unknown key.{hint} Valid keys here: {', '.join(names)}"
            )
        kwargs[key] = _convert(value, hints[key], key_path)
    return cls(**kwargs)


def _apply_env(data: dict[str, Any], environ: dict[str, str]) -> dict[str, Any]:
    """KAFKA_HEALTH__SECTION__KEY=value overrides one key; value is parsed as YAML."""
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        keys = [k.lower() for k in name[len(ENV_PREFIX):].split("__") if k]
        node = data
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{name}: {'.'.join(keys)} does not name a nested key")
        try:
            node[keys[-1]] = _parse_yaml(raw)
        except yaml.YAMLError as err:
            raise ConfigError(f"{name}: not valid YAML ({_yaml_problem(err)}); the value is "
                              "not shown, it may hold a secret") from None
    return data


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML whose mappings may not repeat a key. PyYAML keeps the last one silently: a
    second `source:` block would drop every setting of the first without a word. A merge
    (`<<: *base`) may still be overridden, as YAML means it to."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, Hashable):
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"the key {str(key)[:60]!r} appears twice in one "
                            "mapping (the first would be dropped)", key_node.start_mark)
                    seen.add(key)
        return super().construct_mapping(node, deep)


def _parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader


def _yaml_problem(err: yaml.YAMLError) -> str:
    """What is wrong and where, without PyYAML's snippet of the text (which would print a
    secret sitting on that line)."""
    problem = getattr(err, "problem", None) or "cannot parse"
    mark = getattr(err, "problem_mark", None)
    if mark is None:
        return problem
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"


def load_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """Read YAML (optional), apply environment overrides, validate."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            text = Path(path).read_text()
        except OSError as err:
            raise ConfigError(f"--config {path}: cannot read ({err.strerror})") from err
        try:
            data = _parse_yaml(text) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"--config {path}: not valid YAML ({_yaml_problem(err)})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"--config {path}: the top level must be a mapping of sections")
    data = _apply_env(data, dict(os.environ if environ is None else environ))
    return _build(Config, data, "").validate()


def redacted(config: Config) -> dict[str, Any]:
    """The config as a dict safe to print or log (see streaming.redact for the rule)."""
    return redact_tree(dataclasses.asdict(config))
