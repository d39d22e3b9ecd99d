"""A static HTML report of the last N hours, from the Delta tables, for on-call hand-overs.

    write_report("data/demo/delta", "report/", hours=6)   # -> report/index.html + *.png

One self-contained directory: index.html with inline CSS and PNG charts next to it
(matplotlib Agg), no scripts and no external resources, so it opens from a file share, a
ticket attachment or a browser on a closed network. Every section shows its data or says
plainly why there is none (table missing, no rows in the window, signal not reported);
nothing in the tables can make it crash.
"""

from __future__ import annotations

import html
import logging
import math
import os
import tempfile
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pandas as pd

from streaming.headroom.chart import (
    ceilings_frame_from_rows,
    history_frame_from_rows,
    write_headroom_png,
)
from streaming.identity import CLUSTER_WIDE
from streaming.report import charts
from streaming.report.clients_view import clients_view
from streaming.report.durability_view import per_rule, read_open_findings
from streaming.report.headroom_view import BOUND_HEADERS, read_history
from streaming.report.tables import (
    TableRead,
    broker_label,
    fmt_ts,
    latest_per_broker,
    read_incidents,
    read_quarantine,
    read_windowed,
    utc,
    window_start,
)

log = logging.getLogger(__name__)

INDEX = "index.html"
FINDINGS_SHOWN = 100  # open durability findings listed in full; all are counted
CHART_FILES = {
    "incidents": "incidents.png",
    "broker_signals": "broker_signals.png",
    "cluster_signals": "cluster_signals.png",
    "headroom": "headroom.png",
    "quarantine": "quarantine.png",
}

CSS = """
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif;
       margin: 0 auto; max-width: 1340px; padding: 0 24px 48px; color: #1a1a1a; background: #fff;
       line-height: 1.4; }
header { border-bottom: 3px solid #1a1a1a; padding: 16px 0 8px; margin-bottom: 8px; }
h1 { font-size: 1.7em; margin: 0 0 4px; }
h2 { font-size: 1.3em; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #ccc; }
.meta { color: #444; font-size: 0.92em; margin: 2px 0; }
.summary { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0 4px; }
.card { border: 1px solid #ccc; border-radius: 6px; padding: 8px 14px; min-width: 150px;
        background: #fafafa; }
.card .n { font-size: 1.6em; font-weight: bold; }
.card .l { font-size: 0.85em; color: #444; }
.card.bad { border-color: #b2182b; background: #fdecea; }
.card.bad .n { color: #b2182b; }
.card.warn { border-color: #e08214; background: #fff4e5; }
.card.good .n { color: #1b7837; }
.tablewrap { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 0.9em; }
th, td { border: 1px solid #d0d0d0; padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
th.group { text-align: center; }
td.binding { font-weight: bold; background: #fff4e5; }
td.bad { color: #b2182b; font-weight: bold; }
td.warn { color: #b35806; font-weight: bold; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
tr.open td { background: #fdecea; }
.tag { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 0.85em; font-weight: 600; }
.tag.open { background: #b2182b; color: #fff; }
.tag.resolved { background: #dfeedd; color: #1b5e20; }
.nodata { border: 1px dashed #999; background: #f6f6f6; color: #333; padding: 10px 14px;
          border-radius: 6px; margin: 8px 0; }
.nodata strong { color: #1a1a1a; }
.error { border: 1px solid #b2182b; background: #fdecea; padding: 10px 14px; border-radius: 6px; }
img.chart { max-width: 100%; height: auto; border: 1px solid #e0e0e0; margin: 6px 0; }
.note { color: #555; font-size: 0.88em; }
code { background: #f3f3f3; padding: 0 3px; border-radius: 3px; }
footer { margin-top: 40px; border-top: 1px solid #ccc; padding-top: 8px; color: #555; font-size: 0.85em; }
"""


