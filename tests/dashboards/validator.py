"""Checks for the kafka-health Grafana dashboards.

Two halves, both pure Python (stdlib + PyYAML):

* structural checks of dashboard JSON against the Grafana model and against the
  exported-series contract (metrics_schemas/exported_metrics.yaml):
  ``validate_dashboard(dashboard, contract) -> list[str]`` (empty list = valid),
  ``validate_expectations(expectations, dashboards) -> list[str]``;
* a query runner that substitutes template variables and runs every panel target
  as an instant query against a Prometheus server:
  ``run_panel_queries(prometheus_url, dashboards, variables) -> list[QueryResult]``.
  It knows nothing about where the series come from, so it works the same against a
  test exporter and against the running pipeline; the caller decides which results
  matter (``QueryResult.problem`` flags errors and unexpected empties).

Command line:  python -m tests.dashboards.validator [--prometheus URL] [--var k=v ...]
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CONTRACT_PATH = REPO / "metrics_schemas" / "exported_metrics.yaml"
DASHBOARD_DIR = REPO / "dashboards"
EXPECTATIONS_PATH = DASHBOARD_DIR / "expectations.yaml"

DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}
PANEL_TYPES = {"row", "timeseries", "stat", "table", "bargauge"}
MIN_SCHEMA_VERSION = 39
# Labels every scraped series carries besides its own (added by Prometheus).
SCRAPE_LABELS = frozenset({"job", "instance"})

# Grafana's global variables; any name starting with "__" is also treated as built-in.
BUILTIN_VARIABLES = frozenset({"timeFilter", "interval", "interval_ms"})

# Defaults for Grafana's interval/range variables when running queries outside Grafana.
DEFAULT_BUILTINS = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__interval_ms": "15000",
    "__range": "1h",
    "__range_s": "3600",
    "__range_ms": "3600000",
}

PROMQL_FUNCTIONS = frozenset(
    [
        "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
        "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
        "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg",
        "delta", "deriv", "exp", "floor", "histogram_count", "histogram_fraction",
        "histogram_quantile", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
        "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2",
        "mad_over_time", "max_over_time", "min_over_time", "minute", "month", "pi",
        "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets",
        "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_desc", "sqrt", "stddev_over_time",
        "stdvar_over_time", "sum_over_time", "tan", "tanh", "time", "timestamp", "vector", "year",
        "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
        "bottomk", "topk", "quantile",
    ]
)
PROMQL_KEYWORDS = frozenset(
    [
        "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
        "group_right", "atan2", "inf", "nan",
    ]
)

_STRING = r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`'
_VAR_PATTERNS = (
    re.compile(r"\$\{([A-Za-z_][\w.]*)(?::[^}]*)?\}"),  # ${var} ${var:format} ${__data.x}
    re.compile(r"\[\[([A-Za-z_]\w*)(?::[^\]]*)?\]\]"),  # [[var]] (deprecated)
    re.compile(r"\$([A-Za-z_]\w*)"),  # $var
)
_SELECTOR = re.compile(
    r"(?P<name>[A-Za-z_:][\w:]*)?\s*\{(?P<body>(?:[^{}\"']|" + _STRING + r")*)\}"
)
_MATCHER = re.compile(r"\s*([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*(" + _STRING + r")\s*,?")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(?P<sel>.*),\s*)?(?P<label>\w+)\s*\)\s*$",
                           re.S)


# ------------------------------------------------------------------------------------
# Contract
# ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Contract:
    """Metric name -> label names, from exported_metrics.yaml."""

    labels: Mapping[str, frozenset[str]]
    kinds: Mapping[str, str]

    def __contains__(self, name: str) -> bool:
        return name in self.labels


def load_contract(path: Path | str = CONTRACT_PATH) -> Contract:
    """Read the exported-series contract.

    Each section declares its labels. A few series carry one more label that the
    contract only names in prose ("label bound: ...", "label binding_bound names ...",
    "(label reason)"); those are picked up from the description text.
    """
    doc = yaml.safe_load(Path(path).read_text())
    labels: dict[str, frozenset[str]] = {}
    kinds: dict[str, str] = {}
    for section in doc.values():
        base = set(section.get("labels") or [])
        for kind in ("gauges", "counters", "histograms", "summaries"):
            for name, description in (section.get(kind) or {}).items():
                extra = set(re.findall(r"\blabel (\w+)", str(description)))
                labels[name] = frozenset(base | extra)
                kinds[name] = kind[:-1]
    return Contract(labels=labels, kinds=kinds)


# ------------------------------------------------------------------------------------
# PromQL inspection (lexical: enough to find metric names, functions and matchers)
# ------------------------------------------------------------------------------------
def _blank_variables(expr: str) -> str:
    for pattern in _VAR_PATTERNS:
        expr = pattern.sub("1", expr)
    return expr


def promql_names(expr: str) -> tuple[set[str], set[str]]:
    """Return (metric names, function names) used in a PromQL expression."""
    s = _blank_variables(expr)
    s = re.sub(_STRING, '""', s)
    s = re.sub(r"\{[^{}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\[\]]*\]", " ", s)  # ranges, subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", s)
    s = re.sub(r"(?<![\w:.])\d[\w.]*(?:[eE][+-]?\d+)?", " ", s)  # numbers, durations
    metrics: set[str] = set()
    functions: set[str] = set()
    for m in re.finditer(r"[A-Za-z_:][\w:]*", s):
        token = m.group(0)
        if re.match(r"\s*\(", s[m.end():]):
            functions.add(token)
        elif token.lower() not in PROMQL_KEYWORDS:
            metrics.add(token)
    return metrics, functions


def promql_selectors(expr: str) -> list[tuple[str | None, dict[str, str]]]:
    """(metric name or None, {label: matcher}) for every `name{...}` selector."""
    out = []
    for m in _SELECTOR.finditer(expr):
        matchers = {lm.group(1): lm.group(2) for lm in _MATCHER.finditer(m.group("body"))}
        out.append((m.group("name"), matchers))
    return out


def variable_refs(text: str) -> set[str]:
    refs: set[str] = set()
    for pattern in _VAR_PATTERNS:
        for m in pattern.finditer(text):
            refs.add(m.group(1).split(".")[0])
        text = pattern.sub("", text)
    return refs


# ------------------------------------------------------------------------------------
# Dashboard walking
# ------------------------------------------------------------------------------------
def iter_panels(dashboard: Mapping[str, Any]) -> Iterator[dict]:
    """Every panel, including those nested in (collapsed) rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", []) or []


