"""What the real-Kafka tests compare: the job's tables against the truth the Admin API
sampled (tests/real_kafka/conftest.py's TruthSampler), window by window, and against the
brokers' own counters in bronze."""

from __future__ import annotations

from typing import Any

import pandas as pd

from streaming.signals.broker import LEVEL_METRICS
from tests.conftest import wait_for
from tests.integration.helpers import table
from tests.real_kafka.conftest import FINDINGS, NAMES, WINDOW, Bed

GAUGES = {field: LEVEL_METRICS[field] for field in ("under_min_isr", "under_replicated")}
FIELDS = {"under_min_isr": ("under_min_isr_max", "under_min_isr_last"),
          "under_replicated": ("under_replicated_max", "under_replicated_last")}


def epoch(ts: Any) -> float:
    return pd.Timestamp(ts).timestamp()


def exported(bed: Bed, name: str) -> dict[tuple[str, ...], float]:
    """The job's /metrics series `name` now: label values (in the exporter's order) to value."""
    exporter = bed.exporter
    return {tuple(s.labels[n] for n in exporter.labelnames[name]): s.value
            for family in exporter.gauges[name].collect() for s in family.samples}


def caught_up(bed: Bed, until: float) -> bool:
    """The job has signals of every shipped name up to `until` (event time)."""
    rows = table(bed.delta, "broker_signals")
    if rows.empty:
        return False
    newest = rows.groupby("cluster")["last_sample_ts"].max()
    return all(name in newest and epoch(newest[name]) >= until for name in NAMES)


def wait_caught_up(bed: Bed, until: float) -> None:
    def check() -> bool:
        assert bed.job.query.isActive, f"query stopped: {bed.job.query.exception()}"
        return caught_up(bed, until)
    wait_for(check, 120, f"signals up to {until:.0f}")


def hold_until_stable(bed: Bed, since: float, condition, what: str) -> float:  # noqa: ANN001
    """Keep the fault until the truth has a stable window after `since` whose per-broker
    values satisfy condition(values); returns that window's end."""
    def found() -> float | None:
        for start, (_, values) in sorted(bed.stable_windows().items()):
            if start >= since and condition(values):
                return start + WINDOW
        return None
    return wait_for(found, 150, what, every=1.0)


def mismatches(bed: Bed, since: float, until: float) -> list[str]:
    """Every (name, broker, window, field) where the pipeline differs from stable truth."""
    rows = table(bed.delta, "broker_signals")
    rows = rows.assign(start=rows["window_start"].map(epoch))
    out = []
    checked = 0
    for start, (brokers, values) in sorted(bed.stable_windows().items()):
        if not since <= start < until - WINDOW + 1:
            continue
        for name in NAMES:
            for broker, truth in values.items():
                if broker not in brokers:
                    continue  # not registered throughout: no samples expected
                got = rows[(rows.cluster == name) & (rows.broker == str(broker))
                           & (rows.start == start)]
                if got.empty:
                    if shipped(bed, name, broker, start, list(GAUGES.values())):
                        out.append(f"{name} b{broker} @{start:.0f}: samples but no signal row")
                    else:  # the shipper got nothing from that agent: a gap, not a mismatch
                        FINDINGS.append(f"{name} b{broker} @{start:.0f}: no gauge shipped")
                    continue
                for field, columns in FIELDS.items():
                    value = got.iloc[0][columns[0]]
                    if value != value and not shipped(bed, name, broker, start, [GAUGES[field]]):
                        # A window may hold only the tail of a bulk read that began in the
                        # second before it (each Jolokia reply has its own timestamp): no
                        # sample of this gauge, no value, not a wrong one.
                        FINDINGS.append(f"{name} b{broker} @{start:.0f}: no {GAUGES[field]} "
                                        "sample shipped")
                        continue
                    for column in columns:
                        checked += 1
                        if got.iloc[0][column] != truth[field]:
                            out.append(f"{name} b{broker} @{start:.0f} {column}="
                                       f"{got.iloc[0][column]} truth {truth[field]}")
    assert checked, "no stable window to compare"
    return out


def shipped(bed: Bed, name: str, broker: int, start: float, metrics: list[str]) -> bool:
    """Whether bronze holds samples of one of `metrics` of that broker in that window."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    lo = pd.Timestamp(start, unit="s", tz="UTC")
    data = DeltaTable(str(bed.delta / "bronze")).to_pyarrow_dataset()
    match = ((ds.field("cluster") == name) & (ds.field("broker") == str(broker))
             & ds.field("metric").isin(metrics)
             & (ds.field("ts") >= lo) & (ds.field("ts") < lo + pd.Timedelta(seconds=WINDOW)))
    return data.count_rows(filter=match) > 0


def counter_deltas(bed: Bed, metric: str, since: float, until: float) -> dict[str, float]:
    """Per shipped name, what the brokers' own `metric` Count rose by in bronze over the
    windows starting in [since, until]: the sum of rises between consecutive samples of
    each broker (a fall is a restart: the new value counts from zero). Independent of the
    pipeline's counter code, which must come to the same."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    lo = pd.Timestamp(since // WINDOW * WINDOW, unit="s", tz="UTC")
    hi = pd.Timestamp(until // WINDOW * WINDOW + WINDOW, unit="s", tz="UTC")
    data = DeltaTable(str(bed.delta / "bronze")).to_pyarrow_dataset()
    rows = data.to_table(
        filter=(ds.field("metric") == metric) & (ds.field("attribute") == "Count")
        & (ds.field("ts") >= lo - pd.Timedelta(minutes=2)) & (ds.field("ts") < hi),
        columns=["cluster", "broker", "ts", "source_offset", "value"]).to_pandas()
    # Jolokia's timestamps are whole seconds: two scrapes of a second tie on ts and are
    # ordered by offset (the order they were shipped in), as the pipeline orders them
    rows = rows.sort_values(["ts", "source_offset"], kind="stable")
    out: dict[str, float] = dict.fromkeys(NAMES, 0.0)
    for (name, _broker), series in rows.groupby(["cluster", "broker"]):
        values, stamps = series["value"].tolist(), series["ts"].tolist()
        for before, after, ts in zip(values, values[1:], stamps[1:], strict=False):
            if ts >= lo:
                out[name] += after - before if after >= before else after
    return out


def increases(bed: Bed, column: str, since: float, until: float) -> dict[str, float]:
    rows = table(bed.delta, "broker_signals")
    rows = rows[rows["window_start"].map(epoch).between(since // WINDOW * WINDOW, until)]
    return {name: float(rows[rows.cluster == name][column].fillna(0).sum()) for name in NAMES}