def write_report(delta_root: str, out_dir: str, hours: float = 6.0, cluster: str | None = None,
                 now: datetime | None = None) -> Path:
    """Write ``out_dir/index.html`` (+ PNG charts) covering ``[now - hours, now]``; return its path.

    ``cluster`` limits every section to one cluster (quarantine has no cluster column and
    is always fleet-wide). ``now`` defaults to the wall clock (UTC; naive means UTC).
    """
    end = utc(now)
    start = window_start(end, hours)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ctx = _Context(Path(delta_root), out, start, end, hours, cluster)

    sections = [
        ("incidents", "Incidents", _incidents_section),
        ("broker-signals", "Broker signals", _broker_section),
        ("cluster-signals", "Cluster signals", _cluster_section),
        ("headroom", "Partition headroom", _headroom_section),
        ("durability", "Durability findings (Admin API)", _durability_section),
        ("clients", "Clients' truth (durability probe, consumer groups)", _clients_section),
        ("quarantine", "Quarantine (bad input)", _quarantine_section),
    ]
    bodies = [(anchor, title, _guarded(ctx, title, fn)) for anchor, title, fn in sections]
    page = _page(ctx, bodies)
    target = out / INDEX
    # Atomic replace: a browser refreshing the report never sees half a page.
    fd, tmp = tempfile.mkstemp(prefix=".index.", suffix=".html", dir=out)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    return target


class _Context:
    def __init__(self, root: Path, out: Path, since: datetime, now: datetime, hours: float,
                 cluster: str | None) -> None:
        self.root, self.out, self.since, self.now = root, out, since, now
        self.hours, self.cluster = hours, cluster
        self.summary: list[tuple[str, str, str]] = []  # (value, label, css class)
        self.sources: list[TableRead] = []

    def chart(self, key: str) -> Path:
        return self.out / CHART_FILES[key]


def _guarded(ctx: _Context, title: str, fn: Callable[[_Context], str]) -> str:
    """A bug in one section must not cost the on-call engineer the rest of the report."""
    try:
        return fn(ctx)
    except Exception as exc:
        log.exception("report section %s failed", title)
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return (f'<div class="error"><strong>This section could not be built:</strong> '
                f"{_e(last)}. The other sections are unaffected.</div>")


# --- sections ----------------------------------------------------------------------------


def _incidents_section(ctx: _Context) -> str:
    read = read_incidents(ctx.root, ctx.since, ctx.now, ctx.cluster)
    ctx.sources.append(read)
    if not read.ok:
        ctx.summary.append(("-", "open incidents (no data)", ""))
        return _no_data(read)
    df = read.frame
    is_open = df["resolved_at"].isna()
    n_open = int(is_open.sum())
    ctx.summary.append((str(n_open), "open incidents", "bad" if n_open else "good"))
    ctx.summary.append((str(len(df)), "incidents in window", "warn" if len(df) else "good"))

    labels = _broker_labels(df)
    path = charts.incidents_timeline(df, ctx.since, ctx.now, ctx.chart("incidents"), labels.map(_scope))
    parts = [f"{k} on {lbl} ({'open' if o else 'resolved'})"
             for k, lbl, o in zip(df["kind"], labels.map(_scope), is_open, strict=True)]
    alt = (f"Timeline of {len(df)} incident(s) between {fmt_ts(ctx.since)} and {fmt_ts(ctx.now)}, "
           f"{n_open} still open: " + "; ".join(parts))

    rows = []
    for lbl, r, o in zip(labels, df.itertuples(index=False), is_open, strict=True):
        end = ctx.now if o else r.resolved_at
        status = '<span class="tag open">OPEN</span>' if o else '<span class="tag resolved">resolved</span>'
        rows.append(
            f'<tr class="{"open" if o else ""}"><td>{status}</td><td>{_e(r.kind)}</td>'
            f"<td>{_e(_scope(lbl))}</td><td>{_e(fmt_ts(r.started_at))}</td>"
            f"<td>{_e('-' if o else fmt_ts(r.resolved_at))}</td>"
            f'<td class="num">{_e(_duration(end - r.started_at))}{" so far" if o else ""}</td>'
            f'<td class="num">{_e(_fmt_num(r.peak_value))}</td>'
            f"<td>{_e(r.cause if isinstance(r.cause, str) else '-')}</td></tr>")
    table = ("<table><tr><th>status</th><th>kind</th><th>scope</th><th>started (UTC)</th>"
             '<th>resolved (UTC)</th><th class="num">duration</th><th class="num">peak value</th>'
             "<th>cause (Admin API)</th></tr>" + "".join(rows) + "</table>")
    note = ('<p class="note">Bars run from the start of the first window in which the condition held to '
            "the start of the first window in which it no longer held; open incidents run to the end of "
            "the report window. Peak value is in the unit of the condition (partitions, elections, "
            "controllers, queue ratio, seconds of silence). The cause names the brokers the Admin API "
            "found missing from the ISR (under min ISR) or down (offline partitions); it is empty "
            "without <code>metadata</code> polling of the cluster.</p>")
    return _img(ctx, path, alt) + table + note


