"""The metrics broker restarted mid-stream, its data gone (the embedded broker keeps topics
in memory, so a restart is exactly that).

While it is down the query waits instead of failing (no crash loop) and
`kafka_health_pipeline_source_up` says so. When it is back without the data the
checkpoint expects, the job does what `source.fail_on_data_loss` says: continue from the
new offsets and count the loss, or stop with a message that names the setting.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from streaming.exporter import Exporter
from streaming.simulate.model import ClusterModel
from streaming.simulate.runner import Simulator
from streaming.testbed.kafka import create_topic, metrics_cluster
from tests.conftest import wait_for
from tests.integration.helpers import count, running_job

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, minutes: float) -> int:
    """Samples of `minutes` of a 3-broker cluster, written in the past (compressed time)."""
    model = ClusterModel("c1", [1, 2, 3], {"orders": 3})
    start = (int(time.time()) // 60 - int(minutes) - 2) * 60.0
    sim = Simulator(model, bootstrap, topic, scrape_interval=15, start=start)
    sim.run(minutes * 60)
    return sim.truth.samples_total


def gauge(exporter: Exporter, name: str) -> float | None:
    return exporter.registry.get_sample_value(name)


@pytest.mark.parametrize("fail_on_data_loss", [False, True])
def test_broker_restarted_with_its_data_gone(spark, tmp_path, fail_on_data_loss: bool):
    broker = metrics_cluster().start()
    topic = "metrics-restart"
    try:
        create_topic(broker.bootstrap, topic, partitions=3)
        before = produce(broker.bootstrap, topic, minutes=4)
        env = {
            "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": broker.bootstrap,
            "KAFKA_HEALTH__SOURCE__TOPICS": f'[{{"name": "{topic}", "format": "auto"}}]',
                        "KAFKA_HEALTH__SOURCE__FAIL_ON_DATA_LOSS": str(fail_on_data_loss).lower(),
            "KAFKA_HEALTH__SPARK__CHECKPOINT": str(tmp_path / "checkpoint"),
            "KAFKA_HEALTH__DELTA__PATH": str(tmp_path / "delta"),
            "KAFKA_HEALTH__QUALITY__MAX_TIMESTAMP_SKEW_SECONDS": "86400",
        }
        root = tmp_path / "delta"
        exporter = Exporter()
        with running_job(spark, env, exporter) as job:
            query: Any = job.query

            def alive(condition):
                def check() -> Any:
                    assert query.isActive, f"query stopped: {query.exception()}"
                    return condition()
                return check

            wait_for(alive(lambda: count(root, "bronze") == before), 180, f"{before} samples")
            # the listener hears of the batch asynchronously, after the trigger has ended
            wait_for(alive(lambda: gauge(exporter, "kafka_health_pipeline_source_up") == 1), 60,
                     "the pipeline to report its source up")

            broker.stop()
            wait_for(alive(lambda: gauge(exporter, "kafka_health_pipeline_source_up") == 0), 90,
                     "the pipeline to report its source down")

            broker.start()  # same port, empty storage: every offset the checkpoint has is gone
            create_topic(broker.bootstrap, topic, partitions=3)
            after = produce(broker.bootstrap, topic, minutes=1)  # fewer records per partition

            if fail_on_data_loss:
                wait_for(lambda: not query.isActive, 120, "the query to stop on data loss")
                message = str(query.exception())
                assert "Set source.fail_on_data_loss: false" in message, message[-2000:]
                assert count(root, "bronze") == before, "nothing read past the loss"
                assert job.run_until_stopped() == 1, "one clean failure, not a retry loop"
            else:
                wait_for(alive(lambda: count(root, "bronze") == before + after), 180,
                         f"{before} + {after} samples")
                wait_for(alive(lambda: gauge(
                    exporter, "kafka_health_pipeline_source_data_loss_total")), 30,
                    "the data loss to be counted")
                wait_for(alive(lambda: gauge(exporter, "kafka_health_pipeline_source_up") == 1), 60,
                         "the pipeline to report its source back")
                assert count(root, "quarantine") == 0
    finally:
        broker.stop()
