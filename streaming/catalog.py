"""The metric catalog (metrics_schemas/catalog.yaml) as lookups for decoders and the simulator.

Every transport names a metric differently; the catalog is the one place that knows all
the names, so adding an exporter's naming is a data change, not a code change.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from streaming.schemas import load_yaml

COUNT_ATTRIBUTE = "Count"


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: str  # gauge | meter | timer
    unit: str
    scope: str
    jmx_mbean: str | None
    jmx_attribute: str | None

    def sample_kind(self, attribute: str) -> str:
        """Meters and timers carry a cumulative Count (a counter); everything else is a level."""
        if self.kind in ("meter", "timer") and attribute == COUNT_ATTRIBUTE:
            return "counter"
        return "gauge"


def parse_object_name(object_name: str) -> tuple[str, dict[str, str]]:
    """Split a JMX ObjectName into its domain and key properties (quoted values unquoted)."""
    domain, sep, rest = object_name.partition(":")
    if not sep or not domain:
        raise ValueError(f"not a JMX ObjectName: {object_name[:200]!r}")
    props: dict[str, str] = {}
    key, value, in_quotes, escaped, reading_key = [], [], False, False, True
    for ch in rest + ",":
        if reading_key:
            if ch == "=":
                reading_key = False
            elif ch == ",":
                raise ValueError(f"key without value in ObjectName: {object_name[:200]!r}")
            else:
                key.append(ch)
            continue
        if in_quotes:
            if escaped:
                value.append(ch)
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_quotes = False
            else:
                value.append(ch)
        elif ch == '"':
            in_quotes = True
        elif ch == ",":
            props["".join(key).strip()] = "".join(value)
            key, value, reading_key = [], [], True
        else:
            value.append(ch)
    if in_quotes or not reading_key:
        raise ValueError(f"unterminated ObjectName: {object_name[:200]!r}")
    return domain, props


class Catalog:
    """Name lookups over the catalog data, built once per process."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.metrics: dict[str, MetricDef] = {}
        self._jmx: dict[tuple[str, str | None, str | None, str | None], MetricDef] = {}
        for name, spec in data["metrics"].items():
            jmx = spec.get("jmx") or {}
            metric = MetricDef(
                name=name,
                kind=spec["kind"],
                unit=spec.get("unit", ""),
                scope=spec.get("scope", "broker"),
                jmx_mbean=jmx.get("mbean"),
                jmx_attribute=jmx.get("attribute"),
            )
            self.metrics[name] = metric
            if metric.jmx_mbean:
                domain, props = parse_object_name(metric.jmx_mbean)
                key = (domain, props.get("type"), props.get("name"), metric.jmx_attribute)
                self._jmx[key] = metric

    def from_jmx(self, domain: str, props: dict[str, str], attribute: str) -> MetricDef | None:
        """The metric an MBean attribute is, or None when the catalog does not know it."""
        type_, name = props.get("type"), props.get("name")
        return self._jmx.get((domain, type_, name, None)) or self._jmx.get(
            (domain, type_, name, attribute)
        )

    def is_attribute_metric(self, metric: MetricDef) -> bool:
        return metric.jmx_attribute is not None


@functools.cache
def load_catalog() -> Catalog:
    return Catalog(load_yaml("catalog.yaml"))
