"""Deployment artifacts under deploy/: parse, agree with each other, and stay generated.

No network, no containers, no Spark: external tools (promtool, kubectl, docker compose) are
used when installed and replaced by structural checks when not.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from streaming.config import load_config
from tests.deploy import k8s_tools

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
SUBMIT = DEPLOY / "spark-submit.sh"
IMAGE_MAIN = "/opt/kafka-health/spark_main.py"   # where deploy/docker/Dockerfile puts it

YAML_FILES = sorted(p for ext in ("*.yaml", "*.yml") for p in DEPLOY.rglob(ext))
JSON_FILES = sorted(DEPLOY.rglob("*.json"))


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _k8s_docs() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted([*K8S.glob("*.yaml"), *(DEPLOY / "alertmanager").glob("*.yaml")]):
        if path.name in ("kustomization.yaml", "kustomizeconfig.yaml"):  # kustomize's, not the API's
            continue
        out += [(path, doc) for doc in _docs(path)]
    return out


def _one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for _, d in _k8s_docs()
             if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _configmap_data(name: str) -> dict[str, str]:
    return _one("ConfigMap", name)["data"]


def _job_config(tmp_path: Path):  # noqa: ANN202
    text = _configmap_data("kafka-health-config")["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(path, environ={})


# --- every file parses ---------------------------------------------------------------

@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_yaml_parses(path: Path) -> None:
    assert _docs(path), f"{path} is empty"


def test_json_parses() -> None:
    for path in JSON_FILES:  # none today; dashboards live in dashboards/ (tested there)
        json.loads(path.read_text())


def test_k8s_manifests_have_api_version_kind_name() -> None:
    docs = _k8s_docs()
    assert docs
    for path, doc in docs:
        where = f"{path.relative_to(REPO)} ({doc.get('kind')})"
        assert doc.get("apiVersion"), f"{where}: apiVersion missing"
        assert doc.get("kind"), f"{where}: kind missing"
        assert doc.get("metadata", {}).get("name"), f"{where}: metadata.name missing"


def test_kustomizations_list_existing_files() -> None:
    for kustomization in DEPLOY.rglob("kustomization.yaml"):
        for resource in yaml.safe_load(kustomization.read_text())["resources"]:
            assert (kustomization.parent / resource).exists(), f"{kustomization}: {resource} missing"


def test_kustomize_builds_offline() -> None:
    docs = k8s_tools.build(K8S)
    kinds = {d["kind"] for d in docs}
    assert {"SparkApplication", "Service", "ServiceMonitor", "PrometheusRule", "AlertmanagerConfig",
            "ConfigMap", "Role", "RoleBinding", "ServiceAccount"} <= kinds
    # The Prometheus Operator's Alertmanager takes the routing: no Alertmanager of our own.
    assert "Deployment" not in kinds
    assert all(d["metadata"].get("namespace") == "kafka-health" for d in docs)
    # The runbook base is a build input (local-config), never applied.
    assert not [d for d in docs if d["metadata"]["name"] == "kafka-health-runbook-url"]
    (app,) = [d for d in docs if d["kind"] == "SparkApplication"]
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    assert app["spec"]["image"] == f"{image['newName']}:{image['newTag']}"
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert all(r["labels"]["namespace"] == "kafka-health" for r in alerts)


def test_the_knobs_reach_every_place(tmp_path: Path) -> None:
    """namespace, image and runbook base, changed in kustomization.yaml only, are what the
    built manifests carry everywhere: no other copy of them is left hard-coded."""
    copy = tmp_path / "k8s"
    shutil.copytree(K8S, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "alertmanager").symlink_to(DEPLOY / "alertmanager")
    kustomization = copy / "kustomization.yaml"
    text = kustomization.read_text()
    for old, new in (("namespace: kafka-health\n", "namespace: observability\n"),
                     ("newName: ghcr.io/kafka-health/kafka-health", "newName: registry.example.com/kh"),
                     ('newTag: "0.1.0"', 'newTag: "9.8.7"'),
                     ("base=https://github.com/kafka-health/kafka-health/blob/main",
                      "base=https://git.example.com/ops/kafka-health/-/blob/v9.8.7")):
        assert old in text, old
        text = text.replace(old, new)
    kustomization.write_text(text)
    docs = k8s_tools.build(copy)
    built = yaml.safe_dump_all(docs)
    assert all(d["metadata"]["namespace"] == "observability" for d in docs)
    (app,) = [d for d in docs if d["kind"] == "SparkApplication"]
    assert app["spec"]["image"] == "registry.example.com/kh:9.8.7"
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert all(r["labels"]["namespace"] == "observability" for r in alerts)
    urls = [r["annotations"]["runbook_url"] for r in alerts]
    assert urls and all(u == "https://git.example.com/ops/kafka-health/-/blob/v9.8.7/alerts/runbooks/"
                        f"{r['alert']}.md" for u, r in zip(urls, alerts, strict=True))
    assert "github.com/kafka-health" not in built and "ghcr.io" not in built
    # and each names a runbook that exists
    runbooks = {p.name for p in (REPO / "alerts" / "runbooks").glob("*.md")}
    assert {u.rpartition("/")[2] for u in urls} <= runbooks


def test_the_bundled_alertmanager_component_replaces_the_alertmanagerconfig(tmp_path: Path) -> None:
    docs = k8s_tools.build(k8s_tools.copy_with_bundled_alertmanager(tmp_path))
    kinds = [d["kind"] for d in docs]
    assert "AlertmanagerConfig" not in kinds and kinds.count("Deployment") == 1
    assert all(d["metadata"].get("namespace") == "kafka-health" for d in docs)
    (app,) = [d for d in docs if d["kind"] == "SparkApplication"]
    env = {e["name"]: e["value"] for e in app["spec"]["driver"]["env"]}
    service = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "alertmanager")
    assert env["KAFKA_HEALTH__ALERT_PUSH__ALERTMANAGER_URL"] == \
        f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    assert env["KAFKA_HEALTH__SPARK__MASTER"] == "null"  # added to, not replaced


# --- the SparkApplication ------------------------------------------------------------

def test_sparkapplication_v1beta2_required_fields() -> None:
    app = _one("SparkApplication")
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    spec = app["spec"]
    for key in ("type", "mode", "image", "mainApplicationFile", "sparkVersion", "driver", "executor"):
        assert spec.get(key), f"spec.{key} missing"
    assert spec["type"] == "Python"
    assert spec["mode"] == "cluster"
    pinned = re.search(r'"pyspark>=(\d+\.\d+)', (REPO / "pyproject.toml").read_text()).group(1)
    assert spec["sparkVersion"].startswith(pinned + "."), "sparkVersion differs from pyproject's pyspark"
    policy = spec["restartPolicy"]
    assert policy["type"] in ("Always", "OnFailure")
    assert policy["onFailureRetryInterval"] >= 1 and policy["onSubmissionFailureRetryInterval"] >= 1
    if policy["type"] == "OnFailure":
        assert policy["onFailureRetries"] > 0 and policy["onSubmissionFailureRetries"] > 0
    for role in ("driver", "executor"):
        pod = spec[role]
        assert isinstance(pod.get("cores"), int) and pod["cores"] >= 1
        assert re.fullmatch(r"\d+[kmg]", pod["memory"])
        for port in pod.get("ports", []):
            assert set(port) == {"name", "containerPort", "protocol"}
    assert spec["executor"]["instances"] >= 1


def test_sparkapplication_runs_spark_main_with_the_mounted_config(tmp_path: Path) -> None:
    spec = _one("SparkApplication")["spec"]
    assert spec["mainApplicationFile"] == f"local://{IMAGE_MAIN}"
    dockerfile = (DEPLOY / "docker" / "Dockerfile").read_text()
    assert re.search(r"COPY deploy/spark_main\.py\b.* \./\n", dockerfile)
    assert "WORKDIR /opt/kafka-health\n" in dockerfile
    # The arguments are what spark_main.py accepts.
    spark_main = _module(DEPLOY / "spark_main.py")
    config_arg, verbose = spark_main.parse_args(spec["arguments"])
    assert not verbose
    # ... and point at the key of the mounted ConfigMap.
    mounts = {m["name"]: m["mountPath"] for m in spec["driver"]["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    config_volume = next(n for n, v in volumes.items() if "configMap" in v)
    assert config_arg == f"{mounts[config_volume]}/config.yaml"
    assert volumes[config_volume]["configMap"]["name"] == "kafka-health-config"
    config = _job_config(tmp_path)
    assert config.spark.master is None
    assert {"name": "KAFKA_HEALTH__SPARK__MASTER", "value": "null"} in spec["driver"]["env"]


def test_shared_storage_and_secret_files(tmp_path: Path) -> None:
    config = _job_config(tmp_path)
    for location in (config.spark.checkpoint, config.delta.path):
        assert re.match(r"(s3a|abfss|hdfs|gs)://", location), location
    spec = _one("SparkApplication")["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    for key, ref in config.source.secrets.items():
        assert ref.file, f"source.secrets.{key} should be a file from a Secret"
        for role in ("driver", "executor"):  # the Kafka source reads it on the executors
            mounted = [m for m in spec[role]["volumeMounts"]
                       if "secret" in volumes[m["name"]] and ref.file.startswith(m["mountPath"] + "/")]
            assert mounted, f"{ref.file} is not on a Secret volume of the {role}"


def test_metrics_port_is_consistent(tmp_path: Path) -> None:
    config = _job_config(tmp_path)
    assert config.exporter.enabled and config.exporter.bind == "0.0.0.0"
    spec = _one("SparkApplication")["spec"]
    ports = {p["name"]: p["containerPort"] for p in spec["driver"]["ports"]}
    assert ports["metrics"] == config.exporter.port == 9464
    service = _one("Service", "kafka-health-metrics")
    driver_labels = spec["driver"]["labels"]
    assert service["spec"]["selector"].items() <= driver_labels.items()
    assert not service["spec"]["selector"].items() <= spec["executor"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["name"] == "metrics" and port["targetPort"] == "metrics" and port["port"] == 9464
    monitor = _one("ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "kafka-health"
    # The static scrape config and the Dockerfile agree too.
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "kafka-health")
    assert job["static_configs"][0]["targets"] == [f"{service['metadata']['name']}:9464"]
    assert "EXPOSE 9464" in (DEPLOY / "docker" / "Dockerfile").read_text()


# --- generated manifests -------------------------------------------------------------

def test_prometheusrule_is_generated_from_alerts() -> None:
    generator = _module(K8S / "generate_prometheusrule.py")
    assert (K8S / "prometheusrule.yaml").read_text() == generator.build(), (
        "deploy/k8s/prometheusrule.yaml is stale: run deploy/k8s/generate_prometheusrule.py")
    rule = _one("PrometheusRule")
    source = yaml.safe_load((REPO / "alerts" / "kafka-health.rules.yml").read_text())
    # The same rules; each alert carries the install namespace besides its own labels.
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            if "alert" in r:
                assert r["labels"].pop("namespace") == "kafka-health", r["alert"]
    assert rule["spec"]["groups"] == source["groups"]


def test_configmaps_are_generated_from_sources() -> None:
    generator = _module(K8S / "generate_configmaps.py")
    for path, text in generator.build().items():
        assert path.read_text() == text, f"{path.relative_to(REPO)} is stale: run {generator.__file__}"
    assert _configmap_data("alertmanager-config")["alertmanager.yml"] == \
        (REPO / "alerts" / "alertmanager.yml").read_text()


def test_grafana_gets_dashboards_only_as_sidecar_configmaps() -> None:
    """kube-prometheus-stack's Grafana sidecar loads ConfigMaps labelled grafana_dashboard=1;
    its Grafana has its own default datasource, which a second default would fight."""
    docs = _docs(K8S / "grafana.yaml")
    shipped = {}
    for doc in docs:
        assert doc["kind"] == "ConfigMap"
        assert doc["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert "grafana_datasource" not in doc["metadata"]["labels"]
        ((name, text),) = doc["data"].items()  # one dashboard each: small enough for any apply
        assert len(text.encode()) < 256 * 1024
        shipped[name] = text
    assert shipped == {p.name: p.read_text() for p in (REPO / "dashboards").glob("*.json")}
    for name, text in shipped.items():
        dashboard = json.loads(text)
        assert any(v["name"] == "datasource" and v["type"] == "datasource"
                   for v in dashboard["templating"]["list"]), name
    for path in K8S.rglob("*.yaml"):
        text = path.read_text()
        assert "isDefault" not in text and "grafana_datasource" not in text, path


# --- AlertmanagerConfig: alerts/alertmanager.yml for the operator's Alertmanager -------

_MATCHER = re.compile(r'^\s*(\w+)\s*(=~|!~|!=|=)\s*"(.*)"\s*$')
# The Route fields of the CRD: its child routes are schemaless there (kubeconform cannot see them).
_ROUTE_FIELDS = {"receiver", "groupBy", "groupWait", "groupInterval", "repeatInterval", "matchers",
                 "continue", "routes", "muteTimeIntervals", "activeTimeIntervals"}


def _matchers_from_source(texts: list[str]) -> list[tuple[str, str, str]]:
    return [_MATCHER.match(t).groups() for t in texts]  # type: ignore[union-attr]


def _matchers_from_crd(matchers: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    return [(m["name"], m["matchType"], m["value"]) for m in matchers]


def _route_back(route: dict[str, Any]) -> dict[str, Any]:
    """A CRD route as alertmanager.yml writes it, by an independent mapping."""
    assert set(route) <= _ROUTE_FIELDS, set(route) - _ROUTE_FIELDS
    names = {"groupBy": "group_by", "groupWait": "group_wait", "groupInterval": "group_interval",
             "repeatInterval": "repeat_interval"}
    out: dict[str, Any] = {}
    for key, value in route.items():
        if key == "matchers":
            out["matchers"] = _matchers_from_crd(value)
        elif key == "routes":
            out["routes"] = [_route_back(r) for r in value]
        else:
            out[names.get(key, key)] = value
    return out


def _normalized_source_route(route: dict[str, Any]) -> dict[str, Any]:
    out = dict(route)
    if "matchers" in out:
        out["matchers"] = _matchers_from_source(out["matchers"])
    if "routes" in out:
        out["routes"] = [_normalized_source_route(r) for r in out["routes"]]
    return out


def test_alertmanagerconfig_is_generated_from_alerts() -> None:
    generator = _module(K8S / "generate_alertmanagerconfig.py")
    assert (K8S / "alertmanagerconfig.yaml").read_text() == generator.build(), (
        "deploy/k8s/alertmanagerconfig.yaml is stale: run deploy/k8s/generate_alertmanagerconfig.py")


def test_alertmanagerconfig_routes_inhibits_and_receives_as_alertmanager_yml() -> None:
    source = yaml.safe_load((REPO / "alerts" / "alertmanager.yml").read_text())
    config = _one("AlertmanagerConfig")
    assert config["apiVersion"] == "monitoring.coreos.com/v1alpha1"
    spec = config["spec"]
    # An AlertmanagerConfig has no global section; the source keeps Alertmanager's default.
    assert source["global"] == {"resolve_timeout": "5m"}
    # The operator forces continue on the top route and refuses matchers on it.
    assert "continue" not in spec["route"] and "matchers" not in spec["route"]
    assert _route_back(spec["route"]) == _normalized_source_route(source["route"])
    assert len(spec["inhibitRules"]) == len(source["inhibit_rules"])
    for mine, theirs in zip(spec["inhibitRules"], source["inhibit_rules"], strict=True):
        assert _matchers_from_crd(mine["sourceMatch"]) == _matchers_from_source(theirs["source_matchers"])
        assert _matchers_from_crd(mine["targetMatch"]) == _matchers_from_source(theirs["target_matchers"])
        assert mine.get("equal") == theirs.get("equal")
    # Receivers: the same names and integrations, field for field.
    mounted = _routing_key_secret_of_the_bundled_alertmanager()
    assert [r["name"] for r in spec["receivers"]] == [r["name"] for r in source["receivers"]]
    for mine, theirs in zip(spec["receivers"], source["receivers"], strict=True):
        pagerduty = mine.get("pagerdutyConfigs", [])
        for pd, src in zip(pagerduty, theirs.get("pagerduty_configs", []), strict=True):
            secret, key = pd["routingKey"]["name"], pd["routingKey"]["key"]
            assert mounted[src["routing_key_file"]] == (secret, key)
            assert {d["key"]: d["value"] for d in pd["details"]} == src["details"]
            assert [(link["href"], link["alt"]) for link in pd["pagerDutyLinkConfigs"]] == \
                [(link["href"], link["text"]) for link in src["links"]]
            plain = {k: v for k, v in pd.items()
                     if k not in ("routingKey", "details", "pagerDutyLinkConfigs")}
            assert plain == {("sendResolved" if k == "send_resolved" else k): v for k, v in src.items()
                             if k not in ("routing_key_file", "details", "links")}
        assert [{("sendResolved" if k == "send_resolved" else k): v for k, v in w.items()}
                for w in theirs.get("webhook_configs", [])] == mine.get("webhookConfigs", [])


def _routing_key_secret_of_the_bundled_alertmanager() -> dict[str, tuple[str, str]]:
    """routing_key_file path -> (Secret, key) as deploy/alertmanager mounts it: the one
    Secret serves both ways of running Alertmanager."""
    pod = _one("Deployment", "alertmanager")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    out = {}
    for mount in container["volumeMounts"]:
        secret = volumes[mount["name"]].get("secret")
        for item in (secret or {}).get("items", []):
            out[f"{mount['mountPath']}/{item['path']}"] = (secret["secretName"], item["key"])
    return out


def test_alertmanagerconfig_generator_refuses_what_it_cannot_say(tmp_path: Path) -> None:
    generator = _module(K8S / "generate_alertmanagerconfig.py")
    source = yaml.safe_load((REPO / "alerts" / "alertmanager.yml").read_text())
    for change in (lambda c: c["receivers"].append({"name": "x", "slack_configs": [{}]}),
                   lambda c: c.update(time_intervals=[]),
                   lambda c: c["global"].update(resolve_timeout="1m"),
                   lambda c: c["route"]["routes"][0].update(mute_time_intervals=["night"]),
                   lambda c: c["route"]["routes"][0]["matchers"].append("team=kafka")):
        changed = json.loads(json.dumps(source))
        change(changed)
        (tmp_path / "alerts").mkdir(exist_ok=True)
        (tmp_path / "alerts" / "alertmanager.yml").write_text(yaml.safe_dump(changed))
        with pytest.raises(generator.Unsupported):
            generator.build(tmp_path)


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed (deploy/install-prometheus.sh installs it)")
    return found


def test_prometheusrule_passes_promtool(tmp_path: Path) -> None:
    promtool = _promtool()
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": _one("PrometheusRule")["spec"]["groups"]}))
    out = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    promtool = _promtool()
    text = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    assert "/etc/prometheus/alerts/*.rules.yml" in text
    alerts = tmp_path / "alerts"
    shutil.copytree(REPO / "alerts", alerts, ignore=shutil.ignore_patterns("runbooks", "tests"))
    config = tmp_path / "prometheus.yml"
    config.write_text(text.replace("/etc/prometheus/alerts", str(alerts)))
    out = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 rule files found" in out.stdout + out.stderr


# --- Alertmanager: the PagerDuty key lands where routing_key_file expects it ---------

def _routing_key_files() -> set[str]:
    am = yaml.safe_load((REPO / "alerts" / "alertmanager.yml").read_text())
    files = {c["routing_key_file"] for r in am["receivers"] for c in r.get("pagerduty_configs", [])}
    assert files, "alerts/alertmanager.yml has no routing_key_file"
    return files


def test_alertmanager_deployment_mounts_config_and_routing_key() -> None:
    pod = _one("Deployment", "alertmanager")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    provided = set()
    for mount in container["volumeMounts"]:
        secret = volumes[mount["name"]].get("secret")
        if secret:
            provided |= {f"{mount['mountPath']}/{item['path']}" for item in secret["items"]}
    assert _routing_key_files() <= provided
    config_flag = next(a for a in container["args"] if a.startswith("--config.file="))
    config_path = config_flag.split("=", 1)[1]
    config_mount = next(m for m in container["volumeMounts"]
                        if volumes[m["name"]].get("configMap", {}).get("name") == "alertmanager-config")
    assert config_path == f"{config_mount['mountPath']}/alertmanager.yml"


# --- compose -------------------------------------------------------------------------

def _expand(value: str) -> str:
    """${VAR:-default} -> $VAR or default, as compose does."""
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: os.environ.get(m.group(1), m.group(2)), value)


def test_compose_stack() -> None:
    compose_file = DEPLOY / "compose.yaml"
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                 timeout=30).returncode == 0:
        out = subprocess.run([docker, "compose", "-f", str(compose_file), "config", "--quiet"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    compose = yaml.safe_load(compose_file.read_text())
    services = compose["services"]
    assert {"broker", "job", "prometheus", "alertmanager", "grafana"} <= set(services)
    named_volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        assert service.get("image") or service.get("build"), f"{name}: no image or build"
        build = service.get("build")
        if build:
            context = (DEPLOY / build["context"]).resolve()
            assert (context / build["dockerfile"]).is_file(), f"{name}: Dockerfile missing"
        for volume in service.get("volumes", []):
            source = _expand(volume).split(":")[0]
            if source.startswith((".", "/")):
                assert (DEPLOY / source).resolve().exists(), f"{name}: {source} does not exist"
            else:
                assert source in named_volumes, f"{name}: volume {source} not declared"
        mode = service.get("network_mode", "")
        if mode.startswith("service:"):
            assert mode.split(":", 1)[1] in services
    assert services["broker"]["command"][:2] == ["kafka-health", "cluster"]
    assert services["job"]["command"][:2] == ["kafka-health", "run"]
    # Prometheus reaches the job under the name its scrape config uses.
    assert "kafka-health-metrics" in services["broker"]["networks"]["default"]["aliases"]
    # Alertmanager gets the routing key where alerts/alertmanager.yml reads it.
    targets = {_expand(v).split(":")[1] for v in services["alertmanager"]["volumes"]}
    assert _routing_key_files() <= targets


def test_compose_job_environment_is_a_valid_config() -> None:
    job = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["job"]
    config = load_config(DEPLOY / "config.example.yaml",
                         environ={k: str(v) for k, v in job["environment"].items()})
    assert config.exporter.bind == "0.0.0.0"


# --- spark-submit.sh and spark_main.py ----------------------------------------------

def test_spark_submit_script_syntax_and_help() -> None:
    assert subprocess.run(["bash", "-n", str(SUBMIT)], timeout=30).returncode == 0
    out = subprocess.run(["bash", str(SUBMIT), "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    for word in ("Usage:", "--config", "--master", "cluster", "KAFKA_HEALTH_SCHEMAS", "DELTA_SPARK",
                 "KAFKA_SOURCE", "spark.pyspark.python", "s3a://"):
        assert word in out.stdout, word


def _dry_run(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
             config: str | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "prod.yaml"
    path.write_text(config if config is not None else
                    "spark: {checkpoint: s3a://b/kh/checkpoint}\ndelta: {path: abfss://c@a.dfs.core.windows.net/kh}\n")
    # without what this process's own Spark sessions may have set (build_spark sets
    # PYSPARK_PYTHON), so the dry run sees the environment a user's shell would give it
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("KAFKA_HEALTH") and k != "PYSPARK_PYTHON"}
    return subprocess.run(["bash", str(SUBMIT), "--config", str(path), "--dry-run", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**clean, "TMPDIR": str(tmp_path), "KAFKA_HEALTH_PYTHON": sys.executable,
                               **(env or {})})


def test_spark_submit_delta_spark_tells_the_driver_and_ships_the_delta_jars(tmp_path: Path) -> None:
    """DELTA_SPARK=1: the driver's config says delta-spark (its session then adds Delta's
    extension and catalog) and the delta component's jars go with --jars."""
    out = _dry_run(tmp_path, "--master", "yarn", env={"DELTA_SPARK": "1"})
    assert out.returncode == 0, out.stderr
    cmd = out.stdout.replace("\\", "")  # printf %q escapes
    assert "spark.yarn.appMasterEnv.KAFKA_HEALTH__DELTA__ENGINE=delta-spark" in cmd
    jars = cmd.split("--jars ", 1)[1].split(" ", 1)[0].split(",")
    assert any(Path(jar).name.startswith("delta-spark_") for jar in jars), jars


