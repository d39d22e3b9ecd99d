"""The test bed's shipper: carries the watched brokers' own JMX into the metrics topics.

In production this is Telegraf's jolokia2 input, Prometheus remote_write into
prometheus-kafka-adapter, or the OTel collector's kafka exporter (docs/getting-started.md
has a recipe for each). Here it does what they do, against the real agents on each broker:

- Jolokia: one bulk read per broker and scrape of every MBean the catalog names, produced
  exactly as the agent returned it (record key `cluster/broker`, as the catalog's
  key_pattern expects).
- jmx_exporter: a scrape of each broker's /metrics, each sample produced as
  prometheus-kafka-adapter writes it (JSON `{timestamp, value, name, labels}`, values as
  strings, second-precision RFC 3339 times, no record key), with `cluster` and `broker`
  labels attached as a Prometheus scrape config's static labels would.

A broker that does not answer is skipped for that scrape (its silence is the signal); the
shipper itself never stops on one broker's error.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from streaming.catalog import jmx_series_props, load_catalog, parse_object_name
from streaming.logsetup import kafka_logger
from streaming.simulate.formats import go_float

LOG = logging.getLogger("kafka_health.shipper")
HTTP_TIMEOUT = 10.0  # seconds an agent's answer may take (a frozen broker's never comes)
FLUSH_TIMEOUT = 10.0  # seconds a scrape's records may take to reach the metrics cluster
# Series families worth shipping from a jmx_exporter scrape; a production remote_write
# keeps the same with a write_relabel_configs `keep` rule (the JVM's own series are noise).
KEEP_PREFIXES = ("kafka_server_", "kafka_controller_", "kafka_network_", "kafka_log_",
                 "process_open_fds", "process_max_fds")
# RequestMetrics is ~5,400 of a broker's ~6,200 series (a dozen histograms per request
# type); of it the catalog reads only RequestQueueTimeMs.
DROP_PREFIXES = ("kafka_network_requestmetrics_",)
KEEP_DESPITE_DROP = ("kafka_network_requestmetrics_requestqueuetimems",)


@dataclass(frozen=True)
class Target:
    """One broker to scrape: its id and its agents' URLs."""

    broker: int
    jolokia_url: str | None = None
    jmx_exporter_url: str | None = None


def jolokia_requests() -> list[dict[str, Any]]:
    """The bulk read body: every catalog MBean as a pattern (labelled beans such as
    NumLogSegments carry topic/partition keys), java.lang beans by attribute."""
    out: dict[tuple[str, str | None], dict[str, Any]] = {}
    for metric in load_catalog().metrics.values():
        if not metric.jmx_mbean:
            continue
        mbean = metric.jmx_mbean
        if jmx_series_props(metric):  # one series of a labelled bean: read the bean's pattern
            domain, props = parse_object_name(mbean)
            mbean = f"{domain}:type={props['type']},name={props['name']}"
        if metric.jmx_attribute:
            request = {"type": "read", "mbean": mbean, "attribute": metric.jmx_attribute}
        else:
            request = {"type": "read", "mbean": f"{mbean},*"}
        out.setdefault((request["mbean"], request.get("attribute")), request)
    # java.lang attributes of one bean go in one request, as Telegraf's input does.
    merged: dict[str, dict[str, Any]] = {}
    for (mbean, attribute), request in out.items():
        if attribute is None:
            merged[mbean] = request
        else:
            entry = merged.setdefault(mbean, {"type": "read", "mbean": mbean, "attribute": []})
            entry["attribute"].append(attribute)
    return list(merged.values())


def _get(url: str, body: bytes | None = None, timeout: float = HTTP_TIMEOUT) -> bytes:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}
                                     if body else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (loopback)
        return response.read()


