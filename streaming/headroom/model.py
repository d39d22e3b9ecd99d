"""Partition headroom: how many more partitions a broker can take, and which limit stops it.

The per-broker partition ceiling has no constant behind it: it is the minimum of
independent resource bounds (memory map areas, file descriptors, failover time), and the
operator needs to know *which* bound binds, because raising one only exposes the
next. This module is pure Python (no Spark, no pandas) so the same arithmetic runs in a
micro-batch, in a unit test, and in a capacity-planning notebook.

Bounds modelled, with their names as exported in metrics_schemas/exported_metrics.yaml:

* ``mmap``                  vm.max_map_count (Kafka documentation, "Hardware and OS")
* ``file_descriptors``      the nofile ulimit (same section)
* ``recovery``              failover time, ~5 ms per leader (Jun Rao, Confluent blog, 2015)
* ``max_broker_partitions`` KIP-578's guard rail (only when set)
* ``baseline``              ~4,000 partitions per broker (Confluent blog, 2018)

Memory is not modelled: there is no published per-partition byte cost to divide by,
only the advice to keep the heap small, so any number here would be invented. The
sources are cited beside each default in metrics_schemas/headroom_defaults.yaml.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from streaming.schemas import schemas_dir

# The KRaft controller refuses a CreateTopics request for more than 10,000 partitions
# (MAX_PARTITIONS_PER_BATCH in Kafka's ReplicationControlManager.java). A compiled
# constant, so it is deliberately not a per-cluster setting in headroom_defaults.yaml: no
# config can move it.
MAX_PARTITIONS_PER_BATCH = 10_000

DEFAULTS_FILE = "headroom_defaults.yaml"

MMAP = "mmap"
FILE_DESCRIPTORS = "file_descriptors"
RECOVERY = "recovery"
MAX_BROKER_PARTITIONS = "max_broker_partitions"
BASELINE = "baseline"

# Tie-break order when two bounds give the same ceiling: the first one listed wins.
# An explicitly configured guard rail first (the broker actually rejects requests there),
# then the bounds whose failure is abrupt (mmap failure at segment roll, EMFILE), then the
# one that degrades availability (recovery), and the advisory baseline last.
BOUND_ORDER: tuple[str, ...] = (MAX_BROKER_PARTITIONS, MMAP, FILE_DESCRIPTORS, RECOVERY, BASELINE)

SECONDS_PER_DAY = 86_400.0
# Guards float division such as 5.0 / 0.005 against landing a hair under an integer.
_EPS = 1e-9


@dataclass(frozen=True)
class HeadroomConfig:
    """Host facts and budgets for one cluster, which JMX does not report.

    Values come from metrics_schemas/headroom_defaults.yaml (each documented there with its
    public source) merged with the cluster's overrides; build it with
    ``make_config`` so unknown keys are caught instead of silently ignored.
    """

    vm_max_map_count: int
    mmap_regions_per_segment: float
    files_per_segment: float
    default_non_log_fds: int
    per_leader_election_seconds: float
    failover_budget_seconds: float
    practical_baseline_partitions: int
    max_broker_partitions: int | None
    max_partitions: int | None
    forecast_lookback_days: float
    forecast_min_points: int

    def __post_init__(self) -> None:
        positive = (
            "vm_max_map_count",
            "mmap_regions_per_segment",
            "files_per_segment",
            "per_leader_election_seconds",
            "failover_budget_seconds",
            "practical_baseline_partitions",
            "forecast_lookback_days",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if self.default_non_log_fds < 0:
            raise ValueError(f"default_non_log_fds must be >= 0, got {self.default_non_log_fds}")
        if self.forecast_min_points < 2:
            raise ValueError("forecast_min_points must be >= 2 (a slope needs two points)")
        for name in ("max_broker_partitions", "max_partitions"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive int or null, got {value!r}")


CONFIG_KEYS: tuple[str, ...] = tuple(f.name for f in fields(HeadroomConfig))


def load_defaults(path: str | Path | None = None) -> dict[str, Any]:
    """Defaults live in YAML so they can be reviewed as data, next to their sources.

    ``path`` names the YAML file; without it the file is looked up in ``schemas_dir()``.
    The file must hold exactly the model's keys, so a typo there fails as loudly as one in
    a cluster override.
    """
    file: Traversable = Path(path) if path is not None else schemas_dir() / DEFAULTS_FILE
    with file.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{file}: expected a mapping of defaults, got {type(data).__name__}")
    _check_keys(data, f"{file}")
    missing = sorted(set(CONFIG_KEYS) - set(data))
    if missing:
        raise ValueError(f"{file}: missing default(s) {missing}")
    return dict(data)


def make_config(
    overrides: Mapping[str, Any] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> HeadroomConfig:
    """Per-cluster overrides are merged over the defaults; an unknown key is a ValueError
    because a misspelt key (``vm_max_mapcount``) would otherwise leave the default in force
    while the operator believes it was changed."""
    base = dict(defaults) if defaults is not None else load_defaults()
    _check_keys(base, "defaults")
    if overrides:
        _check_keys(overrides, "override")
        base.update(overrides)
    return HeadroomConfig(**base)


def _check_keys(data: Mapping[str, Any], origin: str) -> None:
    for key in data:
        if key not in CONFIG_KEYS:
            raise ValueError(
                f"unknown headroom {origin} key {key!r}; valid keys: {', '.join(CONFIG_KEYS)}"
            )


@dataclass(frozen=True)
class BrokerSnapshot:
    """The JMX facts the bounds need, as of one point in time.

    ``log_segments`` is the sum of NumLogSegments over the broker's partitions; it and the
    FD gauges are optional because not every exporter scrapes them, and the model must
    still answer (with the defaults' floors) when they are missing.
    """

    broker: str
    partitions: int  # kafka.server:type=ReplicaManager,name=PartitionCount
    leaders: int  # kafka.server:type=ReplicaManager,name=LeaderCount
    log_segments: int | None = None  # sum of kafka.log:type=Log,name=NumLogSegments
    open_fds: int | None = None  # java.lang:type=OperatingSystem OpenFileDescriptorCount
    max_fds: int | None = None  # java.lang:type=OperatingSystem MaxFileDescriptorCount

    def __post_init__(self) -> None:
        for name in ("partitions", "leaders", "log_segments", "open_fds", "max_fds"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"broker {self.broker}: {name} must be >= 0, got {value}")


@dataclass(frozen=True)
class BrokerHeadroom:
    """Everything needed to explain the number, not just the number.

    ``ceilings`` has every bound name in BOUND_ORDER; a value is None when the bound cannot
    be computed (FD limit unknown) or does not apply (guard rail unset). Headroom may be
    negative: the broker is already past its binding ceiling.
    """

    broker: str
    partitions: int
    leaders: int
    ceilings: dict[str, int | None]
    binding_bound: str
    binding_ceiling: int
    headroom: int
    headroom_pct: float | None  # None when the binding ceiling is 0
    leader_ceiling: int
    segments_per_partition: float | None
    mmap_regions_per_partition: float
    fds_per_partition: float
    non_log_fds: int
    non_log_fds_source: str  # "observed" or "configured"
    partitions_per_leader: float

    @property
    def headroom_ratio(self) -> float | None:
        """The exported gauge is a 0-1 ratio; the report reads better in percent."""
        return None if self.headroom_pct is None else self.headroom_pct / 100.0


def segments_per_partition(snapshot: BrokerSnapshot) -> float | None:
    """None rather than a guess, so each bound can apply its own documented floor."""
    if snapshot.log_segments is None or snapshot.partitions == 0:
        return None
    return snapshot.log_segments / snapshot.partitions


def mmap_ceiling(
    vm_max_map_count: int, segs_per_partition: float | None, regions_per_segment: float = 2
) -> tuple[int, float]:
    """Returns (ceiling, regions per partition) because the multiplier is what moves.

    partitions/broker ~= vm.max_map_count / map areas per partition, with 2 areas (offset
    and time index) per log segment (Kafka documentation, "Hardware and OS"). Areas per
    partition = 2 x segments/partition; 2 is a floor per partition, not a guarantee, so
    never fewer than one segment's worth (also the assumption when segments are unknown).
    """
    segs = max(1.0, segs_per_partition) if segs_per_partition is not None else 1.0
    regions = regions_per_segment * segs
    return _floor(vm_max_map_count / regions), regions


def non_log_fds(
    open_fds: int | None,
    log_segments: int | None,
    files_per_segment: float,
    default_non_log_fds: int,
) -> tuple[int, str]:
    """Sockets and other non-segment files, measured when possible.

    open files ~= partitions x segments x files/segment + connections (Kafka documentation,
    "Hardware and OS"), so connections ~= OpenFileDescriptorCount - 3 x segments (clamped at
    0: segment files can be closed or counted late). Without both inputs, fall back to the
    configured socket count (default_non_log_fds).
    """
    if open_fds is not None and log_segments is not None:
        return max(0, _floor(open_fds - files_per_segment * log_segments)), "observed"
    return default_non_log_fds, "configured"


def fd_ceiling(
    max_fds: int | None, non_log: int, fds_per_partition: float
) -> int | None:
    """None when MaxFileDescriptorCount is unknown: an FD bound without the ulimit is a guess.

    partitions = (nofile - non-log FDs) / FDs per partition.
    """
    if max_fds is None:
        return None
    available = max_fds - non_log
    if available <= 0:
        return 0
    return _floor(available / fds_per_partition)


def fds_per_partition(
    snapshot: BrokerSnapshot, segs_per_partition: float | None, files_per_segment: float,
    non_log: int,
) -> float:
    """Prefer segment counts; else the observed per-partition FD cost; else one segment.

    ~3 files per segment x segments per partition. When NumLogSegments is missing but
    OpenFileDescriptorCount is known, the observed (open - non-log) / partitions is used
    instead: a measured cost beats an assumed one. Never below one segment's
    files, because every hosted partition has an active segment.
    """
    floor = files_per_segment
    if segs_per_partition is not None:
        return max(floor, files_per_segment * segs_per_partition)
    if snapshot.open_fds is not None and snapshot.partitions > 0:
        return max(floor, (snapshot.open_fds - non_log) / snapshot.partitions)
    return floor


def leader_ceiling(failover_budget_seconds: float, per_leader_election_seconds: float) -> int:
    """Recovery time ~= leaders x ~5 ms, so leaders <= budget / 5 ms.

    With the defaults, 5 s / 0.005 s = 1,000 leaders.
    """
    return _floor(failover_budget_seconds / per_leader_election_seconds)


def recovery_ceiling(leader_max: int, partitions_per_leader: float) -> int:
    """Failover cost is per *leader* (an election per led partition), but headroom is in
    partitions.

    The broker's current partitions/leaders ratio is held constant: if its leadership
    share stays what it is, it reaches the leader ceiling when partitions reach
    leader_ceiling x ratio. With balanced leadership the ratio is about the replication
    factor. The ratio is clamped to >= 1 because scrapes of the two gauges can disagree.
    """
    return _floor(leader_max * max(1.0, partitions_per_leader))


def broker_headroom(
    snapshot: BrokerSnapshot,
    config: HeadroomConfig,
    fallback_partitions_per_leader: float = 1.0,
) -> BrokerHeadroom:
    """Evaluate every bound for one broker and pick the binding (lowest) one.

    ``fallback_partitions_per_leader`` is used when the broker leads nothing (just
    restarted, or drained); ``evaluate_cluster`` passes the cluster-wide ratio. The default
    1.0 is the worst case: every replica could become a leader on failover.
    """
    segs = segments_per_partition(snapshot)
    mmap_max, regions = mmap_ceiling(config.vm_max_map_count, segs, config.mmap_regions_per_segment)

    non_log, non_log_source = non_log_fds(
        snapshot.open_fds, snapshot.log_segments, config.files_per_segment,
        config.default_non_log_fds,
    )
    per_partition_fds = fds_per_partition(snapshot, segs, config.files_per_segment, non_log)
    fd_max = fd_ceiling(snapshot.max_fds, non_log, per_partition_fds)

    leaders_max = leader_ceiling(config.failover_budget_seconds, config.per_leader_election_seconds)
    ratio = snapshot.partitions / snapshot.leaders if snapshot.leaders > 0 else fallback_partitions_per_leader
    ratio = max(1.0, ratio)
    recovery_max = recovery_ceiling(leaders_max, ratio)

    ceilings: dict[str, int | None] = {
        # KIP-578's max.broker.partitions, only when the cluster sets it.
        MAX_BROKER_PARTITIONS: config.max_broker_partitions,
        MMAP: mmap_max,
        FILE_DESCRIPTORS: fd_max,
        RECOVERY: recovery_max,
        # ~4,000 partitions/broker: a conservative baseline (Confluent blog, 2018).
        BASELINE: config.practical_baseline_partitions,
    }
    binding, binding_ceiling = binding_bound(ceilings)
    headroom = binding_ceiling - snapshot.partitions
    pct = None if binding_ceiling == 0 else 100.0 * headroom / binding_ceiling
    return BrokerHeadroom(
        broker=snapshot.broker,
        partitions=snapshot.partitions,
        leaders=snapshot.leaders,
        ceilings=ceilings,
        binding_bound=binding,
        binding_ceiling=binding_ceiling,
        headroom=headroom,
        headroom_pct=pct,
        leader_ceiling=leaders_max,
        segments_per_partition=segs,
        mmap_regions_per_partition=regions,
        fds_per_partition=per_partition_fds,
        non_log_fds=non_log,
        non_log_fds_source=non_log_source,
        partitions_per_leader=ratio,
    )


def binding_bound(ceilings: Mapping[str, int | None]) -> tuple[str, int]:
    """The minimum wins; ties go to the bound listed first in BOUND_ORDER."""
    present = [(ceilings[name], i, name) for i, name in enumerate(BOUND_ORDER)
               if ceilings.get(name) is not None]
    if not present:
        raise ValueError("no bound could be computed")
    value, _, name = min(present)
    assert value is not None
    return name, value


# --- growth and forecast -------------------------------------------------------------


@dataclass(frozen=True)
class Forecast:
    """A slope alone does not page anyone; days-to-ceiling does, so both are carried."""

    slope_per_day: float | None
    points_used: int
    current_partitions: int | None
    ceiling: int
    days_to_ceiling: float | None


def _epoch_seconds(ts: datetime | float | int) -> float:
    if isinstance(ts, datetime):
        return ts.timestamp()
    return float(ts)


def _points(history: Iterable[tuple[datetime | float | int, int]] | np.ndarray) -> np.ndarray:
    """(epoch seconds, partitions) rows in time order."""
    if isinstance(history, np.ndarray):
        points = history.reshape(-1, 2).astype(float)
    else:
        points = np.array([(_epoch_seconds(ts), float(p)) for ts, p in history],
                          dtype=float).reshape(-1, 2)
    return points[np.argsort(points[:, 0], kind="stable")]


def growth_per_day(
    history: Iterable[tuple[datetime | float | int, int]] | np.ndarray,
    lookback_days: float,
    min_points: int,
) -> tuple[float | None, int]:
    """Least-squares slope in partitions/day over the look-back ending at the newest point.

    Least squares rather than first-to-last so one odd scrape does not swing the forecast.
    Returns (slope, points used); slope is None with fewer than ``min_points`` points or
    when all points share one timestamp. Timestamps are datetimes (use tz-aware ones) or
    epoch seconds.
    """
    points = _points(history)
    return sorted_growth_per_day(points[:, 0], points[:, 1], lookback_days, min_points)


def sorted_growth_per_day(times: np.ndarray, counts: np.ndarray, lookback_days: float,
                          min_points: int) -> tuple[float | None, int]:
    """`growth_per_day` of points already in time order (epoch seconds, partitions).

    Why apart: the stream keeps each broker's look-back sorted (~20,000 one-minute points)
    and forecasts every window it evaluates, hundreds per broker in a catch-up batch.
    Sorting and copying the whole history for each one was most of the headroom step; here
    the look-back is found by binary search and only its slice is read.
    """
    if len(times) == 0:
        return None, 0
    start = int(np.searchsorted(times, times[-1] - lookback_days * SECONDS_PER_DAY))
    n = len(times) - start
    if n < min_points:
        return None, n
    xs = (times[start:] - times[start]) / SECONDS_PER_DAY
    ys = counts[start:]
    dx = xs - xs.mean()
    sxx = float(np.dot(dx, dx))
    if sxx == 0:
        return None, n
    return float(np.dot(dx, ys - ys.mean())) / sxx, n


def days_until(current: int, ceiling: int, slope_per_day: float | None) -> float | None:
    """None when not growing: "never" at this rate is not a number of days.

    Already at or past the ceiling is 0 days, whatever the slope.
    """
    if current >= ceiling:
        return 0.0
    if slope_per_day is None or slope_per_day <= 0:
        return None
    return (ceiling - current) / slope_per_day


def forecast(
    history: Sequence[tuple[datetime | float | int, int]] | np.ndarray,
    ceiling: int,
    config: HeadroomConfig,
) -> Forecast:
    """Days from the newest observed count to the binding ceiling at the fitted rate.

    The newest observation (not the fitted line) is the starting point so the forecast
    agrees with the headroom reported for the same broker.
    """
    points = _points(history)
    return sorted_forecast(points[:, 0], points[:, 1], ceiling, config)


def sorted_forecast(times: np.ndarray, counts: np.ndarray, ceiling: int,
                    config: HeadroomConfig) -> Forecast:
    """`forecast` of points already in time order (see `sorted_growth_per_day`)."""
    slope, used = sorted_growth_per_day(times, counts, config.forecast_lookback_days,
                                        config.forecast_min_points)
    return outlook(slope, used, None if len(times) == 0 else int(counts[-1]), ceiling)


def outlook(slope_per_day: float | None, points_used: int, current: int | None,
            ceiling: int) -> Forecast:
    """The forecast of a fitted slope from the newest count (None: no points)."""
    if current is None:
        return Forecast(slope_per_day, points_used, None, ceiling, None)
    return Forecast(slope_per_day, points_used, current, ceiling,
                    days_until(current, ceiling, slope_per_day))


def growth_from_sums(n: int, sx: int, sy: int, sxx: int, sxy: int, min_points: int
                     ) -> tuple[float | None, int]:
    """`sorted_growth_per_day` of n points given by the exact integer sums of x (seconds),
    y (partitions), x² and xy: the least-squares slope (n·Σxy − Σx·Σy) / (n·Σx² − (Σx)²).

    Why: a stream keeps running sums of each broker's history, so a window's slope is a
    few differences of them instead of a pass over its whole look-back (~20,000 points).
    In Python's integers the result is exact up to the final division, so it does not
    depend on where x starts, and a flat history gives exactly zero.
    """
    if n < min_points:
        return None, n
    spread = n * sxx - sx * sx
    if spread == 0:  # every point at one instant
        return None, n
    return (n * sxy - sx * sy) * int(SECONDS_PER_DAY) / spread, n


# --- cluster view ------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterHeadroom:
    """Cluster totals against both cluster-level ceilings.

    ``total_partitions`` is the sum of PartitionCount, i.e. replicas hosted, the same unit
    as the broker ceilings. It is also compared with max.partitions: KIP-578 (a draft)
    does not say whether replicas count there, and replicas >= partitions, so this
    never overstates headroom.
    """

    brokers: int
    total_partitions: int
    sum_broker_ceilings: int
    headroom_vs_broker_ceilings: int
    max_partitions: int | None
    headroom_vs_max_partitions: int | None
    binding: str  # "broker_ceilings" or "max_partitions" (tie -> "max_partitions")


def cluster_headroom(brokers: Sequence[BrokerHeadroom], config: HeadroomConfig) -> ClusterHeadroom:
    """The cluster fills up either broker by broker or at the KIP-578 cluster rail."""
    total = sum(b.partitions for b in brokers)
    capacity = sum(b.binding_ceiling for b in brokers)
    rail = config.max_partitions  # KIP-578's max.partitions, None = unset
    rail_headroom = None if rail is None else rail - total
    binding = "broker_ceilings"
    if rail is not None and rail <= capacity:
        binding = "max_partitions"
    return ClusterHeadroom(
        brokers=len(brokers),
        total_partitions=total,
        sum_broker_ceilings=capacity,
        headroom_vs_broker_ceilings=capacity - total,
        max_partitions=rail,
        headroom_vs_max_partitions=rail_headroom,
        binding=binding,
    )


def evaluate_cluster(
    snapshots: Sequence[BrokerSnapshot], config: HeadroomConfig
) -> tuple[dict[str, BrokerHeadroom], ClusterHeadroom]:
    """Brokers that lead nothing borrow the cluster's partitions/leaders ratio, which in a
    balanced cluster is the average replication factor, instead of the worst case 1.0."""
    total_leaders = sum(s.leaders for s in snapshots)
    total_partitions = sum(s.partitions for s in snapshots)
    fallback = total_partitions / total_leaders if total_leaders > 0 else 1.0
    per_broker = {s.broker: broker_headroom(s, config, fallback) for s in snapshots}
    return per_broker, cluster_headroom(list(per_broker.values()), config)


def brokers_needed(
    planned_total_partitions: int, per_broker_ceiling: int, replication_factor: int
) -> int:
    """Every partition lands replication_factor times, and ceilings count replicas.

    ceil(planned partitions x RF / per-broker ceiling); at least RF brokers, since the
    replicas of one partition must sit on distinct brokers.
    """
    if planned_total_partitions < 0:
        raise ValueError("planned_total_partitions must be >= 0")
    if per_broker_ceiling <= 0:
        raise ValueError("per_broker_ceiling must be > 0")
    if replication_factor < 1:
        raise ValueError("replication_factor must be >= 1")
    if planned_total_partitions == 0:
        return 0
    needed = math.ceil(planned_total_partitions * replication_factor / per_broker_ceiling)
    return max(needed, replication_factor)


def create_topic_batches(
    partitions: int, max_per_batch: int = MAX_PARTITIONS_PER_BATCH
) -> list[int]:
    """A CreateTopics request may carry at most MAX_PARTITIONS_PER_BATCH partitions; the
    AdminClient does not split, so callers must. Returns the partition count of each
    request, e.g. 25,000 -> [10000, 10000, 5000]; 50,000 partitions take 5 requests."""
    if partitions < 0:
        raise ValueError("partitions must be >= 0")
    if max_per_batch <= 0:
        raise ValueError("max_per_batch must be > 0")
    full, rest = divmod(partitions, max_per_batch)
    return [max_per_batch] * full + ([rest] if rest else [])


def _floor(value: float) -> int:
    return math.floor(value + _EPS)
