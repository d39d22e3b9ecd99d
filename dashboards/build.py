"""Generate the kafka-health Grafana dashboards (dashboards/*.json).

The JSON files are the artefact Grafana loads (see deploy/grafana/provisioning);
this script is how they are written, so ids, grid positions, datasource references
and thresholds stay consistent. Edit here, then run

    .venv/bin/python dashboards/build.py

tests/dashboards/test_dashboards.py fails when the committed JSON differs from what
this script produces.

Every query and threshold comes from the signal catalog (metrics_schemas/signals.yaml),
as the alert rules' expressions do (alerts/build.py): a panel wraps a signal's expression in
its own aggregation and selector (q), and colours exactly the signal's bad values (steps).
tests/dashboards checks that every single-series panel turns non-green exactly where its
alert fires, and every expression against the exported-series contract
(metrics_schemas/exported_metrics.yaml).

The panels are plain dicts, not grafana-foundation-sdk builders: its query variables
cannot carry the `definition` Grafana shows for them, its layout lets a panel run past the
24th column instead of starting a new line and numbers no panels (dashboards/
expectations.yaml names panels by id), and it writes defaults of its own into every panel
(a browser time zone, repeat directions, transparency), so it would take over the JSON
without taking over these choices.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from streaming.signal_catalog import Signal, signal

HERE = Path(__file__).resolve().parent

DS = {"type": "prometheus", "uid": "${datasource}"}

# --------------------------------------------------------------------------------------
# Queries and thresholds, from the signal catalog
# --------------------------------------------------------------------------------------
RED, ORANGE, GREEN, BLUE = "red", "orange", "green", "blue"


def q(signal_id: str, selector: str = "") -> str:
    """The signal's expression with `selector` on every series it names."""
    return signal(signal_id).select(selector)


def bad(signal_id: str, selector: str = "") -> str:
    """The signal's bad values as a condition (`expr op value`)."""
    found = signal(signal_id)
    return f"{found.select(selector)} {found.bad}"


def bad_value(signal_id: str) -> float:
    """The value the signal's bad values start from, for a title or a description."""
    found = signal(signal_id)
    if found.bad is None:
        raise ValueError(f"signal {signal_id!r} has no bad values")
    return float(found.bad.value)


def steps(found: Signal) -> list[tuple[str, float | None]]:
    """Grafana threshold steps (each colours the values >= its own) that colour exactly the
    signal's bad values; blue when none are bad."""
    if found.bad is None:
        return [(BLUE, None)]
    op, value, color = found.bad.op, found.bad.value, found.bad.color
    above = value + 1 if found.integer else value  # "> 0" of a count is ">= 1"
    if op == ">":
        return [(GREEN, None), (color, above)]
    if op == ">=":
        return [(GREEN, None), (color, value)]
    if op == "<":
        return [(color, None), (GREEN, value)]
    if op == "!=" and found.integer:
        return [(color, None), (GREEN, value), (color, value + 1)]
    if op == "==" and found.integer and value in (0, 1):  # a 0/1 flag, or a count of them
        return [(color, None), (GREEN, 1)] if value == 0 else [(GREEN, None), (color, 1)]
    raise ValueError(f"signal {found.id!r}: no Grafana steps for `{found.bad}`")


def thresholds(signal_id: str | None) -> dict:
    pairs = [(BLUE, None)] if signal_id is None else steps(signal(signal_id))
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for c, v in pairs]}


# --------------------------------------------------------------------------------------
# Template variables
# --------------------------------------------------------------------------------------
def datasource_var() -> dict:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
        "skipUrlSync": False,
    }


def query_var(
    name: str, label: str, query: str, *, multi: bool, include_all: bool, sort: int = 1
) -> dict:
    var = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {
            "qryType": 1,
            "query": query,
            "refId": "PrometheusVariableQueryEditor-VariableQuery",
        },
        "current": {},
        "hide": 0,
        "includeAll": include_all,
        "multi": multi,
        "options": [],
        "refresh": 2,  # on time range change: brokers come and go
        "regex": "",
        "skipUrlSync": False,
        "sort": sort,
    }
    if include_all:
        var["allValue"] = ".+"
    return var


def cluster_var(*, multi: bool = True) -> dict:
    return query_var(
        "cluster",
        "Cluster",
        f"label_values({q('brokers_reporting')}, cluster)",
        multi=multi,
        include_all=multi,
    )


def broker_var() -> dict:
    return query_var(
        "broker",
        "Broker",
        f"label_values({q('partitions', C)}, broker)",
        multi=True,
        include_all=True,
        sort=3,  # numerical ascending: broker ids
    )


def instance_var() -> dict:
    return query_var(
        "instance",
        "Pipeline instance",
        f"label_values({q('pipeline_up')}, instance)",
        multi=True,
        include_all=True,
    )


# --------------------------------------------------------------------------------------
# Targets and panels
# --------------------------------------------------------------------------------------
def target(expr: str, legend: str = "__auto", ref: str = "A", *, instant: bool = False,
           table: bool = False) -> dict:
    return {
        "datasource": DS,
        "editorMode": "code",
        "expr": expr,
        "format": "table" if table else "time_series",
        "instant": instant,
        "range": not instant,
        "legendFormat": legend,
        "refId": ref,
    }


def _field_defaults(unit: str, thr: str | None, *, decimals: int | None = None, vmin=None, vmax=None,
                    mappings: list | None = None, no_value: str | None = None) -> dict:
    d: dict = {
        "color": {"mode": "thresholds"},
        "mappings": mappings or [],
        "thresholds": thresholds(thr),
        "unit": unit,
    }
    if decimals is not None:
        d["decimals"] = decimals
    if vmin is not None:
        d["min"] = vmin
    if vmax is not None:
        d["max"] = vmax
    if no_value is not None:
        d["noValue"] = no_value
    return d


def stat(title: str, description: str, targets: list[dict], *, unit: str = "short",
         thr: str | None = None, w: int = 4, h: int = 4, decimals: int | None = 0,
         mappings: list | None = None, no_value: str | None = None,
         graph: bool = False, text_mode: str = "value_and_name", links: list | None = None) -> dict:
    p = {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {
            "defaults": _field_defaults(unit, thr, decimals=decimals, mappings=mappings,
                                        no_value=no_value),
            "overrides": [],
        },
        "options": {
            "colorMode": "background",
            "graphMode": "area" if graph else "none",
            "justifyMode": "auto",
            "orientation": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": text_mode,
            "wideLayout": True,
            "showPercentChange": False,
        },
        "_size": (w, h),
    }
    if links:
        p["links"] = links
    return p


def timeseries(title: str, description: str, targets: list[dict], *, unit: str = "short",
               thr: str | None = None, w: int = 12, h: int = 8, bars: bool = False,
               threshold_style: str = "off", vmin=0, vmax=None, decimals: int | None = None,
               overrides: list | None = None, no_value: str | None = None) -> dict:
    defaults = _field_defaults(unit, thr, decimals=decimals, vmin=vmin, vmax=vmax,
                               no_value=no_value)
    defaults["color"] = {"mode": "palette-classic"}
    defaults["custom"] = {
        "drawStyle": "bars" if bars else "line",
        "lineInterpolation": "stepAfter" if bars else "linear",
        "lineWidth": 1,
        "fillOpacity": 60 if bars else 10,
        "gradientMode": "none",
        "showPoints": "never",
        "spanNulls": False,
        "axisPlacement": "auto",
        "axisSoftMin": 0 if vmin is None else vmin,
        "stacking": {"group": "A", "mode": "none"},
        "thresholdsStyle": {"mode": threshold_style},
    }
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                       "calcs": ["lastNotNull", "max"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "_size": (w, h),
    }


def bargauge(title: str, description: str, targets: list[dict], *, unit: str = "short",
             thr: str | None = None, w: int = 12, h: int = 8, vmin=None, vmax=None,
             decimals: int | None = None) -> dict:
    return {
        "type": "bargauge",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {
            "defaults": _field_defaults(unit, thr, decimals=decimals, vmin=vmin, vmax=vmax),
            "overrides": [],
        },
        "options": {
            "displayMode": "gradient",
            "orientation": "horizontal",
            "namePlacement": "left",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "showUnfilled": True,
            "sizing": "auto",
            "valueMode": "color",
            "minVizHeight": 16,
            "minVizWidth": 8,
            "maxVizHeight": 300,
        },
        "_size": (w, h),
    }


def column(name: str, unit: str | None = None, thr: str | None = None, *,
           decimals: int | None = None, links: list | None = None) -> dict:
    props: list[dict] = []
    if unit:
        props.append({"id": "unit", "value": unit})
    if decimals is not None:
        props.append({"id": "decimals", "value": decimals})
    if thr:
        props.append({"id": "thresholds", "value": thresholds(thr)})
        props.append({"id": "color", "value": {"mode": "thresholds"}})
        props.append({"id": "custom.cellOptions", "value": {"type": "color-background"}})
    if links:
        props.append({"id": "links", "value": links})
    return {"matcher": {"id": "byName", "options": name}, "properties": props}