def prometheus_adapter_records(text: str, cluster: str, broker: int, instance: str,
                               now: float) -> list[bytes]:
    """One jmx_exporter scrape as prometheus-kafka-adapter JSON messages (kept families)."""
    from prometheus_client.parser import text_string_to_metric_families

    stamp = datetime.fromtimestamp(int(now), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out: list[bytes] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith(KEEP_PREFIXES) or (
                    sample.name.startswith(DROP_PREFIXES)
                    and not sample.name.startswith(KEEP_DESPITE_DROP)):
                continue
            labels = {"__name__": sample.name, "instance": instance, "job": "kafka",
                      **sample.labels, "cluster": cluster, "broker": str(broker)}
            out.append(orjson.dumps({"timestamp": stamp, "value": go_float(sample.value),
                                     "name": sample.name, "labels": labels}))
    return out


class Shipper:
    """Scrapes every target each `interval` seconds and produces to the metrics cluster:
    Jolokia responses to `jolokia_topic`, adapter JSON to `prometheus_topic` (either may be
    None to skip that path). Each target has a thread of its own, as each Telegraf or
    Prometheus scrape runs on its own schedule: a frozen broker's request waits for its
    timeout (10 s) without thinning the other brokers' samples."""

    def __init__(self, targets: list[Target], cluster: str, bootstrap: str,
                 jolokia_topic: str | None, prometheus_topic: str | None,
                 interval: float = 5.0, client: Mapping[str, str] | None = None) -> None:
        """`client`: the settings of a client that logs in to a secured metrics cluster
        (streaming.kafka_client.client_settings); its bootstrap.servers, when set, replace
        `bootstrap`."""
        from confluent_kafka import Producer

        self.targets = targets
        self.cluster = cluster
        self.jolokia_topic = jolokia_topic
        self.prometheus_topic = prometheus_topic
        self.interval = interval
        self.producer = Producer({"bootstrap.servers": bootstrap, **(client or {}),
                                  "linger.ms": 20, "compression.type": "lz4", "acks": "all",
                                  "logger": kafka_logger()})
        self.body = orjson.dumps(jolokia_requests())
        self.errors: dict[str, str] = {}
        # (stamp, seconds) of each jmx_exporter scrape: how long after the timestamp its
        # samples carry the exporter read them (bounded: a day of 1 s scrapes of 5 brokers)
        self.reading_lags: deque[tuple[float, float]] = deque(maxlen=500_000)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def scrape_target(self, target: Target) -> int:
        """One scrape of one target's agents; returns the records produced."""
        now = time.time()
        produced = 0
        if self.jolokia_topic and target.jolokia_url:
            url = target.jolokia_url
            produced += self._ship(target, "jolokia", lambda: [_get(url, self.body)],
                                   self.jolokia_topic,
                                   key=f"{self.cluster}/{target.broker}".encode())
        if self.prometheus_topic and target.jmx_exporter_url:
            url = target.jmx_exporter_url
            stamp = float(int(now))  # what prometheus_adapter_records writes

            def scrape() -> list[bytes]:
                text = _get(url).decode()
                self.reading_lags.append((stamp, time.time() - stamp))
                return prometheus_adapter_records(text, self.cluster, target.broker,
                                                  url.split("/")[2], now)
            produced += self._ship(target, "jmx_exporter", scrape, self.prometheus_topic,
                                   key=None)
        self.producer.flush(FLUSH_TIMEOUT)
        return produced

    def _ship(self, target: Target, agent: str, fetch: Any, topic: str, key: bytes | None) -> int:
        try:
            values = fetch()
        except Exception as err:  # a silent broker is data, not a shipper failure
            self.errors[f"{target.broker}/{agent}"] = str(err)
            return 0
        self.errors.pop(f"{target.broker}/{agent}", None)
        for value in values:
            self.producer.produce(topic, value=value, key=key)
            self.producer.poll(0)
        return len(values)

    def _run(self, target: Target) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.scrape_target(target)
            except Exception:
                LOG.exception("shipper scrape of broker %s failed; trying again next interval",
                              target.broker)
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def start(self) -> Shipper:
        self._threads = [threading.Thread(target=self._run, args=(target,), daemon=True,
                                          name=f"shipper-{target.broker}")
                         for target in self.targets]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            # a scrape in progress: both agents' requests, then its flush
            thread.join(timeout=self.interval + 2 * HTTP_TIMEOUT + FLUSH_TIMEOUT + 5)
        self.producer.flush(FLUSH_TIMEOUT)

    def reading_lag_by_window(self, window_seconds: int) -> dict[float, float]:
        """Per window start, the longest a scrape stamped in it took to read its samples."""
        out: dict[float, float] = {}
        for stamp, lag in list(self.reading_lags):
            start = stamp // window_seconds * window_seconds
            out[start] = max(out.get(start, 0.0), lag)
        return out

    def __enter__(self) -> Shipper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
