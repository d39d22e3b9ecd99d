"""Message layouts the simulator writes; each takes one scrape's samples of one broker."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from streaming.catalog import Catalog, load_catalog
from streaming.simulate.samples import Sample

# (cluster, broker, epoch seconds, samples) -> list of (key, value) records
Encoder = Callable[[str, int, float, list[Sample]], list[tuple[bytes | None, bytes]]]


def _object_name(catalog: Catalog, sample: Sample) -> tuple[str, str]:
    metric = catalog.metrics[sample.metric]
    mbean = metric.jmx_mbean or ""
    if sample.labels:
        domain, _, props = mbean.partition(":")
        extra = ",".join(f"{k}={v}" for k, v in sample.labels.items())
        mbean = f"{domain}:{props},{extra}"
    attribute = metric.jmx_attribute or sample.attribute
    return mbean, attribute


def jolokia(cluster: str, broker: int, ts: float, samples: list[Sample]) -> list[
        tuple[bytes | None, bytes]]:
    """A Jolokia bulk read response, one entry per MBean, keyed by cluster/broker."""
    catalog = load_catalog()
    entries: dict[str, dict] = {}
    for sample in samples:
        mbean, attribute = _object_name(catalog, sample)
        entry = entries.setdefault(mbean, {
            "request": {"mbean": mbean, "type": "read"},
            "value": {},
            "timestamp": int(ts),
            "status": 200,
        })
        entry["value"][attribute] = sample.value
    return [(f"{cluster}/{broker}".encode(), orjson.dumps(list(entries.values())))]


ENCODERS: dict[str, Encoder] = {"jolokia": jolokia}
