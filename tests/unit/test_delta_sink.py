"""delta-rs sink: once per batch id, MERGE by key, and reads over files holding several clusters."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.dataset as ds

from streaming.sinks.delta_rs import DeltaRsTable

TS = pa.timestamp("us", "UTC")


def rows(table: DeltaRsTable, clusters: list[str], at: datetime, samples: int) -> pa.Table:
    out = []
    for cluster in clusters:
        row = {f.name: None for f in table.schema}
        row.update(cluster=cluster, broker="1", window_start=at, samples=samples)
        out.append(row)
    return pa.Table.from_pylist(out, schema=table.schema)


def test_merge_is_once_per_batch_and_reads_filter_several_clusters(tmp_path):
    table = DeltaRsTable(str(tmp_path), "broker_signals", "app")
    at = datetime.now(UTC).replace(microsecond=0)
    assert table.upsert(rows(table, ["a", "b"], at, 1), batch_id=0)
    assert table.upsert(rows(table, ["a", "b"], at, 2), batch_id=1)
    assert not table.upsert(rows(table, ["a", "b"], at, 99), batch_id=1), "replayed batch"
    # a second handle (a restarted job) sees the committed transaction too
    assert DeltaRsTable(str(tmp_path), "broker_signals", "app").committed(1)
    got = table.read(ds.field("window_start") >= pa.scalar(at, TS), ds.field("cluster") == "b")
    assert got.column("cluster").to_pylist() == ["b"]
    assert got.column("samples").to_pylist() == [2]
    assert table.read().num_rows == 2
    table.compact()
    assert sorted(table.read(columns=["cluster"]).column("cluster").to_pylist()) == ["a", "b"]