def _variables(dashboard: Mapping[str, Any]) -> list[dict]:
    return list((dashboard.get("templating") or {}).get("list") or [])


def _variable_query(var: Mapping[str, Any]) -> str:
    q = var.get("query", "")
    if isinstance(q, Mapping):
        q = q.get("query", "")
    return str(q or "")


def _texts_with_variables(dashboard: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, text) for every string that Grafana interpolates."""
    yield "dashboard title", str(dashboard.get("title", ""))
    for var in _variables(dashboard):
        if var.get("type") == "query":
            yield f"variable {var.get('name')}", _variable_query(var)
    for ann in (dashboard.get("annotations") or {}).get("list", []):
        for key in ("expr", "titleFormat", "textFormat"):
            if key in ann:
                yield f"annotation {ann.get('name')}", str(ann[key])
    for panel in iter_panels(dashboard):
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        yield where, str(panel.get("title", ""))
        for link in panel.get("links", []) or []:
            yield where + " link", str(link.get("url", ""))
        for override in (panel.get("fieldConfig") or {}).get("overrides", []):
            for prop in override.get("properties", []):
                if prop.get("id") == "links":
                    for link in prop.get("value") or []:
                        yield where + " data link", str(link.get("url", ""))
        for target in panel.get("targets", []) or []:
            for key in ("expr", "legendFormat"):
                if key in target:
                    yield f"{where} target {target.get('refId')}", str(target[key])


def _exprs(dashboard: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for panel targets, annotations and label_values variables."""
    for var in _variables(dashboard):
        if var.get("type") == "query":
            m = _LABEL_VALUES.match(_variable_query(var))
            if m and m.group("sel"):
                yield f"variable {var.get('name')}", m.group("sel")
    for ann in (dashboard.get("annotations") or {}).get("list", []):
        if ann.get("expr"):
            yield f"annotation {ann.get('name')}", ann["expr"]
    for panel in iter_panels(dashboard):
        for target in panel.get("targets", []) or []:
            if target.get("expr"):
                yield (f"panel {panel.get('id')} {panel.get('title')!r} "
                       f"target {target.get('refId')}", target["expr"])