def table(title: str, description: str, targets: list[dict], *, renames: dict[str, str],
          order: list[str], columns: list[dict], sort_by: str | None = None,
          sort_desc: bool = False, w: int = 24, h: int = 8, hide: tuple[str, ...] = ()) -> dict:
    """A table of instant queries merged on their labels.

    `renames` maps frame field names ("Value #A", label names) to column titles,
    `order` lists the raw field names in display order, `hide` the fields not shown (the
    value of an info series, always 1).
    """
    exclude = {"Time": True, **dict.fromkeys(hide, True)}
    p = {
        "type": "table",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {
            "defaults": {
                "color": {"mode": "thresholds"},
                "custom": {"align": "auto", "cellOptions": {"type": "auto"}, "filterable": True},
                "mappings": [],
                "thresholds": thresholds(None),
                "unit": "short",
            },
            "overrides": columns,
        },
        "options": {
            "cellHeight": "sm",
            "footer": {"show": False, "reducer": ["sum"], "countRows": False, "fields": ""},
            "showHeader": True,
            "sortBy": [{"displayName": sort_by, "desc": sort_desc}] if sort_by else [],
        },
        "transformations": [
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": exclude,
                    "indexByName": {name: i for i, name in enumerate(order)},
                    "renameByName": renames,
                },
            },
        ],
        "_size": (w, h),
    }
    return p


def row(title: str) -> dict:
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "_size": (24, 1)}


def value_map(pairs: list[tuple[float, str, str]]) -> list[dict]:
    return [
        {
            "type": "value",
            "options": {str(v): {"text": text, "color": color, "index": i}
                        for i, (v, text, color) in enumerate(pairs)},
        }
    ]


# --------------------------------------------------------------------------------------
# Layout: panels flow left to right and wrap at 24 columns; a row starts a new line.
# --------------------------------------------------------------------------------------
def layout(items: list[dict]) -> list[dict]:
    panels: list[dict] = []
    x = y = line_h = 0
    next_id = 1
    for item in items:
        w, h = item.pop("_size")
        if item["type"] == "row" or x + w > 24:
            y += line_h
            x, line_h = 0, 0
        item["id"] = next_id
        next_id += 1
        item["gridPos"] = {"h": h, "w": w, "x": x, "y": y}
        x += w
        line_h = max(line_h, h)
        if item["type"] == "row":
            y += h
            x, line_h = 0, 0
        panels.append(item)
    return panels


def dashboard(uid: str, title: str, description: str, tags: list[str], variables: list[dict],
              items: list[dict], *, time_from: str = "now-6h",
              annotations: list[dict] | None = None) -> dict:
    return {
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                },
                *(annotations or []),
            ]
        },
        "description": description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [
            {
                "asDropdown": True,
                "icon": "external link",
                "includeVars": True,
                "keepTime": True,
                "tags": ["kafka-health"],
                "targetBlank": False,
                "title": "kafka-health",
                "tooltip": "",
                "type": "dashboards",
                "url": "",
            }
        ],
        "panels": layout(items),
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["kafka-health", *tags],
        "templating": {"list": variables},
        "time": {"from": time_from, "to": "now"},
        "timepicker": {},
        "timezone": "utc",
        "title": title,
        "uid": uid,
        "version": 1,
        "weekStart": "",
    }


def unclean_annotation(sel: str) -> dict:
    return {
        "datasource": DS,
        "enable": True,
        "hide": False,
        "iconColor": "red",
        "name": "Unclean leader election",
        "expr": f"sum by (cluster, broker) ({q('unclean_elections', sel)}) "
                f"{signal('unclean_elections').bad}",
        "step": "1m",
        "titleFormat": "Unclean leader election (data loss)",
        "textFormat": "cluster {{cluster}} broker {{broker}}",
        "useValueForTime": False,
    }


BROKER_LINK = [
    {
        "title": "Broker drill-down",
        "url": "/d/kafka-health-broker/kafka-health-broker-drill-down"
               "?var-cluster=${__data.fields.cluster}&var-broker=${__data.fields.broker}"
               "&${__url_time_range}",
    }
]

C = 'cluster=~"$cluster"'
CB = 'cluster=~"$cluster",broker=~"$broker"'
I = 'instance=~"$instance"'  # noqa: E741
NOT_OK = 'cluster=~"$cluster",status!="ok"'  # a consumer group's status other than ok


