"""The metric catalog (metrics_schemas/catalog.yaml) as lookups for decoders and the simulator.

Every transport names a metric differently; the catalog is the one place that knows all
the names, so adding an exporter's naming is a data change, not a code change.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from streaming.bounded_cache import cached_when_short
from streaming.number_text import plain_float
from streaming.schemas import load_yaml

COUNT_ATTRIBUTE = "Count"
QUANTILE_LABEL = "quantile"


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: str  # gauge | meter | timer | counter
    unit: str
    scope: str
    jmx_mbean: str | None
    jmx_attribute: str | None

    def sample_kind(self, attribute: str) -> str:
        """Meters and timers carry a cumulative Count (a counter), a `counter` gauge its
        cumulative Value; everything else is a level."""
        if self.kind == "counter":
            return "counter"
        if self.kind in ("meter", "timer") and attribute == COUNT_ATTRIBUTE:
            return "counter"
        return "gauge"


@cached_when_short(65536)
def parse_object_name(object_name: str) -> tuple[str, dict[str, str]]:
    """Split a JMX ObjectName into its domain and key properties (quoted values unquoted).

    Cached: a fleet repeats the same few thousand names every scrape. Callers must not
    mutate the returned dict."""
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
            name = "".join(key).strip()
            if not name:  # JMX refuses an empty key too: it would be a label without a name
                raise ValueError(f"empty key in ObjectName: {object_name[:200]!r}")
            if name in props:  # JMX refuses such a name: no broker publishes one
                raise ValueError(f"key {name[:60]!r} given twice in ObjectName: "
                                 f"{object_name[:200]!r}")
            props[name] = "".join(value)
            key, value, reading_key = [], [], True
        else:
            value.append(ch)
    if in_quotes or not reading_key:
        raise ValueError(f"unterminated ObjectName: {object_name[:200]!r}")
    return domain, props


def quantile_attribute(quantile: str) -> str | None:
    """jmx_exporter's quantile label ("0.99", "0.999", "0.5") as the Yammer attribute name."""
    try:
        q = plain_float(quantile)
    except (TypeError, ValueError):
        return None
    if not 0.0 < q < 1.0:
        return None
    per_mille = round(q * 1000)
    if abs(per_mille - q * 1000) > 1e-6:
        return None
    if per_mille % 10:
        return f"{per_mille}thPercentile"  # 0.999 -> 999thPercentile
    return f"{per_mille // 10}thPercentile"


def attribute_quantile(attribute: str) -> str | None:
    """The inverse: 99thPercentile -> "0.99", 999thPercentile -> "0.999" (jmx_exporter's "0.$N")."""
    if not attribute.endswith("thPercentile"):
        return None
    digits = attribute[: -len("thPercentile")]
    return f"0.{digits}" if digits.isdigit() else None


@dataclass(frozen=True)
class NamedSeries:
    """One transport name of a metric: a name plus label/attribute matchers -> attribute.

    `attribute` None means it follows from the `quantile` label (Prometheus summaries).
    `tags` are the schemes (Prometheus) or sources (OTel) that write this name, and
    `instrument` the OTel instrument type; the simulator encodes from them, decoders ignore them.
    """

    metric: MetricDef
    name: str
    attribute: str | None
    match: tuple[tuple[str, str], ...] = ()
    quantile: bool = False
    tags: tuple[str, ...] = ()
    instrument: str | None = None

    @property
    def consumed(self) -> tuple[str, ...]:
        keys = tuple(k for k, _ in self.match)
        return (*keys, QUANTILE_LABEL) if self.quantile else keys


def _matches(candidates: list[NamedSeries], labels: dict[str, str]) -> tuple[NamedSeries, str] | None:
    for entry in candidates:  # most specific (most matchers) first
        if entry.quantile:
            quantile = labels.get(QUANTILE_LABEL)
            if quantile is None:
                continue
            attribute = quantile_attribute(quantile)
            if attribute is None:
                continue
        elif QUANTILE_LABEL in labels:
            continue
        else:
            attribute = entry.attribute
        if all(labels.get(k) == v for k, v in entry.match):
            return entry, attribute
    return None


