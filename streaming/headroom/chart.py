"""A static PNG of partition headroom for reports and incident tickets.

Drawn on an explicit Agg canvas (no pyplot) so it works headless, inside the streaming
driver, and without touching matplotlib's global backend state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from streaming.chart_values import plottable
from streaming.headroom.model import BOUND_ORDER, BrokerHeadroom
from streaming.text import drawn

HISTORY_COLUMNS = ("broker", "timestamp", "partitions")
CEILING_COLUMNS = ("broker", "bound", "ceiling", "binding")

# One fixed colour per bound so the same bound looks the same on every broker's panel.
BOUND_COLOURS: dict[str, str] = {
    "max_broker_partitions": "tab:purple",
    "mmap": "tab:blue",
    "file_descriptors": "tab:orange",
    "recovery": "tab:red",
    "baseline": "tab:gray",
}


def ceilings_frame(results: Iterable[BrokerHeadroom]) -> pd.DataFrame:
    """Bridges the pure model to the chart without making the model depend on pandas."""
    rows = [
        {
            "broker": r.broker,
            "bound": bound,
            "ceiling": r.ceilings[bound],
            "binding": bound == r.binding_bound,
        }
        for r in results
        for bound in BOUND_ORDER
        if r.ceilings.get(bound) is not None
    ]
    return pd.DataFrame(rows, columns=list(CEILING_COLUMNS))


def write_headroom_png(history: pd.DataFrame, ceilings: pd.DataFrame, path: str | Path) -> Path:
    """One panel per broker: partitions over time against each bound's ceiling.

    ``history`` has columns broker, timestamp, partitions; ``ceilings`` has broker, bound,
    ceiling, binding (as built by ``ceilings_frame``). The binding bound is drawn thick and
    solid, the others thin and dashed. The y-axis stops at 1.5x the larger of the binding
    ceiling and the observed partitions, because the region near the binding ceiling is
    what matters; ceilings above that are listed in the legend as "off scale" rather than
    flattening the partition line to the floor.
    """
    _require_columns(history, HISTORY_COLUMNS, "history")
    _require_columns(ceilings, CEILING_COLUMNS, "ceilings")
    brokers = sorted(set(history["broker"]).union(ceilings["broker"]), key=str)
    if not brokers:
        raise ValueError("nothing to plot: history and ceilings are both empty")

    ncols = min(3, len(brokers))
    nrows = math.ceil(len(brokers) / ncols)
    fig = Figure(figsize=(5.5 * ncols, 3.6 * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)

    for ax, broker in zip(axes.flat, brokers, strict=False):
        _draw_broker(ax, broker, history[history["broker"] == broker],
                     ceilings[ceilings["broker"] == broker])
    for ax in list(axes.flat)[len(brokers):]:
        ax.set_visible(False)

    fig.suptitle("Partition headroom per broker (binding bound drawn solid)")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=100)
    return out


def _draw_broker(ax: Axes, broker: object, hist: pd.DataFrame, ceil: pd.DataFrame) -> None:
    hist = hist.sort_values("timestamp").assign(
        partitions=lambda h: plottable(pd.to_numeric(h["partitions"], errors="coerce")))
    # a ceiling that is not a number has nothing to draw
    ceil = ceil.assign(ceiling=lambda c: plottable(pd.to_numeric(c["ceiling"], errors="coerce"))
                       ).dropna(subset=["ceiling"])
    times = pd.to_datetime(hist["timestamp"])
    if not hist.empty:
        ax.plot(times, hist["partitions"], color="black", linewidth=1.8, marker=".",
                label="partitions")
        if times.min() == times.max():  # one evaluation: without this the axis spans years
            ax.set_xlim(times.min() - pd.Timedelta(minutes=5), times.max() + pd.Timedelta(minutes=5))

    binding_rows = ceil[ceil["binding"].astype(bool)]
    binding_value = float(binding_rows["ceiling"].min()) if not binding_rows.empty else 0.0
    observed_max = float(hist["partitions"].fillna(0.0).max()) if not hist.empty else 0.0
    top = 1.5 * max(binding_value, observed_max, 1.0)

    order = {name: i for i, name in enumerate(BOUND_ORDER)}
    for row in sorted(ceil.itertuples(index=False), key=lambda r: order.get(r.bound, 99)):
        value = float(row.ceiling)
        binding = bool(row.binding)
        label = f"{row.bound} {value:,.0f}" + (" (binding)" if binding else "")
        colour = BOUND_COLOURS.get(row.bound, "tab:green")
        if value > top:
            # Keep it in the legend without stretching the axis.
            ax.plot([], [], color=colour, linestyle=":", label=label + " (off scale)")
            continue
        ax.axhline(value, color=colour, linewidth=3.0 if binding else 1.0,
                   linestyle="-" if binding else "--", label=label)

    ax.set_ylim(0, top)
    ax.set_title(f"broker {drawn(broker)}")
    ax.set_ylabel("partitions")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left")
    ax.tick_params(axis="x", labelrotation=30, labelsize="small")


def _require_columns(frame: pd.DataFrame, columns: Iterable[str], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} is missing column(s) {missing}; expected {list(columns)}")


# --- from the partition_headroom Delta table -------------------------------------------
# The table stores one row per (cluster, broker, evaluated_at) with a ceiling_<bound>
# column per bound; these two helpers turn its rows into the frames write_headroom_png
# takes, so reports and notebooks draw the same chart as the streaming job.

CEILING_COLUMN_PREFIX = "ceiling_"


def history_frame_from_rows(rows: pd.DataFrame, broker_labels: pd.Series | None = None) -> pd.DataFrame:
    """partition_headroom rows -> (broker, timestamp, partitions), one point per row."""
    _require_columns(rows, ("broker", "evaluated_at", "partitions"), "partition_headroom rows")
    labels = rows["broker"] if broker_labels is None else broker_labels
    frame = pd.DataFrame({
        "broker": labels.astype(str).reset_index(drop=True),
        "timestamp": pd.to_datetime(rows["evaluated_at"], utc=True).reset_index(drop=True),
        "partitions": pd.to_numeric(rows["partitions"], errors="coerce").reset_index(drop=True),
    })
    return frame.dropna(subset=["partitions"]).reset_index(drop=True)


def ceilings_frame_from_rows(latest: pd.DataFrame, broker_labels: pd.Series | None = None) -> pd.DataFrame:
    """The latest partition_headroom row per broker -> (broker, bound, ceiling, binding).

    A null ceiling (bound not computable or not configured) is left out, as
    ``ceilings_frame`` does for the model's None.
    """
    _require_columns(latest, ("broker", "binding_bound"), "partition_headroom rows")
    labels = latest["broker"] if broker_labels is None else broker_labels
    out = []
    for label, (_, row) in zip(labels.astype(str), latest.iterrows(), strict=True):
        for bound in BOUND_ORDER:
            value = row.get(CEILING_COLUMN_PREFIX + bound)
            if value is None or pd.isna(value):
                continue
            out.append({"broker": label, "bound": bound, "ceiling": float(value),
                        "binding": bound == row["binding_bound"]})
    return pd.DataFrame(out, columns=list(CEILING_COLUMNS))