# --------------------------------------------------------------------------------------
# 1. Fleet overview
# --------------------------------------------------------------------------------------
def fleet() -> dict:
    by_c = "{{cluster}}"
    items = [
        row("Paging signals (per cluster, newest window)"),
        stat("Under-min-ISR partitions",
             "Partitions whose ISR is below min.insync.replicas, summed over the brokers that "
             "lead them (no double counting). Bad: anything > 0 (red) - producers with "
             "acks=all get NotEnoughReplicas for those partitions. Pages.",
             [target(f"sum by (cluster) ({q('under_min_isr', C)})", by_c)],
             thr="under_min_isr"),
        stat("Offline partitions",
             "Partitions without a leader, as reported by the active controller. Bad: > 0 "
             "(red) - those partitions accept neither reads nor writes. Pages.",
             [target(f"max by (cluster) ({q('offline_partitions', C)})", by_c)],
             thr="offline_partitions"),
        stat("Unclean elections (in time range)",
             "Largest unclean-leader-election window increase seen per broker during the "
             "selected time range, summed per cluster. Bad: > 0 (red) - an out-of-sync "
             "replica became leader and committed records were lost. Pages on the first one.",
             [target("sum by (cluster) (max_over_time("
                     f"{q('unclean_elections', C)}[$__range]))",
                     by_c)],
             thr="unclean_elections"),
        stat("Active controllers",
             "Sum of ActiveControllerCount in the newest window. Healthy: exactly 1 (green). "
             "Bad: 0 (no controller: no leader elections, no metadata changes) or more than "
             "1 (split brain). Both red. Pages.",
             [target(f"max by (cluster) ({q('active_controllers', C)})", by_c)],
             thr="active_controllers"),
        stat("Stale brokers",
             "Brokers that sent no samples for stale_after_intervals scrape intervals. Bad: "
             "> 0 (orange) - every other signal for those brokers is old; check the broker "
             "and its metrics exporter.",
             [target(f"sum by (cluster) ({q('broker_stale', C)})", by_c)],
             thr="broker_stale"),
        stat("Open incidents",
             "Open incidents of every kind (under-min-ISR, offline partitions, unclean "
             "election, controller, saturation, stale broker). Bad: > 0 (orange); see the "
             "table below for the kinds. Shows 0 while the cluster reports but has no "
             "incident series.",
             [target(f"sum by (cluster) ({q('open_incidents', C)}) "
                     f"or sum by (cluster) (0 * {q('brokers_reporting', C)})", by_c)],
             thr="open_incidents"),
        row("Saturation and freshness (per cluster)"),
        stat("Brokers reporting",
             "Brokers with samples in the newest window. Bad: fewer than the cluster's "
             "broker count - compare with Stale brokers.",
             [target(f"max by (cluster) ({q('brokers_reporting', C)})", by_c)]),
        stat("Under-replicated partitions",
             "Partitions with ISR smaller than the replica set, summed per cluster. Bad: "
             "> 0 (orange) for longer than a broker restart; one more failure may take "
             "partitions under min ISR.",
             [target(f"sum by (cluster) ({q('under_replicated', C)})",
                     by_c)],
             thr="under_replicated"),
        stat("Worst request queue utilization",
             "Highest RequestQueueSize / queued.max.requests of any broker. Bad: > 0.8 "
             "(orange) - at 1.0 the network threads stop reading from sockets.",
             [target("max by (cluster) "
                     f"({q('request_queue', C)})", by_c)],
             unit="percentunit", thr="request_queue", decimals=1),
        stat("Lowest request handler idle",
             "Lowest request handler (I/O thread) idle fraction of any broker. Bad: < 0.2 "
             "(orange) - I/O threads are saturated and request latency rises.",
             [target(f"min by (cluster) ({q('request_handler_idle', C)})",
                     by_c)],
             unit="percentunit", thr="request_handler_idle", decimals=1),
        stat("Oldest broker sample",
             "Largest gap between the cluster's newest event time and a broker's newest "
             "sample. Bad: >= 180 s (orange) - that broker's signals are stale.",
             [target("max by (cluster) "
                     f"({q('broker_sample_age', C)})", by_c)],
             unit="s", thr="broker_sample_age"),
        stat("Cluster silent for",
             "Wall-clock seconds since the cluster's newest sample from any broker. Bad: "
             "> 120 s (red) - the whole cluster, or its one metrics shipper, went quiet; "
             "KafkaClusterDark pages while the pipeline itself runs.",
             [target(q("cluster_silence", C), by_c)],
             unit="s", thr="cluster_silence"),
        stat("Pipeline last batch age",
             "Seconds since the kafka-health pipeline (all instances, not per cluster) "
             "finished a micro-batch. Bad: > 300 s (orange) - every panel here is stale. "
             "Keeps counting when the pipeline stops being scraped.",
             [target(f"time() - max(last_over_time({q('last_batch')}[1h]))", "last batch")],
             unit="s", thr="batch_age", text_mode="value"),
        row("KRaft: what the controller quorum knows (per cluster)"),
        stat("Offline log directories",
             "Failed log directories summed over the brokers (OfflineLogDirectoryCount). "
             "Bad: > 0 (red) - every replica in such a directory is offline on its broker "
             "until it restarts with the disk repaired. Pages.",
             [target(f"sum by (cluster) ({q('offline_log_dirs', C)})",
                     by_c)],
             thr="offline_log_dirs"),
        stat("Fenced brokers",
             "Brokers the active controller has fenced (FencedBrokerCount). Bad: > 0 (red) - "
             "they lead nothing and leave every ISR; pages while their metrics still flow "
             "(more fenced than stale brokers).",
             [target(f"max by (cluster) ({q('fenced_brokers', C)})", by_c)],
             thr="fenced_brokers"),
        stat("Active brokers",
             "Registered, unfenced brokers as the active controller sees them "
             "(ActiveBrokerCount). Bad: fewer than the cluster's brokers.",
             [target(f"max by (cluster) ({q('active_brokers', C)})", by_c)]),
        stat("Worst metadata lag",
             "How far behind the metadata log the slowest broker applies records. Healthy: "
             "under a second. Bad: over 30 s (orange) - it serves a stale view of leaders "
             "and ISRs.",
             [target("max by (cluster) "
                     f"({q('metadata_lag', C)})", by_c)],
             unit="ms", thr="metadata_lag"),
        stat("Metadata errors",
             "Errors loading or applying the metadata log in the newest window, summed over "
             "the nodes. Bad: > 0 (orange).",
             [target("sum by (cluster) "
                     f"({q('metadata_errors', C)})", by_c)],
             thr="metadata_errors"),
        stat("Controller elections (5 min)",
             "New active controllers elected in the last 5 minutes, each once. One failover "
             "is 1 or 2. Bad: 3 or more (orange) - the controller keeps moving.",
             [target(f"max by (cluster) ({q('controller_elections', C)})",
                     by_c)],
             thr="controller_elections"),
        stat("ELR elections",
             "Leaders elected from the eligible leader replicas (KIP-966) in the newest "
             "window. Not data loss (unclean elections are); bad: > 0 (orange) - the whole "
             "ISR of a partition had failed.",
             [target("max by (cluster) "
                     f"({q('elr_elections', C)})", by_c)],
             thr="elr_elections"),
        stat("Eligible leader replicas",
             "Whether the cluster's controller keeps eligible leader replicas (KIP-966, "
             "eligible.leader.replicas.version >= 1; the default of clusters created on "
             "Kafka 4.1 and later). ON: a partition whose whole ISR failed gets a leader that "
             "holds every acknowledged write. OFF (orange): it stays offline, or is elected "
             "uncleanly (data loss) where unclean election is enabled.",
             [target(f"max by (cluster) ({q('elr_enabled', C)})", by_c)],
             mappings=value_map([(0, "OFF", ORANGE), (1, "ON", GREEN)])),
        stat("Preferred replica imbalance",
             "Partitions led by a replica other than their preferred one "
             "(PreferredReplicaImbalanceCount of the active controller). Informational: "
             "leadership concentrated on fewer brokers after restarts.",
             [target(f"max by (cluster) ({q('preferred_imbalance', C)})",
                     by_c)]),
        row("Open incidents"),
        table("Open incidents by kind",
              "Incidents open right now, per cluster and kind. Bad: any row. Empty when the "
              "fleet is healthy.",
              [target(f"sum by (cluster, kind) ({q('open_incidents', C)}) > 0",
                      instant=True, table=True)],
              renames={"cluster": "Cluster", "kind": "Kind", "Value": "Open"},
              order=["cluster", "kind", "Value"],
              columns=[column("Open", thr="open_incidents", decimals=0)],
              sort_by="Open", sort_desc=True, w=8, h=8),
        timeseries("Open incidents over time",
                   "Open incidents per cluster and kind. Bad: a step up that does not come "
                   "back down; a saw-tooth means a flapping condition.",
                   [target(f"sum by (cluster, kind) ({q('open_incidents', C)})",
                           "{{cluster}} {{kind}}")],
                   thr="open_incidents", w=16, h=8, decimals=0),
        row("Brokers by partition headroom"),
        table("Brokers by headroom (lowest first)",
              "Every broker, lowest headroom ratio first: the bound that limits it, partitions "
              "hosted, headroom in partitions and days until the ceiling at the current "
              "growth. Bad: ratio < 0.2 (orange; below 0 the broker is past its ceiling); "
              "days to ceiling < 30 (orange). Click a broker for the drill-down.",
              [
                  target("min by (cluster, broker, binding_bound) "
                         f"({q('headroom_ratio', C)})",
                         ref="A", instant=True, table=True),
                  target(f"max by (cluster, broker) ({q('partitions', C)})",
                         ref="B", instant=True, table=True),
                  target(f"min by (cluster, broker) ({q('headroom', C)})",
                         ref="C", instant=True, table=True),
                  target("min by (cluster, broker) "
                         f"({q('days_to_ceiling', C)})",
                         ref="D", instant=True, table=True),
              ],
              renames={"cluster": "Cluster", "broker": "Broker",
                       "binding_bound": "Binding bound", "Value #A": "Headroom ratio",
                       "Value #B": "Partitions", "Value #C": "Headroom",
                       "Value #D": "Days to ceiling"},
              order=["cluster", "broker", "binding_bound", "Value #A", "Value #C",
                     "Value #B", "Value #D"],
              columns=[
                  column("Headroom ratio", "percentunit", "headroom_ratio", decimals=1),
                  column("Days to ceiling", "d", "days_to_ceiling", decimals=0),
                  column("Partitions", decimals=0),
                  column("Headroom", decimals=0),
                  column("Broker", links=BROKER_LINK),
              ],
              sort_by="Headroom ratio", h=10),
    ]
    return dashboard(
        "kafka-health-fleet", "kafka-health / Fleet overview",
        "Every cluster at a glance: paging signals, open incidents, brokers by headroom.",
        ["fleet"], [datasource_var(), cluster_var()], items,
        annotations=[unclean_annotation(C)],
    )