def _broker_section(ctx: _Context) -> str:
    read = read_windowed(ctx.root, "broker_signals", "window_start", ctx.since, ctx.now, ctx.cluster)
    ctx.sources.append(read)
    if not read.ok:
        ctx.summary.append(("-", "max under-min-ISR partitions (no data)", ""))
        ctx.summary.append(("-", "unclean leader elections (no data)", ""))
        return _no_data(read)
    df = read.frame
    labels = _broker_labels(df)
    path = charts.signals_grid(df, charts.BROKER_SIGNALS, labels, ctx.since, ctx.now,
                               ctx.chart("broker_signals"), "Per-broker signals", "broker")
    brokers = sorted(set(labels), key=charts._natural)
    umi = _max(df["under_min_isr_max"])
    unclean = _sum(df["unclean_elections_increase"])
    ctx.summary.append((_fmt_num(umi), "max under-min-ISR partitions", "bad" if (umi or 0) > 0 else "good"))
    ctx.summary.append((_fmt_num(unclean), "unclean leader elections",
                        "bad" if (unclean or 0) > 0 else "good"))
    missing = [s.title for s in charts.BROKER_SIGNALS if df[s.column].dropna().empty]
    alt = (f"Per-broker signals over time for broker(s) {', '.join(brokers)} between {fmt_ts(ctx.since)} "
           f"and {fmt_ts(ctx.now)}: under-min-ISR (peak {_fmt_num(umi)}), under-replicated, ISR shrinks "
           f"and expands, unclean elections (total {_fmt_num(unclean)}), request queue utilization, "
           "request handler and network processor idle."
           + (f" No data for: {', '.join(missing)}." if missing else ""))

    headers = ["broker", "windows", "last window (UTC)", "under-min-ISR max", "under-replicated max",
               "ISR shrinks", "ISR expands", "unclean elections", "request queue max %",
               "handler idle min %", "partitions (last)", "leaders (last)"]
    rows = []
    for key in brokers:
        g = df[(labels == key).to_numpy()]
        rows.append([
            key, f"{len(g):,}", fmt_ts(g["window_start"].max()),
            _fmt_num(_max(g["under_min_isr_max"])), _fmt_num(_max(g["under_replicated_max"])),
            _fmt_num(_sum(g["isr_shrinks_increase"])), _fmt_num(_sum(g["isr_expands_increase"])),
            _fmt_num(_sum(g["unclean_elections_increase"])),
            _fmt_pct(_max(g["request_queue_utilization_max"])),
            _fmt_pct(_min(g["request_handler_idle_min"])),
            _fmt_num(_last(g, "partition_count_last")), _fmt_num(_last(g, "leader_count_last")),
        ])
    note = ('<p class="note">Totals are over the report window; increases come from the meters\' '
            "cumulative counts with restart handling. A dash means no source reported the signal (it "
            "is never shown as zero). Request queue utilization is RequestQueueSize ÷ "
            "queued.max.requests.</p>")
    return _img(ctx, path, alt) + _table(headers, rows, first_left=1) + note


def _cluster_section(ctx: _Context) -> str:
    read = read_windowed(ctx.root, "cluster_signals", "window_start", ctx.since, ctx.now, ctx.cluster)
    ctx.sources.append(read)
    if not read.ok:
        ctx.summary.append(("-", "max offline partitions (no data)", ""))
        return _no_data(read)
    df = read.frame
    labels = df["cluster"].astype(str)
    path = charts.signals_grid(df, charts.CLUSTER_SIGNALS, labels, ctx.since, ctx.now,
                               ctx.chart("cluster_signals"), "Cluster signals", "cluster")
    clusters = sorted(set(labels))
    offline = _max(df["offline_partitions_max"])
    ctx.summary.append((_fmt_num(offline), "max offline partitions", "bad" if (offline or 0) > 0 else "good"))
    controllers = df["active_controllers"]
    alt = (f"Cluster signals over time for cluster(s) {', '.join(clusters)} between {fmt_ts(ctx.since)} "
           f"and {fmt_ts(ctx.now)}: offline partitions (peak {_fmt_num(offline)}), active controllers "
           f"(range {_fmt_num(_min(controllers))} to {_fmt_num(_max(controllers))}), "
           "brokers reporting, unclean elections.")
    headers = ["cluster", "windows", "last window (UTC)", "brokers reporting (last)", "brokers reporting min",
               "offline partitions max", "active controllers min", "active controllers max",
               "under-min-ISR total max", "unclean elections"]
    rows = []
    for key in clusters:
        g = df[(labels == key).to_numpy()]
        rows.append([key, f"{len(g):,}", fmt_ts(g["window_start"].max()),
                     _fmt_num(_last(g, "brokers_reporting")), _fmt_num(_min(g["brokers_reporting"])),
                     _fmt_num(_max(g["offline_partitions_max"])), _fmt_num(_min(g["active_controllers"])),
                     _fmt_num(_max(g["active_controllers"])), _fmt_num(_max(g["under_min_isr_total"])),
                     _fmt_num(_sum(g["unclean_elections_increase"]))])
    note = '<p class="note">A healthy cluster has exactly one active controller in every window.</p>'
    return _img(ctx, path, alt) + _table(headers, rows, first_left=1) + note


