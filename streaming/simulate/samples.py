"""What a broker's JMX shows at one scrape, as canonical (metric, attribute, labels, value)."""

from __future__ import annotations

from dataclasses import dataclass, field

from streaming.simulate.model import ClusterModel


@dataclass(frozen=True)
class Sample:
    metric: str
    attribute: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)


def broker_samples(
    model: ClusterModel, broker: int, scrape_interval: float, per_partition: bool = True
) -> list[Sample]:
    """Every sample one scrape of `broker` yields; meters report Count and OneMinuteRate."""
    state = model.brokers[broker]
    out = [Sample(metric, "Value", float(value))
           for metric, value in model.broker_values(broker).items()]
    for metric, count in model.meters(broker).items():
        out.append(Sample(metric, "Count", float(count)))
    # RequestHandlerAvgIdlePercent is a Meter: Count accumulates idle nanoseconds per thread,
    # OneMinuteRate is the idle fraction.
    state.handler_idle_ns += state.handler_idle * scrape_interval * 1e9
    out.append(Sample("RequestHandlerAvgIdlePercent", "Count", float(int(state.handler_idle_ns))))
    out.append(Sample("RequestHandlerAvgIdlePercent", "OneMinuteRate", state.handler_idle))
    if per_partition:
        for p in model.hosted_partitions(broker):
            out.append(Sample("NumLogSegments", "Value", float(p.segments),
                              {"topic": p.topic, "partition": str(p.index)}))
    return out
