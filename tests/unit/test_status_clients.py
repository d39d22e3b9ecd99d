"""`kafka-health status` on the clients' tables as the job's store writes them: brokers
whose probe writes failed or were lost in the look-back, groups not ok or losing records
to retention; and the sections' absence said, not taken for an unknown, when the job does
not run them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from streaming.clients.group_status import PartitionStatus, RetentionLoss
from streaming.clients.probe_ledger import Loss, ProbeWindow
from streaming.clients.store import ClientsStore
from streaming.report.html import write_report
from streaming.report.status import format_status, read_status

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def window(broker: str, minutes_ago: float, acked: int, failed: int, lost: int = 0
           ) -> ProbeWindow:
    return ProbeWindow("prod", broker, NOW - timedelta(minutes=minutes_ago), 60.0,
                       attempted=acked + failed, acked=acked, failed=failed,
                       failed_by_class={"not_enough_replicas": failed} if failed else {},
                       ack_p50_ms=3.0, ack_p99_ms=9.0, read_p99_ms=20.0, lost=lost)


def group(name: str, partition: int, status: str, lag: int, at: datetime,
          lost: int = 0) -> PartitionStatus:
    return PartitionStatus("prod", name, "orders", partition, at, 100, 100 + lost, 100 + lag,
                           lag, 30.0 if lag else 0.0, status, lost)


def test_status_lists_failing_probe_brokers_and_groups_in_trouble(tmp_path: Path) -> None:
    store = ClientsStore(str(tmp_path), "test")
    store.write_probe("prod", [
        window("1", 5, acked=12, failed=0), window("3", 5, acked=4, failed=8),
        window("3", 4, acked=11, failed=1), window("2", 3, acked=10, failed=0, lost=2),
        window("4", 40, acked=0, failed=12)], [])  # broker 4's is older than the look-back
    earlier, later = NOW - timedelta(minutes=2), NOW - timedelta(minutes=1)
    store.write_groups("prod", [group("stuck", 0, "ok", 0, earlier)], [])
    store.write_groups("prod", [group("stuck", 0, "stalled", 500, later),
                                group("fine", 0, "ok", 0, later),
                                group("late", 0, "error", 900, later, lost=70),
                                group("late", 1, "ok", 0, later)],
                       [RetentionLoss("prod", "late", "orders", 0, 100, 170, 70, earlier,
                                      later)])
    status = read_status(tmp_path, now=NOW)
    assert [(p["broker"], p["failed"], p["lost"]) for p in status.probe_failing] == [
        ("2", 0, 2), ("3", 9, 0)]
    assert status.probe_failing[1]["availability"] == 15 / 24
    troubled = {g["group"]: (g["status"], g["lag_records"], g["lost_to_retention"])
                for g in status.groups_in_trouble}
    assert troubled == {"stuck": ("stalled", 500, 0), "late": ("error", 900, 70)}
    text = format_status(status, 45)
    assert "brokers with failed or lost writes in the last 15 min: 2" in text
    assert "62.5%" in text


def test_clients_not_run_are_said_and_are_no_unknown(tmp_path: Path) -> None:
    status = read_status(tmp_path, now=NOW)
    assert status.probe_failing is None and status.groups_in_trouble is None
    text = format_status(status, 45)
    assert "Durability probe: not run (config probe.enabled)" in text
    assert "Consumer groups: not read (config consumer_groups.enabled)" in text


def test_the_report_lists_the_probes_failures_and_losses_and_the_groups(tmp_path: Path) -> None:
    store = ClientsStore(str(tmp_path), "test")
    now = datetime.now(UTC)
    store.write_probe("prod", [ProbeWindow("prod", "3", now - timedelta(minutes=5), 60.0,
                                           attempted=12, acked=4, failed=8,
                                           failed_by_class={"not_enough_replicas": 8})],
                      [Loss("prod", "5", "kafka-health-probe", 2, 41, 7,
                            now - timedelta(minutes=4), now - timedelta(minutes=4),
                            now - timedelta(minutes=3), 44)])
    store.write_groups("prod", [PartitionStatus("prod", "late", "orders", 0,
                                                now - timedelta(minutes=2), 100, 170, 900, 800,
                                                None, "error", 70)],
                       [RetentionLoss("prod", "late", "orders", 0, 100, 170, 70,
                                      now - timedelta(minutes=2), now - timedelta(minutes=2))])
    out = tmp_path / "report"
    write_report(str(tmp_path), str(out), hours=1.0)
    page = (out / "index.html").read_text()
    section = page[page.index('<section id="clients">'):]
    section = section[:section.index("</section>")]
    assert "33.33%" in section and "not_enough_replicas" not in section, section
    assert ">41<" in section and ">late<" in section and ">70<" in section, section
    assert '<div class="n">1</div><div class="l">acked probe records lost</div>' in page
