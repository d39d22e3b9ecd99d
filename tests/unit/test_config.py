"""Config fails early and clearly, takes env overrides, and never leaks secrets."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from streaming.config import Config, ConfigError, load_config, redacted
from streaming.source.reader import source_options


def write(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_unknown_key_names_the_key_and_the_fix(tmp_path):
    path = write(tmp_path, "source:\n  bootstrap_server: kafka:9092\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert "source.bootstrap_server" in str(err.value)
    assert "Did you mean 'bootstrap_servers'" in str(err.value)


def test_wrong_type_and_bad_choice_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"signals.window_seconds: expected a number"):
        load_config(write(tmp_path, "signals:\n  window_seconds: soon\n"), environ={})
    with pytest.raises(ConfigError, match=r"source.topics\[0\].format: 'xml' is not one of"):
        load_config(write(tmp_path, "source:\n  topics: [{name: t, format: xml}]\n"), environ={})
    with pytest.raises(ConfigError, match="source.engine"):
        load_config(write(tmp_path, "source:\n  engine: flink\n"), environ={})
    with pytest.raises(ConfigError, match=r"spark.stop_timeout_seconds: must be >= 0"):
        load_config(write(tmp_path, "spark:\n  stop_timeout_seconds: -1\n"), environ={})
    with pytest.raises(ConfigError, match=r"delta.log_retention_minutes: must be >= 1"):
        load_config(write(tmp_path, "delta:\n  log_retention_minutes: 0.5\n"), environ={})


@pytest.mark.parametrize(("text", "said"), [
    ("clusters:\n  prod:\n    vm_max_mapcount: 262144\n",
     "clusters.prod: unknown headroom override key 'vm_max_mapcount'"),
    ("clusters:\n  prod:\n    max_broker_partitions: -5\n",
     "clusters.prod: max_broker_partitions must be a positive int or null"),
])
def test_a_headroom_fact_that_would_be_ignored_at_run_time_fails_at_start(tmp_path, text, said):
    """A misspelt headroom fact would leave the default ceiling in force: it fails at start,
    named, not when a batch first reaches the cluster."""
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), environ={})
    assert said in str(err.value)


def test_cluster_headroom_facts_that_exist_pass(tmp_path):
    config = load_config(write(tmp_path, (
        "clusters:\n  prod:\n    vm_max_map_count: 262144\n    max_broker_partitions: 4000\n"
        )), environ={})
    assert config.clusters["prod"]["vm_max_map_count"] == 262144


@pytest.mark.parametrize("text", [
    "earlist", '{"kafka-metrics": 42}', '{"kafka-metrics": {"0": "42"}}', "[0]",
    '{"kafka-metrics": {"0": true}}', '{"kafka-metrics": {"0": 42}'])
def test_starting_offsets_not_a_start_is_refused_before_the_job_runs(tmp_path, text: str):
    """A misspelt start used to pass check-config and stop the job later with a bare
    JSONDecodeError (or a TypeError deep in the source) once Spark was up."""
    path = write(tmp_path, f"source:\n  starting_offsets: '{text}'\n")
    with pytest.raises(ConfigError, match=r"source.starting_offsets: .* is not 'earliest', "
                                          r"'latest' or a JSON object"):
        load_config(path, environ={})


@pytest.mark.parametrize("text", ["earliest", "latest", '{"kafka-metrics": {"0": 42}}'])
def test_starting_offsets_that_are_a_start_are_taken(tmp_path, text: str):
    path = write(tmp_path, f"source:\n  starting_offsets: '{text}'\n")
    assert load_config(path, environ={}).source.starting_offsets == text


@pytest.mark.parametrize(("kafka", "said"), [
    ("{fetch.wiat.max.ms: 10}", 'No such configuration property: "fetch.wiat.max.ms"'),
    ("{fetch.wait.max.ms: soon}", 'Invalid value for configuration property "fetch.wait.max.ms"'),
    ("{sasl.jaas.config: 'x'}", "Java JAAS configuration is not supported"),
    ("{security.protocol: SASL_SSL, sasl.mechanism: GSSAPI}", "No provider for SASL mechanism"),
])
def test_client_settings_the_kafka_client_refuses_are_a_config_error(
        tmp_path, kafka: str, said: str):
    """They used to pass check-config and stop `run` once Spark was up, as a
    KafkaUnavailableError. The same settings under metadata.clusters are checked too."""
    path = write(tmp_path, f"source:\n  kafka: {kafka}\n")
    with pytest.raises(ConfigError, match=r"source.kafka: the Kafka client refuses it: ") as err:
        load_config(path, environ={})
    assert said in str(err.value)
    path = write(tmp_path, f"metadata:\n  clusters:\n    prod:\n      bootstrap_servers: k:9093"
                           f"\n      kafka: {kafka}\n")
    with pytest.raises(ConfigError, match=r"metadata.clusters.prod.kafka: the Kafka client"):
        load_config(path, environ={})


def test_a_refused_client_value_is_not_repeated(tmp_path):
    """librdkafka quotes the value it refuses; a value in the wrong key may be a secret."""
    path = write(tmp_path, "source:\n  kafka: {security.protocol: hunter2-secret}\n")
    with pytest.raises(ConfigError, match="security.protocol") as err:
        load_config(path, environ={})
    assert "hunter2" not in str(err.value)


def test_client_settings_are_checked_without_their_files_or_secret_values(tmp_path):
    """A CA file that exists only in the pod, and a secret read only at run time, pass
    check-config on another machine; Spark's own engine takes the Java client's names."""
    path = write(tmp_path, "source:\n  kafka: {security.protocol: SSL, ssl.ca.location: "
                           "/nowhere/ca.pem, ssl.key.location: /nowhere/key.pem}\n"
                           "  secrets: {ssl.key.password: {file: /nowhere/password}}\n")
    assert load_config(path, environ={}).source.kafka["ssl.ca.location"] == "/nowhere/ca.pem"
    path = write(tmp_path, "source:\n  kafka: {security.protocol: SSL, ssl.keystore.location: "
                           "/nowhere/ks.p12}\n  secrets: {ssl.keystore.password: {env: KS},"
                           " ssl.key.pem: {file: /nowhere/key.pem}}\n")
    assert load_config(path, environ={}).source.kafka["security.protocol"] == "SSL"
    path = write(tmp_path, "source:\n  engine: spark\n  kafka: {sasl.jaas.config: x}\n")
    assert load_config(path, environ={}).source.kafka == {"sasl.jaas.config": "x"}


@pytest.mark.parametrize("port", [0, 70000, -1])
def test_a_metrics_port_outside_tcp_is_refused(port: int):
    """Port 70000 passed check-config and stopped `run` with a raw OverflowError."""
    with pytest.raises(ConfigError, match=rf"exporter.port: {port} is not a TCP port"):
        load_config(None, environ={"KAFKA_HEALTH__EXPORTER__PORT": str(port)})


def test_environment_overrides_a_nested_key(tmp_path):
    path = write(tmp_path, "source:\n  bootstrap_servers: a:9092\n")
    config = load_config(path, environ={"KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": "b:9093",
                                        "KAFKA_HEALTH__SIGNALS__WINDOW_SECONDS": "300"})
    assert config.source.bootstrap_servers == "b:9093"
    assert config.signals.window_seconds == 300


def test_secrets_come_from_files_and_stay_out_of_logs_and_options(tmp_path):
    secret_file = tmp_path / "sasl-password"
    secret_file.write_text("hunter2\n")
    path = write(tmp_path, f"""
