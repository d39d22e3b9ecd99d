"""docs/configuration.md, the configuration reference, written from the model: every key
with its type, default, environment variable and meaning, so the page cannot drift from
what the loader takes.

    python -m streaming.config.reference            # rewrite docs/configuration.md
    python -m streaming.config.reference --check    # exit 1 when it is out of date
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union, cast, get_args, get_origin

from pydantic_core import PydanticUndefined

from streaming.config.loading import CONFIG_FILE_ENV, ENV_PREFIX, env_name
from streaming.config.model import Config, key_fields, plain_type
from streaming.config.secrets import SecretRef

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

INTRO = f"""# Configuration reference

kafka-health reads one YAML file: the one `--config FILE` names, or else the one the
environment variable `{CONFIG_FILE_ENV}` names (`--config` wins); with neither, every key
takes its default. Every key is optional. Any key can then be set from the environment
as `{ENV_PREFIX}SECTION__KEY` (the value is parsed as YAML, so
`{ENV_PREFIX}SOURCE__TOPICS='[{{name: m, format: jolokia}}]'` sets a list); an error in
such a value names the variable. `kafka-health check-config` validates a config without
starting anything. `deploy/config.example.yaml` is a commented example.

A secret reference is `{{file: PATH}}` or `{{env: NAME}}`: where a secret value lives. It is
read when the job needs it and never logged.

This page is generated from the configuration model (`streaming/config/model.py`) by
`python -m streaming.config.reference`; edit the model's descriptions, not this page.
"""


def _nullable(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint)


def type_name(hint: Any) -> str:
    """A key's type in words."""
    kind = plain_type(hint)
    origin = get_origin(kind)
    if kind is SecretRef:
        name = "secret reference"
    elif origin is Literal:
        name = "one of " + ", ".join(f"`{choice}`" for choice in get_args(kind))
    elif origin is list:
        name = f"list of {type_name(get_args(kind)[0])}"
    elif origin is dict:
        key, value = get_args(kind)
        name = f"mapping of {type_name(key)} to {type_name(value)}"
    elif kind is Any:
        name = "any value"
    else:
        name = {str: "string", int: "whole number", float: "number",
                bool: "true or false"}.get(kind, getattr(kind, "__name__", str(kind)))
    return f"{name}, or null" if _nullable(hint) else name


def _default(info: Any) -> Any:
    value = info.default_factory() if info.default is PydanticUndefined else info.default
    # a default is a section's instance, never the class: is_dataclass also admits classes
    return dataclasses.asdict(cast(Any, value)) if dataclasses.is_dataclass(value) else (
        [dataclasses.asdict(cast(Any, v)) if dataclasses.is_dataclass(v) else v for v in value]
        if isinstance(value, list) else value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rows(cls: type, prefix: str, env: str | None) -> Iterator[tuple[str, str, str, str, str]]:
    """(key, type, default, variable, meaning) of every key under a section, depth first:
    a list's items as KEY[].name, a mapping's values as KEY.<name>.key."""
    for name, info in key_fields(cls).items():
        key = f"{prefix}.{name}"
        variable = f"{env}__{name.upper()}" if env else None
        kind = plain_type(info.annotation)
        # sections and their entries are classes (is_dataclass also admits instances)
        if dataclasses.is_dataclass(kind):
            yield from rows(cast(type, kind), key, variable)
            continue
        entry = plain_type(get_args(kind)[-1]) if get_origin(kind) in (list, dict) else None
        if not dataclasses.is_dataclass(entry) or entry is SecretRef:
            entry = None
        shown = type_name(info.annotation) if entry is None else (
            "list of the keys below" if get_origin(kind) is list
            else "mapping of a name to the keys below")
        yield key, shown, json.dumps(_default(info)), variable or "", info.description or ""
        if entry is not None and get_origin(kind) is list:
            yield from rows(cast(type, entry), f"{key}[]", None)
        elif entry is not None:
            yield from rows(cast(type, entry), f"{key}.<name>",
                            f"{variable}__<NAME>" if variable else None)


def render() -> str:
    """The page's text."""
    parts = [INTRO]
    for name, info in key_fields(Config).items():
        kind = plain_type(info.annotation)
        parts.append(f"\n## `{name}`\n\n{info.description[0].upper()}{info.description[1:]}.\n")
        parts.append("\n| Key | Type | Default | Environment | Meaning |\n|---|---|---|---|---|\n")
        section = (rows(cast(type, kind), name, env_name(name)) if dataclasses.is_dataclass(kind)
                   else [(name, type_name(info.annotation), json.dumps(_default(info)),
                          env_name(name), info.description or "")])
        for key, type_, default, variable, meaning in section:
            shown = f"`{_cell(variable)}`" if variable else "(with its list)"
            parts.append(f"| `{_cell(key)}` | {_cell(type_)} | `{_cell(default)}` | {shown} "
                         f"| {_cell(meaning)} |\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write docs/configuration.md from the model")
    parser.add_argument("--check", action="store_true",
                        help="only compare: exit 1 when the page is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = PAGE.read_text() if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE} is out of date: python -m streaming.config.reference",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
