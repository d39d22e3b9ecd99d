"""Identity strings from hostile input: resolution stays linear, over-long ones are rejected.

Cluster and broker come from labels, record keys and instance addresses, all of which any
producer controls. A regex search whose cost grows with the square of a label (20 KB took
7.7 s) stalls the job on one record; an unbounded identity string ends up as a Delta key,
an exporter label and an alert field.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time

import orjson
import pyarrow as pa
import pytest

from streaming.config import IdentityConfig
from streaming.decode.common import DecodeError
from streaming.decode.records import (
    MAX_IDENTITY_CHARS,
    DecodeContext,
    IdentityResolver,
    decode_record_batch,
    reason_category,
)
from streaming.schemas import arrow_schema

UMI = "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"
HOSTILE_INSTANCE = "1" * (1 << 20) + "x"  # a digit run with no separator after it
RATIO = 200  # hostile / normal decode time; the quadratic search was ~10^6 times slower


def prometheus(labels: dict[str, str]) -> bytes:
    return orjson.dumps({"timestamp": "2026-03-01T12:00:00Z", "value": "1", "labels": labels,
                         "name": "kafka_server_replicamanager_underminisrpartitioncount"})


def jolokia_attribute() -> bytes:
    return orjson.dumps({"request": {"mbean": UMI, "attribute": "Value", "type": "read"},
                         "value": 1, "status": 200, "timestamp": 1772366400})


def records(values: list[bytes], keys: list[bytes | None] | None = None) -> pa.RecordBatch:
    n = len(values)
    stamp = pa.array([1772366400_000_000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return pa.RecordBatch.from_pydict({
        "key": keys or [None] * n, "value": values, "topic": ["kafka-metrics"] * n,
        "partition": [0] * n, "offset": list(range(n)), "timestamp": stamp,
        "timestampType": [0] * n,
    }, schema=arrow_schema("kafka_records"))


def categories(batch: pa.RecordBatch) -> list[str | None]:
    return [reason_category(r) if r else None for r in batch.column("reject_reason").to_pylist()]


def _decode_seconds(value: bytes, runs: int) -> float:
    batch = records([value])
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        decode_record_batch(batch, DecodeContext())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _timings(conn) -> None:  # noqa: ANN001 - a multiprocessing connection
    normal = _decode_seconds(prometheus({"instance": "kafka-12.prod:9404"}), 50)
    hostile = _decode_seconds(prometheus({"instance": HOSTILE_INSTANCE}), 3)
    conn.send((normal, hostile))


def test_hostile_megabyte_instance_label_resolves_in_linear_time() -> None:
    """Timed in a child process: the quadratic search would hold the GIL for hours."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=_timings, args=(child,), daemon=True)
    worker.start()
    if not parent.poll(60):
        worker.kill()
        pytest.fail("decoding one record with a 1 MB instance label took over 60 s")
    normal, hostile = parent.recv()
    worker.join()
    assert hostile < RATIO * max(normal, 1e-4), (normal, hostile)


def test_default_instance_regex_still_finds_the_broker_number() -> None:
    resolver = IdentityResolver(IdentityConfig(), {})
    for instance, broker in [("kafka-12.prod:9404", "12"), ("broker3", "3"),
                             ("http://kafka-2:8778/jolokia", "2"), ("kafka-7", "7"),
                             ("kafka-1.10.0.0.7.nip.io:9404", "1"),
                             ("kafka-0.kafka-headless.ns.svc.cluster.local:9404", "0"),
                             ("service:jmx:rmi:///jndi/rmi://kafka-3:9999/jmxrmi", "3")]:
        assert resolver.resolve({"instance": instance}, {}, {}, "t") == ("default", broker)


@pytest.mark.parametrize("instance", ["kafka-a:9404", "http://kafka:8778/jolokia"])
def test_a_ports_digits_are_no_broker_id_and_the_reason_names_the_instance(instance: str
                                                                           ) -> None:
    """kafka-a:9404 and kafka-b:9404 would both be broker 9404."""
    with pytest.raises(DecodeError) as raised:
        IdentityResolver(IdentityConfig(), {}).resolve({"instance": instance}, {}, {}, "t")
    assert raised.value.reason == "no_broker_identity"
    assert raised.value.detail.startswith(f"instance {instance!r} holds no broker id: map it")


@pytest.mark.parametrize("instance", [
    "10.0.0.7:9404", "10.0.0.8", "http://10.0.0.9:8778/jolokia", "[fd00::7]:9404",
    "[fe80::1%eth0]:9404", "fd00::7", "fd00:0:0:0:0:0:0:7", "::ffff:10.0.0.7",
    "10.0.0.7.nip.io:9404", "ip-10-0-0-7.ec2.internal:9404", "10-0-0-7.ns.pod.cluster.local",
    "service:jmx:rmi:///jndi/rmi://10.0.0.7:9999/jmxrmi"])
