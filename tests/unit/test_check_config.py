"""`kafka-health check-config` and the redaction rule: secrets planted in a config file and
in the environment never reach stdout or stderr, and a secret that cannot be read fails
the check (exit 2) with its dotted key."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.cli import main
from streaming.redact import is_secret_key, redact_tree, redact_url

PLANTED = {
    "url": "PLANTED-URL-PASS",
    "s3": "PLANTED-S3-SECRET",
    "token": "PLANTED-ENV-TOKEN",
    "oauth": "PLANTED-OAUTH-CONFIG",
    "sasl": "PLANTED-INLINE-SASL",
    "sslkey": "PLANTED-SSL-KEY-PASS",
    "file": "PLANTED-FILE-SECRET",
    "env": "PLANTED-ENV-SECRET",
}


def write_config(tmp_path: Path, secret_file: Path, extra: str = "") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
spark:
  conf:
    spark.hadoop.fs.s3a.secret.key: {PLANTED["s3"]}
    spark.executor.memory: 2g
source:
  kafka:
    security.protocol: SASL_SSL
    sasl.mechanism: SCRAM-SHA-512
    sasl.oauthbearer.config: "scope=x clientSecret={PLANTED["oauth"]}"
    sasl.password: {PLANTED["sasl"]}
    ssl.key.password: {PLANTED["sslkey"]}
  secrets:
    sasl.username: {{file: {secret_file}}}
    sasl.oauthbearer.client.secret: {{env: KH_TEST_OAUTH_SECRET}}
alert_push:
  alertmanager_url: http://amuser:{PLANTED["url"]}@am.example:9093
{extra}""")
    return path


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text(PLANTED["file"] + "\n")
    return path


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("KAFKA_HEALTH__"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("KH_TEST_OAUTH_SECRET", PLANTED["env"])
    monkeypatch.setenv("KAFKA_HEALTH__SPARK__CONF__SPARK.HADOOP.FS.S3A.SESSION.TOKEN",
                       PLANTED["token"])


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def assert_nothing_planted(text: str) -> None:
    leaked = [value for value in PLANTED.values() if value in text]
    assert not leaked, f"secret values printed: {leaked}"


def test_check_config_prints_no_planted_secret(tmp_path, secret_file, capsys) -> None:
    code, text = run(["check-config", "--print", str(write_config(tmp_path, secret_file))],
                     capsys)
    assert code == 0, text
    assert_nothing_planted(text)
    assert "http://***@am.example:9093" in text, "scheme and host stay visible"
    assert "2g" in text and "SASL_SSL" in text, "ordinary values stay visible"
    assert str(secret_file) in text and "KH_TEST_OAUTH_SECRET" in text, \
        "a secret reference names where the secret lives, which is not a secret"


def test_check_config_says_ok_in_one_line_and_prints_the_config_only_when_asked(
        tmp_path, secret_file, capsys) -> None:
    path = write_config(tmp_path, secret_file)
    code, text = run(["check-config", str(path)], capsys)
    assert code == 0, text
    assert text.splitlines() == [f"OK {path}: valid; secrets 2 read"]


def test_check_config_skip_secrets_checks_a_config_whose_secrets_live_elsewhere(
        tmp_path, capsys, monkeypatch) -> None:
    """On a laptop the secret files and variables do not exist: everything else is still
    checked, and --print shows where each secret lives."""
    monkeypatch.delenv("KH_TEST_OAUTH_SECRET")
    missing = tmp_path / "no-such-file"
    path = write_config(tmp_path, missing)
    assert run(["check-config", str(path)], capsys)[0] == 2
    code, text = run(["check-config", "--skip-secrets", str(path)], capsys)
    assert code == 0, text
    assert text.splitlines() == [f"OK {path}: valid; secrets not read (--skip-secrets)"]
    code, text = run(["check-config", "--skip-secrets", "--print", str(path)], capsys)
    assert code == 0 and str(missing) in text and "KH_TEST_OAUTH_SECRET" in text
    assert_nothing_planted(text)
    bad = write_config(tmp_path, missing, extra="exporter:\n  port: 70000\n")
    assert run(["check-config", "--skip-secrets", str(bad)], capsys)[0] == 2


def test_check_config_unreadable_secret_file_exits_2_naming_the_key(tmp_path, secret_file,
                                                                    capsys) -> None:
    missing = tmp_path / "no-such-file"
    path = write_config(tmp_path, missing)
    code, text = run(["check-config", str(path)], capsys)
    assert code == 2
    assert (f"source.secrets.sasl.username: file {missing} cannot be read "
            "(No such file or directory)") in text
    assert_nothing_planted(text)


def test_check_config_unset_secret_env_exits_2_naming_the_key(tmp_path, secret_file, capsys,
                                                              monkeypatch) -> None:
    monkeypatch.delenv("KH_TEST_OAUTH_SECRET")
    code, text = run(["check-config", str(write_config(tmp_path, secret_file))], capsys)
    assert code == 2
    assert ("source.secrets.sasl.oauthbearer.client.secret: environment variable "
            "KH_TEST_OAUTH_SECRET is not set") in text
    assert_nothing_planted(text)


def test_bad_yaml_in_an_env_override_names_the_variable_not_the_value(
        tmp_path, secret_file, capsys, monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_HEALTH__SOURCE__KAFKA", f'{{sasl.password: "{PLANTED["sasl"]}')
    code, text = run(["check-config", str(write_config(tmp_path, secret_file))], capsys)
    assert code == 2
    assert "KAFKA_HEALTH__SOURCE__KAFKA: not valid YAML" in text
    assert_nothing_planted(text)


def test_bad_yaml_in_the_config_file_does_not_echo_the_line(tmp_path, capsys) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f'source:\n  kafka:\n    sasl.password: "{PLANTED["sasl"]}\n')
    code, text = run(["check-config", str(path)], capsys)
    assert code == 2 and "not valid YAML" in text
    assert_nothing_planted(text)


@pytest.mark.parametrize("key", [
    "sasl.password", "ssl.key.password", "sasl.oauthbearer.config", "sasl.jaas.config",
    "spark.hadoop.fs.s3a.secret.key", "spark.hadoop.fs.s3a.access.key", "bearer_token",
    "fs.azure.account.key.acct.blob.core.windows.net", "aws_secret_access_key", "password",
])
def test_secret_looking_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", [
    "key_pattern", "bootstrap_servers", "security.protocol", "ssl.keystore.type", "username",
])
def test_ordinary_keys_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


def test_url_user_info_is_replaced_scheme_host_and_path_stay() -> None:
    assert redact_url("https://u:p@ss@am-0.example:9093/x") == "https://***@am-0.example:9093/x"
    assert redact_url("http://am:9093") == "http://am:9093"


def test_redact_tree_masks_under_secret_keys_but_keeps_references() -> None:
    tree = {"credentials": {"user": "a", "pass": "b"}, "password": {"env": "PW"},
            "urls": ["http://x:y@h"], "n": 3}
    assert redact_tree(tree) == {"credentials": {"user": "***", "pass": "***"},
                                 "password": {"env": "PW"}, "urls": ["http://***@h"], "n": 3}


def test_the_config_file_may_be_named_by_kafka_health_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "named.yaml"
    path.write_text("source:\n  bootstrap_servers: kafka-1.example:9093\n")
    monkeypatch.setenv("KAFKA_HEALTH_CONFIG", str(path))
    assert main(["check-config"]) == 0
    assert f"OK KAFKA_HEALTH_CONFIG {path}: valid" in capsys.readouterr().out
    path.write_text("source:\n  bootstrap_serverz: x:1\n")
    assert main(["check-config"]) == 2
    assert "bootstrap_serverz" in capsys.readouterr().err
