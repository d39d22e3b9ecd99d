"""PNG charts for the HTML report, drawn on explicit Agg canvases (no pyplot, headless-safe).

Each function takes already-filtered pandas frames, writes one PNG and returns its path.
Time axes are UTC and span the data drawn (`data_span`), the report's look-back only as
their bound: a demo's minutes in a 6 h report fill the chart, not its last pixels. A signal
that is null for the whole window is drawn as a "no data"
panel, never as a flat zero: a metrics format that lacks a signal must not look healthy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import matplotlib.dates as mdates
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from streaming.chart_values import plottable
from streaming.text import drawn

DPI = 100

# One fixed colour per incident kind (streaming/signals/incidents.py KINDS), so a kind
# looks the same in every report; data-loss red, availability orange, others calmer.
KIND_COLOURS: dict[str, str] = {
    "unclean_election": "#b2182b",
    "offline_partitions": "#e66101",
    "under_min_isr": "#c51b7d",
    "controller": "#7b3294",
    "saturation": "#2166ac",
    "stale_broker": "#7f7f7f",
    "offline_log_dir": "#d6604d",
    "fenced_broker": "#f4a582",
    "metadata": "#4393c3",
    "controller_churn": "#9970ab",
    "elr_election": "#fdb863",
}
OTHER_KIND_COLOUR = "#1b7837"


@dataclass(frozen=True)
class Signal:
    column: str
    title: str
    unit: str
    scale: float = 1.0  # ratio columns are shown in percent
    events: bool = False  # discrete events: draw markers, not a line
    threshold: float | None = None  # in display units
    threshold_label: str = ""


BROKER_SIGNALS: tuple[Signal, ...] = (
    Signal("under_min_isr_max", "Under-min-ISR partitions (max per window)", "partitions"),
    Signal("under_replicated_max", "Under-replicated partitions (max per window)", "partitions"),
    Signal("isr_shrinks_increase", "ISR shrinks (increase per window)", "shrinks / window"),
    Signal("isr_expands_increase", "ISR expands (increase per window)", "expands / window"),
    Signal("unclean_elections_increase", "Unclean leader elections (increase per window)",
           "elections / window", events=True),
    Signal("request_queue_utilization_max", "Request queue utilization (max per window)",
           "% of queued.max.requests", scale=100.0, threshold=80.0,
           threshold_label="saturation threshold (default 80 %)"),
    # The saturation incident compares the window's *minimum* idle with the threshold
    # (streaming/signals/incidents.py), so that is what is drawn against it.
    Signal("request_handler_idle_min", "Request handler idle (min per window)", "% idle",
           scale=100.0, threshold=20.0, threshold_label="saturation threshold (default 20 %)"),
    Signal("network_processor_idle_mean", "Network processor idle (mean per window)", "% idle",
           scale=100.0),
)

CLUSTER_SIGNALS: tuple[Signal, ...] = (
    Signal("offline_partitions_max", "Offline partitions (max per window)", "partitions"),
    Signal("active_controllers", "Active controllers (expected: exactly 1)", "controllers",
           threshold=1.0, threshold_label="expected"),
    Signal("brokers_reporting", "Brokers reporting", "brokers"),
    Signal("unclean_elections_increase", "Unclean leader elections, cluster total", "elections / window",
           events=True),
)


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=DPI)
    return out


def _naive_utc(values: pd.Series | datetime) -> pd.Series | pd.Timestamp:
    """matplotlib date axes without tz surprises: everything as naive UTC."""
    if isinstance(values, pd.Series):
        return pd.to_datetime(values, utc=True).dt.tz_localize(None)
    return pd.Timestamp(values).tz_convert("UTC").tz_localize(None)


# A time axis's margin either side of the data, as a share of its span (at least a minute),
# so the first and last points do not sit on the frame.
SPAN_MARGIN = 0.03
MIN_SPAN_MARGIN = timedelta(minutes=1)


def data_span(starts: pd.Series, ends: pd.Series, since: datetime,
              now: datetime) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The time axis for data from `starts` to `ends` (a null end: still going, to now):
    the earliest start to the latest end with a margin, within [since, now]; all of
    [since, now] when there is no data."""
    low, high = pd.Timestamp(since).tz_convert("UTC"), pd.Timestamp(now).tz_convert("UTC")
    first = pd.to_datetime(starts, utc=True).min() if len(starts) else pd.NaT
    if pd.isna(first):
        return low, high
    last = pd.to_datetime(ends, utc=True).fillna(high).max() if len(ends) else first
    margin = max((last - first) * SPAN_MARGIN, MIN_SPAN_MARGIN)
    return max(low, first - margin), min(high, max(last, first) + margin)


