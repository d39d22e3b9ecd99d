"""What the commands share: argparse value types, usage errors, and the Kafka client a
command builds from its config and its Kafka options.

Standard library only at import: the wrapper scripts print help before anything is
installed (deploy/demo.sh).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any


def _number(kind: Callable[[str], Any], low: float, what: str) -> Callable[[str], Any]:
    """An argparse type: `kind` of at least `low`, else a usage error that says so."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not low <= value < math.inf:  # also refuses nan, and inf (no cycle, no timer)
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    return parse


POSITIVE_INT = _number(int, 1, "a whole number >= 1")
COUNT = _number(int, 0, "a whole number >= 0")
SECONDS = _number(float, 1e-3, "a finite number of seconds > 0")
HOURS = _number(float, 1e-6, "a finite number of hours > 0")


def tcp_port(text: str) -> int:
    value = COUNT(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return value


class CommandFailed(Exception):
    """The command could not do its work for a reason outside its arguments (Kafka does
    not answer, a topic is missing): said on stderr, exit 1."""


def usage_error(args: argparse.Namespace, message: str) -> None:
    """Exit 2 with the subcommand's usage and what to fix, as argparse does for its own checks."""
    args.parser.error(message)


def require_config_file(args: argparse.Namespace, environ: Any) -> None:
    """A command that needs a config file has it from its argument or KAFKA_HEALTH_CONFIG;
    neither is a usage error naming both (the defaults alone watch nothing of the operator's)."""
    if args.config is None and not environ.get("KAFKA_HEALTH_CONFIG"):
        usage_error(args, "no config file: give --config FILE or set KAFKA_HEALTH_CONFIG")


def given(args: argparse.Namespace, name: str) -> bool:
    """Whether an option was set to other than its default (a default given explicitly is
    the same as none)."""
    return getattr(args, name) != args.parser.get_default(name)


def kafka_client(args: argparse.Namespace, config: Any) -> dict[str, str]:
    """The librdkafka settings of a command that talks to the metrics cluster: the config's
    source section (bootstrap servers, source.kafka, source.secrets read now), then the
    --command-config file's properties, then --bootstrap-server. Never print the result."""
    from streaming.kafka_client import read_properties, with_properties

    client = config.source.client_config()
    if args.command_config:
        try:
            properties = read_properties(args.command_config)
        except OSError as err:
            usage_error(args, f"--command-config {args.command_config}: cannot read "
                        f"({err.strerror})")
        client = with_properties(client, properties)
    if args.bootstrap_server:
        client["bootstrap.servers"] = args.bootstrap_server
    return client
