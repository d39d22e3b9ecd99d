"""Hostile records of every class a producer can send, each with what the job must do with it.

One catalogue for the bad-input flood test, the whole-path Hypothesis test and the hostile
soak: a record is either quarantined (its expected reason category) or accepted into bronze
(reason None) without stopping, slowing or skewing anything else. Classes that reach a
bound take the bound from `Bounds`, so a test can run them with small caps.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass

import orjson

from streaming.simulate.formats import ENCODERS
from streaming.simulate.model import ClusterModel
from streaming.simulate.samples import broker_samples

URP = "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"
SHRINKS = "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec"
ADAPTER_URP = "kafka_server_replicamanager_underreplicatedpartitions"
# Past Python's datetime (year 9999) by 10^9 ms, and before the Unix epoch.
BEYOND_DATETIME_MS = 253402300800000 + 10**9
YEAR_1938_S = -1009843200
HOSTILE_NAMES = ["it's", 'a"b\'c', "x\ny", "back\\slash", "nul\x00byte", "') OR 1=1 --"]


@dataclass(frozen=True)
class Bounds:
    """The caps the job runs with (quality.*): a hostile record is built one past them."""

    max_message_bytes: int = 64 * 1024
    max_samples_per_record: int = 1000
    max_labels_per_sample: int = 64
    max_label_chars: int = 1024
    max_brokers_per_cluster: int = 20

    def env(self) -> dict[str, str]:
        """The bounds as the job's environment overrides."""
        return {f"KAFKA_HEALTH__QUALITY__{name.upper()}": str(value)
                for name, value in self.__dict__.items()}


@dataclass(frozen=True)
class Hostile:
    """One record: its bytes, key, optional Kafka timestamp (ms), and the expected outcome."""

    name: str
    value: bytes
    key: bytes | None
    reason: str | None  # quarantine reason category; None: accepted into bronze
    timestamp_ms: int | None = None
    also_bronze: bool = False  # a partly good record: some samples kept, the rest refused
    # the format it is written in; None: no format at all, "auto": only format detection
    # gives its reason (a one-format topic quarantines it for that format's own complaint)
    fmt: str | None = "jolokia"


def jolokia_entry(mbean: str, value: object, ts: float) -> dict[str, object]:
    return {"request": {"mbean": mbean, "type": "read"}, "value": value, "timestamp": int(ts),
            "status": 200}


def jolokia(mbean: str, value: object, ts: float) -> bytes:
    return json.dumps([jolokia_entry(mbean, value, ts)]).encode()


def adapter(labels: dict[str, str], value: str, ts: float) -> bytes:
    """prometheus-kafka-adapter JSON (values as strings, RFC 3339 time)."""
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    return json.dumps({"labels": {"__name__": ADAPTER_URP, **labels}, "name": ADAPTER_URP,
                       "timestamp": iso, "value": value}).encode()


def good_jolokia(cluster: str, broker: int, ts: float) -> bytes:
    [(_, good)] = ENCODERS["jolokia"](cluster, broker, ts, broker_samples(
        ClusterModel(cluster, [1, 2, 3], {"orders": 3}), broker, 15.0))
    return good


