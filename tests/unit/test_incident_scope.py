"""Reconciling incidents on real Delta tables with cluster names that quoting would break.

Cluster names come from record keys and labels, so any text can reach the incidents MERGE:
quotes of both kinds, backslashes, newlines, NULs. The reconciliation must close (withdraw,
never delete) exactly the vanished incidents of the batch's clusters and leave every other
cluster's alone.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.config import Config
from streaming.pipeline.batch import BatchProcessor

WINDOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOSTILE = ["it's", 'a"b\'c', "x\ny", "back\\slash", "nul\x00byte", "') OR 1=1 --", ""]


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> BatchProcessor:
    config = Config()
    config.delta.path = str(tmp_path_factory.mktemp("incident-scope"))
    return BatchProcessor(config, exporter=None)


BATCH_IDS = itertools.count()


def under_min_isr(proc: BatchProcessor, cluster: str, value: float) -> None:
    """One broker_signals window of `cluster` with under-min-ISR partitions (or none)."""
    table = proc.tables["broker_signals"]
    row = {f.name: None for f in table.schema}
    row.update(cluster=cluster, broker="1", window_start=WINDOW,
               window_end=WINDOW + timedelta(minutes=1), samples=1, last_sample_ts=WINDOW,
               under_min_isr_max=value, under_min_isr_last=value, updated_at=WINDOW)
    table.upsert(pa.Table.from_pylist([row], schema=table.schema), next(BATCH_IDS))


def open_incidents(proc: BatchProcessor, cluster: str) -> list[str]:
    rows = proc.tables["incidents"].read(columns=["cluster", "kind", "resolved_at"]).to_pylist()
    return [r["kind"] for r in rows if r["cluster"] == cluster and r["resolved_at"] is None]


def withdrawn_incidents(proc: BatchProcessor, cluster: str) -> list[str]:
    rows = proc.tables["incidents"].read(columns=["cluster", "kind", "withdrawn_at"]).to_pylist()
    return [r["kind"] for r in rows if r["cluster"] == cluster and r["withdrawn_at"] is not None]


def reconcile(proc: BatchProcessor, clusters: list[str]) -> None:
    proc.stages.update_incidents(clusters, WINDOW, WINDOW, next(BATCH_IDS))


def check_one_name(proc: BatchProcessor, name: str) -> None:
    """An incident of `name` opens, then is withdrawn (kept, closed) on correction; a
    bystander's stays open."""
    bystander = f"bystander-{len(name)}"
    for cluster in (name, bystander):
        under_min_isr(proc, cluster, 3.0)
    reconcile(proc, [name, bystander])
    assert open_incidents(proc, name) == ["under_min_isr"]
    assert open_incidents(proc, bystander) == ["under_min_isr"]
    under_min_isr(proc, name, 0.0)  # late data: the window was healthy after all
    reconcile(proc, [name])
    assert open_incidents(proc, name) == []
    assert withdrawn_incidents(proc, name) == ["under_min_isr"], "shown, so kept"
    assert open_incidents(proc, bystander) == ["under_min_isr"], "another cluster was touched"
    under_min_isr(proc, bystander, 0.0)  # leave the bystander's name clean for the next one
    reconcile(proc, [bystander])


@pytest.mark.parametrize("name", HOSTILE)
def test_incidents_reconcile_with_quotes_newlines_and_nuls_in_cluster_names(
        proc: BatchProcessor, name: str) -> None:
    check_one_name(proc, name)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.text(max_size=40))
def test_incidents_reconcile_for_any_cluster_name(proc: BatchProcessor, name: str) -> None:
    check_one_name(proc, name)