# --------------------------------------------------------------------------------------
# 2. Broker drill-down
# --------------------------------------------------------------------------------------
def broker() -> dict:
    b = "{{broker}}"
    items = [
        row("Status now"),
        stat("Freshness",
             "Whether the broker is sending samples. Bad: STALE (orange) - it sent nothing "
             "for stale_after_intervals scrape intervals; the rest of this page is old.",
             [target(f"max by (broker) ({q('broker_stale', CB)})", b)],
             thr="broker_stale", mappings=value_map([(0, "fresh", GREEN), (1, "STALE", ORANGE)])),
        stat("Last sample age",
             "Seconds between the cluster's newest event time and this broker's newest "
             "sample. Bad: >= 180 s (orange).",
             [target(f"max by (broker) ({q('broker_sample_age', CB)})",
                     b)],
             unit="s", thr="broker_sample_age"),
        stat("Under-min-ISR (led)",
             "Partitions this broker leads whose ISR is below min.insync.replicas. Bad: > 0 "
             "(red): acks=all produce fails for them. Pages.",
             [target(f"max by (broker) ({q('under_min_isr', CB)})", b)],
             thr="under_min_isr"),
        stat("Unclean elections (window)",
             "Unclean leader elections on this broker in the newest window. Bad: > 0 (red) "
             "- data loss. Pages.",
             [target("max by (broker) "
                     f"({q('unclean_elections', CB)})", b)],
             thr="unclean_elections"),
        stat("Request queue utilization",
             "RequestQueueSize / queued.max.requests. Bad: > 0.8 (orange); at 1.0 the "
             "network threads block.",
             [target("max by (broker) "
                     f"({q('request_queue', CB)})", b)],
             unit="percentunit", thr="request_queue", decimals=1),
        stat("File descriptors used",
             "Open / max file descriptors of the broker JVM. Bad: >= 0.8 (orange) - at the "
             "limit the broker cannot open segments or accept connections.",
             [target(f"max by (broker) ({q('fd_utilization', CB)})", b)],
             unit="percentunit", thr="fd_utilization", decimals=1),
        row("Replication"),
        timeseries("Under-min-ISR partitions",
                   "Partitions led by the broker with ISR below min.insync.replicas. Bad: "
                   "above the red line (> 0).",
                   [target(f"{q('under_min_isr', CB)}", b)],
                   thr="under_min_isr", threshold_style="line", w=8, decimals=0),
        timeseries("At-min-ISR partitions",
                   "Partitions led by the broker whose ISR equals min.insync.replicas. Bad: "
                   "> 0 (orange) - one more replica loss blocks acks=all producers.",
                   [target(f"{q('at_min_isr', CB)}", b)],
                   thr="at_min_isr", threshold_style="line", w=8, decimals=0),
        timeseries("Under-replicated partitions",
                   "Partitions led by the broker with ISR smaller than the replica set. Bad: "
                   "> 0 (orange) for longer than a restart or reassignment.",
                   [target(f"{q('under_replicated', CB)}", b)],
                   thr="under_replicated", threshold_style="line", w=8, decimals=0),
        timeseries("ISR shrinks vs expands (per window)",
                   "ISR shrinks and expands in each window. Healthy: shrinks are followed by "
                   "as many expands (a replica fell behind and caught up). Bad: shrinks "
                   "without expands, or a steady stream of both (flapping followers). "
                   "Expands alone follow a broker's restart: the controller took its "
                   "replicas out of the ISR, which no broker counts as a shrink.",
                   [target(f"{q('isr_shrinks', CB)}",
                           "{{broker}} shrinks", "A"),
                    target(f"{q('isr_expands', CB)}",
                           "{{broker}} expands", "B")],
                   bars=True, w=8, decimals=0),
        timeseries("Unmatched ISR shrinks",
                   "ISR shrinks not followed by an expand within the configured time. Bad: "
                   "> 0 (orange) - a replica left the ISR and did not come back.",
                   [target(f"{q('unmatched_shrinks', CB)}", b)],
                   thr="unmatched_shrinks", threshold_style="line", w=8, decimals=0),
        timeseries("Unclean leader elections (per window)",
                   "Unclean leader elections per window. Bad: any bar (red) - committed "
                   "records were lost.",
                   [target(f"{q('unclean_elections', CB)}",
                           b)],
                   thr="unclean_elections", threshold_style="line", bars=True, w=8, decimals=0),
        row("Request plane"),
        timeseries("Request queue utilization",
                   "RequestQueueSize / queued.max.requests (max per window). Bad: above the "
                   "orange line (0.8); at 1.0 network threads stop reading.",
                   [target(f"{q('request_queue', CB)}", b)],
                   unit="percentunit", thr="request_queue", threshold_style="line", vmax=1,
                   w=6),
        timeseries("Response queue size",
                   "ResponseQueueSize (max per window). Bad: growing steadily - network "
                   "threads cannot send responses as fast as handlers produce them.",
                   [target(f"{q('response_queue', CB)}", b)], w=6),
        timeseries("Request handler idle",
                   "Request handler (I/O thread) idle fraction, min per window. Bad: below "
                   "the orange line (0.2) - I/O threads saturated.",
                   [target(f"{q('request_handler_idle', CB)}", b)],
                   unit="percentunit", thr="request_handler_idle", threshold_style="line", vmax=1, w=6),
        timeseries("Network processor idle",
                   "Network processor idle fraction, min per window (can read slightly above "
                   "1). Bad: below the orange line (0.3) - network threads saturated.",
                   [target(f"{q('network_idle', CB)}", b)],
                   unit="percentunit", thr="network_idle", threshold_style="line", w=6),
        row("File descriptors"),
        timeseries("Open vs max file descriptors",
                   "Open file descriptors of the broker JVM against its limit (dashed). Bad: "
                   "open approaching max.",
                   [target(f"{q('open_fds', CB)}", "{{broker}} open",
                           "A"),
                    target(f"{q('max_fds', CB)}", "{{broker}} max",
                           "B")],
                   overrides=[dashed_override("max$")]),
        timeseries("File descriptor utilization",
                   "Open / max file descriptors. Bad: above the orange line (0.8).",
                   [target(q("fd_utilization", CB), b)],
                   unit="percentunit", thr="fd_utilization", threshold_style="line", vmax=1),
        row("Partitions and leaders against the ceilings"),
        timeseries("Partitions vs ceiling per bound",
                   "Partitions hosted (solid) against each bound's ceiling (dashed: mmap, "
                   "file descriptors, recovery, guard rails). Bad: the solid line approaching "
                   "the lowest dashed one.",
                   [target(f"{q('partitions', CB)}", "{{broker}} partitions", "A"),
                    target(f"{q('partition_ceiling', CB)}",
                           "{{broker}} ceiling {{bound}}", "B")],
                   overrides=[dashed_override("ceiling")]),
        timeseries("Leaders vs recovery ceiling",
                   "Partition leaders on the broker against the recovery bound (failover "
                   "budget / time per leader election, dashed). Bad: leaders near the "
                   "recovery ceiling - a failover of this broker would exceed the budget.",
                   [target(f"{q('leaders', CB)}", "{{broker}} leaders", "A"),
                    target(q("partition_ceiling", CB + ',bound="recovery"'),
                           "{{broker}} recovery ceiling", "B")],
                   overrides=[dashed_override("ceiling")]),
        timeseries("Headroom ratio",
                   "(binding ceiling - partitions) / binding ceiling; the legend names the "
                   "binding bound. Bad: below the orange line (0.2), below 0 past the ceiling.",
                   [target(f"{q('headroom_ratio', CB)}",
                           "{{broker}} ({{binding_bound}})")],
                   unit="percentunit", thr="headroom_ratio", threshold_style="line",
                   vmin=None),
        timeseries("Days to partition ceiling",
                   "Days until the binding ceiling at the observed growth. Bad: < 30 "
                   "(orange). No data when partitions are not growing.",
                   [target(f"{q('days_to_ceiling', CB)}", b)],
                   unit="d", thr="days_to_ceiling", threshold_style="line",
                   no_value="not growing"),
        row("Cluster context"),
        timeseries("Active controllers",
                   "ActiveControllerCount summed over the cluster. Bad: anything but 1 (red).",
                   [target(f"max by (cluster) ({q('active_controllers', C)})",
                           "{{cluster}}")],
                   thr="active_controllers", threshold_style="line", w=8, decimals=0),
        timeseries("Offline partitions",
                   "Partitions without a leader in the cluster. Bad: > 0 (red).",
                   [target(f"max by (cluster) ({q('offline_partitions', C)})",
                           "{{cluster}}")],
                   thr="offline_partitions", threshold_style="line", w=8, decimals=0),
        timeseries("Brokers reporting",
                   "Brokers with samples in the newest window. Bad: a drop - a broker is down "
                   "or its metrics stopped.",
                   [target(f"max by (cluster) ({q('brokers_reporting', C)})",
                           "{{cluster}}")],
                   w=8, decimals=0),
    ]
    return dashboard(
        "kafka-health-broker", "kafka-health / Broker drill-down",
        "One cluster, one or more brokers: every health signal over time.",
        ["broker"], [datasource_var(), cluster_var(multi=False), broker_var()], items,
        annotations=[unclean_annotation(CB)],
    )


def dashed_override(regex: str) -> dict:
    return {
        "matcher": {"id": "byRegexp", "options": f".*{regex}.*" if regex[-1] != "$" else
                    f".*{regex}"},
        "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}],
    }