def malformed(now: float, rnd: random.Random, key: bytes) -> list[Hostile]:
    """Records no decoder can take, keyed like a real broker's (they must not hurt it)."""
    good = good_jolokia("c1", 1, now)
    return [
        Hostile("non-JSON", b"UnderReplicatedPartitions=0 broker=1", key, "not_json", fmt=None),
        Hostile("truncated", good[: len(good) // 2], key, "not_json"),
        Hostile("wrong type", jolokia(URP, {"Value": "zero"}, now), key, "wrong_type"),
        Hostile("NaN", adapter({"instance": "b1:9404"}, "NaN", now), key, "non_finite_value",
                fmt="prometheus"),
        Hostile("+Inf", adapter({"instance": "b1:9404"}, "+Inf", now), key, "non_finite_value",
                fmt="prometheus"),
        Hostile("1e999", jolokia(URP, {"Value": 1}, now).replace(b'"Value": 1', b'"Value": 1e999'),
                key, "not_json"),
        Hostile("negative counter", jolokia(SHRINKS, {"Count": -5}, now), key,
                "negative_counter"),
        Hostile("far future", jolokia(URP, {"Value": 0}, now + 400 * 86400), key,
                "timestamp_skew"),
        Hostile("far past", jolokia(URP, {"Value": 0}, now - 400 * 86400), key, "timestamp_skew"),
        Hostile("unknown format", json.dumps({"metric": "x", "v": 1}).encode(), key,
                "unknown_format", fmt="auto"),
        Hostile("binary garbage", bytes(rnd.getrandbits(8) for _ in range(300)), key,
                "not_json", fmt=None),
        Hostile("one bad ObjectName in a bulk read", orjson.dumps(
            [*orjson.loads(good), jolokia_entry("no-colon-here", {"Value": 1}, now)]),
            key, "bad_mbean", also_bronze=True),
    ]


def over_bounds(now: float, key: bytes, bounds: Bounds) -> list[Hostile]:
    """Records past one bound each: the record (or its samples) refused, memory bounded."""
    fanout = {"name": "kafka_custom", "tags": {"host": "kafka-1"}, "timestamp": int(now),
              "fields": {f"F{i}": 0 for i in range(bounds.max_samples_per_record + 1)}}
    many_labels = {f"l{i}": "v" for i in range(bounds.max_labels_per_sample + 1)}
    # tags each within the label bounds, repeated by every field: far more label text in
    # the rows than the record holds
    long_tags = {f"tag{i:02d}": "v" * (bounds.max_label_chars - 24)
                 for i in range(min(45, bounds.max_labels_per_sample - 1))}
    repeated = {**fanout, "tags": {"host": "kafka-1", **long_tags},
                "fields": {f"F{i}": 0 for i in range(bounds.max_samples_per_record)}}
    return [
        Hostile("huge", b'{"pad": "' + b"x" * (bounds.max_message_bytes + 1000) + b'"}', key,
                "message_too_large", fmt=None),
        Hostile("samples past the cap", orjson.dumps(fanout), key, "too_many_samples",
                fmt="telegraf"),
        Hostile("labels past the cap", adapter({"instance": "b1:9404", **many_labels}, "0", now),
                key, "too_many_labels", fmt="prometheus"),
        Hostile("label too long",
                adapter({"instance": "b1:9404", "topic": "t" * (bounds.max_label_chars + 1)},
                        "0", now), key, "label_too_long", fmt="prometheus"),
        Hostile("labels repeated past the record's size", orjson.dumps(repeated), key,
                "too_many_label_chars", fmt="telegraf"),
        Hostile("identity too long", good_jolokia("c1", 1, now),
                b"c" * 300 + b"/1", "identity_too_long"),
    ]


def out_of_range_times(now: float, key: bytes) -> list[Hostile]:
    """Timestamps at and past the limits of Python's datetime, in the record and the sample."""
    return [
        Hostile("record time past year 9999", jolokia(URP, {"Value": 0}, now), key,
                "timestamp_out_of_range", timestamp_ms=BEYOND_DATETIME_MS),
        # the sample's skew from its record's time is checked first
        Hostile("sample time past year 9999",
                jolokia(URP, {"Value": 0}, BEYOND_DATETIME_MS / 1000), key, "timestamp_skew"),
        Hostile("sample time 1938", jolokia(URP, {"Value": 0}, YEAR_1938_S), key,
                "timestamp_skew"),
    ]


def hostile_identities(now: float, names: list[str] = HOSTILE_NAMES) -> list[Hostile]:
    """Good samples of clusters whose names quoting or SQL would break: accepted as they are."""
    return [Hostile(f"cluster {name!r}", good_jolokia(name, 1, now),
                    f"{name}/1".encode(), None) for name in names]


def broker_fanout(now: float, cluster: str, bounds: Bounds) -> Hostile:
    """One Jolokia-keyed cluster's record per broker is the norm; this one names far more
    brokers than the cluster may have (OTLP, one resource per broker): the first ones
    within the cap are kept, the record is quarantined for the rest."""
    encode = ENCODERS["otlp"]
    samples = [s for s in broker_samples(ClusterModel(cluster, [1, 2, 3], {"orders": 3}), 1, 15.0)
               if s.metric == "UnderReplicatedPartitions"]
    resources: list[object] = []
    for broker in range(1, bounds.max_brokers_per_cluster * 2 + 1):
        for _, value in encode(cluster, broker, now, samples):
            resources.extend(orjson.loads(value)["resourceMetrics"])
    return Hostile("broker fan-out", orjson.dumps({"resourceMetrics": resources}), None,
                   "too_many_brokers", also_bronze=True, fmt="otlp")


def every_class(now: float, rnd: random.Random, key: bytes, bounds: Bounds) -> list[Hostile]:
    """One record of every hostile class (the fan-out one in its own cluster)."""
    return [*malformed(now, rnd, key), *over_bounds(now, key, bounds),
            *out_of_range_times(now, key), *hostile_identities(now),
            broker_fanout(now, "fanout", bounds)]
