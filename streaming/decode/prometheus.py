"""prometheus-kafka-adapter JSON (Prometheus remote_write -> Kafka) -> observations.

Layout (Telefonica/prometheus-kafka-adapter, schemas/metric.avsc): one sample per message,
every field a string, no record key:

    {"timestamp": "2024-05-01T12:00:00Z", "value": "42", "name": "kafka_...",
     "labels": {"__name__": "kafka_...", "instance": "kafka-1:9404", "job": "kafka", ...}}

- `timestamp` is RFC 3339, second precision in practice (fractions and offsets accepted,
  "t" and "z" in either case; no offset is UTC). ISO 8601's other forms, which
  datetime.fromisoformat also reads (a date alone, a time without seconds, week dates, the
  basic format), are bad_timestamp: a date alone would be read as midnight.
- `value` is Go's float formatting: "NaN", "+Inf", "-Inf" parse to non-finite floats, which
  the hard rules in records.py quarantine (non_finite_value). Remote-write staleness markers
  arrive as "NaN" and land there too.
- Labels carry identity (instance, cluster, ...); records.py resolves and strips them.
- The name (plus label matchers, plus `quantile`) is looked up in the catalog: every naming
  scheme listed there decodes to the same canonical metric/attribute; matcher labels (the
  `name` label of the name-label style, `quantile`) are consumed. Unknown series are kept with
  metric = null and `raw_name`.
A JSON array of such objects is accepted too (one record, several samples).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from streaming.bounded_cache import cached_when_short
from streaming.catalog import Catalog
from streaming.decode.common import DecodeError, Observation, Observations, each_item
from streaming.number_text import plain_float

NAME_LABEL = "__name__"
RFC_3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
                      r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})?")


@cached_when_short(4096)
def parse_timestamp(text: str) -> float:
    """RFC 3339 -> epoch seconds; a time without offset is UTC."""
    if RFC_3339.fullmatch(text) is None:
        raise DecodeError("bad_timestamp", f"not RFC 3339: {text[:60]!r}")
    try:
        # RFC 3339 section 5.6 allows a lowercase "t" and "z"; fromisoformat reads only "Z".
        parsed = datetime.fromisoformat(text[:-1] + "Z" if text.endswith("z") else text)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    except (ValueError, OverflowError) as err:
        raise DecodeError("bad_timestamp", f"not RFC 3339: {text[:60]!r}") from err


def parse_value(text: Any) -> float:
    """The adapter writes values as strings; plain JSON numbers are accepted as well."""
    if isinstance(text, str):
        try:
            return plain_float(text)  # "NaN", "+Inf", "-Inf" included
        except ValueError as err:
            raise DecodeError("wrong_type", f"value {text[:60]!r} is not a number") from err
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    raise DecodeError("wrong_type", "value must be a string holding a number")


def _sample(catalog: Catalog, doc: Any) -> Observation:
    if not isinstance(doc, dict):
        raise DecodeError("wrong_type", "a prometheus-kafka-adapter sample must be an object")
    labels = doc.get("labels")
    if labels is None:
        labels = {}
    elif not isinstance(labels, dict):
        raise DecodeError("wrong_type", "labels must be an object of strings")
    name = doc.get("name")
    if name is None:
        name = labels.get(NAME_LABEL)
    if not isinstance(name, str) or not name:
        raise DecodeError("missing_field", "name")
    if "value" not in doc:
        raise DecodeError("missing_field", "value")
    value = parse_value(doc["value"])
    ts_text = doc.get("timestamp")
    if not isinstance(ts_text, str):
        raise DecodeError("missing_field" if ts_text is None else "wrong_type",
                          "timestamp (RFC 3339 string)")
    ts = parse_timestamp(ts_text)
    clean: dict[str, str] = {}
    for key, label_value in labels.items():
        if key == NAME_LABEL:
            continue
        if not isinstance(label_value, str):
            raise DecodeError("wrong_type", f"label {str(key)[:60]} is not a string")
        clean[key] = label_value
    found = catalog.from_prometheus(name, clean)
    if found is None:
        clean["raw_name"] = name
        return Observation(ts, None, "Value", value, "gauge", clean, raw_name=name)
    metric, attribute, consumed = found
    for key in consumed:
        clean.pop(key, None)
    return Observation(ts, metric.name, attribute, value, metric.sample_kind(attribute), clean)


def decode(doc: Any, catalog: Catalog) -> tuple[list[Observation], dict[str, str]]:
    """Observations of one message; identity travels in the labels, so no record hints."""
    if isinstance(doc, list):
        return each_item(doc, lambda item: _sample(catalog, item)), {}
    out = Observations()
    out.append(_sample(catalog, doc))
    return out, {}


def looks_like(doc: Any) -> bool:
    first = doc[0] if isinstance(doc, list) and doc else doc
    return (
        isinstance(first, dict)
        and isinstance(first.get("labels"), dict)
        and "value" in first
        and "request" not in first
        and "fields" not in first
        and "resourceMetrics" not in first
    )
