"""Message layouts the simulator writes; each takes one scrape's samples of one broker.

Every non-Jolokia layout is generated from the catalog's names for that transport (and
naming scheme), the only thing the simulator shares with decode. A sample the format has no
name for is simply not written: that format yields no data for it, never a zero.
Identity sits where each transport puts it: Prometheus labels instance="kafka-<broker>:9404"
and cluster; OTLP resource attributes host.name and kafka.cluster.alias; Telegraf tags host
and cluster (global_tags). The default IdentityConfig resolves all of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from streaming.catalog import Catalog, NamedSeries, attribute_quantile, load_catalog
from streaming.simulate.samples import Sample

PROMETHEUS_SCHEMES = ("strimzi", "upstream", "confluent", "grafanacloud", "bitnami", "namelabel")
OTEL_SOURCES = {"otlp": "jmx-scraper", "otlp-javaagent": "javaagent"}

# (cluster, broker, epoch seconds, samples) -> list of (key, value) records
Encoder = Callable[[str, int, float, list[Sample]], list[tuple[bytes | None, bytes]]]


def _object_name(catalog: Catalog, sample: Sample) -> tuple[str, str]:
    metric = catalog.metrics[sample.metric]
    mbean = metric.jmx_mbean or ""
    if sample.labels:
        domain, _, props = mbean.partition(":")
        extra = ",".join(f"{k}={v}" for k, v in sample.labels.items())
        mbean = f"{domain}:{props},{extra}"
    attribute = metric.jmx_attribute or sample.attribute
    return mbean, attribute


def jolokia(cluster: str, broker: int, ts: float, samples: list[Sample]) -> list[
        tuple[bytes | None, bytes]]:
    """A Jolokia bulk read response, one entry per MBean, keyed by cluster/broker."""
    catalog = load_catalog()
    entries: dict[str, dict] = {}
    for sample in samples:
        mbean, attribute = _object_name(catalog, sample)
        entry = entries.setdefault(mbean, {
            "request": {"mbean": mbean, "type": "read"},
            "value": {},
            "timestamp": int(ts),
            "status": 200,
        })
        entry["value"][attribute] = sample.value
    return [(f"{cluster}/{broker}".encode(), orjson.dumps(list(entries.values())))]


def jolokia_single(cluster: str, broker: int, ts: float, samples: list[Sample]) -> list[
        tuple[bytes | None, bytes]]:
    """One Jolokia read response per sample, MBean and attribute named in the request (as a
    per-attribute poller sends them): one sample per record, the decoder's worst case."""
    catalog = load_catalog()
    key = f"{cluster}/{broker}".encode()
    out: list[tuple[bytes | None, bytes]] = []
    for sample in samples:
        mbean, attribute = _object_name(catalog, sample)
        out.append((key, orjson.dumps({
            "request": {"mbean": mbean, "attribute": attribute, "type": "read"},
            "value": sample.value, "timestamp": int(ts), "status": 200,
        })))
    return out


