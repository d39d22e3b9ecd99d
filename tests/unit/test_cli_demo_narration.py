"""What the demo says about incidents, read from an incidents table as the job writes it:
the opening in the operator's units, the page it raises, the resolve with its duration,
and a stale broker tied to the fault that stopped it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from streaming.config import load_config
from streaming.schemas import arrow_schema
from streaming.testbed.demo import IncidentNarrator

START = datetime(2026, 1, 1, 4, 31, tzinfo=UTC)


def incident(key: str, kind: str, broker: str, peak: float,
             resolved: datetime | None = None) -> dict:
    return {"incident_id": key, "cluster": "demo", "broker": broker, "kind": kind,
            "started_at": START, "resolved_at": resolved, "peak_value": peak,
            "updated_at": resolved or START}


def write(root: Path, rows: list[dict]) -> None:
    write_deltalake(str(root / "incidents"), pa.Table.from_pylist(rows, arrow_schema("incidents")),
                    mode="overwrite")


def narrator(tmp_path: Path, stopped: set[str] | None = None) -> tuple[IncidentNarrator, list[str]]:
    config = load_config(None, environ={"KAFKA_HEALTH__DELTA__PATH": str(tmp_path)})
    lines: list[str] = []
    return IncidentNarrator(config, lines.append, stopped or set()), lines


def test_an_incident_is_announced_with_its_page_and_its_resolve(tmp_path: Path) -> None:
    watcher, lines = narrator(tmp_path)
    watcher.poll()  # no table yet: nothing to say, no error
    assert lines == []
    write(tmp_path, [incident("a", "under_min_isr", "1", 27)])
    watcher.poll()
    watcher.poll()  # still open: said once
    assert lines[0] == "INCIDENT opened: under-min-isr on demo/1 (27 partitions) since 04:31:00Z"
    assert lines[1].startswith("PAGE: KafkaUnderMinIsrPartitions (critical)")
    assert "dedup: one PagerDuty incident per alertname+cluster" in lines[1]
    assert len(lines) == 2 and watcher.pages == 1
    write(tmp_path, [incident("a", "under_min_isr", "1", 27, START + timedelta(minutes=2, seconds=10))])
    watcher.poll()
    assert lines[2] == "RESOLVED: under-min-isr on demo/1 after 2m10s"
    assert (watcher.opened, watcher.resolved, len(watcher.open)) == (1, 1, 0)


def test_an_incident_open_again_after_its_resolve_is_said_reopened(tmp_path: Path) -> None:
    """The resolve came from a window's first samples; the rest of that window saw the
    condition again, so the run (and its id and start) goes on: not a new incident."""
    watcher, lines = narrator(tmp_path)
    write(tmp_path, [incident("a", "under_min_isr", "1", 6)])
    watcher.poll()
    write(tmp_path, [incident("a", "under_min_isr", "1", 6, START + timedelta(minutes=2))])
    watcher.poll()
    write(tmp_path, [incident("a", "under_min_isr", "1", 6)])
    watcher.poll()
    assert lines[-2] == ("INCIDENT reopened: under-min-isr on demo/1 (6 partitions): back "
                         "within the window it resolved in, so one incident since 04:31:00Z")
    assert lines[-1].startswith("PAGE: KafkaUnderMinIsrPartitions")
    assert [line.split(":")[0] for line in lines].count("INCIDENT opened") == 1
    assert (watcher.opened, watcher.reopened, watcher.resolved) == (1, 1, 1)


def test_a_stale_broker_names_the_fault_that_stopped_it(tmp_path: Path) -> None:
    watcher, lines = narrator(tmp_path, stopped={"5"})
    write(tmp_path, [incident("s5", "stale_broker", "5", 75.0),
                     incident("s3", "stale_broker", "3", 30.0)])
    watcher.poll()
    assert "INCIDENT opened: stale-broker on demo/5 (no metrics for 1m15s) since 04:31:00Z; " \
           "broker 5 is one the fault cycle stopped" in lines
    assert "INCIDENT opened: stale-broker on demo/3 (no metrics for 30s) since 04:31:00Z" in lines
    assert not any(line.startswith("PAGE") for line in lines)  # not a paging kind


def test_the_cause_is_said_once_known_and_again_when_it_changes(tmp_path: Path) -> None:
    watcher, lines = narrator(tmp_path)
    write(tmp_path, [incident("a", "under_min_isr", "1", 6)])
    watcher.poll()
    assert not any(line.startswith("CAUSE") for line in lines)  # not polled yet
    write(tmp_path, [{**incident("a", "under_min_isr", "1", 6),
                      "cause": "brokers 4 and 5 out of ISR"}])
    watcher.poll()
    watcher.poll()
    assert lines[-1] == ("CAUSE of under-min-isr on demo/1 (Admin API): brokers 4 and 5 out of "
                         "ISR; the page names them")
    write(tmp_path, [{**incident("a", "under_min_isr", "1", 6),
                      "cause": "brokers 3, 4 and 5 out of ISR"}])
    watcher.poll()
    assert lines[-1].startswith("CAUSE of under-min-isr on demo/1 (Admin API): brokers 3, 4")
    assert sum(line.startswith("CAUSE") for line in lines) == 2
    write(tmp_path, [{**incident("a", "under_min_isr", "1", 6, START + timedelta(minutes=1)),
                      "cause": "brokers 3, 4 and 5 out of ISR"}])
    watcher.poll()
    assert lines[-1] == "RESOLVED: under-min-isr on demo/1 after 1m00s"


def test_the_real_demo_polls_its_watched_cluster_the_simulated_one_cannot(tmp_path: Path
                                                                        ) -> None:
    from streaming.cli import build_parser
    from streaming.testbed.demo import demo_config

    args = build_parser().parse_args(["demo", "--cluster", "demo"])
    real = demo_config(args, "127.0.0.1:1", tmp_path, watched="127.0.0.1:2")
    assert real.metadata.polled()["demo"].bootstrap_servers == "127.0.0.1:2"
    assert real.metadata.interval_seconds < 30
    assert demo_config(args, "127.0.0.1:1", tmp_path).metadata.polled() == {}
