"""OTLP JSON metrics (OTel Collector kafka exporter, `encoding: otlp_json`) -> observations.

Layout (opentelemetry-proto, JSON mapping): resourceMetrics[].resource.attributes and
scopeMetrics[].metrics[], each metric one of gauge / sum / histogram / summary with
dataPoints[]; int64 values (`asInt`) and times (`timeUnixNano`) are JSON strings, attribute
values are {stringValue | intValue | doubleValue | boolValue | arrayValue | kvlistValue}.

- Resource attributes are identity hints (host.name, service.instance.id, a cluster
  attribute, ...). One message may hold several resources (one per scraped broker), so every
  observation carries its own resource's attributes as hints; they never become labels, so
  process.pid, telemetry.sdk.* and the like do not split series.
- Attribute values are written as the Collector writes them as labels: an intValue as its
  int64 (a non-integer is wrong_type), a doubleValue in its shortest form (3.0 is "3").
- Data point attributes are labels; the catalog's matchers (e.g. operation=shrink on
  kafka.isr.operation.count) are consumed.
- The catalog, not the OTLP instrument, says what a value is: the Java agent writes
  kafka.isr.operation.count as an updowncounter (a non-monotonic sum) although it is the
  meter's cumulative Count, and it is decoded as a counter.
- Temporality: cumulative sums are decoded as they are (a monotonic cumulative sum is the
  meter Count). Delta sums carry the increase since the previous export, which can only be
  turned into a Count by a stateful accumulator per series that survives restarts and
  partition moves; a stateless decoder would invent counter resets. So delta (and
  unspecified) temporality sum and histogram points are quarantined with reason
  `unsupported_temporality`:
  configure the collector pipeline to keep cumulative temporality (the JMX receivers'
  default; do not add cumulativetodelta). Gauges in the same message are still decoded.
- A point flagged FLAG_NO_RECORDED_VALUE (OTLP's staleness marker) is skipped, like a
  Jolokia entry with an error status: no value, so no sample and no false zero. A record
  left with no sample at all is quarantined as `no_samples` (records.py), not dropped.
- A broken resource, scope, metric or data point is quarantined in its place, named by
  where it sits, and the message's other samples are kept (common.each_item): one export carries
  every metric of the collector's brokers.
- Histograms and summaries are not in the catalog; their count and sum are kept as
  unknown observations (metric = null, raw_name, attribute Count / Sum).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import orjson

from streaming.catalog import Catalog
from streaming.decode.common import (
    DecodeError,
    Observation,
    Observations,
    Rejected,
    each_item,
)
from streaming.number_text import plain_float, plain_int

TEMPORALITY_DELTA = {1, "AGGREGATION_TEMPORALITY_DELTA"}
TEMPORALITY_CUMULATIVE = {2, "AGGREGATION_TEMPORALITY_CUMULATIVE"}
FLAG_NO_RECORDED_VALUE = 1


@dataclass(slots=True)
class ResourceObservation(Observation):
    """An observation with its own identity hints (its resource's attributes)."""

    hints: dict[str, str] = field(default_factory=dict)


# The JSON types each scalar AnyValue variant may hold (int64 as a number or a decimal
# string, a double as a number or "NaN"/"Infinity", bytes as base64 text).
_VARIANTS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("stringValue", (str,)), ("intValue", (int, str)), ("boolValue", (bool,)),
    ("doubleValue", (int, float, str)), ("bytesValue", (str,)))


def _any_value(value: Any) -> str:
    """An attribute's value as label text. A variant of another JSON type is malformed
    (wrong_type), not a label spelled as Python prints it; null is the variant unset, as
    proto3's JSON mapping reads it."""
    if not isinstance(value, dict):
        raise DecodeError("wrong_type", "an attribute value must be an AnyValue object")
    for key, types in _VARIANTS:
        raw = value.get(key)
        if raw is None:
            continue
        if not isinstance(raw, types) or (isinstance(raw, bool) and key != "boolValue"):
            raise DecodeError("wrong_type", f"{key} of type {type(raw).__name__}")
        if key == "boolValue":
            return "true" if raw else "false"
        if key == "intValue":
            return str(_integer(raw, key, INT64))
        if key == "doubleValue":
            return _double_text(_number(raw, key))
        return cast(str, raw)  # stringValue or bytesValue, both checked to be str above
    if "arrayValue" in value or "kvlistValue" in value:
        return orjson.dumps(value).decode()
    return ""


