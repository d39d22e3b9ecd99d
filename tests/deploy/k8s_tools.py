"""kustomize and kubeconform for the deploy/k8s tests: from PATH, else where
deploy/install-k8s-tools.sh puts them ($KAFKA_HEALTH_CACHE/k8s-tools). A test that needs
one and finds none skips, naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
# kustomization.yaml's commented-out lines and what a user makes of them
COMPONENT_LINES = {"# components:\n": "components:\n",
                   "#   - components/bundled-alertmanager\n": "  - components/bundled-alertmanager\n"}


def tools_dir() -> Path:
    base = os.environ.get("KAFKA_HEALTH_CACHE") or Path.home() / ".cache" / "kafka-health"
    return Path(base) / "k8s-tools"


def find(name: str) -> str | None:
    installed = tools_dir() / "bin" / name
    return shutil.which(name) or (str(installed) if installed.is_file() else None)


def require(name: str) -> str:
    found = find(name)
    if found is None:
        pytest.skip(f"{name} not installed (deploy/install-k8s-tools.sh installs it)")
    return found


def kustomize_command() -> list[str]:
    """kustomize itself, else kubectl's built-in one (the same engine, an older release)."""
    if find("kustomize"):
        return [find("kustomize"), "build"]  # type: ignore[list-item]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    pytest.skip("neither kustomize nor kubectl installed (deploy/install-k8s-tools.sh installs kustomize)")


def build_text(path: Path) -> str:
    out = subprocess.run([*kustomize_command(), str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


class _Loader(yaml.SafeLoader):
    """kustomize writes a matcher's `matchType: =` unquoted, a string in the YAML the API
    server reads; PyYAML's YAML 1.1 would take the bare `=` for its `value` tag."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:value"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def build(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(build_text(path), Loader=_Loader) if d]  # noqa: S506


def copy_with_bundled_alertmanager(tmp_path: Path) -> Path:
    """deploy/k8s and deploy/alertmanager copied, with the kustomization's commented-out
    component line turned on as a user would: the copy's deploy/k8s."""
    root = tmp_path / "deploy"
    for name in ("k8s", "alertmanager"):
        shutil.copytree(DEPLOY / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    kustomization = root / "k8s" / "kustomization.yaml"
    text = kustomization.read_text()
    for commented, line in COMPONENT_LINES.items():
        assert commented in text, f"deploy/k8s/kustomization.yaml lost its line {commented!r}"
        text = text.replace(commented, line)
    kustomization.write_text(text)
    return root / "k8s"