# --------------------------------------------------------------------------------------
# 3. Durability
# --------------------------------------------------------------------------------------
def durability() -> dict:
    by_c = "{{cluster}}"
    cb = "{{cluster}}/{{broker}}"
    items = [
        row("Now (per cluster)"),
        stat("Under-min-ISR partitions",
             "Partitions with ISR below min.insync.replicas. Bad: > 0 (red) - acks=all "
             "writes to them fail. Pages.",
             [target(f"sum by (cluster) ({q('under_min_isr', CB)})",
                     by_c)], thr="under_min_isr", w=4),
        stat("At-min-ISR partitions",
             "Partitions whose ISR equals min.insync.replicas. Bad: > 0 (orange) - one more "
             "replica loss and they go under min ISR.",
             [target(f"sum by (cluster) ({q('at_min_isr', CB)})",
                     by_c)], thr="at_min_isr", w=4),
        stat("Under-replicated partitions",
             "Partitions with ISR smaller than the replica set. Bad: > 0 (orange) beyond a "
             "rolling restart.",
             [target(f"sum by (cluster) ({q('under_replicated', CB)})",
                     by_c)], thr="under_replicated", w=4),
        stat("Unclean elections (in time range)",
             "Peak unclean-election window increase per broker over the time range, summed. "
             "Bad: > 0 (red) - data loss happened. Pages.",
             [target("sum by (cluster) (max_over_time("
                     f"{q('unclean_elections', CB)}[$__range]))",
                     by_c)], thr="unclean_elections", w=4),
        stat("Offline partitions",
             "Partitions without a leader (from the active controller). Bad: > 0 (red). "
             "Pages.",
             [target(f"max by (cluster) ({q('offline_partitions', C)})", by_c)],
             thr="offline_partitions", w=4),
        stat("Active controllers",
             "ActiveControllerCount summed over the cluster. Healthy: 1. Bad: 0 or > 1 "
             "(red). Pages.",
             [target(f"max by (cluster) ({q('active_controllers', C)})", by_c)],
             thr="active_controllers", w=4),
        row("Over time"),
        timeseries("Under-min-ISR partitions by broker",
                   "Partitions each broker leads with ISR below min.insync.replicas. Bad: any "
                   "line above the red threshold (> 0).",
                   [target(f"{q('under_min_isr', CB)}", cb)],
                   thr="under_min_isr", threshold_style="line", w=8, decimals=0),
        timeseries("At-min-ISR partitions by broker",
                   "Partitions each broker leads with ISR exactly at min.insync.replicas. "
                   "Bad: > 0 (orange) - no margin left.",
                   [target(f"{q('at_min_isr', CB)}", cb)],
                   thr="at_min_isr", threshold_style="line", w=8, decimals=0),
        timeseries("Under-replicated partitions by broker",
                   "Partitions each broker leads with ISR smaller than the replica set. Bad: "
                   "> 0 (orange) for more than a restart.",
                   [target(f"{q('under_replicated', CB)}", cb)],
                   thr="under_replicated", threshold_style="line", w=8, decimals=0),
        timeseries("ISR shrinks vs expands (per window, per cluster)",
                   "ISR shrinks and expands per window summed per cluster. Healthy: shrinks "
                   "matched by expands. Bad: shrinks without expands (replicas leave the ISR "
                   "for good) or constant churn of both (flapping followers). Expands alone "
                   "follow a broker's restart (the controller's ISR removals count no shrink).",
                   [target("sum by (cluster) "
                           f"({q('isr_shrinks', CB)})",
                           "{{cluster}} shrinks", "A"),
                    target("sum by (cluster) "
                           f"({q('isr_expands', CB)})",
                           "{{cluster}} expands", "B")],
                   bars=True, w=8, decimals=0),
        timeseries("Unmatched ISR shrinks by broker",
                   "ISR shrinks not followed by an expand within the configured time. Bad: "
                   "> 0 (orange).",
                   [target(f"{q('unmatched_shrinks', CB)}", cb)],
                   thr="unmatched_shrinks", threshold_style="line", w=8, decimals=0),
        timeseries("Unclean leader elections by broker",
                   "Unclean leader elections per window. Bad: any bar (red) - data loss.",
                   [target(f"{q('unclean_elections', CB)}",
                           cb)],
                   thr="unclean_elections", threshold_style="line", bars=True, w=8, decimals=0),
        timeseries("Offline partitions",
                   "Partitions without a leader per cluster. Bad: > 0 (red).",
                   [target(f"max by (cluster) ({q('offline_partitions', C)})", by_c)],
                   thr="offline_partitions", threshold_style="line", w=12, decimals=0),
        timeseries("Active controllers",
                   "ActiveControllerCount per cluster. Bad: anything but 1 (red band).",
                   [target(f"max by (cluster) ({q('active_controllers', C)})", by_c)],
                   thr="active_controllers", threshold_style="area", w=12, decimals=0),
        row("Per broker now"),
        table("Durability per broker",
              "Every broker's replication state in the newest window. Bad: red cells "
              "(under-min-ISR, unclean elections) page; orange cells (at-min-ISR, "
              "under-replicated, unmatched shrinks) warn. Click a broker for the drill-down.",
              [target("max by (cluster, broker) "
                      f"({q('under_min_isr', CB)})",
                      ref="A", instant=True, table=True),
               target("max by (cluster, broker) "
                      f"({q('at_min_isr', CB)})",
                      ref="B", instant=True, table=True),
               target("max by (cluster, broker) "
                      f"({q('under_replicated', CB)})",
                      ref="C", instant=True, table=True),
               target("max by (cluster, broker) "
                      f"({q('unmatched_shrinks', CB)})",
                      ref="D", instant=True, table=True),
               target("max by (cluster, broker) "
                      f"({q('unclean_elections', CB)})",
                      ref="E", instant=True, table=True)],
              renames={"cluster": "Cluster", "broker": "Broker",
                       "Value #A": "Under-min-ISR", "Value #B": "At-min-ISR",
                       "Value #C": "Under-replicated", "Value #D": "Unmatched shrinks",
                       "Value #E": "Unclean elections"},
              order=["cluster", "broker", "Value #A", "Value #E", "Value #B", "Value #C",
                     "Value #D"],
              columns=[column("Under-min-ISR", thr="under_min_isr", decimals=0),
                       column("Unclean elections", thr="unclean_elections", decimals=0),
                       column("At-min-ISR", thr="at_min_isr", decimals=0),
                       column("Under-replicated", thr="under_replicated", decimals=0),
                       column("Unmatched shrinks", thr="unmatched_shrinks", decimals=0),
                       column("Broker", links=BROKER_LINK)],
              sort_by="Under-min-ISR", sort_desc=True, h=10),
        row("Configuration and causes (Admin API)"),
        stat("Durability audit findings",
             "Open findings of the durability audit (metrics_schemas/durability.yaml) from "
             "the latest Admin API poll: min.insync.replicas above RF, RF below 3, "
             "min.insync.replicas 1, unclean election enabled, racks. Bad: > 0 (orange). "
             "The durability_audit table names each topic and partition.",
             [target(f"sum by (cluster) ({q('audit_findings', C)})",
                     by_c)], thr="audit_findings", w=6),
        stat("Admin API reachable",
             "Whether the latest poll of the cluster's Admin API succeeded. Bad: DOWN "
             "(orange) - audit findings and causes are as of the last success.",
             [target(f"min by (cluster) ({q('metadata_up', C)})", by_c)],
             thr="metadata_up", w=6,
             mappings=value_map([(0, "DOWN", ORANGE), (1, "UP", GREEN)])),
        stat("Since the last Admin API poll",
             "Seconds since the latest successful poll (every 30 s by default). Bad: over "
             "5 minutes (orange).",
             [target(f"time() - max by (cluster) ({q('metadata_last_success', C)})", by_c)],
             unit="s", thr="metadata_poll_age", w=6),
        table("Admin API errors",
              "The class of the failing poll: unreachable (no broker answers), unauthorized "
              "(authentication or ACLs), timeout, misconfigured (client settings), error. "
              "Empty while the polls succeed.",
              [target(f"max by (cluster, error) ({q('metadata_error', C)})",
                      ref="A", instant=True, table=True)],
              renames={"cluster": "Cluster", "error": "Error"},
              order=["cluster", "error"], columns=[], w=6, h=4),
        table("Durability audit findings by rule",
              "Findings per rule in the latest successful poll; 0 rows are rules with "
              "none. Bad: orange cells. The runbook KafkaDurabilityAuditFinding says what "
              "each rule means and how to fix it.",
              [target(f"max by (cluster, rule) ({q('audit_findings', C)})",
                      ref="A", instant=True, table=True)],
              renames={"cluster": "Cluster", "rule": "Rule", "Value #A": "Findings"},
              order=["cluster", "rule", "Value #A"],
              columns=[column("Findings", thr="audit_findings", decimals=0)],
              sort_by="Findings", sort_desc=True, w=12, h=9),
        table("Brokers behind partitions in trouble",
              "Per kind (offline, under_min_isr, under_replicated), the brokers missing from "
              "the most affected partitions: out of their ISR, or down for offline ones. "
              "The broker to look at is this one, not the leader that reports the "
              "partitions. Empty while every partition is healthy.",
              [target("max by (cluster, kind, broker) "
                      f"({q('cause_broker_partitions', C)})",
                      ref="A", instant=True, table=True)],
              renames={"cluster": "Cluster", "kind": "Kind", "broker": "Broker",
                       "Value #A": "Partitions missing it"},
              order=["cluster", "kind", "broker", "Value #A"],
              columns=[column("Partitions missing it", decimals=0),
                       column("Broker", links=BROKER_LINK)],
              sort_by="Partitions missing it", sort_desc=True, w=12, h=9),
        table("Causes per leader",
              "What the pages say: per leader (none for offline partitions) and kind, the "
              "brokers behind its partitions in trouble, as KafkaUnderMinIsrPartitions, "
              "KafkaOfflinePartitions and KafkaUnderReplicatedPartitions name them in their "
              "summaries (which leave it out while the Admin API does not answer: see Admin "
              "API reachable). From the latest successful poll; empty while every "
              "partition is healthy.",
              [target("max by (cluster, kind, leader, cause) "
                      f"({q('cause_info', C)})",
                      ref="A", instant=True, table=True)],
              renames={"cluster": "Cluster", "kind": "Kind", "leader": "Leader",
                       "cause": "Cause"},
              order=["cluster", "kind", "leader", "cause"], columns=[], hide=("Value #A",),
              sort_by="Kind", w=24, h=7),
        *probe_panels(),
        *consumer_group_panels(),
    ]
    return dashboard(
        "kafka-health-durability", "kafka-health / Durability",
        "Replication and data-loss signals: under-min-ISR, at-min-ISR, under-replicated, ISR "
        "churn, unclean elections, offline partitions, controllers; from the Admin API, the "
        "durability audit and the brokers behind partitions in trouble; from the clients, "
        "the durability probe's acks=all writes and the consumer groups' lag and losses.",
        ["durability"], [datasource_var(), cluster_var(), broker_var()], items,
        annotations=[unclean_annotation(CB)],
    )


