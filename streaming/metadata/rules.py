"""The durability audit's thresholds, read from metrics_schemas/durability.yaml.

Data, not code, so a reviewer sees each threshold next to the public source it comes
from; a missing or unknown key fails at load, because a misspelt threshold would
otherwise leave a default in force while the file reads as changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from streaming.schemas import schemas_dir

RULES_FILE = "durability.yaml"
SEVERITIES = ("critical", "warning", "info")
# rule -> the thresholds it takes (besides severity and source)
RULE_PARAMS: dict[str, tuple[str, ...]] = {
    "min_isr_above_replication_factor": (),
    "replication_factor_below_minimum": ("min_replication_factor",),
    "min_isr_below_minimum": ("min_insync_replicas", "from_replication_factor"),
    "unclean_leader_election_enabled": (),
    "replicas_share_rack": (),
    "rack_sizes_unequal": ("max_broker_count_difference",),
    "leader_recovering": (),
}
RULES = tuple(RULE_PARAMS)


@dataclass(frozen=True)
class Rule:
    name: str
    severity: str
    source: str
    params: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditRules:
    """Every rule (all of RULES) and how many cause brokers to name."""

    rules: Mapping[str, Rule]
    top_cause_brokers: int = 3

    def __getitem__(self, name: str) -> Rule:
        return self.rules[name]


def _rule(name: str, spec: Any, where: str) -> Rule:
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: expected a mapping")
    expected = {"severity", "source", *RULE_PARAMS[name]}
    unknown, missing = sorted(set(spec) - expected), sorted(expected - set(spec))
    if unknown or missing:
        raise ValueError(f"{where}: unknown key(s) {unknown}, missing key(s) {missing}")
    if spec["severity"] not in SEVERITIES:
        raise ValueError(f"{where}.severity: {spec['severity']!r} is not one of "
                         f"{', '.join(SEVERITIES)}")
    if not str(spec["source"]).strip():
        raise ValueError(f"{where}.source: name the public source of this rule")
    params = {}
    for key in RULE_PARAMS[name]:
        value = spec[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{where}.{key}: expected a whole number >= 0, got {value!r}")
        params[key] = value
    return Rule(name, spec["severity"], " ".join(str(spec["source"]).split()), params)


def load_rules(path: str | Path | None = None) -> AuditRules:
    """The rules of `path` (default: durability.yaml in the schemas folder)."""
    file: Traversable = Path(path) if path is not None else schemas_dir() / RULES_FILE
    data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or set(data) != {"top_cause_brokers", "rules"}:
        raise ValueError(f"{file}: expected exactly the keys top_cause_brokers and rules")
    top = data["top_cause_brokers"]
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError(f"{file}: top_cause_brokers must be a whole number >= 1")
    specs = data["rules"] or {}
    unknown, missing = sorted(set(specs) - set(RULES)), sorted(set(RULES) - set(specs))
    if unknown or missing:
        raise ValueError(f"{file}: rules: unknown {unknown}, missing {missing}")
    rules = {name: _rule(name, specs[name], f"{file}: rules.{name}") for name in RULES}
    return AuditRules(rules=rules, top_cause_brokers=top)
