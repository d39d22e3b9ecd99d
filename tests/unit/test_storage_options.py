"""delta.storage_options / delta.storage_secrets: delta-rs' names, secrets by reference,
checked by check_secrets, masked when shown, and mapped onto pyarrow's S3 file system."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.config import ConfigError, load_config, redacted
from streaming.locations import s3_filesystem

YAML = """\
delta:
  path: s3a://bucket/kh/delta
  storage_options:
    AWS_ENDPOINT_URL: http://minio:9000
    AWS_REGION: eu-west-1
    AWS_ALLOW_HTTP: "true"
    AWS_ACCESS_KEY_ID: kafka-health
  storage_secrets:
    AWS_SECRET_ACCESS_KEY: {file: SECRET_FILE}
"""


def config_file(tmp_path: Path, text: str = YAML) -> Path:
    secret = tmp_path / "s3-secret"
    secret.write_text("s3cr3t-value\n")
    path = tmp_path / "c.yaml"
    path.write_text(text.replace("SECRET_FILE", str(secret)))
    return path


def test_storage_options_with_secrets_resolved(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path), environ={})
    assert config.delta.storage() == {
        "AWS_ENDPOINT_URL": "http://minio:9000", "AWS_REGION": "eu-west-1",
        "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "kafka-health",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t-value"}
    assert "delta.storage_secrets.AWS_SECRET_ACCESS_KEY" in config.secret_refs()
    config.check_secrets()
    shown = redacted(config)["delta"]
    assert shown["storage_secrets"]["AWS_SECRET_ACCESS_KEY"] == {"file": str(tmp_path / "s3-secret"),
                                                                 "env": None}
    assert "s3cr3t-value" not in repr(redacted(config))


def test_defaults_are_empty_and_env_overrides_reach_them(tmp_path: Path) -> None:
    config = load_config(None, environ={})
    assert config.delta.storage() == {}
    config = load_config(None, environ={
        "KAFKA_HEALTH__DELTA__STORAGE_OPTIONS": '{"AWS_REGION": "us-east-2"}',
        "KAFKA_HEALTH__DELTA__STORAGE_SECRETS": '{"AWS_SECRET_ACCESS_KEY": {"env": "MY_KEY"}}'})
    assert config.delta.storage_options == {"AWS_REGION": "us-east-2"}
    with pytest.raises(ConfigError, match=r"delta.storage_secrets.AWS_SECRET_ACCESS_KEY: "
                                          r"environment variable MY_KEY is not set"):
        config.check_secrets()


def test_a_secret_given_in_plain_storage_options_is_masked_when_shown(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("delta: {storage_options: {AWS_SECRET_ACCESS_KEY: plain-secret, "
                    "AWS_SESSION_TOKEN: plain-token}}\n")
    shown = redacted(load_config(path, environ={}))["delta"]["storage_options"]
    assert shown == {"AWS_SECRET_ACCESS_KEY": "***", "AWS_SESSION_TOKEN": "***"}


def test_storage_options_map_onto_pyarrow_s3() -> None:
    fs = s3_filesystem({"aws_endpoint_url": "http://127.0.0.1:9000/", "AWS_ACCESS_KEY_ID": "a",
                        "AWS_SECRET_ACCESS_KEY": "b", "AWS_REGION": "eu-west-1",
                        "AWS_SESSION_TOKEN": "t"})
    settings = fs.__reduce__()[1][0]
    assert (settings["endpoint_override"], settings["scheme"]) == ("127.0.0.1:9000", "http")
    assert (settings["access_key"], settings["secret_key"], settings["session_token"],
            settings["region"]) == ("a", "b", "t", "eu-west-1")
    assert not settings["force_virtual_addressing"]
    plain = s3_filesystem({"endpoint": "minio:9000", "allow_http": "true",
                           "virtual_hosted_style_request": "true"}).__reduce__()[1][0]
    assert (plain["endpoint_override"], plain["scheme"]) == ("minio:9000", "http")
    assert plain["force_virtual_addressing"]
