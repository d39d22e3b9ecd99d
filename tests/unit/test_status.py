"""`kafka-health status` on Delta tables written by the job's own sink (MERGEs, no Spark).

Two clusters share every batch, as on a fleet: the files the MERGEs write hold several
cluster names, which is where a pushed-down string filter failed the report's scans.
One cluster is named with a quote and a newline, as record keys can name one.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from streaming.cli import main
from streaming.config import Config
from streaming.metadata.board import CauseBoard, CauseView
from streaming.pipeline.batch import BatchProcessor
from streaming.report import headroom_table
from streaming.report.tables import latest_per_broker, read_table
from streaming.text import shown

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
WINDOWS = [START + i * MINUTE for i in range(8)]
PROD = "prod"
ODD = "it's\nodd"  # a name only a record key or label would give
SILENT_AFTER = WINDOWS[1]  # prod's broker 3 sends nothing after this window
CAUSE = "brokers 4 and 5 out of ISR"
HEADROOM = {(PROD, "1"): 500.0, (PROD, "2"): 120.0, (PROD, "3"): 900.0, (ODD, "1"): 40.0}


def signal_row(table, cluster: str, broker: str, window: datetime, umi: float) -> dict:  # noqa: ANN001
    row = {f.name: None for f in table.schema}
    row.update(cluster=cluster, broker=broker, window_start=window, window_end=window + MINUTE,
               samples=4, last_sample_ts=window + timedelta(seconds=50),
               under_min_isr_max=umi, under_min_isr_last=umi, updated_at=window)
    return row


def headroom_row(table, cluster: str, broker: str, headroom: float) -> dict:  # noqa: ANN001
    row = {f.name: None for f in table.schema}
    row.update(cluster=cluster, broker=broker, evaluated_at=WINDOWS[-1], partitions=1000.0,
               binding_bound="recovery", binding_ceiling=1000.0 + headroom, headroom=headroom,
               headroom_pct=100 * headroom / (1000.0 + headroom), updated_at=WINDOWS[-1])
    return row


@pytest.fixture(scope="module")
def delta_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """prod: broker 1 under min ISR from the fourth window on, broker 3 silent after the
    second; ODD: two healthy brokers. One batch per window, both clusters in each."""
    config = Config()
    config.delta.path = str(tmp_path_factory.mktemp("status") / "delta")
    # prod is polled: its Admin API blames brokers 4 and 5 for leader 1's partitions
    board = CauseBoard(90, clock=lambda: WINDOWS[-1].timestamp())
    board.publish(CauseView(PROD, WINDOWS[-1], {("1", "under_min_isr"): CAUSE}, 3))
    proc = BatchProcessor(config, exporter=None, causes=board)
    batch_ids = itertools.count()
    signals = proc.tables["broker_signals"]
    for window in WINDOWS:
        rows = [signal_row(signals, PROD, "1", window, 3.0 if window >= WINDOWS[3] else 0.0),
                signal_row(signals, PROD, "2", window, 0.0),
                signal_row(signals, ODD, "1", window, 0.0),
                signal_row(signals, ODD, "2", window, 0.0)]
        if window <= SILENT_AFTER:
            rows.append(signal_row(signals, PROD, "3", window, 0.0))
        signals.upsert(pa.Table.from_pylist(rows, schema=signals.schema), next(batch_ids))
        proc.stages.update_incidents([PROD, ODD], window, window, next(batch_ids))
    headroom = proc.tables["partition_headroom"]
    rows = [headroom_row(headroom, c, b, h) for (c, b), h in HEADROOM.items()]
    headroom.upsert(pa.Table.from_pylist(rows, schema=headroom.schema), next(batch_ids))
    return config.delta.path


def status(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> dict:
    assert main(["status", *args, "-o", "json"]) == code
    return json.loads(capsys.readouterr().out)


def test_status_lists_open_incidents_stale_brokers_and_lowest_headroom(
        delta_root: str, capsys: pytest.CaptureFixture[str]) -> None:
    found = status(capsys, "--delta", delta_root)
    opened = {(i["cluster"], i["kind"], i["broker"]): i for i in found["open_incidents"]}
    assert set(opened) == {(PROD, "under_min_isr", "1"), (PROD, "stale_broker", "3")}
    assert opened[(PROD, "under_min_isr", "1")]["since"] == WINDOWS[3].isoformat()
    assert opened[(PROD, "under_min_isr", "1")]["peak"] == 3.0
    assert opened[(PROD, "under_min_isr", "1")]["cause"] == CAUSE
    assert opened[(PROD, "stale_broker", "3")]["cause"] is None  # no cause kind for it
    [stale] = found["stale_brokers"]
    assert (stale["cluster"], stale["broker"], stale["incident_open"]) == (PROD, "3", True)
    assert stale["last_sample"] == (SILENT_AFTER + timedelta(seconds=50)).isoformat()
    assert stale["behind_seconds"] == (WINDOWS[-1] - SILENT_AFTER).total_seconds()
    lowest = {h["cluster"]: (h["broker"], h["headroom"]) for h in found["lowest_headroom"]}
    assert lowest == {PROD: ("2", 120.0), ODD: ("1", 40.0)}
    assert found["notes"] == []


def test_status_of_one_cluster_after_merges(delta_root: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    found = status(capsys, "--delta", delta_root, "--cluster", ODD)
    assert found["open_incidents"] == [] and found["stale_brokers"] == []
    assert [(h["cluster"], h["broker"]) for h in found["lowest_headroom"]] == [(ODD, "1")]
    assert found["notes"] == []
    assert {i["cluster"] for i in status(capsys, "--delta", delta_root, "--cluster",
                                          PROD)["open_incidents"]} == {PROD}


@pytest.mark.parametrize("cluster", [PROD, ODD])
def test_report_readers_filter_a_cluster_on_tables_a_merge_wrote(delta_root: str,
                                                                 cluster: str) -> None:
    """The cluster filter is a string predicate: pushed down to files a MERGE wrote,
    pyarrow failed the scan and the report showed 'could not be read'."""
    incidents = read_table(delta_root, "incidents", cluster=cluster)
    assert incidents.status in ("ok", "empty"), incidents.detail
    assert set(incidents.frame["cluster"]) <= {cluster}
    latest = latest_per_broker(delta_root, "broker_signals", "window_start", cluster=cluster)
    assert latest.ok, latest.detail
    assert set(latest.frame["cluster"]) == {cluster}
    assert set(headroom_table(delta_root, cluster)["cluster"]) == {cluster}


def test_status_table_shows_every_section_with_names_escaped(
        delta_root: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--delta", delta_root]) == 0
    out = capsys.readouterr().out
    assert "Open incidents: 2" in out and "under_min_isr" in out and "stale_broker" in out
    assert "Stale brokers (silent over 45s" in out
    assert shown(ODD) in out and ODD not in out  # the newline is escaped, not printed
    assert "120" in out and "recovery" in out
    header = next(line for line in out.splitlines() if line.startswith("cluster"))
    assert header.split() == ["cluster", "kind", "broker", "since", "peak", "cause"]
    assert CAUSE in out


def test_status_on_an_empty_root_says_why_and_gives_no_all_clear(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bronze" / "_delta_log").mkdir(parents=True)
    found = status(capsys, "--delta", str(tmp_path), code=1)
    assert found["open_incidents"] is None and found["lowest_headroom"] is None
    assert found["newest_window_end"] is None
    assert any("incidents does not exist" in note for note in found["notes"])
    assert main(["status", "--delta", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "Open incidents: unknown" in out and "Newest signals: none written yet" in out


def test_an_unreadable_incidents_table_is_unknown_not_none(
        delta_root: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torn commit in the incidents table's log: status cannot say whether incidents
    are open, and must not print "none"."""
    import shutil

    copy = tmp_path / "delta"
    shutil.copytree(delta_root, copy)
    newest = sorted((copy / "incidents" / "_delta_log").glob("*.json"))[-1]
    newest.write_text("{torn")
    found = status(capsys, "--delta", str(copy), code=1)
    assert found["open_incidents"] is None
    assert any("incidents" in note and "could not be read" in note for note in found["notes"])
    assert found["stale_brokers"] is not None  # the other sections still read