def _headroom_section(ctx: _Context) -> str:
    read = latest_per_broker(ctx.root, "partition_headroom", "evaluated_at", ctx.cluster, as_of=ctx.now)
    ctx.sources.append(read)
    if not read.ok:
        ctx.summary.append(("-", "lowest headroom (no data)", ""))
        return _no_data(read)
    latest = read.frame
    labels = broker_label(latest)
    pct = pd.to_numeric(latest["headroom_pct"], errors="coerce")
    lowest = _min(pct)
    ctx.summary.append((_fmt_pct(lowest / 100 if lowest is not None else None), "lowest partition headroom",
                        "bad" if lowest is not None and lowest < 10 else
                        "warn" if lowest is not None and lowest < 25 else "good"))

    bounds = [b for b in BOUND_HEADERS if f"ceiling_{b}" in latest.columns]
    # Two header rows: the ceilings grouped under one heading keeps the table narrow.
    head1 = ('<tr><th rowspan="2">broker</th><th rowspan="2">evaluated (UTC)</th>'
             '<th rowspan="2" class="num">partitions</th><th rowspan="2" class="num">leaders</th>'
             f'<th colspan="{len(bounds)}" class="group">ceiling per bound (partitions)</th>'
             '<th rowspan="2">binding bound</th><th rowspan="2" class="num">headroom</th>'
             '<th rowspan="2" class="num">headroom %</th><th rowspan="2" class="num">growth / day</th>'
             '<th rowspan="2" class="num">days to ceiling</th></tr>')
    head2 = "<tr>" + "".join(f'<th class="num">{_e(BOUND_HEADERS[b])}</th>' for b in bounds) + "</tr>"
    body = []
    for lbl, (_, r) in zip(labels, latest.iterrows(), strict=True):
        cells = [f"<td>{_e(lbl)}</td>", f"<td>{_e(fmt_ts(r['evaluated_at']))}</td>",
                 _num_td(_fmt_num(r["partitions"])), _num_td(_fmt_num(r["leaders"]))]
        for b in bounds:
            binding = b == r["binding_bound"]
            text = _fmt_num(r[f"ceiling_{b}"]) + (" ★" if binding else "")
            cells.append(_num_td(text, "binding" if binding else ""))
        pct_value = r["headroom_pct"]
        cells += [f"<td>{_e(_s(r['binding_bound']))}</td>", _num_td(_fmt_num(r["headroom"])),
                  _num_td(_fmt_pct(pct_value / 100 if not pd.isna(pct_value) else None),
                          "bad" if not pd.isna(pct_value) and pct_value < 10 else
                          "warn" if not pd.isna(pct_value) and pct_value < 25 else ""),
                  _num_td(_fmt_num(r["growth_per_day"], signed=True, digits=1)),
                  _num_td(_fmt_num(r["days_to_ceiling"], digits=1))]
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = f'<div class="tablewrap"><table>{head1}{head2}{"".join(body)}</table></div>'

    history = read_history(ctx.root, ctx.since, ctx.now, ctx.cluster)
    path = write_headroom_png(history_frame_from_rows(history, broker_label(history)),
                              ceilings_frame_from_rows(latest, labels), ctx.chart("headroom"))
    parts = [f"broker {lbl}: {_fmt_num(r['partitions'])} partitions, binding {r['binding_bound']} "
             f"ceiling {_fmt_num(r['binding_ceiling'])} ({_fmt_pct(r['headroom_pct'] / 100)} headroom)"
             for lbl, (_, r) in zip(labels, latest.iterrows(), strict=True) if not pd.isna(r["headroom_pct"])]
    alt = ("Partitions over time per broker against each bound's ceiling, binding bound drawn solid. "
           + "; ".join(parts))
    note = ('<p class="note">Latest evaluation per broker at or before the end of the window. '
            "Ceilings are in partitions; ★ marks the binding (lowest) bound — raising another bound "
            "does not help until this one moves. A dash means the bound could not be computed or is "
            "not configured; days to ceiling is a dash when partitions are not growing.</p>")
    stale = [lbl for lbl, ts in zip(labels, latest["evaluated_at"], strict=True)
             if not pd.isna(ts) and ts < pd.Timestamp(ctx.since)]
    if stale:
        note += (f'<p class="note"><strong>Stale:</strong> the newest evaluation for broker(s) '
                 f"{_e(', '.join(stale))} is older than the report window; their figures may be out of "
                 "date.</p>")
    if history.empty:
        note += ('<p class="note">No headroom evaluations inside the window; the chart shows ceilings '
                 "only.</p>")
    return table + _img(ctx, path, alt) + note


