"""What operators were shown stays in the history: a broker frozen for about 35 s (the
shipper's read of it hangs, its scrapes arrive late or stamped early, and the windows that
opened a stale-broker incident are recomputed once its samples come in) must leave every
incident the `incidents` table ever listed (what `kafka-health status`, `/metrics` and the
direct push read) in the table at the end, with its start and an end.
"""

from __future__ import annotations

import threading
import time

import pandas as pd

from streaming.testbed import faults
from tests.conftest import wait_for
from tests.integration.helpers import table
from tests.real_kafka.conftest import FINDINGS, NAMES, WINDOW, Bed
from tests.real_kafka.truth_checks import epoch, wait_caught_up

FREEZE_SECONDS = 35


class IncidentWatcher:
    """Reads the incidents table every half second on a thread of its own: every incident
    id it ever lists, with the row it was first seen as."""

    def __init__(self, bed: Bed, since: float) -> None:
        self.bed, self.since = bed, since
        self.seen: dict[str, dict] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True, name="incident-watcher")

    def run(self) -> None:
        while not self.stop.wait(0.5):
            rows = table(self.bed.delta, "incidents")
            if rows.empty:
                continue
            rows = rows[rows["started_at"].map(epoch) >= self.since - 2 * WINDOW]
            for row in rows.to_dict("records"):
                self.seen.setdefault(row["incident_id"], row)

    def __enter__(self) -> IncidentWatcher:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def test_an_incident_once_listed_stays_in_the_history_with_its_end(healthy: Bed) -> None:
    bed = healthy
    since = time.time()
    with IncidentWatcher(bed, since) as watcher:
        faults.stop_broker(bed.watched, 5, "freeze")
        try:
            # a stale-broker incident is what the freeze opens on the bed's 15 s threshold
            wait_for(lambda: any(r["kind"] == "stale_broker" and r["broker"] == "5"
                                 for r in watcher.seen.values()),
                     FREEZE_SECONDS + 60, "a stale-broker incident for the frozen broker")
            time.sleep(max(0.0, since + FREEZE_SECONDS - time.time()))  # the fault's length
        finally:
            faults.start_broker(bed.watched, 5)
        thawed = time.time()
        faults.wait_fully_replicated(bed.watched)
        # past the watermark (60 s): every window of the freeze has been recomputed by now
        wait_caught_up(bed, thawed + 60 + 2 * WINDOW)
    final = table(bed.delta, "incidents").set_index("incident_id")
    missing = sorted(set(watcher.seen) - set(final.index))
    assert not missing, [watcher.seen[i] for i in missing]
    shown = final.loc[sorted(watcher.seen)]
    open_now = shown[shown["resolved_at"].isna()]
    assert open_now.empty, open_now[["cluster", "broker", "kind", "started_at"]]
    assert (shown["resolved_at"] >= shown["started_at"]).all()
    withdrawn = shown[shown["withdrawn_at"].notna()] if "withdrawn_at" in shown else pd.DataFrame()
    for name in NAMES:
        kinds = sorted(shown[shown.cluster == name].kind.unique())
        FINDINGS.append(f"broker frozen {FREEZE_SECONDS} s, {name}: incidents listed {kinds}, "
                        f"{len(withdrawn[withdrawn.cluster == name]) if len(withdrawn) else 0} "
                        f"withdrawn by later samples, none deleted")
