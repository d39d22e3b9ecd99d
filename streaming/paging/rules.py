"""The Prometheus rules file as the source of what is pushed.

Only the kind -> alertname mapping (ALERTNAMES) lives here. On first use the rule of each
pushed kind gives its labels and its annotations, translated by streaming.paging.templates.
`check` refuses, at `kafka-health run` and `check-config`, a pushed kind the rules file
cannot give. The package carries a copy of the file (streaming.package_data); `rules_path`
says which copy is read.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from streaming.config import AlertPushConfig
from streaming.package_data import SCHEMAS_ENV, packaged_alert_rules
from streaming.paging.templates import AlertRulesError, translate

# Incident kind -> the alertname of the Prometheus rule that pages for it. The alert's labels
# and texts are read from that rule (alerts/kafka-health.rules.yml, the single source); the
# order is the push's priority when one push is capped (data loss first).
ALERTNAMES: dict[str, str] = {
    "unclean_election": "KafkaUncleanLeaderElection",
    "under_min_isr": "KafkaUnderMinIsrPartitions",
    "offline_partitions": "KafkaOfflinePartitions",
    "controller": "KafkaActiveControllerCountAbnormal",
}
RULES_ENV = "KAFKA_HEALTH_RULES"
RULES_FILE = Path("alerts") / "kafka-health.rules.yml"


@dataclass(frozen=True)
class AlertSpec:
    """The Prometheus rule of one incident kind as the push renders it: the rule's labels
    (severity, team, category) verbatim and its annotations as str.format templates over
    {cluster}/{broker}/{value}, one {causeN} per cause block, whose text around the
    cause is in `causes`, and one {elrN} per ELR block, whose texts for on and off are in
    `elr` (see templates.translate)."""

    alertname: str
    labels: dict[str, str]
    annotations: dict[str, str]
    causes: dict[str, tuple[str, str]] = field(default_factory=dict)
    elr: dict[str, tuple[str, str]] = field(default_factory=dict)


def rules_path() -> Traversable:
    """The Prometheus rules file: $KAFKA_HEALTH_RULES; else alerts/ beside the folder
    $KAFKA_HEALTH_SCHEMAS names (/opt/kafka-health in the image, spark-submit's unpacked
    archives), so a shipped copy of the schemas comes with the rules of the same version;
    else the copy the package carries (streaming.package_data). Refused (AlertRulesError)
    when none is a file."""
    override = os.environ.get(RULES_ENV)
    candidates: list[Traversable]
    if override:
        candidates = [Path(override)]
    else:
        schemas = os.environ.get(SCHEMAS_ENV)
        candidates = [*([Path(schemas).parent / RULES_FILE] if schemas else []),
                      packaged_alert_rules()]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise AlertRulesError(
            f"alert_push: the Prometheus rules file {RULES_FILE} (the pushed alerts' labels and "
            f"texts) was not found (looked at {', '.join(map(str, candidates))}); set "
            f"{RULES_ENV} to the file, or ship alerts/ beside the folder {SCHEMAS_ENV} names")
    return found


@functools.cache
def _specs_in(path: Traversable) -> dict[str, AlertSpec | str]:
    """Every pushable kind's spec from the rules file at `path`, or why it has none."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        rules = [r for g in document["groups"] for r in g["rules"] if "alert" in r]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as err:
        raise AlertRulesError(f"alert_push: cannot read the alert rules in {path}: "
                              f"{type(err).__name__}: {err}") from err
    specs: dict[str, AlertSpec | str] = {}
    for kind, alertname in ALERTNAMES.items():
        try:
            specs[kind] = _spec(kind, alertname, [r for r in rules if r["alert"] == alertname], path)
        except AlertRulesError as err:
            specs[kind] = str(err)
    return specs


def _spec(kind: str, alertname: str, found: list[dict[str, Any]], path: Traversable) -> AlertSpec:
    if len(found) != 1:
        raise AlertRulesError(f"alert_push.kinds {kind!r}: {path} has {len(found)} rules named "
                              f"{alertname}; the push renders exactly one")
    [rule] = found
    labels = {str(k): str(v) for k, v in (rule.get("labels") or {}).items()}
    for name, value in labels.items():
        if "{{" in value:
            raise AlertRulesError(f"alert_push.kinds {kind!r}: {alertname} label {name} is a "
                                  f"template ({value!r}); the push carries static labels only")
    causes: dict[str, tuple[str, str]] = {}
    elr: dict[str, tuple[str, str]] = {}
    annotations = {str(name): translate(str(text), f"alert_push.kinds {kind!r}: {path} "
                                                   f"{alertname} annotation {name}", causes, elr)
                   for name, text in (rule.get("annotations") or {}).items()}
    return AlertSpec(alertname, labels, annotations, causes, elr)


def spec_for(kind: str) -> AlertSpec:
    """The alert spec of a pushable kind (one of ALERTNAMES), read from the rules file on first
    use; AlertRulesError when the rules file cannot give it."""
    found = _specs_in(rules_path())[kind]
    if isinstance(found, str):
        raise AlertRulesError(found)
    return found


def check(config: AlertPushConfig) -> None:
    """Refuse (AlertRulesError, a ConfigError) a push config with a kind that has no paging
    rule (a misspelt kind would never page) or whose rule the rules file cannot give:
    `kafka-health run` and `check-config` call it, so the job stops at start instead of
    silently not paging. Without an Alertmanager URL nothing is pushed, and nothing checked."""
    if not config.urls():
        return
    for i, kind in enumerate(config.kinds):
        if kind not in ALERTNAMES:
            raise AlertRulesError(f"alert_push.kinds[{i}]: {kind!r} is not a kind with a "
                                  f"paging rule; one of: {', '.join(ALERTNAMES)}")
        spec_for(kind)