def _durability_section(ctx: _Context) -> str:
    read = read_open_findings(ctx.root, ctx.cluster)
    ctx.sources.append(read)
    if read.status == "empty":
        ctx.summary.append(("0", "open durability findings", "good"))
        return _no_data(read)
    if not read.ok:
        ctx.summary.append(("-", "open durability findings (no data)", ""))
        polled = (" The durability audit runs when the job polls the clusters' Admin API "
                  "(config metadata)." if read.status == "missing" else "")
        return _no_data_text(read.why_empty() + polled)
    findings = read.frame
    ctx.summary.append((str(len(findings)), "open durability findings", "warn"))
    counts = per_rule(findings)
    summary = _table(["cluster", "rule", "severity", "open findings"],
                     [[r.cluster, r.rule, r.severity, f"{r.findings:,}"]
                      for r in counts.itertuples(index=False)], first_left=3)
    shown = findings.head(FINDINGS_SHOWN)
    rows = [[r.cluster, r.rule, r.severity, r.topic if isinstance(r.topic, str) else "(cluster)",
             "-" if pd.isna(r.partition) else str(int(r.partition)), r.detail or "",
             fmt_ts(r.opened_at)] for r in shown.itertuples(index=False)]
    detail = _table(["cluster", "rule", "severity", "topic", "partition", "detail",
                     "open since (UTC)"], rows, first_left=7)
    more = (f'<p class="note">The first {FINDINGS_SHOWN} of {len(findings):,} are listed; the '
            "<code>durability_audit</code> table has every one (open rows: resolved_at null).</p>"
            if len(findings) > FINDINGS_SHOWN else "")
    note = ('<p class="note">Open findings whatever their age (the report window does not apply): '
            "what the topics' effective configuration and replica placement risk, per the rules "
            "of <code>metrics_schemas/durability.yaml</code>. The runbook "
            "KafkaDurabilityAuditFinding says how to fix each rule.</p>")
    return summary + detail + more + note


