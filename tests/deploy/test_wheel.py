"""kafka-health installed from its wheel, run from outside the repository.

The wheel is built from a copy of what a build context holds (pyproject.toml, streaming/,
metrics_schemas/, alerts/), as `pip install .` or the image's build does, and installed
into a fresh virtualenv outside the checkout. Only the wheel is installed there: the
dependencies come from the project's virtualenv through a .pth line naming its
site-packages (whose own .pth files, the editable install's among them, Python does not
run from there), so `streaming` can only be the wheel's. Every command runs with its
working directory outside the checkout and without KAFKA_HEALTH_SCHEMAS/_RULES, so the
schemas, the paging rules and the test bed's files can only come from the package.

Building the wheel installs the build backend pyproject.toml names in an isolated
environment, from the package index, as pip does for a user.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from deltalake import DeltaTable

from streaming.testbed.kafka import free_port
from tests.conftest import wait_for

REPO = Path(__file__).resolve().parents[2]
# What a build context needs: the Dockerfile copies the same.
SOURCES = ("pyproject.toml", "streaming", "metrics_schemas", "alerts")
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
# The environment a user's shell would not have: the checkout's settings and interpreters.
DROPPED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
           "KAFKA_HEALTH_SCHEMAS", "KAFKA_HEALTH_RULES")


@dataclass(frozen=True)
class Installed:
    venv: Path
    python: Path
    script: Path
    cwd: Path
    env: dict[str, str]

    def run(self, *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


def _outside_checkout(path: Path) -> Path:
    assert not path.resolve().is_relative_to(REPO), f"{path} is inside the checkout {REPO}"
    return path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = _outside_checkout(tmp_path_factory.mktemp("wheel-source"))
    for name in SOURCES:
        if (REPO / name).is_dir():
            # the links in streaming/_data stay links, resolved inside the copy as in a checkout
            shutil.copytree(REPO / name, source / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, source / name)
    dist = source.parent / "dist"
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                          "--wheel-dir", str(dist), str(source)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    [built] = dist.glob("kafka_health-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = _outside_checkout(tmp_path_factory.mktemp("installed"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    out = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                          "--quiet", "--no-deps", "--no-index", str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    dependencies = Path(sysconfig.get_path("purelib"))
    # the project's dependencies, never the checkout: `streaming` can only be the wheel's
    assert dependencies != REPO and not (dependencies / "streaming").exists()
    assert site.is_relative_to(venv)
    (site / "project-dependencies.pth").write_text(f"{dependencies}\n")
    cwd = root / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in DROPPED and not k.startswith("KAFKA_HEALTH__")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return Installed(venv, python, venv / "bin" / "kafka-health", cwd, env)


def _repo_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_wheel_holds_the_run_time_data_as_files(wheel: Path) -> None:
    """Every schema file, the paging rules and the test bed's jmx_exporter rules, byte for
    byte the repository's, as files (not the links the checkout has)."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        schemas = _repo_files(REPO / "metrics_schemas")
        assert schemas, "metrics_schemas/ has files"
        expected = {f"streaming/_data/metrics_schemas/{name}": data for name, data in schemas.items()}
        expected["streaming/_data/alerts/kafka-health.rules.yml"] = (
            REPO / "alerts" / "kafka-health.rules.yml").read_bytes()
        expected["streaming/testbed/jmx_exporter_rules.yaml"] = (
            REPO / "streaming" / "testbed" / "jmx_exporter_rules.yaml").read_bytes()
        expected["streaming/py.typed"] = b""
        missing = sorted(set(expected) - names)
        assert missing == []
        for name, data in expected.items():
            info = archive.getinfo(name)
            assert (info.external_attr >> 28) != 0o12, f"{name} is a symlink in the wheel"
            assert archive.read(name) == data, f"{name} differs from the repository's"


def test_the_installed_package_reads_its_own_data(installed: Installed) -> None:
    probe = """
import json, os, streaming
from streaming.paging import rules_path
from streaming.package_data import has_packaged_schemas
from streaming.schemas import schemas_dir
from streaming.testbed.kafka import jmx_exporter_rules
from streaming.catalog import load_catalog
from streaming.headroom.model import load_defaults
from streaming.metadata.rules import load_rules
from streaming.quality import load_suite_dict
load_catalog(); load_defaults(); load_rules(); load_suite_dict()
print(json.dumps({"package": streaming.__file__, "schemas": str(schemas_dir()),
                  "rules": str(rules_path()), "jmx": str(jmx_exporter_rules()),
                  "packaged": has_packaged_schemas(), "env": "KAFKA_HEALTH_SCHEMAS" in os.environ}))
"""
    out = installed.run(installed.python, "-c", probe)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.splitlines()[-1])
    assert found.pop("packaged") is True and found.pop("env") is False
    for what, path in found.items():
        assert Path(path).is_relative_to(installed.venv), f"{what}: {path} is not the wheel's"


def test_version_and_check_config_from_outside_the_checkout(installed: Installed) -> None:
    version = installed.run(installed.script, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"kafka-health {VERSION}"
    config = installed.cwd / "kafka-health.yaml"
    # a push configured: check-config renders each kind's rule from the packaged rules file
    config.write_text("source:\n  bootstrap_servers: kafka-1.example:9093\n"
                      "alert_push:\n  alertmanager_urls: [http://alertmanager.example:9093]\n"
                      "  kinds: [unclean_election, under_min_isr]\n")
    checked = installed.run(installed.script, "check-config", "--print", config.name)
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    printed = json.loads(checked.stdout)
    assert printed["source"]["bootstrap_servers"] == "kafka-1.example:9093"
    assert printed["alert_push"]["kinds"] == ["unclean_election", "under_min_isr"]
    config.write_text("source:\n  bootstrap_serverz: x:1\n")
    refused = installed.run(installed.script, "check-config", config.name)
    assert refused.returncode == 2 and "bootstrap_serverz" in refused.stderr


def _column(table: Path, column: str) -> set[object]:
    """The distinct values of `column` in the Delta table at `table` (none when not written)."""
    if not table.is_dir():
        return set()
    return set(DeltaTable(str(table)).to_pyarrow_table(columns=[column]).column(column).to_pylist())


@pytest.mark.integration
def test_the_simulated_demo_runs_from_the_installed_wheel(installed: Installed) -> None:
    """A short simulated demo (its metrics Kafka node, local Spark with the venv's Python
    workers, the job): a fault cycle of 20 s opens an under-min-ISR incident, which it
    narrates and writes to Delta; SIGTERM then ends it with its summary and report."""
    data = installed.cwd / "demo"
    log = installed.cwd / "demo.log"
    with open(log, "wb") as out:
        demo = subprocess.Popen(
            [str(installed.script), "demo", "--simulated", "--data-dir", str(data),
             "--metrics-port", str(free_port()), "--scrape-interval", "1", "--fault-period", "20",
             "--duration", "110"],
            cwd=installed.cwd, env=installed.env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        wait_for(lambda: demo.poll() is not None or "INCIDENT opened: under-min-isr" in log.read_text(),
                 100, "the demo's under-min-ISR incident")
        assert demo.poll() is None, log.read_text()[-3000:]
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)  # the Kafka node and Spark with it
            demo.wait(30)
    output = log.read_text()
    assert re.search(r"summary: [1-9]\d* incident\(s\) opened", output), output[-3000:]
    assert str(data / "report" / "index.html") in output and (data / "report" / "index.html").is_file()
    delta = data / "delta"
    assert _column(delta / "bronze", "cluster") == {"demo"}
    assert "under_min_isr" in _column(delta / "incidents", "kind")
