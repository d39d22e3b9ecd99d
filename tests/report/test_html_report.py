"""write_report on realistic tables, on empty/missing tables, and on an older table schema."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from streaming.report import write_report
from streaming.schemas import arrow_schema
from tests.report import fixtures
from tests.report.pagecheck import assert_valid_png, parse

SECTIONS = ("Incidents", "Broker signals", "Cluster signals", "Partition headroom",
            "Durability findings (Admin API)", "Clients' truth (durability probe, consumer groups)",
            "Quarantine (bad input)")


def _html(out: Path) -> str:
    return (out / "index.html").read_text(encoding="utf-8")


def test_report_writes_index_and_every_referenced_png(report_dir: Path) -> None:
    page = parse(_html(report_dir))
    srcs = [img["src"] for img in page.imgs]
    assert sorted(srcs) == sorted(["incidents.png", "broker_signals.png", "cluster_signals.png",
                                   "headroom.png", "quarantine.png"])
    for img in page.imgs:
        assert_valid_png(report_dir / str(img["src"]))
        alt = img.get("alt") or ""
        assert len(alt) > 40, f"alt text of {img['src']} says too little: {alt!r}"


def test_report_has_headings_window_and_generated_at(report_dir: Path) -> None:
    text = _html(report_dir)
    page = parse(text)
    assert page.headings[0] == "Kafka health report"
    assert page.headings[1:] == list(SECTIONS)
    assert "2026-03-02 06:00 UTC" in text and "2026-03-02 12:00 UTC" in text
    assert re.search(r"Generated at \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
    assert "could not be built" not in text
    assert "No data." not in text


def test_report_is_self_contained(report_dir: Path) -> None:
    """Closed network: no scripts, stylesheets, fonts or images from anywhere else."""
    text = _html(report_dir)
    page = parse(text)
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "@import" not in text and "url(" not in text


def test_incidents_open_and_resolved(report_dir: Path) -> None:
    text = _html(report_dir)
    incidents = text.split('id="incidents"')[1].split("</section>")[0]
    assert "under_min_isr" in incidents and "unclean_election" in incidents
    assert '<span class="tag open">OPEN</span>' in incidents
    assert '<span class="tag resolved">resolved</span>' in incidents
    assert "22 min" in incidents  # 09:30 -> 09:52
    assert "40 min" in incidents and "so far" in incidents  # open since 11:20, now 12:00
    alt = parse(incidents).imgs[0]["alt"]
    assert "1 still open" in alt and "unclean_election on broker 2 (open)" in alt


def test_incidents_show_their_cause_and_open_durability_findings(report_dir: Path) -> None:
    text = _html(report_dir)
    incidents = text.split('id="incidents"')[1].split("</section>")[0]
    assert "<th>cause (Admin API)</th>" in incidents and f"<td>{fixtures.CAUSE}</td>" in incidents
    durability = text.split('id="durability"')[1].split("</section>")[0]
    assert "payments" in durability and "clicks" in durability
    assert "gone" not in durability, "a resolved finding is not open"
    assert durability.index("clicks") < durability.index("payments"), "critical first"
    assert re.search(r'card warn"><div class="n">2</div><div class="l">open durability findings', text)
    assert "<code>durability_audit</code>" in text


def test_summary_and_tables_carry_the_numbers(report_dir: Path) -> None:
    text = _html(report_dir)
    assert re.search(r'card bad"><div class="n">1</div><div class="l">open incidents', text)
    assert re.search(r'<div class="n">3</div><div class="l">max under-min-ISR partitions', text)
    assert re.search(r'<div class="n">8</div><div class="l">quarantined records', text)
    headroom = text.split('id="headroom"')[1].split("</section>")[0]
    assert "file_descriptors" in headroom and "recovery" in headroom
    assert "3,000 ★" in headroom and "2,950 ★" in headroom
    assert "17.1 %" in headroom  # broker 2: (2,950 - 2,447) / 2,950
    quarantine = text.split('id="quarantine"')[1].split("</section>")[0]
    assert re.search(r"<td>not JSON</td><td class=num>5</td>", quarantine)
    assert re.search(r"<td>NaN value</td><td class=num>2</td>", quarantine)
    for table in ("incidents", "broker_signals", "cluster_signals", "partition_headroom", "quarantine"):
        assert f"<code>{table}</code>" in text, f"{table} missing from the sources list"


def test_cluster_filter(delta_root: Path, tmp_path: Path) -> None:
    index = write_report(str(delta_root), str(tmp_path / "other"), cluster="no-such-cluster",
                         now=fixtures.NOW)
    text = index.read_text()
    assert text.count("No data.") == 6 - 1  # quarantine is fleet-wide and still shows its rows
    assert "for cluster no-such-cluster" in text
    index = write_report(str(delta_root), str(tmp_path / "east"), cluster=fixtures.CLUSTER, now=fixtures.NOW)
    assert "No data." not in index.read_text()


def test_missing_tables_give_no_data_sections(tmp_path: Path) -> None:
    index = write_report(str(tmp_path / "nowhere"), str(tmp_path / "out"), now=fixtures.NOW)
    text = index.read_text()
    page = parse(text)
    assert page.imgs == []
    assert page.headings[1:] == list(SECTIONS)
    assert text.count("No data.") == 6
    assert text.count("does not exist") == 6
    # The summary keeps its shape: every card says "-" rather than disappearing or showing 0.
    cards = re.findall(r'<div class="n">([^<]*)</div><div class="l">([^<]*)</div>', text)
    assert [v for v, _ in cards] == ["-"] * 7 and all(label.endswith("(no data)") for _, label in cards)
    assert "could not be built" not in text


def test_empty_tables_give_no_data_sections(tmp_path: Path) -> None:
    root = fixtures.build_empty(tmp_path / "delta")
    text = write_report(str(root), str(tmp_path / "out"), now=fixtures.NOW).read_text()
    assert parse(text).imgs == []
    assert text.count("No data.") == 6
    assert text.count("has no rows") == 6
    assert "Nothing was quarantined." in text
    assert "could not be built" not in text


def test_quiet_window_after_the_data(delta_root: Path, tmp_path: Path) -> None:
    """A window with no rows says so; headroom still shows the latest evaluation, marked stale."""
    later = fixtures.NOW + timedelta(days=2)
    text = write_report(str(delta_root), str(tmp_path / "out"), hours=1, now=later).read_text()
    assert "has no rows between 2026-03-04 11:00 UTC and 2026-03-04 12:00 UTC" in text
    headroom = text.split('id="headroom"')[1].split("</section>")[0]
    assert "Stale:" in headroom and "file_descriptors" in headroom
    # The unclean election is still open, so it still belongs in a later report.
    incidents = text.split('id="incidents"')[1].split("</section>")[0]
    assert "unclean_election" in incidents and "under_min_isr" not in incidents
    for img in parse(text).imgs:
        assert_valid_png(tmp_path / "out" / str(img["src"]))


def test_older_table_schema_shows_no_data_for_absent_signals(tmp_path: Path) -> None:
    """A broker_signals table without the network-processor columns: no crash, no false zero."""
    root = tmp_path / "delta"
    dropped = {"network_processor_idle_min", "network_processor_idle_mean"}
    schema = arrow_schema("broker_signals")
    old = pa.schema([f for f in schema if f.name not in dropped])
    rows = [{k: v for k, v in r.items() if k not in dropped} for r in fixtures.broker_signal_rows()]
    write_deltalake(str(root / "broker_signals"), pa.Table.from_pylist(rows, schema=old))
    out = tmp_path / "out"
    text = write_report(str(root), str(out), now=fixtures.NOW).read_text()
    assert "columns absent from the table: network_processor_idle_min, network_processor_idle_mean" in text
    alt = next(img["alt"] for img in parse(text).imgs if img["src"] == "broker_signals.png")
    assert "No data for: Network processor idle" in alt
    assert_valid_png(out / "broker_signals.png")


def test_naive_now_is_utc_and_hours_must_be_positive(delta_root: Path, tmp_path: Path) -> None:
    naive = fixtures.NOW.replace(tzinfo=None)
    text = write_report(str(delta_root), str(tmp_path / "out"), now=naive).read_text()
    assert "2026-03-02 12:00 UTC" in text
    with pytest.raises(ValueError, match="hours must be > 0"):
        write_report(str(delta_root), str(tmp_path / "bad"), hours=0, now=fixtures.NOW)


def test_two_clusters_cluster_wide_incident_before_the_window(tmp_path: Path) -> None:
    """Broker ids repeat across clusters, so labels become cluster/broker; '*' reads cluster-wide."""
    root = fixtures.build(tmp_path / "delta")
    west = [dict(r, cluster="prod-west") for r in fixtures.broker_signal_rows() if r["broker"] == "1"]
    write_deltalake(str(root / "broker_signals"),
                    pa.Table.from_pylist(west, schema=arrow_schema("broker_signals")), mode="append")
    headroom = [dict(r, cluster="prod-west") for r in fixtures.headroom_rows() if r["broker"] == "1"]
    write_deltalake(str(root / "partition_headroom"),
                    pa.Table.from_pylist(headroom, schema=arrow_schema("partition_headroom")), mode="append")
    incident = {"incident_id": "c0ffee", "cluster": "prod-west", "broker": "*", "kind": "offline_partitions",
                "started_at": fixtures.NOW - timedelta(hours=9),
                "resolved_at": fixtures.NOW - timedelta(hours=5),
                "peak_value": 12.0, "updated_at": fixtures.NOW - timedelta(hours=5)}
    write_deltalake(str(root / "incidents"),
                    pa.Table.from_pylist([incident], schema=arrow_schema("incidents")), mode="append")

    out = tmp_path / "out"
    text = write_report(str(root), str(out), now=fixtures.NOW).read_text()
    assert "could not be built" not in text
    incidents = text.split('id="incidents"')[1].split("</section>")[0]
    assert "cluster prod-west (cluster-wide)" in incidents and "broker prod-east/1" in incidents
    assert "4 h 00 min" in incidents  # the full duration, though the bar is clipped to the window
    brokers = text.split('id="broker-signals"')[1].split("</section>")[0]
    assert "<td>prod-east/1</td>" in brokers and "<td>prod-west/1</td>" in brokers
    assert "<td>prod-west/1</td>" in text.split('id="headroom"')[1]
    for img in parse(text).imgs:
        assert_valid_png(out / str(img["src"]))


@pytest.mark.parametrize("value, shown", [(float("inf"), "inf"), (-float("inf"), "-inf"),
                                          (1234.0, "1,234"), (2.5, "2.50")])
def test_numbers_past_floats_range_render_as_themselves(value: float, shown: str) -> None:
    """A sum of producers' absurd counts can reach infinity in a stored table: its cell
    reads `inf` instead of failing the report's section."""
    from streaming.report.html import _fmt_num

    assert _fmt_num(value) == shown
