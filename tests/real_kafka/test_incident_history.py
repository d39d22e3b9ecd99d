"""A broker frozen for about 35 s, as the two formats see it.

What operators were shown stays in the history: the shipper's reads of the frozen broker
hang, its scrapes arrive late or stamped early, and the windows they fall in are
recomputed once its samples come in; every incident the `incidents` table ever listed
(what `kafka-health status`, `/metrics` and the direct push read) must be in the table at
the end, with its start and an end.

And no rate over an interval the broker did not measure: the jmx_exporter scrape that
ends the freeze is stamped when it began (before the thaw) but read after it, so the
handler idle fraction from the Meter's Count over the stamps' interval read far too low
(a false saturation the Jolokia feed of the same broker, stamped at its read, did not
show). The broker's idle fraction from jmx_exporter must not fall below the saturation
threshold in a window where Jolokia's stays above it.
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

# two scrape timeouts after the first, and 8 s into the third scrape: about 35 s frozen
THAW_INTO_SCRAPE = 2 * 10 + 8


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
            # The jmx_exporter shipper stamps a scrape when it begins and waits up to its
            # HTTP timeout (10 s) for the answer: its scrapes of the frozen broker time out
            # one after another, each beginning as the last gives up. Thawing 8 s into one
            # of them makes it answer with values read 8 s after its stamp, and the next
            # scrape follows a second later: the interval that misled the rate.
            shipper = bed.shippers[1]
            first_timeout = wait_for(lambda: "5/jmx_exporter" in shipper.errors and time.time(),
                                     30, "a jmx_exporter scrape of the frozen broker timing out",
                                     every=0.1)
            time.sleep(max(0.0, first_timeout + THAW_INTO_SCRAPE - time.time()))
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
    assert_no_false_saturation(bed, since - WINDOW, thawed + 60)
    for name in NAMES:
        kinds = sorted(shown[shown.cluster == name].kind.unique())
        FINDINGS.append(f"broker frozen ~35 s, {name}: incidents listed {kinds}, "
                        f"{len(withdrawn[withdrawn.cluster == name]) if len(withdrawn) else 0} "
                        f"withdrawn by later samples, none deleted")


def assert_no_false_saturation(bed: Bed, since: float, until: float) -> None:
    """Per window of the frozen broker: jmx_exporter's idle fraction below the threshold
    only where Jolokia's is too; and no saturation incident from jmx_exporter alone."""
    threshold = bed.job.config.signals.saturation_idle_ratio
    rows = table(bed.delta, "broker_signals")
    rows = rows[(rows.broker == "5") & rows["window_start"].map(epoch).between(since, until)]
    idle = rows.pivot_table(index="window_start", columns="cluster",
                            values="request_handler_idle_min", aggfunc="min")
    jolokia, prometheus = NAMES
    if prometheus not in idle or jolokia not in idle:
        raise AssertionError(f"no idle fraction of broker 5 from both formats: {idle}")
    false_low = idle[(idle[prometheus] < threshold) & ~(idle[jolokia] < threshold)]
    assert false_low.empty, false_low
    incidents = table(bed.delta, "incidents")
    by_format: dict[str, set[str]] = {name: set() for name in NAMES}
    for row in incidents.to_dict("records"):
        if row["kind"] == "saturation" and since <= epoch(row["started_at"]) <= until:
            by_format[row["cluster"]].add(row["broker"])
    assert by_format[prometheus] <= by_format[jolokia], by_format
    FINDINGS.append(f"broker frozen ~35 s: lowest idle fraction of broker 5 "
                    f"{idle[jolokia].min():.2f} (Jolokia), {idle[prometheus].min():.2f} "
                    f"(jmx_exporter Count)")