source:
  kafka:
    security.protocol: SASL_SSL
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: monitor
    sasl.password: inline-oops
  secrets:
    sasl.password: {{file: {secret_file}}}
""")
    config = load_config(path, environ={})
    assert config.source.client_config()["sasl.password"] == "hunter2"
    shown = str(redacted(config))
    assert "hunter2" not in shown and "inline-oops" not in shown
    assert "hunter2" not in str(source_options(config))


def test_missing_secret_env_is_a_clear_error(tmp_path):
    path = write(tmp_path, "source:\n  secrets:\n    sasl.password: {env: KH_NOPE}\n")
    with pytest.raises(ConfigError, match="KH_NOPE is not set"):
        load_config(path, environ={}).source.client_config()


def test_example_config_documents_every_key_and_loads():
    example = Path(__file__).resolve().parents[2] / "deploy" / "config.example.yaml"
    data = yaml.safe_load(example.read_text())
    load_config(example, environ={})
    for section in dataclasses.fields(Config):
        default = getattr(Config(), section.name)
        assert section.name in data, section.name
        if dataclasses.is_dataclass(default):
            missing = [f.name for f in dataclasses.fields(default)
                       if f.name not in (data[section.name] or {})]
            assert not missing, f"{section.name}: {missing} missing from config.example.yaml"


# --- metadata ----------------------------------------------------------------------------


def test_metadata_is_off_by_default_and_polls_nothing():
    config = load_config(None, environ={})
    assert config.metadata.enabled is False and config.metadata.polled() == {}


def test_metadata_reports_every_problem_of_the_section_at_once(tmp_path):
    path = write(tmp_path, "metadata:\n  enabled: true\n  timeout_seconds: 30\n"
                           "  describe_configs_batch: 0\n  clusters:\n    a: {}\n    b: {}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    lines = str(err.value).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "metadata.timeout_seconds", "metadata.describe_configs_batch",
        "metadata.clusters.a.bootstrap_servers", "metadata.clusters.b.bootstrap_servers"]


def test_metadata_enabled_without_clusters_says_what_to_add(tmp_path):
    path = write(tmp_path, "metadata: {enabled: true}\n")
    with pytest.raises(ConfigError, match=r"metadata.clusters: name at least one"):
        load_config(path, environ={})


def test_metadata_cluster_keys_get_did_you_mean(tmp_path):
    path = write(tmp_path, "metadata:\n  clusters:\n    prod: {bootstrap_server: k:9092}\n")
    with pytest.raises(ConfigError, match=r"metadata.clusters.prod.bootstrap_server: unknown "
                                          r"key. Did you mean 'bootstrap_servers'"):
        load_config(path, environ={})


def test_metadata_secrets_are_references_resolved_late_and_masked(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("s3cr3t-value\n")
    path = write(tmp_path, f"""