def test_an_ip_address_instance_is_no_broker_id(instance: str) -> None:
    """The default regex would read 10.0.0.7, 10.0.0.8 and 10.0.0.9 as one broker 10 (or
    spelt with dashes, as 7, across subnets), whose samples would then mix and keep each
    other fresh (a broker down would never go stale): the sample is quarantined with the fix
    in its reason, unless instance_map maps it."""
    resolver = IdentityResolver(IdentityConfig(), {})
    with pytest.raises(DecodeError) as raised:
        resolver.resolve({"instance": instance}, {}, {}, "t")
    assert raised.value.reason == "no_broker_identity"
    assert "identity.instance_map" in raised.value.detail
    mapped = IdentityResolver(IdentityConfig(instance_map={instance: "7"}), {})
    assert mapped.resolve({"instance": instance}, {}, {}, "t") == ("default", "7")


def test_a_regex_of_ones_own_reads_ip_addresses_too() -> None:
    """A fleet whose convention is the last octet says so with its own regex."""
    resolver = IdentityResolver(IdentityConfig(
        broker_from_instance_regex=r"\.(\d+)(?::\d+)?$"), {})
    assert resolver.resolve({"instance": "10.0.0.7:9404"}, {}, {}, "t") == ("default", "7")


def test_the_earlier_default_regex_in_a_config_means_the_default() -> None:
    """The example config showed the earlier default (which read a port's digits) as the
    default: a config copied from it gets today's."""
    from streaming.config import DEFAULT_INSTANCE_REGEX, EARLIER_DEFAULT_INSTANCE_REGEX

    identity = IdentityConfig(broker_from_instance_regex=EARLIER_DEFAULT_INSTANCE_REGEX)
    assert identity.broker_from_instance_regex == DEFAULT_INSTANCE_REGEX


@pytest.mark.parametrize("columnar", [True, False])
def test_an_ip_address_jolokia_agent_url_is_quarantined_with_the_fix(columnar: bool) -> None:
    """A Jolokia proxy read names its broker by the JMX service URL of its target."""
    url = "service:jmx:rmi:///jndi/rmi://10.0.0.7:9999/jmxrmi"
    value = orjson.dumps({"request": {"mbean": UMI, "attribute": "Value", "type": "read",
                                      "target": {"url": url}},
                          "value": 1, "status": 200, "timestamp": 1772366400})
    out = decode_record_batch(records([value]), DecodeContext(), columnar=columnar)
    assert [r for r in out.column("reject_reason").to_pylist()] == [
        f"no_broker_identity: instance {url!r} is an IP address, whose digits name no broker: "
        "map it to its broker id in identity.instance_map, or label the samples with the "
        "broker"]


@pytest.mark.parametrize("labels", [
    {"instance": "kafka-1-" + "a" * 300 + ":9404"},
    {"broker": "b" * (MAX_IDENTITY_CHARS + 1)},
    {"broker": "1", "cluster": "c" * (MAX_IDENTITY_CHARS + 1)},
], ids=["long-instance", "long-broker", "long-cluster"])
def test_over_long_identity_label_is_quarantined_with_its_reason(labels: dict[str, str]) -> None:
    out = decode_record_batch(records([prometheus(labels)]), DecodeContext())
    assert categories(out) == ["identity_too_long"]
    assert len(out.column("reject_reason")[0].as_py()) <= 500


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize("key", [
    b"c" * (MAX_IDENTITY_CHARS + 1) + b"/1", b"prod/" + b"9" * (MAX_IDENTITY_CHARS + 1),
    b"k" * (1 << 20),
], ids=["long-cluster", "long-broker", "megabyte-key"])
def test_over_long_identity_from_record_key_is_quarantined_in_both_decoders(
        key: bytes, columnar: bool) -> None:
    batch = records([jolokia_attribute(), jolokia_attribute()], [key, b"prod/1"])
    out = decode_record_batch(batch, DecodeContext(max_skew_seconds=1e12), columnar=columnar)
    assert categories(out) == ["identity_too_long", None]
    assert out.column("cluster").to_pylist()[1] == "prod"


def test_identity_at_the_limit_is_kept() -> None:
    name = "c" * MAX_IDENTITY_CHARS
    out = decode_record_batch(records([prometheus({"broker": "1", "cluster": name})]),
                              DecodeContext(max_skew_seconds=1e12))
    assert categories(out) == [None]
    assert out.column("cluster").to_pylist() == [name]


@pytest.mark.parametrize("columnar", [True, False])
def test_a_broker_named_as_a_whole_cluster_is_quarantined_in_both_decoders(
        columnar: bool) -> None:
    """`*` is how the incidents, the pages and the reports name a cluster-wide incident's
    broker: a sample claiming it as its broker would page as the whole cluster, with no
    broker named. From a label it is reserved_identity; a record key names a broker only by
    its id, so `prod/*` names none, in either Jolokia decoder."""
    out = decode_record_batch(records([prometheus({"broker": "*", "cluster": "prod"}),
                                       prometheus({"broker": "1", "cluster": "prod"})]),
                              DecodeContext(max_skew_seconds=1e12))
    assert categories(out) == ["reserved_identity", None]
    batch = records([jolokia_attribute(), jolokia_attribute()], [b"prod/*", b"prod/1"])
    out = decode_record_batch(batch, DecodeContext(max_skew_seconds=1e12), columnar=columnar)
    assert categories(out) == ["no_broker_identity", None]
    assert out.column("broker").to_pylist()[1] == "1"
