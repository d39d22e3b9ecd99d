"""The wrapper scripts answer --help before installing anything: on a fresh clone (no .venv,
only the standard library) `bash deploy/demo.sh --help` lists the demo's real options, and
no script runs its installer to print its help."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_clone(tmp_path: Path) -> Path:
    """The scripts and the package without a virtualenv; every installer the scripts call
    is replaced by one that only leaves a mark."""
    clone = tmp_path / "clone"
    (clone / "deploy").mkdir(parents=True)
    (clone / "streaming").symlink_to(REPO / "streaming")
    for script in ("demo.sh", "test.sh", "bootstrap.sh"):
        (clone / "deploy" / script).write_text((REPO / "deploy" / script).read_text())
    for installer in ("install-prometheus.sh", "install-chromium.sh"):
        (clone / "deploy" / installer).write_text(f"touch {tmp_path}/installed\n")
    (clone / "deploy" / "jvm").mkdir()
    (clone / "deploy" / "jvm" / "resolve.sh").write_text(f"touch {tmp_path}/installed\n")
    # an interpreter without site-packages: what a fresh machine's python3 can import
    stdlib_only = tmp_path / "python3"
    stdlib_only.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    stdlib_only.chmod(0o755)
    return clone


def run(clone: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", *argv], cwd=clone, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHON": str(clone.parent / "python3")})


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_demo_help_lists_the_options_without_installing(fresh_clone: Path, flag: str) -> None:
    done = run(fresh_clone, "deploy/demo.sh", "--simulated", flag)
    assert done.returncode == 0, done.stderr
    for option in ("--fault-period", "--simulated", "--data-dir", "--scrape-interval", "-v"):
        assert option in done.stdout
    assert not (fresh_clone / ".venv").exists()
    assert not (fresh_clone.parent / "installed").exists()


@pytest.mark.parametrize("script", ["deploy/test.sh", "deploy/bootstrap.sh"])
def test_script_help_prints_before_installing(fresh_clone: Path, script: str) -> None:
    done = run(fresh_clone, script, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: bash {script}")
    assert not (fresh_clone / ".venv").exists()
    assert not (fresh_clone.parent / "installed").exists()


def test_bootstrap_refuses_an_unknown_option(fresh_clone: Path) -> None:
    done = run(fresh_clone, "deploy/bootstrap.sh", "--tests")
    assert done.returncode == 2
    assert "unknown option --tests" in done.stderr
    assert not (fresh_clone / ".venv").exists()
