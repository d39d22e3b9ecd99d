"""Headroom model tests: the published worked numbers first, then each bound binding in turn.

Sources are cited beside each default in metrics_schemas/headroom_defaults.yaml.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from streaming.headroom import (
    BASELINE,
    FILE_DESCRIPTORS,
    MAX_BROKER_PARTITIONS,
    MAX_PARTITIONS_PER_BATCH,
    MMAP,
    RECOVERY,
    BrokerSnapshot,
    HeadroomConfig,
    binding_bound,
    broker_headroom,
    brokers_needed,
    create_topic_batches,
    days_until,
    evaluate_cluster,
    forecast,
    growth_per_day,
    load_defaults,
    make_config,
)
from streaming.headroom.chart import ceilings_frame, write_headroom_png
from streaming.headroom.model import CONFIG_KEYS, leader_ceiling, mmap_ceiling, non_log_fds

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def defaults() -> dict[str, Any]:
    return load_defaults()


@pytest.fixture
def config(defaults: dict[str, Any]) -> HeadroomConfig:
    return make_config(defaults=defaults)


def roomy(defaults: dict[str, Any], **overrides: Any) -> HeadroomConfig:
    """Config where recovery and baseline are far away, so a chosen bound can bind."""
    merged = {"failover_budget_seconds": 1000.0, "practical_baseline_partitions": 1_000_000}
    merged.update(overrides)
    return make_config(merged, defaults=defaults)


# --- defaults ---------------------------------------------------------------------------


def test_defaults_file_holds_the_published_values(defaults: dict[str, Any]) -> None:
    assert set(defaults) == set(CONFIG_KEYS)
    assert defaults["vm_max_map_count"] == 65_530  # Linux default
    assert defaults["mmap_regions_per_segment"] == 2  # offset + time index
    assert defaults["files_per_segment"] == 3  # .log, .index, .timeindex
    assert defaults["default_non_log_fds"] == 5_000  # assumed sockets
    assert defaults["per_leader_election_seconds"] == 0.005  # Jun Rao, 2015
    assert defaults["failover_budget_seconds"] == 5.0  # 1,000 leaders x 5 ms
    assert defaults["practical_baseline_partitions"] == 4_000  # Confluent, 2018
    assert defaults["max_broker_partitions"] is None  # KIP-578: unset unless configured
    assert defaults["max_partitions"] is None


def test_defaults_located_through_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = Path(__file__).resolve().parents[2] / "metrics_schemas" / "headroom_defaults.yaml"
    text = source.read_text(encoding="utf-8").replace(
        "vm_max_map_count: 65530", "vm_max_map_count: 262144"
    )
    (tmp_path / "headroom_defaults.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setenv("KAFKA_HEALTH_SCHEMAS", str(tmp_path))
    assert load_defaults()["vm_max_map_count"] == 262_144
    assert make_config().vm_max_map_count == 262_144


def test_unknown_key_in_defaults_file_is_rejected(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[2] / "metrics_schemas" / "headroom_defaults.yaml"
    bad = tmp_path / "headroom_defaults.yaml"
    shutil.copy(source, bad)
    with bad.open("a", encoding="utf-8") as fh:
        fh.write("vm_max_map_cuont: 1\n")
    with pytest.raises(ValueError, match="vm_max_map_cuont"):
        load_defaults(bad)


def test_override_merges_over_defaults(defaults: dict[str, Any]) -> None:
    cfg = make_config({"vm_max_map_count": 262_144, "max_broker_partitions": 3_000}, defaults)
    assert cfg.vm_max_map_count == 262_144
    assert cfg.max_broker_partitions == 3_000
    assert cfg.files_per_segment == 3  # untouched keys keep the default


def test_bad_override_key_names_key_and_valid_keys(defaults: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as err:
        make_config({"vm_max_mapcount": 262_144}, defaults)
    message = str(err.value)
    assert "'vm_max_mapcount'" in message
    assert "vm_max_map_count" in message and "failover_budget_seconds" in message


def test_bad_override_value_is_rejected(defaults: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="per_leader_election_seconds"):
        make_config({"per_leader_election_seconds": 0}, defaults)
    with pytest.raises(ValueError, match="max_broker_partitions"):
        make_config({"max_broker_partitions": -1}, defaults)


# --- the published worked numbers -------------------------------------------------------


def test_mmap_ceiling_65530_over_2(config: HeadroomConfig) -> None:
    # 65,530 map areas / 2 regions per partition = 32,765 partitions.
    ceiling, regions = mmap_ceiling(config.vm_max_map_count, None, config.mmap_regions_per_segment)
    assert (ceiling, regions) == (32_765, 2)
    one_segment_each = BrokerSnapshot("1", partitions=100, leaders=50, log_segments=100)
    assert broker_headroom(one_segment_each, config).ceilings[MMAP] == 32_765
    # Raised sysctl: 262,144 / 2 = 131,072.
    assert mmap_ceiling(262_144, 1.0)[0] == 131_072


def test_mmap_scales_with_retained_segments(config: HeadroomConfig) -> None:
    # 20 segments per partition => 40 regions per partition => 65,530 / 40 = 1,638.
    snap = BrokerSnapshot("1", partitions=2_000, leaders=700, log_segments=40_000)
    result = broker_headroom(snap, config)
    assert result.mmap_regions_per_partition == 40
    assert result.ceilings[MMAP] == 1_638
    # Fewer segments than partitions never drops below the 2-per-partition floor.
    sparse = BrokerSnapshot("1", partitions=2_000, leaders=700, log_segments=500)
    assert broker_headroom(sparse, config).ceilings[MMAP] == 32_765


def test_fd_example_120000_segment_files(config: HeadroomConfig) -> None:
    # 2,000 partitions x 20 segments x 3 files = 120,000 FDs,
    # plus 5,000 sockets = 125,000 open files, "already above a 100,000 ulimit".
    partitions, segments = 2_000, 2_000 * 20
    assert partitions * 20 * config.files_per_segment == 120_000
    non_log, source = non_log_fds(125_000, segments, config.files_per_segment, 5_000)
    assert (non_log, source) == (5_000, "observed")

    snap = BrokerSnapshot(
        "1", partitions=partitions, leaders=700, log_segments=segments,
        open_fds=125_000, max_fds=100_000,
    )
    result = broker_headroom(snap, config)
    assert result.fds_per_partition == 60
    assert result.non_log_fds == 5_000
    # (100,000 - 5,000) / 60 = 1,583 partitions: the broker is over its FD ceiling.
    assert result.ceilings[FILE_DESCRIPTORS] == 1_583
    assert result.headroom < 0


def test_recovery_1000_leaders_times_5ms(config: HeadroomConfig) -> None:
    # 1,000 leaders x 5 ms = 5 s, so a 5 s budget allows 1,000 leaders.
    assert 1_000 * config.per_leader_election_seconds == pytest.approx(5.0)
    budget, per_leader = config.failover_budget_seconds, config.per_leader_election_seconds
    assert leader_ceiling(budget, per_leader) == 1_000
    # Expressed in partitions at the broker's current ratio (RF 3, balanced: 3 per leader).
    snap = BrokerSnapshot("1", partitions=1_500, leaders=500)
    result = broker_headroom(snap, config)
    assert result.leader_ceiling == 1_000
    assert result.partitions_per_leader == 3
    assert result.ceilings[RECOVERY] == 3_000


def test_fd_bound_absent_without_max_fds(config: HeadroomConfig) -> None:
    snap = BrokerSnapshot("1", partitions=100, leaders=30, log_segments=300, open_fds=1_500)
    assert broker_headroom(snap, config).ceilings[FILE_DESCRIPTORS] is None


def test_fd_non_log_falls_back_to_configured_sockets(config: HeadroomConfig) -> None:
    # No segment counts: sockets from config (5,000), per-partition cost observed from
    # (open - sockets) / partitions = (11,000 - 5,000) / 1,000 = 6.
    snap = BrokerSnapshot("1", partitions=1_000, leaders=300, open_fds=11_000, max_fds=65_000)
    result = broker_headroom(snap, config)
    assert result.non_log_fds_source == "configured"
    assert result.fds_per_partition == 6
    assert result.ceilings[FILE_DESCRIPTORS] == 10_000
    # Nothing known but the ulimit: one segment (3 files) per partition.
    bare = BrokerSnapshot("1", partitions=1_000, leaders=300, max_fds=65_000)
    assert broker_headroom(bare, config).ceilings[FILE_DESCRIPTORS] == 20_000


def test_non_log_fds_clamped_at_zero(config: HeadroomConfig) -> None:
    assert non_log_fds(100, 1_000, 3, 5_000) == (0, "observed")


# --- each bound binds in turn ---------------------------------------------------------------


def test_mmap_binds(defaults: dict[str, Any]) -> None:
    snap = BrokerSnapshot("1", partitions=1_000, leaders=330, log_segments=10_000)
    result = broker_headroom(snap, roomy(defaults))
    assert result.binding_bound == MMAP
    assert result.binding_ceiling == 65_530 // 20


def test_file_descriptors_bind(defaults: dict[str, Any]) -> None:
    snap = BrokerSnapshot(
        "1", partitions=100, leaders=33, log_segments=200, open_fds=1_100, max_fds=10_000
    )
    result = broker_headroom(snap, roomy(defaults))
    assert result.binding_bound == FILE_DESCRIPTORS
    assert result.binding_ceiling == (10_000 - 500) // 6


def test_recovery_binds_with_defaults(config: HeadroomConfig) -> None:
    snap = BrokerSnapshot(
        "1", partitions=2_400, leaders=800, log_segments=2_400, open_fds=20_000, max_fds=1_048_576
    )
    result = broker_headroom(snap, config)
    assert result.binding_bound == RECOVERY
    assert result.binding_ceiling == 3_000
    assert result.headroom == 600
    assert result.headroom_pct == pytest.approx(20.0)
    assert result.headroom_ratio == pytest.approx(0.2)


def test_max_broker_partitions_binds_when_set(defaults: dict[str, Any]) -> None:
    snap = BrokerSnapshot("1", partitions=1_500, leaders=500)
    cfg = make_config({"max_broker_partitions": 2_000}, defaults)
    result = broker_headroom(snap, cfg)
    assert result.binding_bound == MAX_BROKER_PARTITIONS
    assert (result.binding_ceiling, result.headroom) == (2_000, 500)
    # Unset (the default) means the bound is not reported at all.
    assert broker_headroom(snap, make_config(defaults=defaults)).ceilings[
        MAX_BROKER_PARTITIONS
    ] is None


def test_baseline_binds(defaults: dict[str, Any]) -> None:
    snap = BrokerSnapshot("1", partitions=1_000, leaders=1_000)
    cfg = make_config({"failover_budget_seconds": 60.0}, defaults)
    result = broker_headroom(snap, cfg)
    assert result.binding_bound == BASELINE
    assert result.binding_ceiling == 4_000
    assert result.headroom_pct == pytest.approx(75.0)


def test_ties_follow_documented_order() -> None:
    tied = {MAX_BROKER_PARTITIONS: 4_000, MMAP: 9_000, FILE_DESCRIPTORS: None,
            RECOVERY: 4_000, BASELINE: 4_000}
    assert binding_bound(tied) == (MAX_BROKER_PARTITIONS, 4_000)
    tied[MAX_BROKER_PARTITIONS] = None
    assert binding_bound(tied) == (RECOVERY, 4_000)
    assert binding_bound({MMAP: 10, FILE_DESCRIPTORS: 10}) == (MMAP, 10)


def test_drained_broker_borrows_cluster_ratio(config: HeadroomConfig) -> None:
    snaps = [
        BrokerSnapshot("1", partitions=1_200, leaders=600),
        BrokerSnapshot("2", partitions=1_200, leaders=600),
        BrokerSnapshot("3", partitions=1_200, leaders=0),  # just restarted
    ]
    per_broker, _ = evaluate_cluster(snaps, config)
    assert per_broker["3"].partitions_per_leader == 3
    assert per_broker["3"].ceilings[RECOVERY] == 3_000
    # Alone, with no cluster to borrow from, the worst case (1 per leader) applies.
    assert broker_headroom(snaps[2], config).ceilings[RECOVERY] == 1_000


def test_negative_gauge_rejected() -> None:
    with pytest.raises(ValueError, match="partitions"):
        BrokerSnapshot("1", partitions=-1, leaders=0)


# --- growth and forecast ------------------------------------------------------------------


def linear_history(days: int, start: int, per_day: float) -> list[tuple[datetime, int]]:
    return [(T0 + timedelta(days=d), round(start + per_day * d)) for d in range(days)]


def test_linear_growth_days_to_ceiling_within_one_percent(config: HeadroomConfig) -> None:
    history = linear_history(14, 1_000, 10.0)
    result = forecast(history, 4_000, config)
    assert result.slope_per_day == pytest.approx(10.0, rel=1e-9)
    assert result.current_partitions == 1_130
    expected_days = (4_000 - 1_130) / 10.0  # 287 days
    assert result.days_to_ceiling == pytest.approx(expected_days, rel=0.01)


def test_growth_with_hourly_epoch_seconds() -> None:
    base = T0.timestamp()
    history = [(base + 3_600 * h, 500 + h) for h in range(48)]  # 24 partitions/day
    slope, used = growth_per_day(history, lookback_days=14, min_points=3)
    assert used == 48
    assert slope == pytest.approx(24.0)


def test_flat_growth_gives_no_forecast(config: HeadroomConfig) -> None:
    result = forecast([(T0 + timedelta(days=d), 2_000) for d in range(10)], 4_000, config)
    assert result.slope_per_day == pytest.approx(0.0)
    assert result.days_to_ceiling is None


def test_shrinking_and_sparse_history_give_no_forecast(config: HeadroomConfig) -> None:
    assert forecast(linear_history(10, 3_000, -5.0), 4_000, config).days_to_ceiling is None
    two_points = forecast(linear_history(2, 1_000, 100.0), 4_000, config)
    assert two_points.slope_per_day is None and two_points.days_to_ceiling is None
    assert forecast([], 4_000, config).days_to_ceiling is None
    same_instant = [(T0, 1_000), (T0, 1_100), (T0, 1_200)]
    assert growth_per_day(same_instant, 14, 3) == (None, 3)


def test_lookback_ignores_old_points(config: HeadroomConfig) -> None:
    # A steep burst 30 days ago, then 14 days of +2/day: only the recent trend counts.
    old = [(T0 - timedelta(days=30 - d), 100 * d) for d in range(5)]
    recent = linear_history(14, 1_000, 2.0)
    slope, used = growth_per_day(old + recent, config.forecast_lookback_days, 3)
    assert used == 14
    assert slope == pytest.approx(2.0)


def test_days_until_edges() -> None:
    assert days_until(4_100, 4_000, None) == 0.0  # already over: 0 days, whatever the trend
    assert days_until(3_000, 4_000, 0.0) is None
    assert days_until(3_000, 4_000, 50.0) == pytest.approx(20.0)


# --- cluster view, planning, batches ---------------------------------------------------------


def test_cluster_view_against_max_partitions(defaults: dict[str, Any]) -> None:
    cfg = make_config({"max_partitions": 8_000}, defaults)
    snaps = [BrokerSnapshot(str(b), partitions=2_400, leaders=800) for b in range(3)]
    per_broker, cluster = evaluate_cluster(snaps, cfg)
    assert all(r.binding_ceiling == 3_000 for r in per_broker.values())
    assert cluster.total_partitions == 7_200
    assert cluster.sum_broker_ceilings == 9_000
    assert cluster.headroom_vs_broker_ceilings == 1_800
    assert cluster.headroom_vs_max_partitions == 800
    assert cluster.binding == "max_partitions"

    _, unset = evaluate_cluster(snaps, make_config(defaults=defaults))
    assert unset.max_partitions is None and unset.headroom_vs_max_partitions is None
    assert unset.binding == "broker_ceilings"


def test_brokers_needed() -> None:
    # 200,000 partitions x RF 3 at 4,000 replicas per broker = 150 brokers.
    assert brokers_needed(200_000, 4_000, 3) == 150
    assert brokers_needed(200_001, 4_000, 3) == 151
    assert brokers_needed(10, 4_000, 3) == 3  # replicas need distinct brokers
    assert brokers_needed(0, 4_000, 3) == 0
    with pytest.raises(ValueError):
        brokers_needed(1_000, 0, 3)


def test_create_topic_batches_respect_controller_limit() -> None:
    assert MAX_PARTITIONS_PER_BATCH == 10_000  # Kafka's ReplicationControlManager
    assert create_topic_batches(25_000) == [10_000, 10_000, 5_000]
    assert len(create_topic_batches(50_000)) == 5  # ceil(50,000 / 10,000) = 5
    assert create_topic_batches(10_000) == [10_000]
    assert create_topic_batches(10_001) == [10_000, 1]
    assert create_topic_batches(0) == []
    batches = create_topic_batches(123_456)
    assert sum(batches) == 123_456 and max(batches) <= MAX_PARTITIONS_PER_BATCH
    with pytest.raises(ValueError):
        create_topic_batches(-1)


# --- chart ---------------------------------------------------------------------------------


def test_write_headroom_png(tmp_path: Path, config: HeadroomConfig) -> None:
    snaps = [
        BrokerSnapshot("1", partitions=2_400, leaders=800, log_segments=4_800,
                       open_fds=30_000, max_fds=100_000),
        BrokerSnapshot("2", partitions=1_300, leaders=430),
    ]
    per_broker, _ = evaluate_cluster(snaps, config)
    rows = [
        {"broker": s.broker, "timestamp": T0 + timedelta(days=d),
         "partitions": s.partitions - 10 * (13 - d)}
        for s in snaps for d in range(14)
    ]
    history = pd.DataFrame(rows)
    ceilings = ceilings_frame(per_broker.values())
    assert ceilings["binding"].sum() == 2  # exactly one binding bound per broker

    out = write_headroom_png(history, ceilings, tmp_path / "charts" / "headroom.png")
    data = out.read_bytes()
    assert out.stat().st_size > 0
    assert data.startswith(PNG_SIGNATURE)


def test_chart_rejects_missing_columns(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="history"):
        write_headroom_png(pd.DataFrame({"broker": []}), pd.DataFrame(), tmp_path / "x.png")


def test_partition_history_keeps_time_order_through_late_and_repeated_windows() -> None:
    from streaming.headroom.stage import PartitionHistory

    history = PartitionHistory({120.0: 12, 0.0: 10})
    history.put(180.0, 13)
    history.put(60.0, 11)  # a late window lands between its neighbours
    history.put(120.0, 20)  # a window seen again: the newer count wins, no second point
    times, counts = history.until(180.0)
    assert times.tolist() == [0.0, 60.0, 120.0, 180.0]
    assert counts.tolist() == [10.0, 11.0, 20.0, 13.0]
    assert [a.tolist() for a in history.until(100.0)] == [[0.0, 60.0], [10.0, 11.0]]  # not later
    history.forget_before(60.0)
    assert history.until(1e9)[0].tolist() == [60.0, 120.0, 180.0]


@pytest.mark.parametrize("counts", ["whole", "fractional", "huge"])
def test_partition_history_forecasts_as_a_pass_over_its_points(
        config: HeadroomConfig, counts: str) -> None:
    """The running sums give the slope a pass over the look-back gives, through windows in
    order, one at a time and in runs, late ones, repeats and forgotten ones; counts int64
    could not sum exactly (a fraction, a producer's absurd number) fall back to the pass
    itself."""
    import numpy as np

    from streaming.headroom.model import sorted_forecast
    from streaming.headroom.stage import FORECASTS_AT_ONCE, PartitionHistory

    rng = np.random.default_rng(7)
    lookback = replace(config, forecast_lookback_days=0.5, forecast_min_points=3)
    history = PartitionHistory({0.0: 100})
    newest, checked = 0.0, 0
    for step in range(400):
        if step % 50 == 49:  # a late window between held ones, or one seen again
            at = float(60 * rng.integers(0, newest // 60 + 1))
        else:
            newest += 60.0 * int(rng.integers(1, 4))
            at = newest
        count = float(100 + step // 3 + int(rng.integers(0, 5)))
        if counts == "fractional" and step == 200:
            count += 0.5
        if counts == "huge" and step == 200:
            count = 1e18
        if step % 30 == 29:  # a catch-up's run of windows at once
            run = newest + 60.0 * np.arange(1, 21)
            history.put_many(run, count + np.arange(20.0))
            newest = at = float(run[-1])
        else:
            history.put_many(np.array([at]), np.array([count]))
        if step % 97 == 96:
            history.forget_before(newest - 86_400 * 0.4)
        # the last before every point; enough probes for forecasts' arrays
        probes = [at, newest, at - 30.0, -60.0, *(newest - 90.0 * np.arange(1, 6))]
        assert len(probes) >= FORECASTS_AT_ONCE
        together = history.forecasts(np.array(probes), [5_000] * len(probes), lookback)
        for probe, at_once in zip(probes, together, strict=True):
            want = sorted_forecast(*history.until(probe), 5_000, lookback)
            for got in (history.forecast(probe, 5_000, lookback), at_once):
                assert got.points_used == want.points_used
                assert got.current_partitions == want.current_partitions
                assert (got.slope_per_day is None) == (want.slope_per_day is None)
                if want.slope_per_day is not None:
                    assert got.slope_per_day == pytest.approx(want.slope_per_day, rel=1e-9,
                                                              abs=1e-9)
                    checked += 1
    assert checked > 2000


def test_a_batch_evaluated_at_once_forecasts_as_one_window_after_the_other() -> None:
    """The tracker puts a batch's windows into each broker's history first: every forecast
    must still see exactly the points at or before its own window, late ones included."""
    from streaming.headroom.stage import HeadroomTracker

    def signals(minutes: list[int], broker: str, start: int) -> list[dict[str, Any]]:
        return [{"cluster": "c1", "broker": broker, "window_start": T0 + timedelta(minutes=m),
                 "partition_count_last": start + 3 * m + (m % 7), "leader_count_last": 100,
                 "log_segments_last": 2 * start, "open_fds_last": 5_000,
                 "max_fds_last": 100_000} for m in minutes]

    def tracker() -> HeadroomTracker:
        empty = pa.table({"cluster": pa.array([], pa.string()),
                          "broker": pa.array([], pa.string()),
                          "evaluated_at": pa.array([], pa.timestamp("us", "UTC")),
                          "partitions": pa.array([], pa.float64())})
        return HeadroomTracker({"c1": {"forecast_lookback_days": 0.02,  # ~29 minutes
                                       "forecast_min_points": 3}}, lambda *a, **k: empty)

    batches = [
        signals(list(range(0, 40)), "1", 1_000) + signals(list(range(0, 40, 2)), "2", 500),
        # late windows between held ones, windows seen before, and a broker's first ones
        signals([41, 5, 17, 40, 39, 60], "1", 1_100) + signals([3, 44], "2", 520)
        + signals([10, 11, 12], "3", 50) + [{**signals([61], "1", 0)[0],
                                               "partition_count_last": None}],
    ]
    at_once, one_by_one = tracker(), tracker()
    for batch in batches:
        got = at_once.evaluate(batch)
        want = [row for one in sorted(batch, key=lambda r: r["window_start"])
                for row in one_by_one.evaluate([one])]
        assert [{**r, "updated_at": None} for r in got] == [
            {**r, "updated_at": None} for r in want]
        assert sum(r["growth_per_day"] is not None for r in got) > len(got) // 2
    held = at_once.history[("c1", "1")]
    assert held.times.tolist() == one_by_one.history[("c1", "1")].times.tolist()
