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
