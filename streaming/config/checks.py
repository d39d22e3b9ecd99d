"""Checks of values that need more than their type: what the Kafka client, a regex
engine, Spark's kafka source and the headroom model would say of them once the job runs,
asked before it starts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

# What librdkafka says of settings no deployment can run with; other errors at a client's
# creation (a PEM or keystore checked with a placeholder secret) are not the config's.
_REFUSALS = ("No such configuration property", "Invalid value", "is not supported",
             "No provider for SASL mechanism", "must be set")


def librdkafka_refusal(kafka: Mapping[str, Any], secrets: Iterable[str]) -> str | None:
    """What librdkafka (confluent-kafka's client) says of these settings, None when it takes
    them: a misspelt name, a value of the wrong kind, a Java client's setting, a SASL
    mechanism this build lacks. Secrets are checked by name only (a placeholder value),
    and the files that `*.location` settings name are not opened: they may exist only
    where the job runs. No connection is made (no bootstrap servers)."""
    secrets = list(secrets)
    if not kafka and not secrets:  # librdkafka's own defaults: nothing to ask
        return None
    from confluent_kafka import Consumer, KafkaException

    from streaming.kafka_client import consumer_config

    conf = {key: value if isinstance(value, str) else json.dumps(value)
            for key, value in kafka.items()}
    conf.update(dict.fromkeys(secrets, "x"))
    files = {key: value for key, value in conf.items() if key.endswith(".location")}
    rest = {key: value for key, value in conf.items() if key not in files}
    for part in (rest, files):
        try:
            Consumer(consumer_config("check-config", {**part, "log_level": 0})).close()
        except KafkaException as err:
            said = err.args[0].str()
            if not any(refusal in said for refusal in _REFUSALS):
                continue
            # librdkafka quotes a value it refuses, and a value may be a secret
            for value in sorted(set(part.values()), key=len, reverse=True):
                if len(value) >= 3:
                    said = said.replace(value, "<the value set>")
            return said
    return None


def starting_offsets_valid(value: str) -> bool:
    """'earliest', 'latest', or a JSON object of whole offsets per topic and partition (the
    form Spark's kafka source takes, which the Python source reads too)."""
    if value in ("earliest", "latest"):
        return True
    try:
        offsets = json.loads(value)
    except ValueError:
        return False
    return isinstance(offsets, dict) and all(
        isinstance(parts, dict) and all(
            isinstance(offset, int) and not isinstance(offset, bool) for offset in parts.values())
        for parts in offsets.values())


def regex_problem(pattern: str | None) -> str | None:
    """Why Python's re refuses the pattern, None when it compiles (or is null)."""
    if pattern is None:
        return None
    try:
        re.compile(pattern)
    except re.error as err:
        return f"not a valid regex ({err})"
    return None


def headroom_problems(clusters: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Each cluster's headroom facts as the headroom stage will build them: a misspelt
    key (vm_max_mapcount) or a bad value fails at start with its dotted path, not when
    a batch first reaches the cluster, and never leaves a default silently in force."""
    from streaming.headroom.model import load_defaults, make_config

    if not clusters:
        return []
    defaults = load_defaults()  # its own errors name its file
    problems = []
    for name, overrides in clusters.items():
        try:
            make_config(overrides, defaults)
        except (TypeError, ValueError) as err:
            problems.append((name, str(err)))
    return problems
