"""Jolokia JMX read responses (single object or bulk array) -> observations.

Layouts handled (Jolokia protocol, "read" operation):
- request names one MBean, no attribute:  value = {attribute: number, ...}
- request names one MBean and attribute:  value = number
- request names a pattern (wildcards):    value = {objectName: {attribute: number, ...}},
                                           whether or not it names attributes
Entries with status != 200 are skipped and an MBean whose ObjectName does not parse is
rejected alone (`bad_mbean`): a bulk read keeps its other entries' samples. A record
whose every entry failed is rejected as `source_error` with Jolokia's error, so an agent
that cannot reach its MBeans shows in quarantine instead of vanishing. Non-numeric
attributes (RateUnit, EventType) are not metrics and are skipped. Jolokia's `timestamp` is
epoch seconds.

A request's target url (proxy mode) is an identity hint for the record's samples. A bulk read
through a proxy may name a different target per entry (one per broker): then each entry's
samples carry their own entry's url, and an entry without a target (the proxy's own JVM) none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from streaming.bounded_cache import ANSWER_KEY_CHARS, AnswerCache
from streaming.catalog import Catalog, jmx_series_props, parse_object_name
from streaming.decode.common import DecodeError, Observation, Observations, Rejected

IDENTITY_PROPS = ("type", "name")
HINT = "jolokia_agent_url"
# (MBean, attribute) resolutions kept per catalog: a fleet's per-partition names, each back
# every scrape
ANSWERS_KEPT = 200_000


@dataclass(slots=True)
class TargetObservation(Observation):
    """An observation with its own entry's target as identity hints (records.py takes them
    in place of the record's)."""

    hints: dict[str, str] = field(default_factory=dict)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class ParsedMBean:
    """An ObjectName parsed on first use and then kept: one MBean's attributes share it, so
    a name too long to cache is parsed once for all of them, not once each."""

    __slots__ = ("object_name", "_parts")

    def __init__(self, object_name: str) -> None:
        self.object_name = object_name
        self._parts: tuple[str, dict[str, str], dict[str, str], dict[str, str]] | None = None

    def parts(self) -> tuple[str, dict[str, str], dict[str, str], dict[str, str]]:
        """(domain, key properties, labels: the properties but type and name, and those
        labels with raw_name, an unknown MBean's)."""
        if self._parts is None:
            try:
                domain, props = parse_object_name(self.object_name)
            except ValueError as err:
                raise DecodeError("bad_mbean", str(err)) from err
            labels = {k: v for k, v in props.items() if k not in IDENTITY_PROPS}
            self._parts = domain, props, labels, {**labels, "raw_name": self.object_name}
        return self._parts


def resolve_attribute(catalog: Catalog, object_name: str, attribute: str,
                      mbean: ParsedMBean | None = None
                      ) -> tuple[str | None, str, str, dict[str, str]]:
    """(metric, canonical attribute, kind, labels) of one MBean attribute, cached on the
    catalog: the same names come back every scrape. The labels dict is shared: read only.
    `mbean` is the caller's parse of object_name, kept across its attributes."""
    cache: AnswerCache = catalog.__dict__.setdefault(
        "_jolokia_cache", AnswerCache(ANSWERS_KEPT, ANSWER_KEY_CHARS))
    hit = cache.get((object_name, attribute))
    if hit is not None:
        return hit
    domain, props, labels, unknown_labels = (mbean or ParsedMBean(object_name)).parts()
    metric = catalog.from_jmx(domain, props, attribute)
    if metric is None:
        resolved = (None, attribute, "gauge", unknown_labels)
    else:
        canonical = "Value" if catalog.is_attribute_metric(metric) else attribute
        fixed = jmx_series_props(metric)
        if fixed:  # the properties that name the series are its identity, not labels
            labels = {k: v for k, v in labels.items() if (k, v) not in fixed}
        resolved = (metric.name, canonical, metric.sample_kind(canonical), labels)
    cache.put((object_name, attribute), resolved)
    return resolved


def _numeric_attribute(attribute: str) -> bool:
    return attribute in ("Value", "Count") or attribute.endswith("Rate")


