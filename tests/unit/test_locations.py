"""Locations stay URLs: joined after the scheme and authority, never through pathlib (which
turns s3a://bucket/x into s3a:/bucket/x), and small files read and written at any of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.config import Config, DeltaConfig, SparkConfig
from streaming.locations import (
    delete,
    exists,
    is_local,
    join,
    local_path,
    parent,
    read_or_create_text,
    read_text,
    scheme,
    write_text,
)
from streaming.source.offsets import last_checkpointed_offsets


@pytest.mark.parametrize(("base", "parts", "joined"), [
    ("s3a://bucket/kh", ("checkpoint",), "s3a://bucket/kh/checkpoint"),
    ("s3a://bucket", ("kh", "delta"), "s3a://bucket/kh/delta"),
    ("s3a://bucket/", ("/kh/", "delta/"), "s3a://bucket/kh/delta"),
    ("s3://bucket/kh/", ("broker_signals",), "s3://bucket/kh/broker_signals"),
    ("s3://bucket/kh?endpoint_override=127.0.0.1:9000", ("t",),
     "s3://bucket/kh/t?endpoint_override=127.0.0.1:9000"),
    ("abfss://c@acct.dfs.core.windows.net/kh", ("t",), "abfss://c@acct.dfs.core.windows.net/kh/t"),
    ("file:///var/kh", ("delta", "t"), "file:///var/kh/delta/t"),
    ("file:/var/kh", ("t",), "file:/var/kh/t"),
    ("/var/kh/", ("t",), "/var/kh/t"),
    ("/", ("t",), "/t"),
    ("data/delta", ("bronze",), "data/delta/bronze"),
    ("", ("t",), "t"),
    ("data/delta", (), "data/delta"),
    ("data/delta", ("", "/"), "data/delta"),
])
def test_join_keeps_scheme_and_authority(base: str, parts: tuple[str, ...], joined: str) -> None:
    assert join(base, *parts) == joined


@pytest.mark.parametrize(("location", "kind", "local"), [
    ("s3a://bucket/x", "s3a", False),
    ("s3://bucket/x", "s3", False),
    ("S3A://bucket/x", "s3a", False),
    ("hdfs://nn:8020/x", "hdfs", False),
    ("abfss://c@a.dfs.core.windows.net/x", "abfss", False),
    ("gs://bucket/x", "gs", False),
    ("file:///tmp/x", "file", True),
    ("file:/tmp/x", "file", True),
    ("/tmp/x", "", True),
    ("data/checkpoint", "", True),
    ("C:\\data\\x", "", True),  # a Windows drive is no scheme
])
def test_scheme_and_is_local(location: str, kind: str, local: bool) -> None:
    assert scheme(location) == kind
    assert is_local(location) is local


def test_pathlib_is_what_join_replaces() -> None:
    """The bug this module exists for: a joined s3a:// location must keep its '//'."""
    assert str(Path("s3a://bucket/x") / "t") == "s3a:/bucket/x/t"
    assert join("s3a://bucket/x", "t") == "s3a://bucket/x/t"


def test_parent_and_local_path() -> None:
    assert parent("s3a://bucket/kh/checkpoint/marker.json") == "s3a://bucket/kh/checkpoint"
    assert parent("s3://b/k/a?region=eu-west-1") == "s3://b/k?region=eu-west-1"
    assert parent("/var/kh/marker") == "/var/kh"
    assert parent("marker") == "."
    assert local_path("file:///tmp/a%20b") == "/tmp/a b"
    assert local_path("file://localhost/tmp/x") == "/tmp/x"
    assert local_path("file:/tmp/x") == "/tmp/x"
    assert local_path("data/x") == "data/x"
    with pytest.raises(ValueError, match="not a local path"):
        local_path("s3a://bucket/x")
    with pytest.raises(ValueError, match="another host"):
        local_path("file://elsewhere/x")


def test_config_table_path_keeps_the_url() -> None:
    config = Config(delta=DeltaConfig(path="s3a://bucket/kh/delta/"))
    assert config.table_path("broker_signals") == "s3a://bucket/kh/delta/broker_signals"
    assert Config(delta=DeltaConfig(path="data/delta")).table_path("bronze") == "data/delta/bronze"
    assert Config(spark=SparkConfig(checkpoint="s3a://b/c")).spark.checkpoint == "s3a://b/c"


@pytest.mark.parametrize("as_url", [False, True])
def test_small_text_files_locally(tmp_path: Path, as_url: bool) -> None:
    base = f"file://{tmp_path}" if as_url else str(tmp_path)
    marker = join(base, "checkpoint", "kafka_health_app_id")
    assert read_text(marker) is None and not exists(marker)
    write_text(marker, "kafka-health-1\n")  # makes the missing folder
    assert read_text(marker) == "kafka-health-1\n" and exists(marker)
    write_text(marker, "kafka-health-2")
    assert read_text(marker) == "kafka-health-2"
    assert sorted(p.name for p in (tmp_path / "checkpoint").iterdir()) == ["kafka_health_app_id"]
    delete(marker)
    delete(marker)  # already gone: nothing to do
    assert not exists(marker)
    assert read_or_create_text(marker, "first") == "first"
    assert read_or_create_text(marker, "second") == "first"


def test_offset_log_of_a_checkpoint_given_as_path_or_url(tmp_path: Path) -> None:
    offsets = tmp_path / "checkpoint" / "offsets"
    assert last_checkpointed_offsets(str(tmp_path / "checkpoint")) is None  # no log yet
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{"batchWatermarkMs":0}\n{"m":{"0":5}}\n')
    (offsets / "1").write_text('v1\n{"batchWatermarkMs":0}\n{"m":{"0":9,"1":2}}\n')
    (offsets / ".1.crc").write_text("")
    for checkpoint in (str(tmp_path / "checkpoint"), f"file://{tmp_path}/checkpoint"):
        assert last_checkpointed_offsets(checkpoint) == {"m": {"0": 9, "1": 2}}


def test_an_unreadable_remote_offset_log_is_a_warning_a_local_one_an_error(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import streaming.locations as locations

    def unreachable(location: str, options: object = None) -> None:
        raise OSError(f"cannot reach {location}")

    monkeypatch.setattr(locations, "filesystem", unreachable)
    assert last_checkpointed_offsets("s3a://bucket/kh/checkpoint") is None
    assert "cannot read the offset log of checkpoint s3a://bucket/kh/checkpoint" in caplog.text
    with pytest.raises(OSError, match="cannot reach"):
        last_checkpointed_offsets("/var/kh/checkpoint")