def test_spark_submit_dry_run_yarn_cluster(tmp_path: Path) -> None:
    out = _dry_run(tmp_path, "--master", "yarn", "--", "--num-executors", "3",
                   env={"KAFKA_SOURCE": "spark",
                        "KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS": "k1:9093"})
    assert out.returncode == 0, out.stderr
    cmd = out.stdout.replace("\\", "")  # printf %q escapes
    for part in ("--deploy-mode cluster", "--py-files", "metrics_schemas.zip#metrics_schemas",
                 "--files", "spark.pyspark.python=python3",
                 "spark.executorEnv.KAFKA_HEALTH_SCHEMAS=metrics_schemas",
                 "spark.yarn.appMasterEnv.KAFKA_HEALTH_SCHEMAS=metrics_schemas",
                 "spark.yarn.appMasterEnv.KAFKA_HEALTH__SOURCE__ENGINE=spark",
                 "spark.yarn.appMasterEnv.KAFKA_HEALTH__SPARK__MASTER=null",
                 "spark.yarn.appMasterEnv.KAFKA_HEALTH__EXPORTER__BIND=0.0.0.0",
                 "spark.yarn.appMasterEnv.KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS=k1:9093",
                 "--num-executors 3", "deploy/spark_main.py --config kafka-health.yaml"):
        assert part in cmd, part
    assert "spark-sql-kafka-0-10_" in cmd.split("--jars ", 1)[1].split(" ", 1)[0]
    build = Path(re.search(r"artifacts kept in (\S+)", out.stderr).group(1))
    with zipfile.ZipFile(build / "kafka_health.zip") as z:
        names = z.namelist()
    assert "streaming/cli/__init__.py" in names and "metrics_schemas/catalog.yaml" in names
    assert not any("__pycache__" in n for n in names)
    with zipfile.ZipFile(build / "metrics_schemas.zip") as z:
        assert "catalog.yaml" in z.namelist()


