"""delta-rs tables and the checkpoint's small files on S3, through moto's S3 server on the
loopback: storage options from config (an endpoint, keys, plain HTTP) reach delta-rs and
pyarrow, and s3:// and s3a:// locations name the same objects."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from streaming.config import load_config
from streaming.locations import exists, join, read_or_create_text, read_text, write_text
from streaming.sinks.delta_rs import DeltaRsTable
from streaming.source.offsets import last_checkpointed_offsets
from streaming.source.options import checkpoint_storage
from tests.s3 import BUCKET, KEY_ID, SECRET, s3_server


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with s3_server() as server:
        yield server.endpoint


@pytest.fixture
def config(s3: str, tmp_path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):
    """A config whose tables live on the moto bucket; the secret key from the environment."""
    monkeypatch.setenv("KH_TEST_S3_SECRET", SECRET)
    root = f"{request.param}://{BUCKET}/{request.node.name.split('[')[0]}-{request.param}"
    path = tmp_path / "c.yaml"
    path.write_text(
        f"spark: {{checkpoint: '{root}/checkpoint'}}\n"
        "delta:\n"
        f"  path: {root}/delta\n"
        "  storage_options:\n"
        f"    AWS_ENDPOINT_URL: {s3}\n"
        "    AWS_REGION: us-east-1\n"
        "    AWS_ALLOW_HTTP: 'true'\n"
        f"    AWS_ACCESS_KEY_ID: {KEY_ID}\n"
        "  storage_secrets:\n"
        "    AWS_SECRET_ACCESS_KEY: {env: KH_TEST_S3_SECRET}\n")
    return load_config(path, environ={})


def signal_rows(table: DeltaRsTable, samples: int) -> pa.Table:
    at = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    out = []
    for broker in ("1", "2"):
        row = {f.name: None for f in table.schema}
        row.update(cluster="prod", broker=broker, window_start=at, samples=samples)
        out.append(row)
    return pa.Table.from_pylist(out, schema=table.schema)


@pytest.mark.parametrize("config", ["s3", "s3a"], indirect=True)
def test_delta_rs_table_on_s3_with_storage_options_from_config(config) -> None:
    options = config.delta.storage()
    assert options["AWS_SECRET_ACCESS_KEY"] == SECRET  # the reference was read
    table = DeltaRsTable(config.delta.path, "broker_signals", "app", storage_options=options)
    assert table.path == config.table_path("broker_signals")
    assert table.path == f"{config.delta.path}/broker_signals"  # scheme://bucket/... kept
    assert table.upsert(signal_rows(table, 1), batch_id=0)
    assert table.upsert(signal_rows(table, 2), batch_id=1)
    assert not table.upsert(signal_rows(table, 99), batch_id=1), "a replayed batch writes nothing"
    table.compact()

    reopened = DeltaRsTable(config.delta.path, "broker_signals", "app", storage_options=options)
    assert reopened.committed(1) and not reopened.committed(2)
    got = reopened.read(columns=["broker", "samples"]).sort_by("broker").to_pylist()
    assert got == [{"broker": "1", "samples": 2}, {"broker": "2", "samples": 2}]
    # the objects are where the URL says, under the bucket (not under a folder "s3a:")
    log = join(config.delta.path, "broker_signals", "_delta_log", "00000000000000000000.json")
    assert exists(log, options)


@pytest.mark.parametrize("config", ["s3a"], indirect=True)
def test_small_files_beside_a_remote_checkpoint(config) -> None:
    options = config.delta.storage()
    app_id = join(config.spark.checkpoint, "kafka_health_app_id")
    assert read_text(app_id, options) is None
    assert read_or_create_text(app_id, "kafka-health-1", options) == "kafka-health-1"
    assert read_or_create_text(app_id, "kafka-health-2", options) == "kafka-health-1"
    marker = join(config.spark.checkpoint, "kafka_health_pending_signals.json")
    write_text(marker, '{"batch_id": 3}', options)
    assert read_text(marker, options) == '{"batch_id": 3}'

    # the source's restart read of Spark's offset log, with the options as the reader
    # passes them (secret by reference)
    for batch, offsets in ((0, '{"m":{"0":5}}'), (1, '{"m":{"0":9}}')):
        write_text(join(config.spark.checkpoint, "offsets", str(batch)),
                   f'v1\n{{"batchWatermarkMs":0}}\n{offsets}\n', options)
    spark_options = {f"checkpointStorage.{k}": v for k, v in config.delta.storage_options.items()}
    spark_options["checkpointStorageSecretEnv.AWS_SECRET_ACCESS_KEY"] = "KH_TEST_S3_SECRET"
    assert checkpoint_storage(spark_options) == options
    assert last_checkpointed_offsets(config.spark.checkpoint,
                                     checkpoint_storage(spark_options)) == {"m": {"0": 9}}


def test_checkpoint_storage_options_arrive_lowercased_from_spark(monkeypatch) -> None:
    """Spark hands a Python data source its options with lowercased keys: the endpoint and
    the secret reference must still be found (else the offset log is read from AWS)."""
    monkeypatch.setenv("KH_TEST_S3_SECRET", SECRET)
    given = {"checkpointstorage.aws_endpoint_url": "http://127.0.0.1:1",
             "checkpointstoragesecretenv.aws_secret_access_key": "KH_TEST_S3_SECRET",
             "checkpointlocation": "s3a://b/c"}
    assert checkpoint_storage(given) == {"aws_endpoint_url": "http://127.0.0.1:1",
                                         "aws_secret_access_key": SECRET}
