"""Ground truth per (cluster, broker, window), kept from the model at each scrape.

Increases come from the model's true event totals (which never reset), attributed to
the window of the scrape that first shows them: that is what any scraper can observe.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streaming.simulate.model import ClusterModel

LEVELS = {
    "under_min_isr": "UnderMinIsrPartitionCount",
    "at_min_isr": "AtMinIsrPartitionCount",
    "under_replicated": "UnderReplicatedPartitions",
}
INCREASES = {
    "isr_shrinks_increase": "true_shrinks",
    "isr_expands_increase": "true_expands",
    "unclean_elections_increase": "true_unclean",
}


@dataclass
class GroundTruth:
    window_seconds: int = 60
    windows: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    _last_totals: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    samples_total: int = 0

    def observe(self, model: ClusterModel, broker: int, ts: float, samples: int) -> None:
        window = int(ts // self.window_seconds) * self.window_seconds
        key = (model.name, str(broker), window)
        values = model.broker_values(broker)
        state = model.brokers[broker]
        row = self.windows.setdefault(key, defaultdict(float))
        row["samples"] += samples
        self.samples_total += samples
        for name, metric in LEVELS.items():
            row[f"{name}_max"] = max(row.get(f"{name}_max", 0.0), values[metric])
            row[f"{name}_last"] = float(values[metric])
        row["offline_partitions_max"] = max(row.get("offline_partitions_max", 0.0),
                                            values["OfflinePartitionsCount"])
        row["active_controller_last"] = float(values["ActiveControllerCount"])
        row["partition_count_last"] = float(values["PartitionCount"])
        row["leader_count_last"] = float(values["LeaderCount"])
        row["request_queue_size_max"] = max(row.get("request_queue_size_max", 0.0),
                                            values["RequestQueueSize"])
        row["request_handler_idle_min"] = min(row.get("request_handler_idle_min", 1e9),
                                              state.handler_idle)
        totals = {attr: getattr(state, attr) for attr in INCREASES.values()}
        previous = self._last_totals.get((model.name, broker))
        for name, attr in INCREASES.items():
            row[name] += 0.0 if previous is None else totals[attr] - previous[attr]
        self._last_totals[(model.name, broker)] = totals

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for (cluster, broker, window), row in sorted(self.windows.items()):
            out.append({"cluster": cluster, "broker": broker,
                        "window_start": datetime.fromtimestamp(window, UTC).isoformat(),
                        **dict(row)})
        return out

    def write(self, path: str | Path) -> None:
        with open(path, "w") as out:
            for row in self.rows():
                out.write(json.dumps(row) + "\n")
