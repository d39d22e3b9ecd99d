"""`kafka-health demo --simulated`: the demo with a model cluster in place of a watched
Kafka cluster. One real Kafka node holds the metrics topic; the simulator produces the
model's scrapes to it in wall-clock time, with a recurring fault cycle, and the job runs on
local Spark, narrated as the real demo is (streaming/testbed/demo.py)."""

from __future__ import annotations

import argparse
import math
import threading
from pathlib import Path
from typing import Any

# A day of the simulated demo's fault cycles, bounded: a --fault-period of a second must
# not build millions of events.
DEMO_MAX_CYCLES = 10_000


def demo_events(brokers: int, period: float = 300.0) -> list[Any]:
    """A fault cycle so the demo shows something: one follower down, then a second, then back;
    and steady partition growth so the headroom forecast has a trend. The steps sit at the
    same fractions of every `period` (at 300 s: 30, 60, 120, 150, 210 and 240 s in), for a
    day of cycles, at most DEMO_MAX_CYCLES."""
    from streaming.simulate.runner import Event

    if brokers < 3:
        return []
    events = []
    for cycle in range(max(1, min(DEMO_MAX_CYCLES, math.ceil(86_400 / period)))):
        base = cycle * period

        def at(fraction: float, base: float = base) -> float:
            return base + fraction * period

        events += [
            Event(at(0.1), lambda m: m.add_partitions("topic-0", 3), "3 partitions added"),
            Event(at(0.5), lambda m: m.add_partitions("topic-0", 3), "3 partitions added"),
            Event(at(0.2), lambda m: m.broker_down(brokers),
                  f"FAULT: the simulator stops broker {brokers}"),
            Event(at(0.4), lambda m: m.broker_down(brokers - 1),
                  f"FAULT: the simulator stops broker {brokers - 1} (under-min-ISR)"),
            Event(at(0.7), lambda m: m.broker_up(brokers - 1),
                  f"RECOVERY: broker {brokers - 1} up"),
            Event(at(0.8), lambda m: m.broker_up(brokers), f"RECOVERY: broker {brokers} up"),
        ]
    return events


class DownBrokers:
    """The model's brokers that are down now, as the narration's set of stopped broker ids."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __contains__(self, broker: object) -> bool:
        return any(str(b) == broker and not self.model.brokers[b].up for b in self.model.brokers)


def run_simulated_demo(args: argparse.Namespace, model: Any) -> int:
    """The demo on `model` (a streaming.simulate.model.ClusterModel) until Ctrl-C or
    --duration; the job's exit code."""
    from streaming.exporter import Exporter
    from streaming.job import Job
    from streaming.simulate.runner import Simulator
    from streaming.testbed.demo import (
        DemoNarration,
        IncidentNarrator,
        batch_printer,
        demo_config,
        say,
        summary,
    )
    from streaming.testbed.kafka import create_topic, metrics_cluster

    data = Path(args.data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    broker = metrics_cluster(data / "kafka-metrics").start()
    stop = threading.Event()
    narration = None
    job = None
    try:
        create_topic(broker.bootstrap, args.topic, partitions=3)
        config = demo_config(args, broker.bootstrap, data)
        simulator = Simulator(model, broker.bootstrap, args.topic,
                              scrape_interval=args.scrape_interval)
        sim_thread = threading.Thread(
            target=simulator.run, name="simulator", daemon=True,
            kwargs={"duration": args.duration or 10**9, "realtime": True,
                    "events": demo_events(args.brokers, args.fault_period),
                    "stop": stop.is_set},
        )
        exporter = Exporter(config=config.exporter)
        exporter.start(config.exporter.bind, config.exporter.port)
        job = Job(config, exporter=exporter, printer=batch_printer(args))
        job.install_signal_handlers()
        sim_thread.start()
        job.start()
        faults = (f"every {args.fault_period:g}s: broker {args.brokers} stopped, then broker "
                  f"{args.brokers - 1}, both back" if args.brokers >= 3 else
                  "none: the fault cycle needs --brokers 3 or more")
        print(f"""
kafka-health demo running (Ctrl-C stops everything)
  metrics    Kafka {broker.bootstrap} (one node, real Apache Kafka), topic {args.topic}
  simulator  cluster {args.cluster}: {args.brokers} brokers, scrape every {args.scrape_interval}s
  delta      {config.delta.path}
  /metrics   http://{config.exporter.bind}:{config.exporter.port}/metrics
  faults     {faults}
""", flush=True)
        # brokers the simulator stops are known to the model, so stale-broker incidents name them
        narrator = IncidentNarrator(config, say, DownBrokers(model))
        narration = DemoNarration(job, exporter, narrator, say).start()
        if args.duration:
            # daemon: a stop by signal or a failed query must not wait out the duration
            timer = threading.Timer(args.duration, job.request_stop)
            timer.daemon = True
            timer.start()
        code = job.run_until_stopped()
        narration.stop()
        narration = None
        print(summary(narrator, config, data), flush=True)
        return code
    finally:
        stop.set()
        if narration:
            narration.stop()
        if job is not None:
            # Spark's Python workers may still hold a Kafka client (a read task the stop
            # cancelled, the stream's planner): stopped first, they do not log the broker's
            # going away as errors.
            job.spark.stop()
        broker.stop()