def test_the_push_rules_ship_beside_metrics_schemas(tmp_path: Path) -> None:
    """streaming/paging/rules.py reads alerts/kafka-health.rules.yml beside the metrics_schemas
    folder: the image copies it there (and its build context lets it in), and spark-submit
    unpacks it into the driver's working directory next to metrics_schemas/."""
    dockerfile = (DEPLOY / "docker" / "Dockerfile").read_text()
    schemas = Path(re.search(r"KAFKA_HEALTH_SCHEMAS=(\S+)", dockerfile).group(1))
    assert "WORKDIR /opt/kafka-health\n" in dockerfile and schemas.parent == Path("/opt/kafka-health")
    assert "COPY alerts/kafka-health.rules.yml ./alerts/kafka-health.rules.yml\n" in dockerfile
    ignore = (DEPLOY / "docker" / "Dockerfile.dockerignore").read_text().splitlines()
    assert "!alerts/kafka-health.rules.yml" in ignore
    out = _dry_run(tmp_path, "--master", "yarn")
    assert out.returncode == 0, out.stderr
    archives = re.search(r"--archives (\S+)", out.stdout.replace("\\", "")).group(1).split(",")
    assert [a.rpartition("#")[2] for a in archives] == ["metrics_schemas", "alerts"]
    build = Path(re.search(r"artifacts kept in (\S+)", out.stderr).group(1))
    with zipfile.ZipFile(build / "alerts.zip") as z:
        assert z.read("kafka-health.rules.yml") == (REPO / "alerts" / "kafka-health.rules.yml").read_bytes()