def _overlaps(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    return (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])


# ------------------------------------------------------------------------------------
# Structural validation
# ------------------------------------------------------------------------------------
def validate_dashboard(dashboard: Mapping[str, Any], contract: Contract | None = None
                       ) -> list[str]:
    """Problems found in one dashboard (an empty list means it is valid)."""
    contract = contract or load_contract()
    problems: list[str] = []
    add = problems.append

    if not isinstance(dashboard, Mapping):
        return ["dashboard is not a JSON object"]
    for key in ("uid", "title"):
        if not dashboard.get(key):
            add(f"dashboard has no {key}")
    if len(str(dashboard.get("uid", ""))) > 40:
        add("uid longer than 40 characters")
    if not isinstance(dashboard.get("schemaVersion"), int) or \
            dashboard["schemaVersion"] < MIN_SCHEMA_VERSION:
        add(f"schemaVersion {dashboard.get('schemaVersion')!r} < {MIN_SCHEMA_VERSION}")

    # --- templating
    variables = _variables(dashboard)
    names = [v.get("name") for v in variables]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        add(f"template variable {dup!r} defined twice")
    ds_vars = [v for v in variables if v.get("name") == "datasource"]
    if not ds_vars or ds_vars[0].get("type") != "datasource" or \
            ds_vars[0].get("query") != "prometheus":
        add("no template variable 'datasource' of type datasource with query 'prometheus'")
    for var in variables:
        if var.get("type") == "query":
            if var.get("datasource") != DATASOURCE_REF:
                add(f"variable {var.get('name')!r}: datasource is not {DATASOURCE_REF}")
            if not _LABEL_VALUES.match(_variable_query(var)):
                add(f"variable {var.get('name')!r}: query is not label_values(...)")
    defined = set(names) | BUILTIN_VARIABLES
    for where, text in _texts_with_variables(dashboard):
        for ref in sorted(variable_refs(text)):
            if ref not in defined and not ref.startswith("__"):
                add(f"{where}: uses ${ref}, which is not a template variable")

    for ann in (dashboard.get("annotations") or {}).get("list", []):
        ds = ann.get("datasource") or {}
        is_prometheus = ann.get("expr") or (isinstance(ds, Mapping)
                                            and ds.get("type") == "prometheus")
        if is_prometheus and ds != DATASOURCE_REF:
            add(f"annotation {ann.get('name')!r}: datasource {ds!r} is not {DATASOURCE_REF}")

    # --- panels
    seen_ids: dict[Any, str] = {}
    for panel in iter_panels(dashboard):
        pid, title = panel.get("id"), panel.get("title")
        where = f"panel {pid} {title!r}"
        if not isinstance(pid, int):
            add(f"{where}: id is not an integer")
        elif pid in seen_ids:
            add(f"{where}: id {pid} already used by {seen_ids[pid]}")
        else:
            seen_ids[pid] = where
        ptype = panel.get("type")
        if ptype not in PANEL_TYPES:
            add(f"{where}: type {ptype!r} not one of {sorted(PANEL_TYPES)}")
        if not title:
            add(f"{where}: no title")
        gp = panel.get("gridPos")
        if not isinstance(gp, Mapping) or not all(
                isinstance(gp.get(k), int) for k in ("x", "y", "w", "h")):
            add(f"{where}: gridPos missing or incomplete")
        else:
            if gp["w"] <= 0 or gp["h"] <= 0:
                add(f"{where}: gridPos w/h must be > 0")
            if gp["x"] < 0 or gp["y"] < 0:
                add(f"{where}: gridPos x/y must be >= 0")
            if gp["x"] + gp["w"] > 24:
                add(f"{where}: gridPos x+w = {gp['x'] + gp['w']} > 24")
        if ptype == "row":
            if panel.get("targets"):
                add(f"{where}: a row has targets")
            if "datasource" in panel and panel["datasource"] not in (None, DATASOURCE_REF):
                add(f"{where}: datasource is not {DATASOURCE_REF}")
            continue
        if not str(panel.get("description") or "").strip():
            add(f"{where}: no description")
        if panel.get("datasource") != DATASOURCE_REF:
            add(f"{where}: datasource {panel.get('datasource')!r} is not {DATASOURCE_REF}")
        targets = panel.get("targets") or []
        if not targets:
            add(f"{where}: no targets")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or None in refs:
            add(f"{where}: refIds missing or not unique: {refs}")
        for t in targets:
            if t.get("datasource") != DATASOURCE_REF:
                add(f"{where} target {t.get('refId')}: datasource {t.get('datasource')!r} "
                    f"is not {DATASOURCE_REF}")
            if not str(t.get("expr") or "").strip():
                add(f"{where} target {t.get('refId')}: empty expr")
        fc = panel.get("fieldConfig") or {}
        defaults = fc.get("defaults") or {}
        if "unit" not in defaults:
            add(f"{where}: no unit in fieldConfig.defaults")
        steps = (defaults.get("thresholds") or {}).get("steps") or []
        if not steps or steps[0].get("value") is not None:
            add(f"{where}: thresholds must start with a base step (value null)")

    # --- layout: top-level panels, and the children of each collapsed row
    groups = [[p for p in dashboard.get("panels", [])]]
    groups += [p.get("panels") or [] for p in dashboard.get("panels", [])
               if p.get("type") == "row" and p.get("collapsed")]
    for group in groups:
        boxes = [(p, p["gridPos"]) for p in group if isinstance(p.get("gridPos"), Mapping)
                 and all(isinstance(p["gridPos"].get(k), int) for k in ("x", "y", "w", "h"))]
        for i, (a, ga) in enumerate(boxes):
            for b, gb in boxes[i + 1:]:
                if _overlaps(ga, gb):
                    add(f"panels {a.get('id')} {a.get('title')!r} and {b.get('id')} "
                        f"{b.get('title')!r} overlap")

    # --- PromQL against the contract
    for where, expr in _exprs(dashboard):
        metrics, functions = promql_names(expr)
        for fn in sorted(functions - PROMQL_FUNCTIONS):
            add(f"{where}: unknown PromQL function {fn!r}")
        for name in sorted(metrics):
            if name not in contract:
                add(f"{where}: metric {name!r} is not in exported_metrics.yaml")
        for name, matchers in promql_selectors(expr):
            if name is None:
                add(f"{where}: selector without a metric name")
                continue
            if name not in contract:
                continue
            allowed = contract.labels[name] | SCRAPE_LABELS
            for label in sorted(set(matchers) - allowed):
                add(f"{where}: {name} has no label {label!r} "
                    f"(it has {sorted(contract.labels[name])})")
    return problems