def _time_axis(ax: Axes, since: datetime, now: datetime, label: bool = True) -> None:
    ax.set_xlim(_naive_utc(since), _naive_utc(now))
    locator = mdates.AutoDateLocator(minticks=4, maxticks=9)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    if label:
        ax.set_xlabel("time (UTC)")


def _no_data(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
            fontsize="medium", color="#666666",
            bbox={"boxstyle": "round", "facecolor": "#f3f3f3", "edgecolor": "#cccccc"})
    ax.set_yticks([])


# --- incidents ---------------------------------------------------------------------------


def incidents_timeline(incidents: pd.DataFrame, since: datetime, now: datetime,
                       path: str | Path, scopes: pd.Series) -> Path:
    """One horizontal bar per incident, from started_at to resolved_at (or now if open).

    ``scopes`` names each incident's scope ("broker 2", "cluster-wide"). The axis spans the
    incidents (`data_span`); bars are clipped to the window, and one that started before
    it says since when at its left edge. Open incidents are hatched and carry an "OPEN" tag
    at the right edge.
    """
    n = len(incidents)
    since, now = data_span(incidents["started_at"], incidents["resolved_at"], since, now)
    fig = _figure(13, max(2.4, 1.3 + 0.42 * n))
    ax = fig.add_subplot()
    start_w, end_w = _naive_utc(since), _naive_utc(now)
    span = end_w - start_w
    min_width = span / 300  # a one-window incident in a 6 h report stays visible

    ylabels = []
    for i, (scope, row) in enumerate(zip(scopes, incidents.itertuples(index=False), strict=True)):
        start = _naive_utc(row.started_at)
        is_open = pd.isna(row.resolved_at)
        end = end_w if is_open else _naive_utc(row.resolved_at)
        left, right = max(start, start_w), min(end, end_w)
        width = max(right - left, min_width)
        colour = KIND_COLOURS.get(row.kind, OTHER_KIND_COLOUR)
        ax.barh(i, width, left=left, height=0.6, color=colour,
                edgecolor="black" if is_open else colour, linewidth=1.2 if is_open else 0.5,
                hatch="//" if is_open else None)
        if start < start_w:
            ax.annotate(f"◀ since {start:%m-%d %H:%M}", (start_w, i), xytext=(3, 0),
                        textcoords="offset points", va="center", ha="left", fontsize="small",
                        fontweight="bold", color="white",
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "black", "alpha": 0.55,
                              "edgecolor": "none"})
        if is_open:
            ax.annotate("OPEN", (end_w, i), xytext=(-4, 0), textcoords="offset points",
                        va="center", ha="right", fontsize="small", fontweight="bold",
                        color="white",
                        bbox={"boxstyle": "round,pad=0.2", "facecolor": "#b2182b", "edgecolor": "none"})
        ylabels.append(f"{row.kind} · {drawn(scope)}")

    ax.set_yticks(range(n), ylabels, fontsize="small")
    ax.set_ylim(n - 0.4, -0.6)  # first incident on top
    _time_axis(ax, since, now)
    ax.grid(True, axis="x", alpha=0.3)
    kinds = list(dict.fromkeys(incidents["kind"]))
    handles = [Patch(facecolor=KIND_COLOURS.get(k, OTHER_KIND_COLOUR), label=k) for k in kinds]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="open (to now)"))
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Incidents in the window (bar = started → resolved; hatched = still open)")
    return _save(fig, path)


# --- per-broker and per-cluster signals --------------------------------------------------


