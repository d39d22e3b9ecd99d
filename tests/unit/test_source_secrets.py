"""Secrets reach every Kafka client built from the config, as Spark hands the options over.

PySpark gives a Python data source its options in a `CaseInsensitiveDict`, which lowercases
every key: these tests pass the source's options through pyspark's own class, so a secret
whose reference travels in a key (`secretFile.sasl.password` arriving as
`secretfile.sasl.password`) would be lost here as it was in the job.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from streaming.config import Config, ConfigError, load_config
from streaming.kafka_client import client_settings, java_options
from streaming.source.data_source import KafkaHealthKafkaSource
from streaming.source.partition_reader import reader_config
from streaming.source.reader import python_source_options, spark_source_options

USER = "Monitor-Reader"


def _config(tmp_path: Path, file_password: str, engine: str = "python") -> Config:
    secret = tmp_path / "sasl.password"
    secret.write_text(file_password + "\n")
    tmp_path.joinpath("config.yaml").write_text(json.dumps({
        "source": {"engine": engine, "bootstrap_servers": "127.0.0.1:1",
                   "kafka": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                             "sasl.username": USER, "ssl.ca.location": str(tmp_path / "ca.pem")},
                   "secrets": {"sasl.password": {"file": str(secret)},
                               "ssl.key.password": {"env": "KH_TEST_KEY_PASSWORD"}}},
        "spark": {"checkpoint": str(tmp_path / "checkpoint")},
    }))
    return load_config(tmp_path / "config.yaml", environ={})


def test_the_python_source_reads_its_secrets_from_options_spark_lowercased(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file_password, env_password = f"Pw-{secrets.token_hex(8)}", f"Env-{secrets.token_hex(8)}"
    monkeypatch.setenv("KH_TEST_KEY_PASSWORD", env_password)
    config = _config(tmp_path, file_password)
    options = python_source_options(config, parallelism=2)
    as_spark_hands_them = CaseInsensitiveDict(options)
    assert all(key == key.lower() for key in as_spark_hands_them)

    reader = KafkaHealthKafkaSource(as_spark_hands_them).streamReader(None)
    conf = reader_config(reader.options)
    assert conf["sasl.password"] == file_password
    assert conf["ssl.key.password"] == env_password
    assert conf["sasl.username"] == USER  # a value keeps its case
    assert conf["bootstrap.servers"] == config.source.bootstrap_servers
    assert reader.source.max_tasks == 2  # a camelCase option found in its lowercased key
    # what Spark shows in its plan and UI names where the secrets live, never what they are
    shown = json.dumps(dict(as_spark_hands_them))
    assert file_password not in shown and env_password not in shown


def test_every_client_takes_its_settings_from_one_function(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file_password, env_password = f"Pw-{secrets.token_hex(8)}", f"Env-{secrets.token_hex(8)}"
    monkeypatch.setenv("KH_TEST_KEY_PASSWORD", env_password)
    config = _config(tmp_path, file_password)
    src = config.source
    expected = client_settings(src.bootstrap_servers, src.kafka, src.secrets, "source")
    assert src.client_config() == expected
    options = CaseInsensitiveDict(python_source_options(config, parallelism=1))
    planner = KafkaHealthKafkaSource(options).streamReader(None)
    assert {k: v for k, v in reader_config(planner.options).items() if k in expected} == expected


def test_spark_engine_gets_the_java_clients_login(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    password = f'Pw"\\{secrets.token_hex(6)}'  # characters a JAAS value must escape
    monkeypatch.setenv("KH_TEST_KEY_PASSWORD", "unused-by-java")
    config = _config(tmp_path, password, engine="spark")
    options = spark_source_options(config)
    jaas = options["kafka.sasl.jaas.config"]
    assert jaas.startswith("org.apache.kafka.common.security.scram.ScramLoginModule required ")
    escaped = password.replace("\\", "\\\\").replace('"', '\\"')
    assert f'username="{USER}" password="{escaped}";' in jaas
    assert "kafka.sasl.password" not in options and "kafka.sasl.username" not in options
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.location"] == config.source.kafka["ssl.ca.location"]
    assert options["kafka.security.protocol"] == "SASL_SSL"


def test_a_librdkafka_client_certificate_on_the_spark_engine_names_the_java_settings() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        java_options("h:1", {"security.protocol": "SSL", "ssl.certificate.location": "c.pem",
                             "ssl.key.location": "k.pem"}, {}, "source")


def test_a_user_without_a_password_is_named() -> None:
    with pytest.raises(ConfigError, match=r"source\.secrets\.sasl\.password"):
        java_options("h:1", {"sasl.mechanism": "PLAIN", "sasl.username": "u"}, {}, "source")


def test_an_unreadable_reference_names_its_key_not_a_value(tmp_path: Path) -> None:
    options = CaseInsensitiveDict({
        "kafka.bootstrap.servers": "h:1", "subscribe": "t",
        "kafkaSecretRefs": json.dumps({"sasl.password": {"file": str(tmp_path / "gone")}})})
    reader = KafkaHealthKafkaSource(options).streamReader(None)
    with pytest.raises(ConfigError, match=r"source\.secrets\.sasl\.password: file .*gone"):
        reader_config(reader.options)


@pytest.mark.parametrize(("name", "text", "setting"), [
    ("_AUTHENTICATION", "SASL authentication error: Authentication failed during "
     "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
     "source.secrets.sasl.password"),
    ("_SSL", "ssl://h:1/bootstrap: SSL handshake failed: error:0A000086:SSL routines::"
     "certificate verify failed: broker certificate could not be verified",
     "source.kafka.ssl.ca.location"),
    ("_TRANSPORT", "ssl://h:1/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls "
     "alert bad certificate: SSL alert number 42", "source.kafka.ssl.certificate.location"),
    ("TOPIC_AUTHORIZATION_FAILED", "Broker: Topic authorization failed", "grant"),
])
def test_a_security_refusal_names_what_to_fix(name: str, text: str, setting: str) -> None:
    from streaming.kafka_client import SOURCE_NEEDS, security_advice

    advice = security_advice(name, text, "source", SOURCE_NEEDS)
    assert advice is not None and setting in advice, advice


def test_an_outage_is_no_security_refusal() -> None:
    from streaming.kafka_client import SOURCE_NEEDS, security_advice

    assert security_advice("_TRANSPORT", "Connect to ipv4#127.0.0.1:1 failed: Connection "
                           "refused", "source", SOURCE_NEEDS) is None