metadata:
  enabled: true
  clusters:
    prod-east:
      bootstrap_servers: kafka-1:9093
      kafka: {{security.protocol: SASL_SSL, sasl.mechanism: SCRAM-SHA-512, sasl.username: kh,
               sasl.password: inline-value}}
      secrets: {{sasl.password: {{file: {secret}}}}}
""")
    config = load_config(path, environ={})
    key = "metadata.clusters.prod-east.secrets.sasl.password"
    assert list(config.secret_refs()) == [key]
    cluster = config.metadata.polled()["prod-east"]
    resolved = cluster.client_config("metadata.clusters.prod-east")
    assert resolved == {"bootstrap.servers": "kafka-1:9093", "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "kh",
                        "sasl.password": "s3cr3t-value"}
    shown = str(redacted(config))
    assert "s3cr3t-value" not in shown and "inline-value" not in shown


def test_metadata_from_the_environment(tmp_path):
    config = load_config(None, environ={
        "KAFKA_HEALTH__METADATA__ENABLED": "true",
        "KAFKA_HEALTH__METADATA__INTERVAL_SECONDS": "5",
        "KAFKA_HEALTH__METADATA__TIMEOUT_SECONDS": "2",
        "KAFKA_HEALTH__METADATA__CLUSTERS": '{"demo": {"bootstrap_servers": "127.0.0.1:9092"}}'})
    assert config.metadata.interval_seconds == 5.0
    assert config.metadata.polled()["demo"].bootstrap_servers == "127.0.0.1:9092"


def test_delta_engine_is_delta_rs_or_delta_spark(tmp_path):
    assert load_config(None, environ={}).delta.engine == "delta-rs"
    chosen = load_config(write(tmp_path, "delta: {engine: delta-spark, path: s3a://b/kh}\n"),
                         environ={})
    assert chosen.delta.engine == "delta-spark"
    with pytest.raises(ConfigError,
                       match=r"delta.engine: 'spark' is not one of 'delta-rs' or 'delta-spark'"):
        load_config(write(tmp_path, "delta: {engine: spark}\n"), environ={})
    # Hadoop, which delta-spark writes through, names S3 s3a://
    with pytest.raises(ConfigError, match=r"delta.path: .* use 's3a://b/kh'"):
        load_config(write(tmp_path, "delta: {engine: delta-spark, path: s3://b/kh}\n"),
                    environ={})


@pytest.mark.parametrize(("text", "said"), [
    ("source:\n  bootstrap_servers: prod:9093\nexporter:\n  port: 9464\nsource:\n  engine: python\n",
     r"the key 'source' appears twice in one mapping .* at line 5, column 1"),
    ("exporter:\n  port: 9464\n  port: 9465\n", r"the key 'port' appears twice .* line 3"),
])
def test_a_key_given_twice_is_refused_not_half_dropped(tmp_path, text: str, said: str):
    """PyYAML keeps the last of two equal keys: the first `source:` block's brokers would
    be dropped without a word."""
    with pytest.raises(ConfigError, match=said):
        load_config(write(tmp_path, text), environ={})


def test_a_yaml_merge_may_still_be_overridden():
    from streaming.config import _parse_yaml

    text = ("base: &base\n  port: 9464\n  bind: 127.0.0.1\n"
            "exporter:\n  <<: *base\n  port: 9470\n")
    assert _parse_yaml(text)["exporter"] == {"port": 9470, "bind": "127.0.0.1"}


@pytest.mark.parametrize(("text", "said"), [
    ("source:\n  subscribe_pattern: '(['\n", r"source.subscribe_pattern: not a valid regex"),
    ("source:\n  bootstrap_servers: ' '\n", r"source.bootstrap_servers: empty"),
    ("spark:\n  trigger_seconds: -1\n", r"spark.trigger_seconds: must be >= 0"),
])
def test_a_setting_spark_or_kafka_would_refuse_after_start_is_refused_before(
        tmp_path, text: str, said: str):
    with pytest.raises(ConfigError, match=said):
        load_config(write(tmp_path, text), environ={})


# --- where the config comes from, and the reference page -----------------------------------


def test_kafka_health_config_names_the_file_when_no_config_is_given(tmp_path):
    named = write(tmp_path, "exporter:\n  port: 9470\n")
    other = tmp_path / "other.yaml"
    other.write_text("exporter:\n  port: 9471\n")
    environ = {"KAFKA_HEALTH_CONFIG": str(named)}
    assert load_config(None, environ=environ).exporter.port == 9470
    assert load_config(other, environ=environ).exporter.port == 9471  # --config wins
    with pytest.raises(ConfigError, match=r"^KAFKA_HEALTH_CONFIG /nowhere.yaml: cannot read"):
        load_config(None, environ={"KAFKA_HEALTH_CONFIG": "/nowhere.yaml"})


@pytest.mark.parametrize(("environ", "said"), [
    ({"KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": "' '"},
     "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS: source.bootstrap_servers: empty"),
    ({"KAFKA_HEALTH__SIGNALS__WINDOW_SECONDS": "soon"},
     "KAFKA_HEALTH__SIGNALS__WINDOW_SECONDS: signals.window_seconds: expected a number"),
    ({"KAFKA_HEALTH__METADATA__CLUSTERS": "{prod: {bootstrap_server: k:9092}}"},
     "KAFKA_HEALTH__METADATA__CLUSTERS: metadata.clusters.prod.bootstrap_server: unknown key"),
])
def test_an_override_s_error_names_its_variable(tmp_path, environ, said):
    """The file is right and the variable wrong: the message says which variable."""
    path = write(tmp_path, "signals:\n  window_seconds: 60\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, environ=environ)
    assert str(err.value).startswith(said)


def test_every_type_problem_of_the_file_is_said_at_once(tmp_path):
    path = write(tmp_path, "exporter:\n  enabled: yes please\n  port: 9464.5\n"
                           "spark:\n  trigger_seconds: true\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert str(err.value).splitlines() == [
        "spark.trigger_seconds: expected a number, got True",
        "exporter.enabled: expected true or false, got 'yes please'",
        "exporter.port: expected a whole number, got 9464.5"]


def test_the_configuration_reference_is_the_model_s():
    """docs/configuration.md is generated from the model; a key added, renamed or
    redescribed without regenerating it fails here."""
    from streaming.config import reference

    assert reference.PAGE.read_text() == reference.render(), (
        "docs/configuration.md is out of date: python -m streaming.config.reference")
    undescribed = [key for key, *_, meaning in reference.rows(Config, "config", None)
                   if not meaning]
    assert not undescribed, f"{undescribed} have no description in the model"