def _double_text(value: float) -> str:
    """A double attribute as the Collector writes it as a label (Go's shortest decimal, no
    ".0"): 3.0 is "3", so a broker id sent as a double names broker 3."""
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _attributes(items: Any, where: str) -> dict[str, str]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise DecodeError("wrong_type", f"{where}.attributes must be a list")
    out: dict[str, str] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise DecodeError("wrong_type", f"{where}.attributes entries need a string key")
        out[item["key"]] = _any_value(item.get("value", {}))
    return out


# The protobuf types' ranges (proto3 JSON mapping): asInt is sfixed64, counts and
# timeUnixNano are fixed64. A value outside them no exporter serialized.
INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)


def _number(raw: Any, what: str, integer: tuple[int, int] | None = None) -> float:
    """A double, or with `integer` the (low, high) range of an integer field, as JSON
    numbers or the numeric strings the JSON mapping writes 64-bit integers as."""
    if isinstance(raw, bool):
        raise DecodeError("wrong_type", f"{what} is a boolean")
    if integer is None:
        if isinstance(raw, int | float):
            return float(raw)
        if isinstance(raw, str):
            try:  # "NaN", "Infinity" as doubles
                return plain_float(raw)
            except ValueError as err:
                raise DecodeError("wrong_type", f"{what} {raw[:40]!r} is not a number") from err
        raise DecodeError("wrong_type", f"{what} must be a number or a numeric string")
    return float(_integer(raw, what, integer))


def _integer(raw: Any, what: str, bounds: tuple[int, int]) -> int:
    """An integer field within its type's (low, high), exact (an int64 label past 2**53
    keeps its digits), as a JSON number or the numeric string the mapping writes."""
    if isinstance(raw, bool):
        raise DecodeError("wrong_type", f"{what} is a boolean")
    if isinstance(raw, float):
        if not raw.is_integer():
            raise DecodeError("wrong_type", f"{what} {raw!r} is not an integer")
        whole = int(raw)
    elif isinstance(raw, int):
        whole = raw
    elif isinstance(raw, str):
        try:
            whole = plain_int(raw)
        except ValueError as err:
            raise DecodeError("wrong_type", f"{what} {raw[:40]!r} is not an integer") from err
    else:
        raise DecodeError("wrong_type", f"{what} must be an integer or an integer string")
    low, high = bounds
    if not low <= whole <= high:
        raise DecodeError("wrong_type", f"{what} {str(raw)[:40]} is outside its type's range")
    return whole


def _time(point: dict[str, Any]) -> float | None:
    raw = point.get("timeUnixNano")
    if raw is None:
        return None
    nanos = _number(raw, "timeUnixNano", integer=UINT64)  # fixed64, as a string
    return nanos / 1e9 if nanos else None


def _list(body: dict[str, Any], key: str, where: str) -> list[Any]:
    """body[key] as a list; absent or null is empty (the JSON mapping leaves empty
    repeated fields out), anything else is malformed."""
    items = body.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise DecodeError("wrong_type", f"{where} must be a list")
    return items


def _points(metric: dict[str, Any], kind: str) -> list[Any]:
    body = metric[kind]
    if not isinstance(body, dict):
        raise DecodeError("wrong_type", f"{kind} must be an object")
    return _list(body, "dataPoints", f"{kind}.dataPoints")


def _point_observations(catalog: Catalog, name: str, kind: str, delta: bool, point: Any,
                        hints: dict[str, str]) -> list[Any]:
    """The observations of one data point of metric `name` (a `kind` body)."""
    if not isinstance(point, dict):
        raise DecodeError("wrong_type", "a data point must be an object")
    shown = name[:120]  # in a reason: a name may be as long as the message
    flags = point.get("flags")
    if flags is not None and (isinstance(flags, bool) or not isinstance(flags, int)):
        raise DecodeError("wrong_type", f"{shown}: flags must be an integer")
    if flags and flags & FLAG_NO_RECORDED_VALUE:
        return []
    if delta:
        return [Rejected("unsupported_temporality", f"{shown}: delta/unspecified {kind} "
                                                    "points cannot become cumulative counts")]
    if kind in ("histogram", "summary"):
        labels = {**_attributes(point.get("attributes"), shown), "raw_name": name}
        ts = _time(point)
        return [ResourceObservation(ts, None, attribute, _number(point[key], key, integer),
                                    "gauge", labels, name, hints)
                for attribute, key, integer in (("Count", "count", UINT64), ("Sum", "sum", None))
                if key in point]
    if "asInt" in point:
        value = _number(point["asInt"], "asInt", integer=INT64)
    elif "asDouble" in point:
        value = _number(point["asDouble"], "asDouble")
    else:
        return [Rejected("missing_field", f"{shown}: data point without asInt/asDouble")]
    labels = _attributes(point.get("attributes"), shown)
    ts = _time(point)
    found = catalog.from_otel(name, labels)
    if found is None:
        labels["raw_name"] = name
        return [ResourceObservation(ts, None, "Value", value, "gauge", labels, name, hints)]
    metric_def, attribute, consumed = found
    for key in consumed:
        labels.pop(key, None)
    return [ResourceObservation(ts, metric_def.name, attribute, value,
                                metric_def.sample_kind(attribute), labels, None, hints)]