def _clients_section(ctx: _Context) -> str:
    view = clients_view(ctx.root, ctx.cluster, ctx.since, ctx.now)
    ctx.sources.extend(view.reads)
    out = []
    if view.probe is None:
        out.append('<p class="note">The durability probe does not run (config '
                   "probe.enabled).</p>")
    else:
        lost = len(view.probe_losses or [])
        ctx.summary.append((f"{lost:,}", "acked probe records lost", "bad" if lost else "good"))
        if view.probe:
            out.append(_table(
                ["cluster", "broker", "probe writes", "failed", "lost", "availability"],
                [[p["cluster"], p["broker"], f"{p['attempted']:,}", f"{p['failed']:,}",
                  f"{p['lost']:,}", "-" if p["availability"] is None
                  else f"{100 * p['availability']:.2f}%"] for p in view.probe], first_left=2))
        else:
            out.append('<p class="note">Every acks=all probe write through every broker was '
                       "acked and read back.</p>")
        if view.probe_losses:
            out.append(_table(
                ["cluster", "acked by broker", "partition", "offset", "sequence", "acked at",
                 "found missing at"],
                [[r["cluster"], r["broker"], str(r["partition"]), str(r["offset"]),
                  str(r["sequence"]), fmt_ts(r["acked_at"]), fmt_ts(r["found_at"])]
                 for r in view.probe_losses[:FINDINGS_SHOWN]], first_left=2))
    if view.groups is None:
        out.append('<p class="note">Consumer groups are not read (config '
                   "consumer_groups.enabled).</p>")
    elif view.groups:
        out.append(_table(
            ["cluster", "group", "topic", "newest status", "lag", "lost to retention"],
            [[g["cluster"], g["group"], g["topic"], g["status"],
              "-" if g["lag_records"] is None else f"{g['lag_records']:,}",
              f"{g['lost_to_retention']:,}"] for g in view.groups], first_left=4))
    else:
        out.append('<p class="note">Every consumer group read was ok and lost nothing to '
                   "retention.</p>")
    note = ('<p class="note">The probe writes with acks=all through every broker and reads '
            "back (tables <code>probe_windows</code>, <code>probe_losses</code>); the groups' "
            "status and losses are in <code>consumer_group_status</code> and "
            "<code>consumer_group_losses</code>. A lost record is data loss the broker "
            "acknowledged.</p>")
    return "".join(out) + note


def _quarantine_section(ctx: _Context) -> str:
    read = read_quarantine(ctx.root, ctx.since, ctx.now)
    ctx.sources.append(read)
    if not read.ok:
        ctx.summary.append(("0" if read.status == "empty" else "-",
                            "quarantined records" + ("" if read.status == "empty" else " (no data)"),
                            "good" if read.status == "empty" else ""))
        return _no_data(read, quiet_is_good=True)
    df = read.frame
    category = df["reason"].fillna("(no reason)").astype(str).str.split(":", n=1).str[0].str.strip()
    category = category.replace("", "(no reason)")
    counts = (df.assign(category=category).groupby("category")
              .agg(records=("category", "size"), first=("ingest_ts", "min"), last=("ingest_ts", "max"),
                   formats=("source_format", lambda s: ", ".join(sorted(set(s.dropna().astype(str))))),
                   topics=("source_topic", lambda s: ", ".join(sorted(set(s.dropna().astype(str))))))
              .reset_index().sort_values(["records", "category"], ascending=[False, True]))
    ctx.summary.append((f"{len(df):,}", "quarantined records", "warn"))
    path = charts.quarantine_bars(counts, ctx.chart("quarantine"))
    alt = (f"Quarantined records by reason category, {len(df):,} in total: "
           + "; ".join(f"{c} {n:,}" for c, n in zip(counts["category"], counts["records"], strict=True)))
    rows = [[c, f"{n:,}", fmt_ts(f), fmt_ts(la), fm or "-", t or "-"]
            for c, n, f, la, fm, t in counts[["category", "records", "first", "last", "formats", "topics"]]
            .itertuples(index=False)]
    table = _table(["reason category", "records", "first (UTC)", "last (UTC)", "source formats",
                    "source topics"], rows, first_left=1, left_cols={4, 5})
    note = ('<p class="note">Category is the text of the reason before the first colon. Quarantine is '
            "fleet-wide: a record that failed decoding has no trusted cluster. The raw bytes and source "
            "offsets are in the <code>quarantine</code> table.</p>")
    return _img(ctx, path, alt) + table + note


# --- page --------------------------------------------------------------------------------


def _page(ctx: _Context, bodies: list[tuple[str, str, str]]) -> str:
    generated = fmt_ts(pd.Timestamp.now(tz="UTC"))
    scope = f"cluster <strong>{_e(ctx.cluster)}</strong>" if ctx.cluster else "all clusters"
    cards = "".join(f'<div class="card {cls}"><div class="n">{_e(v)}</div>'
                    f'<div class="l">{_e(lbl)}</div></div>' for v, lbl, cls in ctx.summary)
    toc = " · ".join(f'<a href="#{a}">{_e(t)}</a>' for a, t, _ in bodies)
    sections = "".join(f'<section id="{a}"><h2>{_e(t)}</h2>{b}</section>' for a, t, b in bodies)
    sources = "".join(
        f"<li><code>{_e(r.table)}</code>: {_e(r.path)} — "
        + (f"version {r.version}, {len(r.frame):,} row(s) read" if r.version is not None else _e(r.status))
        + (f"; columns absent from the table: {_e(', '.join(r.columns_missing))}"
           if r.columns_missing else "")
        + "</li>" for r in ctx.sources)
    hours = f"{ctx.hours:g}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Kafka health report — last {hours} h — {_e(ctx.cluster or "all clusters")}</title>