UP_DOWN = value_map([(0, "DOWN", ORANGE), (1, "UP", GREEN)])


def probe_panels() -> list[dict]:
    """The durability probe (config `probe`): acks=all writes through every broker's
    partitions, read back; its series hold the last closed window."""
    by_c = "{{cluster}}"
    cb = "{{cluster}}/{{broker}}"
    return [
        row("Durability probe: acks=all writes through every leader"),
        stat("Probe running",
             "Whether the durability probe can check, write and read its topic on the "
             "cluster. Bad: DOWN (orange) - failing writes and lost records are not measured "
             "(KafkaHealthProbeDown warns after 5 minutes).",
             [target(f"min by (cluster) ({q('probe_up', C)})", by_c)],
             thr="probe_up", w=4, mappings=UP_DOWN),
        stat("Lowest probe availability",
             "Acked / ended acks=all probe writes of the last closed window, for the broker "
             f"whose partitions fare worst. Bad: < {bad_value('probe_availability') * 100:g}% "
             "(red) - producers with acks=all fail there. Pages (KafkaProbeWritesFailing, or "
             "KafkaProbeWritesFailingUnexplained when no metric alert explains it).",
             [target(f"min by (cluster) ({q('probe_availability', CB)})", by_c)],
             unit="percentunit", thr="probe_availability", decimals=1, w=5),
        stat("Worst ack latency p99",
             "The slowest broker's 99th percentile of send-to-ack time of the probe's acks=all "
             f"writes in the last closed window. Bad: > {bad_value('probe_ack_latency'):g} "
             "(orange, seconds) - every acks=all producer there waits as long.",
             [target(f"max by (cluster) ({q('probe_ack_latency', CB)})", by_c)],
             unit="s", thr="probe_ack_latency", decimals=3, w=5),
        stat("Acked records lost",
             "Probe records the cluster acked (acks=all) and the probe could not read back, "
             "since the job started: data loss. Bad: > 0 (red). Pages as data loss "
             "(KafkaProbeDataLoss); probe_losses names each partition and offset.",
             [target(f"sum by (cluster) ({q('probe_lost', CB)}) "
                     f"or 0 * max by (cluster) ({q('probe_up', C)})", by_c)],
             thr="probe_lost", w=5),
        stat("Probe writes in flight",
             "Writes neither acked nor failed yet, plus acked records not read back yet: a "
             "few per partition is normal; a growing number is writes or reads hanging.",
             [target(f"max by (cluster) ({q('probe_pending', C)})", by_c)], w=5),
        timeseries("Probe availability by broker",
                   "Acked / ended acks=all probe writes through the partitions each broker "
                   f"leads, per closed window. Bad: < {bad_value('probe_availability') * 100:g}"
                   "% (red line); broker none is partitions without a leader.",
                   [target(q("probe_availability", CB), cb)],
                   unit="percentunit", thr="probe_availability", threshold_style="line",
                   vmax=1, w=12),
        timeseries("Failed probe writes by error class",
                   "Failed acks=all probe writes per closed window by error class: "
                   "not_enough_replicas (ISR below min.insync.replicas), not_leader, timeout, "
                   "unreachable, out_of_order_sequence (after an unclean election), "
                   "unauthorized, ... Empty while every write is acked.",
                   [target(f"sum by (cluster, broker, error) ({q('probe_failed', CB)})",
                           "{{cluster}}/{{broker}} {{error}}")],
                   bars=True, decimals=0, w=12),
        timeseries("Ack latency p99 by broker",
                   "99th percentile of the probe's send-to-ack time per broker and closed "
                   f"window. Bad: > {bad_value('probe_ack_latency'):g} (orange line, seconds).",
                   [target(q("probe_ack_latency", CB), cb)],
                   unit="s", thr="probe_ack_latency", threshold_style="line", w=8),
        timeseries("Read-back latency p99 by broker",
                   "99th percentile of the probe's send-to-read-back time: what a consumer "
                   "tailing the partition waits for an acks=all record.",
                   [target(q("probe_read_latency", CB), cb)], unit="s", w=8),
        timeseries("Probe writes per window",
                   "acks=all probe writes sent and acked per closed window, summed over the "
                   "brokers: a gap between the two is writes that failed.",
                   [target(f"sum by (cluster) ({q('probe_attempted', CB)})",
                           "{{cluster}} attempted", "A"),
                    target(f"sum by (cluster) ({q('probe_acked', CB)})",
                           "{{cluster}} acked", "B")],
                   decimals=0, w=8),
        timeseries("Acked records lost and read twice by broker",
                   "Probe records acked and never read back (lost: data loss, red in the "
                   "stat above) and records read back at a second offset (duplicated), "
                   "counted since the job started, by the broker that acked them. Empty "
                   "until the first one.",
                   [target(q("probe_lost", CB), "{{cluster}}/{{broker}} lost", "A"),
                    target(q("probe_duplicates", CB), "{{cluster}}/{{broker}} duplicated",
                           "B")],
                   decimals=0, w=24, h=6),
    ]


def consumer_group_panels() -> list[dict]:
    """The consumer groups (config `consumer_groups`): lag, status and loss to retention
    per group and topic."""
    by_c = "{{cluster}}"
    gt = "{{cluster}} {{group}}/{{topic}}"
    with_status = "* ignoring(status) group_left(status) " \
                  f"({q('group_status', C)} == 1)"
    return [
        row("Consumer groups"),
        stat("Group reads succeed",
             "Whether the latest read of the cluster's consumer groups succeeded. Bad: DOWN "
             "(orange) - lag, statuses and losses are as of the last success "
             "(KafkaHealthConsumerGroupsUnavailable warns after 5 minutes).",
             [target(f"min by (cluster) ({q('groups_up', C)})", by_c)],
             thr="groups_up", w=6, mappings=UP_DOWN),
        stat("Group-partitions left out",
             "Group-partitions the latest read did not judge because "
             "consumer_groups.max_partitions was reached. Bad: > 0 (orange) - some groups "
             "are not watched.",
             [target(f"max by (cluster) ({q('groups_left_out', C)})", by_c)],
             thr="groups_left_out", w=6),
        stat("Topics not ok",
             "Group and topic pairs whose worst partition is not ok: warning (lag growing), "
             "stalled (members, no progress), stopped (no member, lag), error (records lost "
             "to retention). KafkaConsumerGroupStalled warns on stalled and stopped.",
             [target(f"count by (cluster) ({q('group_status', NOT_OK)} == 1) "
                     f"or 0 * count by (cluster) ({q('group_status', C)})", by_c)], w=6),
        stat("Records lost to retention",
             "Records retention deleted before a group read them, since the job started: "
             "data loss for those groups. Bad: > 0 (red). Pages as data loss "
             "(KafkaConsumerGroupLostToRetention); consumer_group_losses names the offsets.",
             [target(f"sum by (cluster) ({q('group_lost', C)}) "
                     f"or 0 * max by (cluster) ({q('groups_up', C)})", by_c)],
             thr="group_lost", w=6),
        table("Consumer groups by topic",
              "Per group and topic: the worst partition's status, the records not read yet, "
              "the age of the oldest of them, and the records lost to retention since the "
              "job started (red: > 0). Sorted by lag.",
              [target(f"max by (cluster, group, topic, status) ({q('group_lag', C)} "
                      f"{with_status})", ref="A", instant=True, table=True),
               target(f"max by (cluster, group, topic, status) ({q('group_lag_seconds', C)} "
                      f"{with_status})", ref="B", instant=True, table=True),
               target(f"max by (cluster, group, topic, status) ({q('group_lost', C)} "
                      f"{with_status})", ref="C", instant=True, table=True)],
              renames={"cluster": "Cluster", "group": "Group", "topic": "Topic",
                       "status": "Status", "Value #A": "Lag (records)",
                       "Value #B": "Lag (time)", "Value #C": "Lost to retention"},
              order=["cluster", "group", "topic", "status", "Value #A", "Value #B",
                     "Value #C"],
              columns=[column("Lag (records)", decimals=0),
                       column("Lag (time)", unit="s"),
                       column("Lost to retention", thr="group_lost", decimals=0)],
              sort_by="Lag (records)", sort_desc=True, h=9),
        timeseries("Lag by group and topic (records)",
                   "Records between each group's committed offsets and the log end, summed "
                   "over the topic's partitions; the 20 largest.",
                   [target(f"topk(20, {q('group_lag', C)})", gt)], decimals=0, w=12),
        timeseries("Lag by group and topic (time)",
                   "How old the oldest record each group has not read is; compare with the "
                   "topic's retention: past it, records are lost to the group. The 20 "
                   "oldest.",
                   [target(f"topk(20, {q('group_lag_seconds', C)})", gt)], unit="s", w=12),
    ]