def load_dashboards(paths: Iterable[Path | str] | Path | str = DASHBOARD_DIR
                    ) -> list[tuple[str, dict]]:
    """(source, dashboard) pairs from a directory, files, or already-parsed dicts."""
    if isinstance(paths, (str, Path)):
        p = Path(paths)
        paths = sorted(p.glob("*.json")) if p.is_dir() else [p]
    out = []
    for item in paths:
        if isinstance(item, Mapping):
            out.append((str(item.get("uid")), dict(item)))
        else:
            out.append((str(item), json.loads(Path(item).read_text())))
    return out


def validate_paths(paths: Iterable[Path | str] | Path | str = DASHBOARD_DIR,
                   contract: Contract | None = None) -> dict[str, list[str]]:
    """source -> problems, for every dashboard; also checks uids are unique."""
    contract = contract or load_contract()
    results: dict[str, list[str]] = {}
    uids: dict[str, str] = {}
    sources = [Path(paths)] if isinstance(paths, (str, Path)) else list(paths)
    files: list[Path] = []
    for s in sources:
        files.extend(sorted(Path(s).glob("*.json")) if Path(s).is_dir() else [Path(s)])
    for f in files:
        try:
            dash = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            results[str(f)] = [f"not valid JSON: {exc}"]
            continue
        problems = validate_dashboard(dash, contract)
        uid = dash.get("uid") if isinstance(dash, Mapping) else None
        if uid in uids:
            problems.append(f"uid {uid!r} also used by {uids[uid]}")
        elif uid:
            uids[uid] = str(f)
        results[str(f)] = problems
    return results


