"""One definition per exported series name: streaming/metric_names.py holds exactly the
names of metrics_schemas/exported_metrics.yaml, and no other module spells one out."""

from __future__ import annotations

import ast
from pathlib import Path

from streaming import metric_names
from streaming.schemas import load_yaml

STREAMING = Path(metric_names.__file__).resolve().parent


def contract_names() -> set[str]:
    return {name for group in load_yaml("exported_metrics.yaml").values()
            for kind in ("gauges", "counters") for name in group.get(kind) or {}}


def test_the_constants_are_exactly_the_contract() -> None:
    constants = {k: v for k, v in vars(metric_names).items() if k.isupper()}
    assert set(constants.values()) == contract_names()
    for key, name in constants.items():
        assert key == name.removeprefix("kafka_health_").upper(), key


def test_no_module_spells_out_a_series_name() -> None:
    names = contract_names()
    spelt: list[str] = []
    for path in sorted(STREAMING.rglob("*.py")):
        if path.name == "metric_names.py" or "_data" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in names:
                spelt.append(f"{path.relative_to(STREAMING.parent)}:{node.lineno} {node.value}")
    assert spelt == [], "use streaming.metric_names:\n" + "\n".join(spelt)
