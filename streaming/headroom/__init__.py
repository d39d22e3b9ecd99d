"""Partition headroom model (pure Python) and its chart; see model.py for the bounds.

The chart is not imported here so that the model stays importable without matplotlib
(the streaming job only needs the numbers).
"""

from streaming.headroom.model import (
    BASELINE,
    BOUND_ORDER,
    FILE_DESCRIPTORS,
    MAX_BROKER_PARTITIONS,
    MAX_PARTITIONS_PER_BATCH,
    MMAP,
    RECOVERY,
    BrokerHeadroom,
    BrokerSnapshot,
    ClusterHeadroom,
    Forecast,
    HeadroomConfig,
    binding_bound,
    broker_headroom,
    brokers_needed,
    cluster_headroom,
    create_topic_batches,
    days_until,
    evaluate_cluster,
    forecast,
    growth_per_day,
    load_defaults,
    make_config,
)

__all__ = [
    "BASELINE",
    "BOUND_ORDER",
    "FILE_DESCRIPTORS",
    "MAX_BROKER_PARTITIONS",
    "MAX_PARTITIONS_PER_BATCH",
    "MMAP",
    "RECOVERY",
    "BrokerHeadroom",
    "BrokerSnapshot",
    "ClusterHeadroom",
    "Forecast",
    "HeadroomConfig",
    "binding_bound",
    "broker_headroom",
    "brokers_needed",
    "cluster_headroom",
    "create_topic_batches",
    "days_until",
    "evaluate_cluster",
    "forecast",
    "growth_per_day",
    "load_defaults",
    "make_config",
]