# ------------------------------------------------------------------------------------
# Expectations: panels that may be empty while the fleet is healthy
# ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EmptyAllowed:
    dashboard_uid: str
    panel_id: int
    ref_id: str | None  # None: every target of the panel
    reason: str
    title: str | None = None  # when given, must match the panel's title


def load_expectations(path: Path | str = EXPECTATIONS_PATH, section: str = "may_be_empty"
                      ) -> list[EmptyAllowed]:
    """Read one section of dashboards/expectations.yaml (see the file for the format):
    `may_be_empty` (a quiet healthy fleet) or `live_demo` (the live-pipeline scenario)."""
    doc = yaml.safe_load(Path(path).read_text()) or {}
    out = []
    for uid, entries in (doc.get(section) or {}).items():
        for e in entries or []:
            out.append(EmptyAllowed(uid, e.get("panel"), e.get("refId"),
                                    str(e.get("reason") or ""), e.get("title")))
    return out


def validate_expectations(expectations: Iterable[EmptyAllowed],
                          dashboards: Iterable[Mapping[str, Any]]) -> list[str]:
    by_uid = {d["uid"]: d for d in dashboards}
    problems = []
    for e in expectations:
        where = f"expectation {e.dashboard_uid}/{e.panel_id}/{e.ref_id}"
        if not e.reason.strip():
            problems.append(f"{where}: no reason")
        dash = by_uid.get(e.dashboard_uid)
        if dash is None:
            problems.append(f"{where}: no dashboard with that uid")
            continue
        panel = next((p for p in iter_panels(dash) if p.get("id") == e.panel_id), None)
        if panel is None or panel.get("type") == "row":
            problems.append(f"{where}: no such panel")
        elif e.title is not None and panel.get("title") != e.title:
            problems.append(f"{where}: panel is titled {panel.get('title')!r}, "
                            f"not {e.title!r}")
        elif e.ref_id is not None and e.ref_id not in {
                t.get("refId") for t in panel.get("targets", [])}:
            problems.append(f"{where}: panel has no target {e.ref_id}")
    return problems


# ------------------------------------------------------------------------------------
# Query runner
# ------------------------------------------------------------------------------------
@dataclass
class QueryResult:
    dashboard_uid: str
    dashboard_title: str
    panel_id: int | None  # None for template-variable queries
    panel_title: str
    ref_id: str
    expr: str  # as written in the dashboard
    query: str  # after variable substitution, as sent
    status: str  # "ok" | "empty" | "error"
    error: str | None = None
    series: int = 0
    may_be_empty: bool = False
    may_be_empty_reason: str = ""
    sample: list[dict] = field(default_factory=list)  # up to 3 result label sets

    @property
    def problem(self) -> bool:
        """An error, or no data where the expectations do not allow it."""
        return self.status == "error" or (self.status == "empty" and not self.may_be_empty)

    def __str__(self) -> str:
        head = f"[{self.status}] {self.dashboard_uid} panel {self.panel_id} " \
               f"{self.panel_title!r} {self.ref_id}: {self.query}"
        return head + (f" -> {self.error}" if self.error else "")


