"""Job configuration: one YAML file, environment overrides, validated before anything starts.

model: the sections and keys (types, defaults, meanings); loading: the YAML file and the
`KAFKA_HEALTH__SECTION__KEY` overrides; secrets: references to secret values, read late;
checks: what the Kafka client and the other consumers of a value would say of it;
migrations: earlier defaults read as today's; reference: docs/configuration.md.
"""

from streaming.config.checks import librdkafka_refusal, starting_offsets_valid
from streaming.config.errors import ConfigError
from streaming.config.loading import CONFIG_FILE_ENV, ENV_PREFIX, _parse_yaml, env_name, load_config
from streaming.config.migrations import (
    DEFAULT_INSTANCE_REGEX,
    DEFAULT_KEY_PATTERN,
    EARLIER_DEFAULT_INSTANCE_REGEX,
    EARLIER_DEFAULT_KEY_PATTERN,
)
from streaming.config.model import (
    FORMATS,
    AlertPushConfig,
    Config,
    DeltaConfig,
    ExporterConfig,
    IdentityConfig,
    MetadataClusterConfig,
    MetadataConfig,
    QualityConfig,
    SignalsConfig,
    SourceConfig,
    SparkConfig,
    TopicConfig,
)
from streaming.config.secrets import SecretRef, redacted

__all__ = [
    "CONFIG_FILE_ENV", "DEFAULT_INSTANCE_REGEX", "DEFAULT_KEY_PATTERN",
    "EARLIER_DEFAULT_INSTANCE_REGEX", "EARLIER_DEFAULT_KEY_PATTERN", "ENV_PREFIX", "FORMATS",
    "AlertPushConfig", "Config", "ConfigError", "DeltaConfig", "ExporterConfig",
    "IdentityConfig", "MetadataClusterConfig", "MetadataConfig", "QualityConfig", "SecretRef",
    "SignalsConfig", "SourceConfig", "SparkConfig", "TopicConfig", "_parse_yaml", "env_name",
    "librdkafka_refusal", "load_config", "redacted", "starting_offsets_valid",
]
