"""Numbers from the data as a chart draws them: capped, so any value draws.

No Kafka gauge or count comes near 1e15; a hostile or broken scrape can (1.7e308,
infinity), and an axis that reaches the largest double overflows matplotlib's tick locator
or has no finite limits at all (a ValueError that would lose the chart). A value beyond the
cap draws at it; the report's tables keep the value as stored.
"""

from __future__ import annotations

import pandas as pd

PLOT_CAP = 1e15


def plottable(values: pd.Series) -> pd.Series:
    """`values` clipped to ±PLOT_CAP (NaN stays NaN: no data)."""
    return values.clip(-PLOT_CAP, PLOT_CAP)
