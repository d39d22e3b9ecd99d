"""One definition per exported series name: streaming/metric_names.py holds exactly the
names of metrics_schemas/exported_metrics.yaml."""

from __future__ import annotations

from streaming import metric_names
from streaming.schemas import load_yaml


def contract_names() -> set[str]:
    return {name for group in load_yaml("exported_metrics.yaml").values()
            for kind in ("gauges", "counters") for name in group.get(kind) or {}}


def test_the_constants_are_exactly_the_contract() -> None:
    constants = {k: v for k, v in vars(metric_names).items() if k.isupper()}
    assert set(constants.values()) == contract_names()
    for key, name in constants.items():
        assert key == name.removeprefix("kafka_health_").upper(), key