class Catalog:
    """Name lookups over the catalog data, built once per process."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.metrics: dict[str, MetricDef] = {}
        self._jmx: dict[tuple[str, str | None, str | None, str | None], MetricDef] = {}
        # Metrics that are one series of a labelled bean (a key property beyond type and
        # name fixed, e.g. FinalizedLevel's featureName): looked up before the bean's own.
        self._jmx_series: dict[tuple[str, str | None, str | None, str | None],
                               list[tuple[tuple[tuple[str, str], ...], MetricDef]]] = {}
        self.prometheus: list[NamedSeries] = []
        self.otel: list[NamedSeries] = []
        self.telegraf: list[NamedSeries] = []
        self._prometheus: dict[str, list[NamedSeries]] = {}
        self._otel: dict[str, list[NamedSeries]] = {}
        self._telegraf: dict[tuple[str, str], NamedSeries] = {}
        self.ambiguous_prometheus_names: dict[str, str] = dict(
            data.get("ambiguous_prometheus_names") or {}
        )
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
                fixed = jmx_series_props(metric)
                if fixed:
                    self._jmx_series.setdefault(key, []).append((fixed, metric))
                else:
                    self._jmx[key] = metric
            for entry in spec.get("prometheus") or []:
                self.prometheus.append(self._series(metric, entry, "labels", "schemes"))
            for entry in spec.get("otel") or []:
                self.otel.append(self._series(metric, entry, "attributes", "sources"))
            for entry in spec.get("telegraf") or []:
                self.telegraf.append(
                    NamedSeries(metric, f"{entry['measurement']}\x00{entry['field']}",
                                str(entry["attribute"]))
                )
        self._prometheus = self._index(self.prometheus, "prometheus")
        self._otel = self._index(self.otel, "otel")
        for entry in self.telegraf:
            measurement, field_name = entry.name.split("\x00")
            key = (measurement, field_name)
            if key in self._telegraf:
                raise ValueError(f"catalog: telegraf {measurement}/{field_name} is listed twice")
            self._telegraf[key] = entry

    @staticmethod
    def _series(metric: MetricDef, entry: dict[str, Any], match_key: str, tag_key: str
                ) -> NamedSeries:
        quantile = bool(entry.get("quantile", False))
        attribute = None if quantile else entry.get("attribute")
        if not entry.get("name") or (attribute is None and not quantile):
            raise ValueError(f"catalog: {metric.name}: each name needs `name` and `attribute` "
                             f"(or `quantile: true`), got {entry!r}")
        match = tuple(sorted((str(k), str(v)) for k, v in (entry.get(match_key) or {}).items()))
        return NamedSeries(metric, str(entry["name"]), attribute and str(attribute), match,
                           quantile, tuple(entry.get(tag_key) or ()), entry.get("type"))

    @staticmethod
    def _index(entries: list[NamedSeries], transport: str) -> dict[str, list[NamedSeries]]:
        index: dict[str, list[NamedSeries]] = {}
        seen: dict[tuple, NamedSeries] = {}
        for entry in entries:
            key = (entry.name, entry.match, entry.quantile)
            other = seen.get(key)
            if other is not None:
                if (other.metric.name, other.attribute) != (entry.metric.name, entry.attribute):
                    raise ValueError(
                        f"catalog: {transport} name {entry.name} {dict(entry.match)} means both "
                        f"{other.metric.name}.{other.attribute} and "
                        f"{entry.metric.name}.{entry.attribute}; make the matchers differ"
                    )
                continue  # the same meaning listed for two schemes/sources
            seen[key] = entry
            index.setdefault(entry.name, []).append(entry)
        for candidates in index.values():
            candidates.sort(key=lambda e: (-len(e.match), not e.quantile))
        return index

    def from_prometheus(self, name: str, labels: dict[str, str]
                        ) -> tuple[MetricDef, str, tuple[str, ...]] | None:
        """(metric, attribute, label keys the name consumed) of a Prometheus series, or None."""
        candidates = self._prometheus.get(name)
        if candidates is None:
            return None
        found = _matches(candidates, labels)
        if found is None:
            return None
        entry, attribute = found
        return entry.metric, attribute, entry.consumed

    def from_otel(self, name: str, attributes: dict[str, str]
                  ) -> tuple[MetricDef, str, tuple[str, ...]] | None:
        """(metric, attribute, point attribute keys consumed) of an OTel metric, or None."""
        candidates = self._otel.get(name)
        if candidates is None:
            return None
        found = _matches(candidates, attributes)
        if found is None:
            return None
        entry, attribute = found
        return entry.metric, attribute, entry.consumed

    def from_telegraf(self, measurement: str, field_name: str) -> tuple[MetricDef, str] | None:
        """(metric, attribute) of a Telegraf measurement field, or None."""
        entry = self._telegraf.get((measurement, field_name))
        return None if entry is None else (entry.metric, entry.attribute)

    def from_jmx(self, domain: str, props: dict[str, str], attribute: str) -> MetricDef | None:
        """The metric an MBean attribute is, or None when the catalog does not know it."""
        type_, name = props.get("type"), props.get("name")
        for key in ((domain, type_, name, None), (domain, type_, name, attribute)):
            for fixed, metric in self._jmx_series.get(key, ()):
                if all(props.get(k) == v for k, v in fixed):
                    return metric
        return self._jmx.get((domain, type_, name, None)) or self._jmx.get(
            (domain, type_, name, attribute)
        )

    def is_attribute_metric(self, metric: MetricDef) -> bool:
        return metric.jmx_attribute is not None


def jmx_series_props(metric: MetricDef) -> tuple[tuple[str, str], ...]:
    """The key properties beyond type and name that a metric's MBean fixes (sorted): those
    of a metric that is one series of a labelled bean, which its samples do not carry as
    labels (as a Prometheus name's matched labels are consumed)."""
    if not metric.jmx_mbean:
        return ()
    _, props = parse_object_name(metric.jmx_mbean)
    return tuple(sorted((k, v) for k, v in props.items() if k not in ("type", "name")))


@functools.cache
def load_catalog() -> Catalog:
    return Catalog(load_yaml("catalog.yaml"))