# --------------------------------------------------------------------------------------
# 4. Headroom
# --------------------------------------------------------------------------------------
def headroom() -> dict:
    cb = "{{cluster}}/{{broker}}"
    low_headroom = bad_value("headroom_ratio")
    items = [
        row("Now"),
        stat("Lowest headroom ratio",
             "Smallest (binding ceiling - partitions) / binding ceiling over the selected "
             "brokers. Bad: < 0.2 (orange); below 0 a broker is past its ceiling.",
             [target(f"min({q('headroom_ratio', CB)})", "lowest")],
             unit="percentunit", thr="headroom_ratio", decimals=1, w=6, text_mode="value"),
        stat("Soonest ceiling",
             "Fewest days until a selected broker reaches its binding ceiling at the observed "
             "growth. Bad: < 30 days (orange). 'not growing' when no broker's "
             "partition count grows.",
             [target(f"min({q('days_to_ceiling', CB)})", "soonest")],
             unit="d", thr="days_to_ceiling", decimals=0, w=6, no_value="not growing",
             text_mode="value"),
        stat(f"Brokers under {low_headroom:.0%} headroom",
             f"How many selected brokers have a headroom ratio below {low_headroom:g}. Bad: > 0 "
             "(orange).",
             [target(f"count({bad('headroom_ratio', CB)}) "
                     f"or 0 * count({q('headroom_ratio', CB)})",
                     "brokers")],
             thr="open_incidents", w=6, text_mode="value"),
        stat("Partitions hosted (selected brokers)",
             "Total partition replicas on the selected brokers. Context for the ceilings.",
             [target(f"sum({q('partitions', CB)})", "partitions")],
             w=6, text_mode="value"),
        table("Binding bound per broker",
              "For each broker the bound that limits it, its ceiling, the partitions it "
              "hosts, the headroom and days until the ceiling. Lowest ratio first. Bad: ratio "
              "< 0.2 (orange; below 0 past the ceiling); days < 30 (orange).",
              [target("min by (cluster, broker, binding_bound) "
                      f"({q('headroom_ratio', CB)})",
                      ref="A", instant=True, table=True),
               target(f"min by (cluster, broker) ({q('partition_ceiling', CB)})",
                      ref="B", instant=True, table=True),
               target(f"max by (cluster, broker) ({q('partitions', CB)})",
                      ref="C", instant=True, table=True),
               target(f"min by (cluster, broker) ({q('headroom', CB)})",
                      ref="D", instant=True, table=True),
               target("min by (cluster, broker) "
                      f"({q('days_to_ceiling', CB)})",
                      ref="E", instant=True, table=True)],
              renames={"cluster": "Cluster", "broker": "Broker",
                       "binding_bound": "Binding bound", "Value #A": "Headroom ratio",
                       "Value #B": "Binding ceiling", "Value #C": "Partitions",
                       "Value #D": "Headroom", "Value #E": "Days to ceiling"},
              order=["cluster", "broker", "binding_bound", "Value #A", "Value #B",
                     "Value #C", "Value #D", "Value #E"],
              columns=[column("Headroom ratio", "percentunit", "headroom_ratio", decimals=1),
                       column("Days to ceiling", "d", "days_to_ceiling", decimals=0),
                       column("Binding ceiling", decimals=0),
                       column("Partitions", decimals=0),
                       column("Headroom", decimals=0),
                       column("Broker", links=BROKER_LINK)],
              sort_by="Headroom ratio", w=14, h=10),
        bargauge("Headroom ratio per broker",
                 "Headroom ratio of each broker. Bad: orange bars (< 0.2), red (< 0).",
                 [target(f"min by (cluster, broker) "
                         f"({q('headroom_ratio', CB)})", cb,
                         instant=True)],
                 unit="percentunit", thr="headroom_ratio", vmin=0, vmax=1, decimals=1,
                 w=10, h=10),
        row("Ceiling per bound"),
        table("Ceiling per bound",
              "Each broker's partition ceiling under each independent bound (mmap, file "
              "descriptors, recovery, max.broker.partitions, baseline); the smallest one "
              "binds. Bad: a bound far below the others that nobody expected (e.g. mmap "
              "from a low vm.max_map_count).",
              [target("min by (cluster, broker, bound) "
                      f"({q('partition_ceiling', CB)})",
                      instant=True, table=True)],
              renames={"cluster": "Cluster", "broker": "Broker", "bound": "Bound",
                       "Value": "Ceiling"},
              order=["cluster", "broker", "bound", "Value"],
              columns=[column("Ceiling", decimals=0), column("Broker", links=BROKER_LINK)],
              sort_by="Ceiling", w=10, h=10),
        timeseries("Ceiling per bound over time",
                   "Each bound's ceiling per broker. Bad: a bound dropping (more segments per "
                   "partition for mmap, more FDs per partition, a lower guard rail).",
                   [target(f"{q('partition_ceiling', CB)}",
                           "{{cluster}}/{{broker}} {{bound}}")],
                   w=14, h=10, decimals=0),
        row("Trend"),
        timeseries("Partitions vs binding ceiling",
                   "Partitions hosted (solid) against the binding (lowest) ceiling (dashed). "
                   "Bad: the lines converging.",
                   [target(f"{q('partitions', CB)}", "{{cluster}}/{{broker}} "
                           "partitions", "A"),
                    target("min by (cluster, broker) "
                           f"({q('partition_ceiling', CB)})",
                           "{{cluster}}/{{broker}} binding ceiling", "B")],
                   overrides=[dashed_override("ceiling")], w=12, decimals=0),
        timeseries("Headroom ratio over time",
                   "Headroom ratio per broker; the legend names the binding bound. Bad: below "
                   "the orange line (0.2).",
                   [target(f"{q('headroom_ratio', CB)}",
                           "{{cluster}}/{{broker}} ({{binding_bound}})")],
                   unit="percentunit", thr="headroom_ratio", threshold_style="line",
                   vmin=None, w=12),
        timeseries("Days to partition ceiling",
                   "Days until the binding ceiling at the observed growth. Bad: below 30 "
                   "(orange). No data while partitions are not growing.",
                   [target(f"{q('days_to_ceiling', CB)}", cb)],
                   unit="d", thr="days_to_ceiling", threshold_style="line", w=12,
                   no_value="not growing"),
        timeseries("Partition growth (per day, 1 h trend)",
                   "Rate of change of partitions hosted, extrapolated to a day from the last "
                   "hour. Bad: sustained growth on brokers with little headroom.",
                   [target(q("partition_growth", CB), cb)],
                   vmin=None, w=12),
    ]
    return dashboard(
        "kafka-health-headroom", "kafka-health / Partition headroom",
        "Partition ceilings per bound, the binding bound and the days until each broker "
        "reaches it.",
        ["headroom"], [datasource_var(), cluster_var(), broker_var()], items,
        time_from="now-7d",
    )