def go_float(value: float) -> str:
    """Value text as prometheus-kafka-adapter writes it (Go's shortest float formatting)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.cache
def _prometheus_names(scheme: str) -> tuple[dict[tuple[str, str], NamedSeries],
                                            dict[str, NamedSeries]]:
    """(metric, attribute) -> name entry, and metric -> quantile entry, for one scheme."""
    exact: dict[tuple[str, str], NamedSeries] = {}
    quantiles: dict[str, NamedSeries] = {}
    for entry in load_catalog().prometheus:
        if scheme not in entry.tags:
            continue
        if entry.quantile:
            quantiles.setdefault(entry.metric.name, entry)
        else:
            exact.setdefault((entry.metric.name, entry.attribute or ""), entry)
    return exact, quantiles


def prometheus_encoder(scheme: str) -> Encoder:
    """prometheus-kafka-adapter JSON, one message per sample, names of one jmx_exporter scheme."""

    def encode(cluster: str, broker: int, ts: float, samples: list[Sample]) -> list[
            tuple[bytes | None, bytes]]:
        exact, quantiles = _prometheus_names(scheme)
        timestamp = _rfc3339(ts)
        out: list[tuple[bytes | None, bytes]] = []
        for sample in samples:
            entry = exact.get((sample.metric, sample.attribute))
            extra: dict[str, str] = {}
            if entry is None:
                entry = quantiles.get(sample.metric)
                quantile = attribute_quantile(sample.attribute)
                if entry is None or quantile is None:
                    continue  # this scheme does not export the sample
                extra["quantile"] = quantile
            labels = {"__name__": entry.name, "instance": f"kafka-{broker}:9404",
                      "job": "kafka", "cluster": cluster, **dict(entry.match),
                      **sample.labels, **extra}
            out.append((None, orjson.dumps({"timestamp": timestamp,
                                            "value": go_float(sample.value),
                                            "name": entry.name, "labels": labels})))
        return out

    encode.__name__ = f"prometheus_{scheme}"
    return encode


@functools.cache
def _otel_names(source: str) -> dict[tuple[str, str], NamedSeries]:
    names: dict[tuple[str, str], NamedSeries] = {}
    for entry in load_catalog().otel:
        if source in entry.tags and entry.attribute:
            names.setdefault((entry.metric.name, entry.attribute), entry)
    return names


def _otel_attributes(items: dict[str, str]) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"stringValue": v}} for k, v in items.items()]


def _otel_point(value: float, labels: dict[str, str], nanos: str) -> dict[str, Any]:
    point: dict[str, Any] = {"attributes": _otel_attributes(labels),
                             "startTimeUnixNano": nanos, "timeUnixNano": nanos}
    if value.is_integer() and abs(value) < 2**63:
        point["asInt"] = str(int(value))  # OTLP JSON writes int64 as a string
    else:
        point["asDouble"] = value
    return point


def otlp_encoder(source: str) -> Encoder:
    """OTLP JSON as the Collector's kafka exporter writes it (otlp_json), one message per scrape."""

    def encode(cluster: str, broker: int, ts: float, samples: list[Sample]) -> list[
            tuple[bytes | None, bytes]]:
        names = _otel_names(source)
        nanos = str(int(ts) * 1_000_000_000)
        metrics: dict[str, dict[str, Any]] = {}
        for sample in samples:
            entry = names.get((sample.metric, sample.attribute))
            if entry is None:
                continue
            metric = metrics.get(entry.name)
            if metric is None:
                if entry.instrument == "gauge":
                    body: dict[str, Any] = {"gauge": {"dataPoints": []}}
                else:  # counter / updowncounter: cumulative sums, monotonic only for counters
                    body = {"sum": {"aggregationTemporality": 2, "dataPoints": []}}
                    if entry.instrument == "counter":
                        body["sum"]["isMonotonic"] = True
                metric = metrics[entry.name] = {"name": entry.name, "unit": entry.metric.unit,
                                                **body}
            kind = "gauge" if "gauge" in metric else "sum"
            metric[kind]["dataPoints"].append(
                _otel_point(sample.value, {**dict(entry.match), **sample.labels}, nanos))
        if not metrics:
            return []
        resource = {"attributes": _otel_attributes({
            "service.name": "kafka", "host.name": f"kafka-{broker}",
            "kafka.cluster.alias": cluster})}
        doc = {"resourceMetrics": [{
            "resource": resource,
            "scopeMetrics": [{"scope": {"name": f"io.opentelemetry.{source}"},
                              "metrics": list(metrics.values())}],
        }]}
        return [(None, orjson.dumps(doc))]

    encode.__name__ = f"otlp_{source}"
    return encode


@functools.cache
def _telegraf_names() -> dict[tuple[str, str], tuple[str, str]]:
    names: dict[tuple[str, str], tuple[str, str]] = {}
    for entry in load_catalog().telegraf:
        measurement, field_name = entry.name.split("\x00")
        names.setdefault((entry.metric.name, entry.attribute or ""), (measurement, field_name))
    return names


def _telegraf_metrics(cluster: str, broker: int, ts: float, samples: list[Sample]
                      ) -> list[dict[str, Any]]:
    names = _telegraf_names()
    grouped: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]] = {}
    for sample in samples:
        found = names.get((sample.metric, sample.attribute))
        if found is None:
            continue
        measurement, field_name = found
        key = (measurement, tuple(sample.labels.items()))
        metric = grouped.get(key)
        if metric is None:
            tags = {"cluster": cluster, "host": f"kafka-{broker}",
                    "jolokia_agent_url": "http://localhost:8778/jolokia", **sample.labels}
            metric = grouped[key] = {"fields": {}, "name": measurement, "tags": tags,
                                     "timestamp": int(ts)}
        value = sample.value
        metric["fields"][field_name] = int(value) if value.is_integer() else value
    return list(grouped.values())


def telegraf(cluster: str, broker: int, ts: float, samples: list[Sample]) -> list[
        tuple[bytes | None, bytes]]:
    """Telegraf JSON serializer, one message per metric (Kafka output default)."""
    return [(None, orjson.dumps(m)) for m in _telegraf_metrics(cluster, broker, ts, samples)]


def telegraf_batch(cluster: str, broker: int, ts: float, samples: list[Sample]) -> list[
        tuple[bytes | None, bytes]]:
    """Telegraf JSON serializer batch form {"metrics": [...]} (use_batch_format = true)."""
    metrics = _telegraf_metrics(cluster, broker, ts, samples)
    return [(None, orjson.dumps({"metrics": metrics}))] if metrics else []


ENCODERS: dict[str, Encoder] = {
    "jolokia": jolokia,
    "jolokia-single": jolokia_single,
    **{f"prometheus-{scheme}": prometheus_encoder(scheme) for scheme in PROMETHEUS_SCHEMES},
    **{name: otlp_encoder(source) for name, source in OTEL_SOURCES.items()},
    "telegraf": telegraf,
    "telegraf-batch": telegraf_batch,
}
