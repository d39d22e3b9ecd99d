"""The signal catalog (metrics_schemas/signals.yaml) against the exported-series contract."""

from __future__ import annotations

import re

from streaming.signal_catalog import OPERATORS, signal, signals
from tests.unit.test_metric_names import contract_names


def test_every_signal_reads_only_exported_series() -> None:
    known = contract_names()
    for sig in signals().values():
        names = set(re.findall(r"\bkafka_health_\w+", sig.expr))
        assert names, f"{sig.id}: names no series"
        assert names <= known, f"{sig.id}: {sorted(names - known)} not exported"


def test_bad_values_are_well_formed() -> None:
    for sig in signals().values():
        assert sig.unit and sig.description, sig.id
        if sig.bad is not None:
            assert sig.bad.op in OPERATORS and sig.bad.color in {"red", "orange"}, sig.id


def test_select_puts_the_selector_on_every_series() -> None:
    fds = signal("fd_utilization")
    assert fds.select('cluster=~"$cluster"') == (
        'kafka_health_open_file_descriptors{cluster=~"$cluster"} / '
        'kafka_health_max_file_descriptors{cluster=~"$cluster"}')
    assert fds.select("") == fds.expr


def test_condition_writes_the_comparison_as_promql_does() -> None:
    assert signal("under_min_isr").condition() == "kafka_health_under_min_isr_partitions > 0"
    assert signal("request_queue").condition() == (
        "kafka_health_request_queue_utilization_ratio > 0.8")
    assert str(signal("active_controllers").bad) == "!= 1"
