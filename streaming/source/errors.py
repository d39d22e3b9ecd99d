"""What goes wrong reading the metrics topics, on either side: the source's exceptions,
the librdkafka errors it tells apart, and what failOnDataLoss makes of a loss."""

from __future__ import annotations

import logging

LOG = logging.getLogger("kafka_health.source")

# librdkafka's errors (KafkaError names): no broker answers; a partition's leader is being
# elected; and either, or a broker that answers late, which a read waits through.
UNREACHABLE = frozenset({"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN"})
LEADER_MOVING = frozenset({"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE"})
NO_ANSWER = UNREACHABLE | LEADER_MOVING | {"REQUEST_TIMED_OUT", "BROKER_NOT_AVAILABLE"}


class KafkaDataLossError(RuntimeError):
    """Offsets the checkpoint expects are gone; raised only when failOnDataLoss is true."""


class KafkaUnavailableError(RuntimeError):
    """Kafka could not be reached before the query knew any offsets (nothing to wait on)."""


def data_loss(fail_on_data_loss: bool, message: str, instead: str = "skip ahead") -> None:
    """A loss found by the planner or a read task: the query stops with failOnDataLoss
    (naming the setting that would `instead` go on), else it is a warning."""
    if fail_on_data_loss:
        raise KafkaDataLossError(
            f"{message}. Set source.fail_on_data_loss: false to {instead} and continue."
        )
    LOG.warning("data loss (continuing, failOnDataLoss=false): %s", message)