def _metric_observations(catalog: Catalog, metric: Any, hints: dict[str, str], where: str,
                         out: Observations) -> None:
    """One metric's data points into `out`; a broken point is quarantined alone."""
    if not isinstance(metric, dict) or not isinstance(metric.get("name"), str):
        raise DecodeError("missing_field", "metrics[].name")
    name = metric["name"]
    if "gauge" in metric:
        kind = "gauge"
    elif "sum" in metric:
        kind = "sum"
    elif "histogram" in metric or "summary" in metric:
        kind = "histogram" if "histogram" in metric else "summary"
    else:
        return  # exponentialHistogram and future types: nothing the catalog knows
    # sums and histograms say their temporality (a summary is always cumulative)
    delta = False
    if kind in ("sum", "histogram"):
        body = metric[kind]
        temporality = body.get("aggregationTemporality") if isinstance(body, dict) else None
        delta = not isinstance(temporality, int | str) or temporality not in TEMPORALITY_CUMULATIVE
    each_item(_points(metric, kind), lambda point: _point_observations(
        catalog, name, kind, delta, point, hints), f"{name[:120]} ({where}).dataPoints", out)


def _resource_observations(catalog: Catalog, resource_metrics: Any, where: str,
                           out: Observations) -> None:
    """One resource's metrics into `out`, named by its attributes (the identity hints): a
    broken scope or metric is quarantined alone; a broken resource, whole."""
    if not isinstance(resource_metrics, dict):
        raise DecodeError("wrong_type", "resourceMetrics entries must be objects")
    resource = resource_metrics.get("resource")
    if resource is None:
        resource = {}
    if not isinstance(resource, dict):
        raise DecodeError("wrong_type", "resource must be an object")
    hints = _attributes(resource.get("attributes"), "resource")

    def scope_observations(indexed: tuple[int, Any]) -> None:
        index, scope = indexed
        if not isinstance(scope, dict):
            raise DecodeError("wrong_type", "scopeMetrics entries must be objects")
        path = f"{where}.scopeMetrics[{index}].metrics"
        each_item(list(enumerate(_list(scope, "metrics", "metrics"))),
                  lambda pair: _metric_observations(catalog, pair[1], hints,
                                                    f"{path}[{pair[0]}]", out), path, out)

    each_item(list(enumerate(_list(resource_metrics, "scopeMetrics", "scopeMetrics"))),
              scope_observations, f"{where}.scopeMetrics", out)


def decode(doc: Any, catalog: Catalog) -> tuple[list[Any], dict[str, str]]:
    """Observations of one ExportMetricsServiceRequest. A broken resource, scope, metric or
    data point is quarantined in its place, named by where it sits (each_item), and the
    message's others are kept: one collector export holds every metric of its brokers, and
    one malformed point must not silence them all (a broker without samples goes stale and
    pages)."""
    if not isinstance(doc, dict):
        raise DecodeError("wrong_type", "an OTLP metrics message must be an object")
    resources = doc.get("resourceMetrics")
    if not isinstance(resources, list):
        raise DecodeError("missing_field", "resourceMetrics")
    out = Observations()
    each_item(list(enumerate(resources)), lambda pair: _resource_observations(
        catalog, pair[1], f"resourceMetrics[{pair[0]}]", out), "resourceMetrics", out)
    return out, {}


def looks_like(doc: Any) -> bool:
    return isinstance(doc, dict) and "resourceMetrics" in doc and "request" not in doc
