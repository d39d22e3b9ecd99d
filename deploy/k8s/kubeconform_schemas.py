"""Write the JSON schemas kubeconform validates deploy/k8s against, from packages a registry
serves (deploy/install-k8s-tools.sh fetches them; kubeconform's own schema catalogues are
web sites, which this project's machines do not reach).

    python deploy/k8s/kubeconform_schemas.py OUT \\
        --kubernetes kubernetes_validate-X-py3-none-any.whl --kubernetes-version 1.33.0 \\
        --crds DIR_WITH_CRD_YAML [--crds ...] \\
        --model MODULE:CLASS=GROUP/VERSION/KIND [--model ...]

Layout of OUT, as kubeconform's `-schema-location` templates expect it:

  OUT/v<kubernetes-version>-standalone-strict/<kind>-<group>-<version>.json
      the built-in kinds, from the kubernetes-validate wheel (PyPI), whose schemas point into
      one shared definitions file by an absolute reference kubeconform cannot follow: each
      kind is written standalone, with the definitions it reaches under $defs
  OUT/crds/<group>/<kind>_<version>.json
      every version of every CustomResourceDefinition in the --crds files (the Prometheus
      Operator's, from its Go module), and the pydantic models given with --model (the Spark
      Operator's, from the kubeflow-spark-api wheel: its Go module is not served)

Strict throughout: an object with named properties accepts no others unless its schema says
so (additionalProperties, x-kubernetes-preserve-unknown-fields), so a misspelt field fails
instead of being pruned silently by the API server.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

DRAFT = "https://json-schema.org/draft/2020-12/schema"
WHEEL_ROOT = "kubernetes_validate/kubernetes-json-schema"


def _strict(schema: Any) -> Any:
    """additionalProperties: false on every object schema that lists its properties and says
    nothing about others (the openapi2jsonschema --strict rule). Walks the schema keywords,
    not every mapping: a field may well be named `properties`."""
    if not isinstance(schema, dict):
        return schema
    for key in ("properties", "patternProperties", "$defs", "definitions"):
        for sub in (schema.get(key) or {}).values():
            _strict(sub)
    for key in ("items", "additionalProperties", "not", "contains"):
        sub = schema.get(key)
        for one in sub if isinstance(sub, list) else [sub]:
            _strict(one)
    for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
        for sub in schema.get(key) or []:
            _strict(sub)
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        schema["additionalProperties"] = False
    return schema


def _refs(node: Any) -> list[str]:
    out: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key == "$ref" and isinstance(value, str):
                    out.append(value)
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return out


def kubernetes(wheel: Path, version: str, out: Path) -> int:
    """The wheel's -local-strict schemas of one Kubernetes version, made standalone."""
    folder = f"{WHEEL_ROOT}/v{version}-local-strict/"
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.startswith(folder) and n.endswith(".json")]
        if not names:
            raise SystemExit(f"{wheel.name} has no schemas for Kubernetes {version}")
        definitions = json.loads(z.read(folder + "_definitions.json"))["$defs"]
        target = out / f"v{version}-standalone-strict"
        target.mkdir(parents=True, exist_ok=True)
        written = 0
        for name in names:
            schema = json.loads(z.read(name))
            if "kind" not in schema.get("properties", {}):
                continue  # a part of a kind (PodSpec, ...), never a document of its own
            reached: set[str] = set()
            pending = _refs(schema)
            while pending:
                ref = pending.pop()
                key = ref.partition("#/$defs/")[2]
                if key and key not in reached:
                    reached.add(key)
                    pending.extend(_refs(definitions[key]))
            schema["$schema"] = DRAFT
            schema["$defs"] = {key: definitions[key] for key in sorted(reached)}
            text = json.dumps(schema).replace('"/api/_definitions.json#/$defs/', '"#/$defs/')
            (target / Path(name).name).write_text(text)
            written += 1
    return written


class _CrdLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML 1.1 reads a bare `=` (an enum value of the operators' matchers) as a `value`
    tag no safe loader constructs; in YAML 1.2, which the API server speaks, it is a string."""


_CrdLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:value"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _write_crd_schema(out: Path, group: str, version: str, kind: str, schema: dict) -> None:
    folder = out / "crds" / group
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{kind.lower()}_{version}.json").write_text(json.dumps(_strict(schema)))


def crds(paths: list[Path], out: Path) -> int:
    written = 0
    files = [f for p in paths for f in (sorted(p.glob("*.yaml")) if p.is_dir() else [p])]
    for path in files:
        for doc in yaml.load_all(path.read_text(), Loader=_CrdLoader):  # noqa: S506
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                schema = version.get("schema", {}).get("openAPIV3Schema")
                if schema:
                    _write_crd_schema(out, spec["group"], version["name"], spec["names"]["kind"], schema)
                    written += 1
    return written


def model(spec: str, out: Path) -> None:
    """MODULE:CLASS=GROUP/VERSION/KIND: a pydantic v2 model's JSON schema, by field alias
    (the names the API uses)."""
    target, _, gvk = spec.partition("=")
    module, _, cls = target.partition(":")
    group, version, kind = gvk.split("/")
    schema = getattr(importlib.import_module(module), cls).model_json_schema(by_alias=True)
    schema["$schema"] = DRAFT
    _write_crd_schema(out, group, version, kind, schema)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--kubernetes", type=Path, help="the kubernetes-validate wheel")
    parser.add_argument("--kubernetes-version", default="1.33.0")
    parser.add_argument("--crds", type=Path, action="append", default=[])
    parser.add_argument("--model", action="append", default=[])
    args = parser.parse_args(argv)
    if args.kubernetes:
        count = kubernetes(args.kubernetes, args.kubernetes_version, args.out)
        print(f"{count} Kubernetes {args.kubernetes_version} kinds", file=sys.stderr)
    if args.crds:
        print(f"{crds(args.crds, args.out)} CRD versions", file=sys.stderr)
    for spec in args.model:
        model(spec, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