def _regex_escape(value: str) -> str:
    """Grafana's prometheusSpecialRegexEscape: a regex escape inside a PromQL string."""
    value = value.replace("\\", "\\\\\\\\")
    return re.sub(r"([$^*{}\[\]'+?.()|])", r"\\\\\1", value)


def _plain_escape(value: str) -> str:
    """Grafana's prometheusRegularEscape (variables without multi/All)."""
    return value.replace("\\", "\\\\").replace("'", "\\\\'")


def _format_value(var: Mapping[str, Any] | None, value: Any) -> str:
    """Format a variable value the way Grafana's Prometheus datasource does."""
    values = [str(v) for v in value] if isinstance(value, (list, tuple, set)) else [str(value)]
    multi_like = bool(var and (var.get("multi") or var.get("includeAll")))
    if values == ["$__all"] and var is not None:
        return str(var.get("allValue") or ".*")
    if not multi_like:
        return _plain_escape(values[0])
    escaped = [_regex_escape(v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def substitute(text: str, dashboard: Mapping[str, Any], variables: Mapping[str, Any]
               ) -> tuple[str, set[str]]:
    """Interpolate Grafana variables; returns (text, names left unresolved).

    A variable missing from `variables` resolves to its allValue (".*" if none) when it
    offers "All"; interval/range built-ins fall back to DEFAULT_BUILTINS.
    """
    defs = {v.get("name"): v for v in _variables(dashboard)}
    unresolved: set[str] = set()

    def resolve(name: str, original: str) -> str:
        if name in variables:
            return _format_value(defs.get(name), variables[name])
        if name in DEFAULT_BUILTINS:
            return DEFAULT_BUILTINS[name]
        var = defs.get(name)
        if var is not None and var.get("includeAll"):
            return str(var.get("allValue") or ".*")
        unresolved.add(name)
        return original

    for pattern in _VAR_PATTERNS:
        text = pattern.sub(lambda m: resolve(m.group(1), m.group(0)), text)
    return text, unresolved


def instant_query(prometheus_url: str, query: str, *, at: float | None = None,
                  timeout: float = 10.0) -> dict:
    """POST /api/v1/query; returns Prometheus' JSON body (errors included)."""
    params = {"query": query}
    if at is not None:
        params["time"] = f"{at:.3f}"
    req = urllib.request.Request(
        prometheus_url.rstrip("/") + "/api/v1/query",
        data=urllib.parse.urlencode(params).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # 400/422: PromQL errors come with a JSON body
        body = exc.read()
        try:
            return json.loads(body)
        except ValueError:
            return {"status": "error", "errorType": f"http {exc.code}",
                    "error": body.decode(errors="replace")[:500]}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return {"status": "error", "errorType": "connection", "error": str(exc)}


def _count(data: Mapping[str, Any]) -> tuple[int, list[dict]]:
    rtype, result = data.get("resultType"), data.get("result")
    if rtype in ("vector", "matrix"):
        return len(result), [r.get("metric", {}) for r in result[:3]]
    if rtype == "scalar":  # a scalar always has a value
        return 1, []
    if rtype == "string":
        return 1, []
    return 0, []


def _queries(dashboard: Mapping[str, Any], include_variables: bool
             ) -> Iterator[tuple[int | None, str, str, str]]:
    """(panel id, panel title, refId, expr) for every query the dashboard runs."""
    if include_variables:
        for var in _variables(dashboard):
            if var.get("type") != "query":
                continue
            m = _LABEL_VALUES.match(_variable_query(var))
            if m:
                sel = m.group("sel") or "{__name__=~\".+\"}"
                yield None, f"variable {var.get('name')}", f"var:{var.get('name')}", \
                    f"group by ({m.group('label')}) ({sel})"
    for panel in iter_panels(dashboard):
        for t in panel.get("targets", []) or []:
            if t.get("expr") and not t.get("hide"):
                yield panel.get("id"), str(panel.get("title", "")), str(t.get("refId")), \
                    t["expr"]


def run_panel_queries(prometheus_url: str,
                      dashboards: Iterable[Path | str | Mapping[str, Any]] | Path | str,
                      variables: Mapping[str, Any], *,
                      expectations: Iterable[EmptyAllowed] | Path | str | None = None,
                      include_variables: bool = True,
                      at: float | None = None,
                      timeout: float = 10.0) -> list[QueryResult]:
    """Run every panel target (and label_values variable) as an instant query.

    `dashboards`: a directory, JSON files or parsed dashboards. `variables`: template
    variable values, e.g. {"cluster": "prod-eu", "broker": ["1", "2"]}; a list becomes
    Grafana's regex "(1|2)"; "$__all" or a missing variable with "All" becomes its
    allValue. Built-ins ($__rate_interval, $__interval, $__range, ...) default to
    DEFAULT_BUILTINS and can be overridden through `variables` too.
    `expectations`: which panels may be empty while healthy (default:
    dashboards/expectations.yaml when it exists); they set QueryResult.may_be_empty.

    Returns one QueryResult per query; nothing is raised for PromQL errors or empty
    results - filter with `[r for r in results if r.problem]`.
    """
    if expectations is None:
        expectations = load_expectations() if EXPECTATIONS_PATH.exists() else []
    elif isinstance(expectations, (str, Path)):
        expectations = load_expectations(expectations)
    allowed = {(e.dashboard_uid, e.panel_id, e.ref_id): e.reason for e in expectations}

    results: list[QueryResult] = []
    for _source, dash in load_dashboards(dashboards):
        uid, title = str(dash.get("uid")), str(dash.get("title"))
        for panel_id, panel_title, ref_id, expr in _queries(dash, include_variables):
            query, unresolved = substitute(expr, dash, variables)
            reason = allowed.get((uid, panel_id, ref_id), allowed.get((uid, panel_id, None)))
            r = QueryResult(uid, title, panel_id, panel_title, ref_id, expr, query,
                            status="error", may_be_empty=reason is not None,
                            may_be_empty_reason=reason or "")
            if unresolved:
                r.error = f"unresolved variables: {sorted(unresolved)}"
                results.append(r)
                continue
            body = instant_query(prometheus_url, query, at=at, timeout=timeout)
            if body.get("status") != "success":
                r.error = f"{body.get('errorType')}: {body.get('error')}"
            else:
                r.series, r.sample = _count(body.get("data") or {})
                r.status = "ok" if r.series else "empty"
            results.append(r)
    return results


def summarize(results: Iterable[QueryResult]) -> str:
    results = list(results)
    counts = {s: sum(r.status == s for r in results) for s in ("ok", "empty", "error")}
    lines = [f"{len(results)} queries: {counts['ok']} ok, {counts['empty']} empty "
             f"({sum(r.status == 'empty' and r.may_be_empty for r in results)} allowed), "
             f"{counts['error']} errors"]
    lines += [f"  {r}" for r in results if r.problem]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dashboards", nargs="*", default=[str(DASHBOARD_DIR)])
    ap.add_argument("--prometheus", help="also run every query against this Prometheus URL")
    ap.add_argument("--var", action="append", default=[],
                    help="template variable, name=value (repeat; value a,b for multi)")
    args = ap.parse_args(argv)

    rc = 0
    for source, problems in validate_paths(args.dashboards).items():
        print(f"{source}: {'ok' if not problems else f'{len(problems)} problems'}")
        for p in problems:
            print(f"  {p}")
        rc |= bool(problems)
    if args.prometheus:
        variables: dict[str, Any] = {}
        for kv in args.var:
            k, _, v = kv.partition("=")
            variables[k] = v.split(",") if "," in v else v
        paths: list[Path] = []
        for d in args.dashboards:
            p = Path(d)
            paths.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
        results = run_panel_queries(args.prometheus, paths, variables)
        print(summarize(results))
        rc |= any(r.problem for r in results)
    return int(rc)


if __name__ == "__main__":
    raise SystemExit(main())