def signals_grid(rows: pd.DataFrame, signals: Sequence[Signal], series_labels: pd.Series,
                 since: datetime, now: datetime, path: str | Path, title: str,
                 legend_title: str) -> Path:
    """One panel per signal, one line per series (broker or cluster), on a shared time
    axis over the rows' windows (`data_span`)."""
    ends = rows["window_end"] if "window_end" in rows else rows.get("window_start", [])
    since, now = data_span(rows.get("window_start", pd.Series(dtype=object)), ends, since, now)
    ncols = 2
    nrows = math.ceil(len(signals) / ncols)
    fig = _figure(13, 2.9 * nrows + 0.6)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True)
    times = _naive_utc(rows["window_start"]) if not rows.empty else pd.Series([], dtype="datetime64[ns]")
    keys = sorted(set(series_labels), key=_natural)
    colours = _series_colours(keys)

    for ax, sig in zip(axes.flat, signals, strict=False):
        ax.set_title(sig.title, fontsize="medium", loc="left")
        ax.set_ylabel(sig.unit, fontsize="small")
        _time_axis(ax, since, now, label=False)
        ax.grid(True, alpha=0.3)
        values = pd.to_numeric(rows[sig.column], errors="coerce") * sig.scale if sig.column in rows \
            else pd.Series(dtype=float)
        values = plottable(values)
        if values.dropna().empty:
            _no_data(ax, "no data: no source reported this signal in the window")
            continue
        drew = False
        for key in keys:
            mask = (series_labels == key).to_numpy()
            t, v = times[mask], values[mask]
            if v.dropna().empty:
                continue
            if sig.events:
                hit = v > 0
                ax.plot(t, v, color=colours[key], linewidth=0.8, alpha=0.5, drawstyle="steps-post")
                ax.scatter(t[hit], v[hit], color=colours[key], marker="v", s=60, zorder=3,
                           edgecolor="black", label=drawn(key))
            else:
                ax.plot(t, v, color=colours[key], linewidth=1.4, drawstyle="steps-post", label=drawn(key))
            drew = True
        if sig.threshold is not None:
            ax.axhline(sig.threshold, color="#b2182b", linestyle="--", linewidth=1.0,
                       label=sig.threshold_label)
        # The bottom sits a little below zero so a flat zero line stays visible above the axis.
        if sig.scale == 100.0:
            top = max(105.0, float(values.max()) * 1.05)
            ax.set_ylim(-0.03 * top, top)
        else:
            top = max(1.0, float(values.max()) * 1.15)
            ax.set_ylim(-0.04 * top, top)
            ax.yaxis.get_major_locator().set_params(integer=True)
        if drew:
            ax.legend(fontsize="x-small", loc="upper left", title=legend_title, title_fontsize="x-small",
                      ncols=min(4, len(keys) + 1))
    for ax in list(axes.flat)[len(signals):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("time (UTC)")
    # sharex hides the inner tick labels; a panel in the last row may be hidden, so make
    # sure the panel above it keeps its labels.
    if len(signals) % ncols:
        axes[-2][-1].xaxis.set_tick_params(labelbottom=True)
    fig.suptitle(title)
    return _save(fig, path)


# --- quarantine --------------------------------------------------------------------------


def quarantine_bars(counts: pd.DataFrame, path: str | Path) -> Path:
    """Horizontal bars: quarantined records per reason category, largest on top."""
    n = len(counts)
    fig = _figure(10, max(2.0, 1.0 + 0.38 * n))
    ax = fig.add_subplot()
    ax.barh(range(n), counts["records"], color="#8c510a")
    ax.set_yticks(range(n), counts["category"].map(drawn), fontsize="small")
    ax.set_ylim(n - 0.4, -0.6)
    for i, v in enumerate(counts["records"]):
        ax.annotate(f"{int(v):,}", (v, i), xytext=(3, 0), textcoords="offset points", va="center",
                    fontsize="small")
    ax.set_xlabel("quarantined records in the window")
    ax.set_xlim(0, float(counts["records"].max()) * 1.15)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title("Quarantined records by reason category")
    return _save(fig, path)


def _natural(key: str) -> tuple:
    parts = str(key).split("/")
    out = []
    for p in parts:
        try:
            out.append((0, float(p), p))
        except ValueError:
            out.append((1, 0.0, p))
    return tuple(out)


def _series_colours(keys: Sequence[str]) -> dict[str, str]:
    palette = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink",
               "tab:olive", "tab:cyan", "tab:gray", "tab:red"]
    return {k: palette[i % len(palette)] for i, k in enumerate(keys)}
