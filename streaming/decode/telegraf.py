"""Telegraf JSON serializer output (jolokia2_agent input) -> observations.

Layout (Telegraf `data_format = "json"`): one metric per message

    {"name": "kafka_replica_manager", "tags": {"host": "kafka-1", "jolokia_agent_url": ...},
     "fields": {"UnderMinIsrPartitionCount.Value": 0, "IsrShrinksPerSec.Count": 12, ...},
     "timestamp": 1714564800}

or the batch form {"metrics": [ ... ]} (json_batch / batch output).

- (measurement, field) is looked up in the catalog (jolokia2 layout: `field_prefix = "$1."`
  gives "<MBean name>.<attribute>"); unknown fields are kept with metric = null and
  raw_name "<measurement>/<field>". String and boolean fields are not metrics and are skipped,
  unless the catalog names the field: that one not a number is a broken exporter, rejected
  (wrong_type) as the Jolokia decoder rejects it, not dropped unseen; null is no value.
- Tags are labels; identity tags (host, jolokia_agent_url, cluster, ...) are resolved and
  stripped by records.py.
- `timestamp` is a count of `json_timestamp_units` (default 1s), which Telegraf truncates
  to a power of ten from 1ns to 1s (20ms counts in 10ms). The unit is recognised by
  magnitude: scaled by tens until below 1e10, a count in any of them is epoch seconds for
  any time from 2001-09-09 to 2286-11-20. With `json_timestamp_format` it is text: RFC
  3339 layouts are read, others quarantined (bad_timestamp).
"""

from __future__ import annotations

import math
from typing import Any

from streaming.catalog import Catalog
from streaming.decode.common import (
    LIMITS,
    DecodeError,
    Observation,
    Observations,
    Rejected,
    check_labels,
    each_item,
)
from streaming.decode.prometheus import parse_timestamp

# Epoch seconds below this are times before 2286-11-20: a count in any coarser unit.
SECONDS_BELOW = 1e10


def _seconds(raw: Any) -> float:
    if isinstance(raw, str):  # json_timestamp_format, e.g. "2006-01-02T15:04:05Z07:00"
        return parse_timestamp(raw)
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise DecodeError("wrong_type", "timestamp must be a number (epoch, json_timestamp_units) "
                                        "or RFC 3339 text (json_timestamp_format)")
    ts = float(raw)
    if not math.isfinite(ts):
        raise DecodeError("wrong_type", "timestamp is not finite")
    # a count of 10 ** -k seconds, k at most 9 (nanoseconds); one power of ten above a
    # count in seconds is past the year 2286 and below one before 2001
    tens = 0
    while abs(ts) >= SECONDS_BELOW * 10 ** tens and tens < 9:
        tens += 1
    return raw / 10 ** tens if tens else ts


def _metric(catalog: Catalog, doc: Any) -> list[Observation | Rejected]:
    if not isinstance(doc, dict):
        raise DecodeError("wrong_type", "a Telegraf metric must be an object")
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise DecodeError("missing_field", "name")
    fields = doc.get("fields")
    if not isinstance(fields, dict):
        raise DecodeError("missing_field" if fields is None else "wrong_type", "fields (object)")
    tags = doc.get("tags")
    if tags is None:
        tags = {}
    elif not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise DecodeError("wrong_type", "tags must be an object of strings")
    # every field's sample carries the tags: over the label limits, the metric is refused
    # once, not each of its fields after copying them
    check_labels(tags, LIMITS.get())
    if "timestamp" not in doc:
        raise DecodeError("missing_field", "timestamp")
    ts = _seconds(doc["timestamp"])
    out = Observations()
    for field_name, raw in fields.items():
        found = catalog.from_telegraf(name, field_name)
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            if found is not None and raw is not None:
                out.append(Rejected("wrong_type", f"{name}/{field_name[:120]}="
                                                  f"{str(raw)[:60]!r} is not a number"))
            continue
        value = float(raw)
        if found is None:
            raw_name = f"{name}/{field_name}"
            out.append(Observation(ts, None, "Value", value, "gauge",
                                   {**tags, "raw_name": raw_name}, raw_name=raw_name))
            continue
        metric, attribute = found
        out.append(Observation(ts, metric.name, attribute, value, metric.sample_kind(attribute),
                               tags))  # shared by the metric's fields: read only
    return out


def decode(doc: Any, catalog: Catalog) -> tuple[list[Observation | Rejected], dict[str, str]]:
    if isinstance(doc, dict) and "metrics" in doc and "fields" not in doc:
        metrics = doc["metrics"]
        if not isinstance(metrics, list):
            raise DecodeError("wrong_type", "metrics must be a list")
        return each_item(metrics, lambda item: _metric(catalog, item)), {}
    return _metric(catalog, doc), {}


def looks_like(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    if "fields" in doc:
        return "request" not in doc and "resourceMetrics" not in doc and "labels" not in doc
    metrics = doc.get("metrics")
    return (isinstance(metrics, list) and bool(metrics) and isinstance(metrics[0], dict)
            and "fields" in metrics[0])