def _mbean_observations(
    catalog: Catalog, object_name: str, attributes: dict[str, Any], ts: float | None,
    hints: dict[str, str] | None = None,
) -> list[Observation | Rejected]:
    """Numeric attributes become observations. A non-numeric one is skipped (MBeans carry
    strings such as a Meter's RateUnit) unless it is a known metric's value, count or rate:
    that arriving as a string or list is a broken exporter, rejected, not dropped unseen.
    A malformed ObjectName is one rejection for the MBean: a bulk or pattern read keeps the
    samples of its other MBeans."""
    out = Observations()
    mbean = ParsedMBean(object_name)
    for attribute, raw in attributes.items():
        value = _number(raw)
        try:
            metric, canonical, kind, labels = resolve_attribute(catalog, object_name, attribute,
                                                                mbean)
        except DecodeError as err:
            return [Rejected(err.reason, err.detail)]
        if value is None:
            if metric is not None and raw is not None and _numeric_attribute(canonical):
                out.append(Rejected("wrong_type", f"{metric}.{canonical}={str(raw)[:60]!r} is "
                                                  "not a number"))
            continue
        raw_name = None if metric else object_name
        if hints is None:
            out.append(Observation(ts, metric, canonical, value, kind, labels, raw_name))
        else:
            out.append(TargetObservation(ts, metric, canonical, value, kind, labels, raw_name,
                                         hints))
    return out


def _entry_observations(catalog: Catalog, entry: Any, hints: dict[str, str] | None = None
                        ) -> list[Observation | Rejected]:
    if not isinstance(entry, dict):
        raise DecodeError("wrong_type", "a Jolokia response entry must be an object")
    status = entry.get("status", 200)
    if status != 200:
        return []
    request = entry.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("mbean"), str):
        raise DecodeError("missing_field", "request.mbean")
    if "value" not in entry:
        raise DecodeError("missing_field", "value")
    ts = entry.get("timestamp")
    if ts is not None:
        ts = _number(ts)
        if ts is None or not math.isfinite(ts):
            raise DecodeError("wrong_type", "timestamp must be epoch seconds")
    mbean, value = request["mbean"], entry["value"]
    if ("*" in mbean or "?" in mbean) and isinstance(value, dict):
        # {ObjectName: {attribute: value}}, the request's attributes named or not
        out = Observations()
        for object_name, attributes in value.items():
            if isinstance(attributes, dict):
                out.extend(_mbean_observations(catalog, object_name, attributes, ts, hints))
        return out
    attribute = request.get("attribute")
    if isinstance(attribute, str):
        return _mbean_observations(catalog, mbean, {attribute: value}, ts, hints)
    if not isinstance(value, dict):
        number = _number(value)
        if number is None:
            raise DecodeError("wrong_type", f"value of {mbean[:120]} is not a number or object")
        raise DecodeError("missing_field", "request.attribute for a scalar value")
    return _mbean_observations(catalog, mbean, value, ts, hints)


def _target_url(entry: Any) -> str | None:
    request = entry.get("request") if isinstance(entry, dict) else None
    target = request.get("target") if isinstance(request, dict) else None
    url = target.get("url") if isinstance(target, dict) else None
    return url if isinstance(url, str) else None


def decode(doc: Any, catalog: Catalog) -> tuple[list[Observation | Rejected], dict[str, str]]:
    """Observations of one message plus record-level identity hints (proxy target url)."""
    entries = doc if isinstance(doc, list) else [doc]
    urls = [_target_url(entry) for entry in entries]
    # One target for the whole record (the usual case, and every single read): record hints.
    mixed = len(set(urls)) > 1
    observations = Observations()
    for entry, url in zip(entries, urls, strict=True):
        own = ({HINT: url} if url is not None else {}) if mixed else None
        observations.extend(_entry_observations(catalog, entry, own))
    hints = {HINT: urls[0]} if urls and not mixed and urls[0] is not None else {}
    if not observations:  # only then does a failed entry explain the record
        failed = next((e for e in entries
                       if isinstance(e, dict) and e.get("status", 200) != 200), None)
        if failed is not None:
            raise DecodeError("source_error", _error_text(failed))
    return observations, hints


def _error_text(entry: dict[str, Any]) -> str:
    """Jolokia's own account of a failed read: status, MBean, error type and message."""
    request = entry.get("request")
    mbean = request.get("mbean") if isinstance(request, dict) else None
    error = entry.get("error") or entry.get("error_type") or "no error text"
    return f"Jolokia status {entry.get('status')} reading {str(mbean)[:120]}: {str(error)[:160]}"


def looks_like(doc: Any) -> bool:
    first = doc[0] if isinstance(doc, list) and doc else doc
    return isinstance(first, dict) and "request" in first and ("value" in first or "status" in first)
