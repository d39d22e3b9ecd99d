"""The signal catalog (metrics_schemas/signals.yaml): each named PromQL expression the alert
rules, the dashboards and the runbooks show, with the values where it turns bad.

alerts/build.py and dashboards/build.py read it; this module only loads it and writes an
expression with a selector or a condition.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from streaming.schemas import load_yaml

OPERATORS = (">", ">=", "<", "==", "!=")
_SERIES = re.compile(r"\bkafka_health_\w+")


@dataclass(frozen=True)
class Bad:
    """The values of a signal that are bad: `op value`, shown in `color`."""

    op: str
    value: float
    color: str

    def __str__(self) -> str:
        """The comparison as PromQL writes it, e.g. `> 0.8`."""
        value = int(self.value) if float(self.value).is_integer() else self.value
        return f"{self.op} {value}"


@dataclass(frozen=True)
class Signal:
    id: str
    expr: str
    unit: str
    description: str
    integer: bool = False
    bad: Bad | None = None

    def select(self, selector: str = "") -> str:
        """The expression with `selector` (label matchers, e.g. `cluster=~"$cluster"`) on
        every series it names."""
        if not selector:
            return self.expr
        return _SERIES.sub(lambda m: f"{m.group(0)}{{{selector}}}", self.expr)

    def condition(self) -> str:
        """`expr op value`: the values that are bad, as an alert or a runbook writes them."""
        if self.bad is None:
            raise ValueError(f"signal {self.id!r} has no bad values (metrics_schemas/signals.yaml)")
        return f"{self.expr} {self.bad}"


def _signal(signal_id: str, spec: dict) -> Signal:
    bad = spec.get("bad")
    if bad is not None:
        if bad["op"] not in OPERATORS:
            raise ValueError(f"signal {signal_id!r}: op {bad['op']!r} is not one of {OPERATORS}")
        bad = Bad(op=bad["op"], value=bad["value"], color=bad["color"])
    return Signal(id=signal_id, expr=" ".join(spec["expr"].split()), unit=spec["unit"],
                  description=spec["description"], integer=bool(spec.get("integer", False)),
                  bad=bad)


@functools.cache
def signals() -> dict[str, Signal]:
    """Signal id -> Signal, in the catalog's order."""
    return {sid: _signal(sid, spec) for sid, spec in load_yaml("signals.yaml")["signals"].items()}


def signal(signal_id: str) -> Signal:
    try:
        return signals()[signal_id]
    except KeyError:
        raise KeyError(f"no signal {signal_id!r} in metrics_schemas/signals.yaml") from None