def test_status_heads_with_the_newest_windows_age(
        delta_root: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Tables a stopped job left read as calm as a live fleet's: their age tells."""
    from streaming.report.status import format_status, read_status

    end = WINDOWS[-1] + MINUTE
    fresh = read_status(delta_root, now=end + timedelta(seconds=70))
    assert fresh.newest_window_end == end.isoformat()
    assert fresh.newest_window_age_seconds == 70
    assert "is the job running" not in format_status(fresh, 45)
    old = read_status(delta_root, now=end + timedelta(hours=3))
    first = format_status(old, 45).splitlines()[0]
    assert "3.0 h ago" in first and "is the job running?" in first


def test_status_with_a_mistyped_delta_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["status", "--delta", str(tmp_path / "nope")])
    assert exit_.value.code == 2
    assert "no such folder" in capsys.readouterr().err


def test_shown_bounds_and_escapes() -> None:
    assert shown("x" * 200) == "x" * 79 + "…"
    assert shown("a\x00b\x1b[2J") == "a\\x00b\\x1b[2J"
    assert shown(None) == "-"


def test_the_lowest_headroom_is_the_smallest_share_left_as_the_alert_pages(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker holding no partitions has a ceiling of its own (no leader share to scale
    by, here 1,000) and so the fewest partitions left, all of them free; the broker that
    KafkaPartitionHeadroomLow would page for first is the one with the smallest share."""
    import pandas as pd

    from streaming.report import status as status_module

    frame = pd.DataFrame([
        {"cluster": "demo", "broker": "2", "headroom": 1000.0, "headroom_pct": 100.0},
        {"cluster": "demo", "broker": "1", "headroom": 1494.0, "headroom_pct": 99.6},
        {"cluster": "demo", "broker": "3", "headroom": None, "headroom_pct": None},
    ]).assign(partitions=0.0, binding_bound="recovery", binding_ceiling=1500.0,
              days_to_ceiling=None, evaluated_at=WINDOWS[-1])
    monkeypatch.setattr(status_module, "headroom_table", lambda *_: frame)
    [lowest] = status_module._lowest_headroom("unused", None, status_module.Status())
    assert (lowest["broker"], lowest["headroom_pct"]) == ("1", 99.6)


def test_status_names_the_measure_that_opened_an_incident_and_peaks_in_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every handler busy while the request queue reads 0.0: the saturation incident was
    opened by the handlers' idle fraction, so status shows its lowest value named by that
    column, not the queue ratio (0.0), which would hide what opened it."""
    config = Config()
    config.delta.path = str(tmp_path / "delta")
    proc = BatchProcessor(config, exporter=None)
    signals = proc.tables["broker_signals"]
    batch_ids = itertools.count()
    for window, idle in zip(WINDOWS[:4], (0.7, 0.19, 0.05, 0.12), strict=True):
        row = signal_row(signals, PROD, "1", window, 0.0)
        row.update(request_queue_utilization_max=0.0, request_handler_idle_min=idle)
        signals.upsert(pa.Table.from_pylist([row], schema=signals.schema), next(batch_ids))
        proc.stages.update_incidents([PROD], window, window, next(batch_ids))
    [saturation] = [i for i in status(capsys, "--delta", config.delta.path)["open_incidents"]
                    if i["kind"] == "saturation"]
    assert (saturation["broker"], saturation["since"]) == ("1", WINDOWS[1].isoformat())
    assert (saturation["opened_by"], saturation["peak"]) == ("request_handler_idle_min", 0.05)
    assert main(["status", "--delta", config.delta.path]) == 0
    [line] = [s for s in capsys.readouterr().out.splitlines() if "saturation" in s]
    assert "0.05 request_handler_idle_min" in line, line
