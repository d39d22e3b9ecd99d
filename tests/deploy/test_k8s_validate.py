"""deploy/k8s as kustomize builds it, checked by kubeconform -strict against the schemas of
the API server (Kubernetes built-ins) and of the operators it targets (Prometheus Operator
CRDs, Spark Operator SparkApplication): a misspelt or misplaced field fails here instead of
being pruned silently by the cluster. deploy/install-k8s-tools.sh provides both tools and
the schemas (deploy/test.sh runs it); without them these tests skip, naming what is missing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.deploy import k8s_tools

K8S = k8s_tools.DEPLOY / "k8s"
# deploy/k8s/kubeconform_schemas.py's layout of the custom resources' schemas
CRD_TEMPLATE = "crds/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json"


def _schemas() -> tuple[Path, str]:
    schemas = k8s_tools.tools_dir() / "schemas"
    version_file = schemas / "kubernetes-version"
    if not version_file.is_file():
        pytest.skip(f"kubeconform schemas not in {schemas} (deploy/install-k8s-tools.sh writes them)")
    return schemas, version_file.read_text().strip()


def _kubeconform(manifests: Path) -> dict:
    kubeconform = k8s_tools.require("kubeconform")
    schemas, version = _schemas()
    out = subprocess.run(
        [kubeconform, "-strict", "-summary", "-output", "json", "-kubernetes-version", version,
         "-schema-location", str(schemas),
         "-schema-location", f"{schemas}/{CRD_TEMPLATE}",
         str(manifests)],
        capture_output=True, text=True, timeout=120)
    report = json.loads(out.stdout)
    bad = [r for r in report["resources"] if r["status"] != "statusValid"]
    assert out.returncode == 0 and not bad, json.dumps(bad, indent=1) + out.stderr
    return report["summary"]


def _built(path: Path, tmp_path: Path) -> Path:
    manifests = tmp_path / "built.yaml"
    manifests.write_text(k8s_tools.build_text(path))
    return manifests


def test_the_default_build_is_valid(tmp_path: Path) -> None:
    summary = _kubeconform(_built(K8S, tmp_path))
    # Nothing skipped for want of a schema: every kind was checked.
    assert summary["skipped"] == 0 and summary["valid"] >= 10, summary


def test_the_build_with_the_bundled_alertmanager_is_valid(tmp_path: Path) -> None:
    summary = _kubeconform(_built(k8s_tools.copy_with_bundled_alertmanager(tmp_path), tmp_path))
    assert summary["skipped"] == 0, summary


def test_kubeconform_rejects_a_misspelt_field(tmp_path: Path) -> None:
    """The schemas are strict for the operators' kinds too (an unknown field is an error)."""
    manifests = _built(K8S, tmp_path)
    text = manifests.read_text()
    for right, wrong in (("    serviceAccount: kafka-health-spark", "    serviceAcount: kafka-health-spark"),
                         ("  jobLabel: ", "  jobLable: "),
                         ("    groupWait: ", "    groupWiat: ")):
        assert right in text, right
        bad = tmp_path / "bad.yaml"
        bad.write_text(text.replace(right, wrong, 1))
        with pytest.raises(AssertionError, match=wrong.strip().split(":")[0]):
            _kubeconform(bad)