# --------------------------------------------------------------------------------------
# 5. Pipeline
# --------------------------------------------------------------------------------------
def pipeline() -> dict:
    inst = "{{instance}}"
    items = [
        row("Now"),
        stat("Pipeline up",
             "1 while the streaming query runs. Bad: DOWN (red), or no data - the pipeline "
             "is not being scraped at all (see last batch age).",
             [target(f"min({q('pipeline_up', I)})", "up")],
             thr="pipeline_up", mappings=value_map([(0, "DOWN", RED), (1, "UP", GREEN)]),
             text_mode="value", w=4),
        stat("Last batch age",
             "Seconds since the last micro-batch finished (keeps counting after the "
             "pipeline stops being scraped). Bad: > 300 s (orange) - dashboards and alerts "
             "downstream are stale.",
             [target(f"time() - max(last_over_time({q('last_batch', I)}[1h]))", "age")],
             unit="s", thr="batch_age", text_mode="value", w=4),
        stat("Event-time lag",
             "Now minus the newest sample event time seen. Bad: >= 300 s (orange) - the "
             "pipeline (or the brokers' metric reporters) fall behind.",
             [target(f"time() - max({q('newest_event', I)})", "lag")],
             unit="s", thr="event_lag", text_mode="value", w=4),
        stat("Source lag",
             "Records behind the end of the metrics topics after the last batch. Bad: "
             "> 500k (orange) for minutes, and growing.",
             [target(f"sum({q('source_lag', I)})", "records")],
             thr="source_lag", text_mode="value", w=4),
        stat("Quarantined (time range)",
             "Records sent to quarantine during the time range. Bad: > 0 means malformed "
             "input; check the quarantine table for the reason. 0 while no record was "
             "quarantined.",
             [target(f"sum(increase({q('quarantined_records', I)}"
                     f"[$__range])) or 0 * max({q('pipeline_up', I)}"
                     f")", "quarantined")],
             thr="dq_failures", text_mode="value", w=4),
        stat("DQ failures (time range)",
             "Failed Great Expectations expectations during the time range. Bad: > 0 "
             "(orange) - the input breaks a data-quality rule.",
             [target(f"sum(increase({q('dq_failures', I)}"
                     "[$__range]))", "failures")],
             thr="dq_failures", text_mode="value", w=4),
        row("Throughput and lag"),
        timeseries("Batch rate",
                   "Micro-batches completed per minute. Bad: dropping to 0 (stopped) or far "
                   "below 60/min with a 1 s trigger (batches take longer than the trigger).",
                   [target(f"sum by (instance) (rate({q('batches', I)}"
                           f"[$__rate_interval])) * 60", inst)],
                   unit="suffix:/min", w=8),
        timeseries("Batch duration",
                   "Duration of the last micro-batch. Bad: longer than the trigger interval "
                   "for long stretches - the pipeline cannot keep up.",
                   [target(f"{q('batch_duration', I)}", inst)],
                   unit="s", w=8),
        timeseries("Last batch age",
                   "Seconds since the last micro-batch finished. Bad: a saw-tooth that no "
                   "longer resets (stopped) - above 300 s (orange).",
                   [target(q("batch_age", I), inst)],
                   unit="s", thr="batch_age", threshold_style="line", w=8),
        timeseries("Input rate",
                   "Records read from the metrics topics per second (counter rate) and the "
                   "last batch's own rows/s. Bad: a sudden drop while brokers keep reporting.",
                   [target(f"sum by (instance) (rate({q('input_records', I)}"
                           f"[$__rate_interval]))", "{{instance}} records/s", "A"),
                    target(f"{q('input_rows_per_second', I)}",
                           "{{instance}} last batch rows/s", "B")],
                   unit="suffix: rows/s", w=8),
        timeseries("Source lag",
                   "Records behind the end of the metrics topics. Bad: growing - input "
                   "arrives faster than the pipeline processes it.",
                   [target(f"{q('source_lag', I)}", inst)],
                   thr="source_lag", threshold_style="line", w=8),
        timeseries("Event-time lag",
                   "Now minus the newest sample event time seen. Bad: above 300 s (orange).",
                   [target(q("event_lag", I), inst)],
                   unit="s", thr="event_lag", threshold_style="line", w=8),
        row("Data quality"),
        timeseries("Quarantined records by reason",
                   "Records sent to quarantine per second, by reason (not JSON, wrong types, "
                   "NaN, negative counter, timestamp far off, unknown format), and samples "
                   "whose cluster fell to identity.default_cluster. Bad: any sustained rate. "
                   "No reasons until the first record is quarantined.",
                   [target("sum by (reason) (rate("
                           f"{q('quarantined_records', I)}"
                           "[$__rate_interval]))", "{{reason}}"),
                    target(f"sum(rate({q('identity_defaulted', I)}"
                           f"[$__rate_interval])) or 0 * max({q('pipeline_up', I)})",
                           "cluster defaulted (samples/s)", "B")],
                   unit="suffix: rows/s", w=8),
        timeseries("Quarantine ratio",
                   "Quarantined records / records read. Bad: >= 1% (orange) - a producer or "
                   "format changed.",
                   [target(q("quarantine_ratio", I), "quarantined / read")],
                   unit="percentunit", thr="quarantine_ratio", threshold_style="line", w=8),
        timeseries("DQ failures",
                   "Failed Great Expectations expectations per validation run window. Bad: "
                   "any increase (orange).",
                   [target(f"sum by (instance) (increase({q('dq_failures', I)}"
                           f"[$__rate_interval]))", inst)],
                   thr="dq_failures", threshold_style="line", bars=True, w=8, decimals=0),
        row("Source and alert push"),
        timeseries("Metrics broker reachable",
                   "1 when the broker holding the metrics topics answered the last offset "
                   "probe (after each batch, and every idle interval). Bad: 0 - the query "
                   "waits for the broker; no new signals until it is back.",
                   [target(f"{q('source_up', I)}", inst)],
                   thr="pipeline_up", threshold_style="line", w=8, decimals=0),
        timeseries("Why the metrics topics cannot be read",
                   "1 per reason while the source's offset probe fails: unauthorized (the "
                   "login or an ACL is refused), unreachable (no broker answers, or the TLS "
                   "handshake failed: an untrusted or expired certificate), timeout, "
                   "misconfigured or error. No series while the topics can be read. The "
                   "driver log names the setting to fix or what to grant (docs/security.md).",
                   [target(f"max by (instance, error) ({q('source_error', I)})",
                           "{{instance}} {{error}}")],
                   thr="pipeline_up", threshold_style="line", w=8, decimals=0),
        timeseries("Readable source partitions",
                   "Partitions of the subscription (source.topics or subscribe_pattern) the "
                   "job can read: those of the last batch, and every idle interval those the "
                   "broker lists. Bad: 0 with the broker up - a misspelt or missing topic, or "
                   "an ACL; nothing is watched (KafkaHealthSourceEmpty).",
                   [target(f"{q('source_partitions', I)}", inst)],
                   thr="pipeline_up", threshold_style="line", w=8, decimals=0),
        timeseries("Source data loss",
                   "Metrics-topic partitions whose offsets went backwards or vanished "
                   "(broker lost data, topic recreated), and offset ranges found deleted "
                   "before they were read (retention), skipped because "
                   "source.fail_on_data_loss is false. Bad: any bar - samples in the gap were "
                   "never seen, so those windows may miss a fault.",
                   [target("sum by (instance) (increase("
                           f"{q('source_data_loss', I)}"
                           "[$__rate_interval]))", inst)],
                   bars=True, w=8, decimals=0),
        timeseries("Alert push failures",
                   "Failed POSTs of the direct data-loss push to Alertmanager. Bad: any bar - "
                   "pages fall back to the Prometheus rule path (seconds slower). Stays 0 "
                   "while the push is not configured.",
                   [target("sum by (instance) (increase("
                           f"{q('alert_push_failures', I)}"
                           "[$__rate_interval]))", inst)],
                   bars=True, w=8, decimals=0),
        timeseries("Exported series",
                   "Series the job's /metrics serves, and new series refused because a batch "
                   "reached exporter.max_new_series_per_batch. Bad: any refused (a record named "
                   "more brokers or clusters than a fleet has; they are missing from the "
                   "gauges and from the direct push) or a count far above brokers x 25.",
                   [target(f"{q('exported_series', I)}", inst),
                    target("sum by (instance) (increase("
                           f"{q('series_dropped', I)}"
                           "[$__rate_interval])) or 0 * max by (instance) "
                           f"({q('pipeline_up', I)})", "{{instance}} refused", "B")],
                   w=8, decimals=0),
        timeseries("Metrics and Admin API disagree",
                   "Episodes in which the broker metrics and the Admin API poll counted "
                   "different numbers of partitions under min ISR for 3 polls in a row, by "
                   "the view that looked stale (metrics, metadata, neither); the driver log "
                   "says which cluster. Bad: any bar - one view is behind, so a page may be "
                   "late or stale. Stays 0 without metadata polling.",
                   [target("sum by (instance, stale) (increase("
                           f"{q('view_disagreements', I)}"
                           "[$__rate_interval])) or 0 * max by (instance) "
                           f"({q('pipeline_up', I)})", "{{instance}} {{stale}}")],
                   bars=True, w=8, decimals=0),
    ]
    return dashboard(
        "kafka-health-pipeline", "kafka-health / Pipeline",
        "The kafka-health streaming job itself: is it running, keeping up, and how much "
        "input is bad.",
        ["pipeline"], [datasource_var(), instance_var()], items, time_from="now-3h",
    )


DASHBOARDS = {
    "fleet-overview.json": fleet,
    "broker-drilldown.json": broker,
    "durability.json": durability,
    "headroom.json": headroom,
    "pipeline.json": pipeline,
}


def render() -> dict[str, str]:
    """File name -> JSON text, exactly as committed."""
    return {name: json.dumps(build(), indent=2, sort_keys=False) + "\n"
            for name, build in DASHBOARDS.items()}


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else HERE
    for name, text in render().items():
        (out / name).write_text(text)
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