def test_spark_submit_k8s_uses_driver_env(tmp_path: Path) -> None:
    out = _dry_run(tmp_path, "--master", "k8s://https://k8s.example:443")
    assert out.returncode == 0, out.stderr
    assert "spark.kubernetes.driverEnv.KAFKA_HEALTH_SCHEMAS=metrics_schemas" in out.stdout
    assert "spark.kubernetes.submission.waitAppCompletion=false" in out.stdout


def test_spark_submit_refuses_what_cannot_work(tmp_path: Path) -> None:
    local = _dry_run(tmp_path, "--master", "yarn", config="spark: {checkpoint: data/checkpoint}\n")
    assert local.returncode == 2 and "shared storage" in local.stderr
    standalone = _dry_run(tmp_path, "--master", "spark://m:7077", "--deploy-mode", "cluster")
    assert standalone.returncode == 2 and "YARN or Kubernetes" in standalone.stderr
    typo = _dry_run(tmp_path, "--master", "yarn", config="spark: {checkpointt: s3a://x}\n")
    assert typo.returncode == 2 and "Did you mean 'checkpoint'" in typo.stderr
    client = _dry_run(tmp_path, "--master", "spark://m:7077")
    assert client.returncode == 0 and "--deploy-mode client" in client.stdout


def test_spark_main_finds_config_and_schemas(tmp_path: Path) -> None:
    spark_main = _module(DEPLOY / "spark_main.py")
    (tmp_path / "kafka-health.yaml").write_text("{}\n")
    assert spark_main.resolve_config("kafka-health.yaml", cwd=tmp_path) == tmp_path / "kafka-health.yaml"
    assert spark_main.resolve_config("/elsewhere/kafka-health.yaml", cwd=tmp_path).parent == tmp_path
    with pytest.raises(FileNotFoundError, match="--files"):
        spark_main.resolve_config("missing.yaml", cwd=tmp_path)
    # Relative KAFKA_HEALTH_SCHEMAS (an unpacked --archives) becomes absolute for the driver.
    shutil.copytree(REPO / "metrics_schemas", tmp_path / "unpacked")
    env = {"KAFKA_HEALTH_SCHEMAS": "unpacked"}
    assert spark_main.resolve_schemas(env, cwd=tmp_path) == tmp_path / "unpacked"
    assert env["KAFKA_HEALTH_SCHEMAS"] == str((tmp_path / "unpacked").resolve())
    with pytest.raises(FileNotFoundError, match="looked at .*nowhere"):
        spark_main.resolve_schemas({"KAFKA_HEALTH_SCHEMAS": "nowhere"}, cwd=tmp_path)
    # Unset: the installed package's own copy, nothing searched for and nothing exported.
    env = {}
    assert spark_main.resolve_schemas(env, cwd=tmp_path, search_path=[]) is None and env == {}
    # A package without its copy (a --py-files zip of the checkout): the zip's, extracted.
    zipped = tmp_path / "kafka_health.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        for path in (REPO / "metrics_schemas").iterdir():
            z.write(path, f"metrics_schemas/{path.name}")
    found = spark_main.resolve_schemas(env, cwd=tmp_path / "empty", search_path=[str(zipped)],
                                       packaged=lambda: False)
    assert (found / "catalog.yaml").read_text() == (REPO / "metrics_schemas" / "catalog.yaml").read_text()
    assert env["KAFKA_HEALTH_SCHEMAS"] == str(found.resolve())
    with pytest.raises(FileNotFoundError, match="--archives"):
        spark_main.resolve_schemas({}, cwd=tmp_path / "empty", search_path=[], packaged=lambda: False)


def test_spark_main_hands_over_to_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spark_main = _module(DEPLOY / "spark_main.py")
    (tmp_path / "kafka-health.yaml").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KAFKA_HEALTH_SCHEMAS", str(REPO / "metrics_schemas"))
    calls = []
    import streaming.cli

    monkeypatch.setattr(streaming.cli, "main", lambda argv: calls.append(argv) or 0)
    assert spark_main.main(["--config", "kafka-health.yaml", "-v"]) == 0
    assert calls == [["-v", "run", "--config", str(tmp_path / "kafka-health.yaml")]]
    assert spark_main.main(["--config", "nope.yaml"]) == 2


def test_image_entrypoint_syntax() -> None:
    assert subprocess.run(["bash", "-n", str(DEPLOY / "docker" / "entrypoint.sh")],
                          timeout=30).returncode == 0
