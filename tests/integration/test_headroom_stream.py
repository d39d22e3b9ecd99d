"""Steady partition growth through the real job: the binding bound and the forecast day."""

from __future__ import annotations

import json

import pytest

from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Event
from tests.integration.helpers import table
from tests.integration.test_scenarios import run_job, simulate

pytestmark = pytest.mark.integration
GROWTH_PER_MINUTE = 2
VM_MAX_MAP_COUNT = 1500  # 3 segments/partition -> 6 map areas -> an mmap ceiling of 250


def test_growth_forecasts_the_mmap_ceiling_within_ten_percent(broker, topic, job_env, spark):
    model = ClusterModel("c1", [1, 2, 3], {"orders": 60})
    minutes = 30
    growth = [Event(60 * m, lambda mdl: mdl.add_partitions("orders", GROWTH_PER_MINUTE))
              for m in range(1, minutes)]
    sim = simulate(broker.bootstrap, topic, model, minutes, growth)
    env = {**job_env, "KAFKA_HEALTH__CLUSTERS": json.dumps(
        {"c1": {"vm_max_map_count": VM_MAX_MAP_COUNT}})}
    root = run_job(spark, env, sim)

    headroom = table(root, "partition_headroom")
    newest = headroom.sort_values("evaluated_at").groupby("broker").tail(1)
    assert len(newest) == 3
    final_partitions = model.broker_values(1)["PartitionCount"]
    true_days = (VM_MAX_MAP_COUNT / 6 - final_partitions) / (GROWTH_PER_MINUTE * 1440)
    for row in newest.to_dict("records"):
        assert row["binding_bound"] == "mmap"
        assert row["ceiling_mmap"] == pytest.approx(VM_MAX_MAP_COUNT / 6)
        assert row["partitions"] == final_partitions
        assert row["growth_per_day"] == pytest.approx(GROWTH_PER_MINUTE * 1440, rel=0.10)
        assert row["days_to_ceiling"] == pytest.approx(true_days, rel=0.10)
