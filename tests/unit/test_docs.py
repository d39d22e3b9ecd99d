"""The user-facing docs say what the code does, and cite what a user can read."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

from streaming.config import load_config
from streaming.pipeline.tables import TABLES
from streaming.source.partition_reader import READER_PREFETCH_KBYTES

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
OPERATIONS = ROOT / "docs" / "operations.md"
PERFORMANCE = ROOT / "docs" / "performance.md"
RESULTS = ROOT / "tests" / "benchmarks" / "results"
# Where a user reads: the docs, the runbooks, the catalog and schemas, the deploy files, and
# the package whose docstrings and comments a newcomer reads first.
USER_FACING = ("README.md", "docs", "alerts", "metrics_schemas", "deploy", "streaming")
# Notes that live outside this project: a user who follows such a citation finds nothing.
PRIVATE_CITATIONS = re.compile(r"\bseed 0\d\d\b|\.\./shared/|\bshared/(seeds|references)\b"
                               r"|\bDESIGN\.md\b", re.IGNORECASE)


def _text(*names: str) -> dict[str, str]:
    files = subprocess.run(["git", "ls-files", "--", *names], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    out = {}
    for name in files:
        path = ROOT / name
        if path.suffix in {".md", ".py", ".yaml", ".yml", ".sh", ".toml", ".txt"} and path.exists():
            out[name] = path.read_text(encoding="utf-8", errors="replace")
    return out


def test_docs_state_the_read_tasks_prefetch_the_code_sets() -> None:
    expected = f"{READER_PREFETCH_KBYTES // 1024} MiB prefetch"
    for path in (GETTING_STARTED, ROOT / "deploy" / "config.example.yaml"):
        stated = re.findall(r"\d+ MiB prefetch", " ".join(path.read_text().split()))
        assert stated, f"{path.name} does not state the prefetch"
        assert set(stated) == {expected}, f"{path.name} says {stated}, the code {expected}"


def test_readme_names_every_table_the_job_writes() -> None:
    text = README.read_text()
    paragraph = text[text.index("Tables land under"):][:400]
    missing = [name for name in TABLES if f"`{name}`" not in paragraph]
    assert not missing, f"README's table list lacks {missing}"


def test_docs_describe_both_delta_engines_the_config_accepts(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    for engine in ("delta-rs", "delta-spark"):
        path.write_text(f"delta: {{engine: {engine}}}\n")
        assert load_config(path, environ={}).delta.engine == engine
    operations = OPERATIONS.read_text()
    bullet = operations[operations.index("- `delta.engine`"):].split("\n- ", 1)[0]
    assert "`delta-rs` (default)" in bullet and "`delta-spark`" in bullet
    for doc in (README, OPERATIONS):
        text = doc.read_text()
        mentions = [m.start() for m in re.finditer("DELTA_SPARK=1", text)]
        assert mentions, f"{doc.name}'s deployment section should say what DELTA_SPARK=1 does"
        for at in mentions:
            assert "delta-spark" in text[at:at + 200], f"{doc.name}: DELTA_SPARK=1 is delta-spark"


def test_user_facing_files_cite_nothing_a_user_does_not_have() -> None:
    found = [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for name, text in _text(*USER_FACING).items()
             for m in PRIVATE_CITATIONS.finditer(text)]
    assert not found, "\n".join(found)


def test_performance_doc_names_every_result_file() -> None:
    text = PERFORMANCE.read_text()
    missing = [path.name for path in RESULTS.glob("*.json") if f"`{path.name}`" not in text]
    assert not missing, f"docs/performance.md does not give the figures of {missing}"


def test_performance_doc_gives_the_result_files_current_figures() -> None:
    text = PERFORMANCE.read_text()
    pipeline = json.loads((RESULTS / "pipeline.json").read_text())
    steady = json.loads((RESULTS / "steady-10000.json").read_text())
    paging = json.loads((RESULTS / "paging.json").read_text())["results"]
    figures = {
        "raw limit": f"{pipeline['raw']['samples_per_s']:,.0f} samples/s",
        "job": f"{pipeline['job']['samples_per_s']:,.0f} samples/s",
        "CPU per sample": f"{pipeline['job']['cpu_us_per_sample']['total']:.2f} µs",
        "steady 10k": f"p50 {steady['latency_p50_s']:.2f} s, p95 {steady['latency_p95_s']:.2f} s",
        "push": f"p50 {paging['push']['p50_s']:.2f} s, p95 {paging['push']['p95_s']:.2f} s",
        "rules": f"p50 {paging['rules']['p50_s']:.2f} s, p95 {paging['rules']['p95_s']:.2f} s",
    }
    stale = {what: figure for what, figure in figures.items() if figure not in text}
    assert not stale, f"docs/performance.md lacks the result files' figures: {stale}"


def test_reference_page_is_generated_from_the_schema_files() -> None:
    path = ROOT / "docs" / "generate_reference.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert (ROOT / "docs" / "reference.md").read_text() == generator.render(), (
        "docs/reference.md is stale: run .venv/bin/python docs/generate_reference.py")