<style>{CSS}</style>
</head>
<body>
<header>
<h1>Kafka health report</h1>
<p class="meta">Window: <strong>{_e(fmt_ts(ctx.since))}</strong> to <strong>{_e(fmt_ts(ctx.now))}</strong>
(last {hours} h) · {scope}</p>
<p class="meta">Generated at {_e(generated)} from the Delta tables under <code>{_e(str(ctx.root))}</code>.
All times UTC.</p>
</header>
<nav class="meta">{toc}</nav>
<div class="summary">{cards}</div>
{sections}
<footer>
<p>Sources:</p><ul>{sources}</ul>
<p>kafka-health static report. Charts are PNG files next to this page.</p>
</footer>
</body>
</html>
"""


# --- helpers -----------------------------------------------------------------------------


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _s(value: object) -> str:
    return "-" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def _img(ctx: _Context, path: Path, alt: str) -> str:
    rel = os.path.relpath(path, ctx.out)
    return f'<img class="chart" src="{_e(rel)}" alt="{_e(alt)}">'


def _no_data(read: TableRead, quiet_is_good: bool = False) -> str:
    text = read.why_empty()
    if quiet_is_good and read.status == "empty":
        text += " Nothing was quarantined."
    return _no_data_text(text)


def _no_data_text(text: str) -> str:
    return f'<div class="nodata"><strong>No data.</strong> {_e(text)}</div>'


def _num_td(text: str, cls: str = "") -> str:
    return f'<td class="num{" " + cls if cls else ""}">{_e(text)}</td>'


def _table(headers: list[str], rows: list[list[str]], first_left: int = 1,
           left_cols: set[int] | None = None) -> str:
    left = set(range(first_left)) | (left_cols or set())
    head = "".join(f'<th{"" if i in left else " class=num"}>{_e(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td{"" if i in left else " class=num"}>{_e(c)}</td>' for i, c in enumerate(row))
        + "</tr>" for row in rows)
    return f'<div class="tablewrap"><table><tr>{head}</tr>{body}</table></div>'


def _broker_labels(df: pd.DataFrame) -> pd.Series:
    return broker_label(df).reset_index(drop=True).set_axis(df.index)


def _scope(label: str) -> str:
    if label == CLUSTER_WIDE:
        return "cluster-wide"
    if label.endswith("/" + CLUSTER_WIDE):
        return f"cluster {label.removesuffix('/' + CLUSTER_WIDE)} (cluster-wide)"
    return f"broker {label}"


def _num_series(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce").dropna()


def _max(s: pd.Series) -> float | None:
    v = _num_series(s)
    return None if v.empty else float(v.max())


def _min(s: pd.Series) -> float | None:
    v = _num_series(s)
    return None if v.empty else float(v.min())


def _sum(s: pd.Series) -> float | None:
    v = _num_series(s)
    return None if v.empty else float(v.sum())


def _last(g: pd.DataFrame, column: str) -> float | None:
    v = g[["window_start", column]].dropna()
    return None if v.empty else float(v.sort_values("window_start")[column].iloc[-1])


def _fmt_num(value: object, signed: bool = False, digits: int = 0) -> str:
    if value is None or pd.isna(value):
        return "-"
    v = float(value)
    if not math.isfinite(v):  # a producer's absurd value, summed past float's range
        return str(v)
    if digits == 0 and v != round(v):
        digits = 2 if abs(v) < 10 else 1
    return f"{v:{'+' if signed else ''},.{digits}f}"


def _fmt_pct(ratio: object) -> str:
    if ratio is None or pd.isna(ratio):
        return "-"
    return f"{100 * float(ratio):.1f} %"


def _duration(delta: pd.Timedelta) -> str:
    minutes = int(round(pd.Timedelta(delta).total_seconds() / 60))
    if minutes < 60:
        return f"{minutes} min"
    h, m = divmod(minutes, 60)
    if h < 48:
        return f"{h} h {m:02d} min"
    d, h = divmod(h, 24)
    return f"{d} d {h} h"
