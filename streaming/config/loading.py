"""Reading the configuration: a YAML file, then `KAFKA_HEALTH__SECTION__KEY` environment
overrides, checked against the model before anything starts.

A bad key or value fails at start with the key's dotted path and the fix (and the
variable's name when an override set it), because an always-on job that dies an hour
later on a typo pages someone for nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, cast, get_args, get_origin

import yaml
from pydantic import TypeAdapter, ValidationError

from streaming.config.errors import ConfigError, Problems
from streaming.config.model import Config, key_fields, plain_type

ENV_PREFIX = "KAFKA_HEALTH__"
# The config file, when no --config names one.
CONFIG_FILE_ENV = "KAFKA_HEALTH_CONFIG"


def env_name(key: str) -> str:
    """The variable overriding a dotted key: source.bootstrap_servers ->
    KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS."""
    return ENV_PREFIX + "__".join(key.split(".")).upper()


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """KAFKA_HEALTH__SECTION__KEY=value overrides one key of `data`; value is parsed as
    YAML. Returns which variable set each dotted key."""
    overridden = {}
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        keys = [k.lower() for k in name[len(ENV_PREFIX):].split("__") if k]
        node = data
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{name}: {'.'.join(keys)} does not name a nested key")
        try:
            node[keys[-1]] = _parse_yaml(raw)
        except yaml.YAMLError as err:
            raise ConfigError(f"{name}: not valid YAML ({_yaml_problem(err)}); the value is "
                              "not shown, it may hold a secret") from None
        overridden[".".join(keys)] = name
    return overridden


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML whose mappings may not repeat a key. PyYAML keeps the last one silently: a
    second `source:` block would drop every setting of the first without a word. A merge
    (`<<: *base`) may still be overridden, as YAML means it to."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, Hashable):
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"the key {str(key)[:60]!r} appears twice in one "
                            "mapping (the first would be dropped)", key_node.start_mark)
                    seen.add(key)
        return super().construct_mapping(node, deep)


def _parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader


def _yaml_problem(err: yaml.YAMLError) -> str:
    """What is wrong and where, without PyYAML's snippet of the text (which would print a
    secret sitting on that line)."""
    problem = getattr(err, "problem", None) or "cannot parse"
    mark = getattr(err, "problem_mark", None)
    if mark is None:
        return problem
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"


def _dotted(loc: tuple[Any, ...]) -> str:
    key = ""
    for part in loc:
        if part == "[key]":  # pydantic's mark for a mapping's key rather than its value
            continue
        key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else str(part)
    return key


def _section_at(loc: tuple[Any, ...]) -> Any:
    """The section type a location's last key is looked up in."""
    hint: Any = Config
    for part in loc[:-1]:
        hint = plain_type(hint)
        if dataclasses.is_dataclass(hint):
            hint = key_fields(cast(type, hint))[part].annotation  # a section is a class
        elif get_origin(hint) in (list, dict):
            hint = get_args(hint)[-1]
    return plain_type(hint)


def _kind(value: Any) -> str:
    return type(value).__name__


def _said(error: Any) -> list[tuple[str, str]]:
    """One pydantic error as (dotted key, what is wrong and the fix)."""
    loc, kind, given = tuple(error["loc"]), error["type"], error.get("input")
    key = _dotted(loc)
    if kind == "unexpected_keyword_argument":
        names = list(key_fields(_section_at(loc)))
        close = difflib.get_close_matches(str(loc[-1]), names, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return [(key, f"unknown key.{hint} Valid keys here: {', '.join(names)}")]
    if kind == "value_error":
        cause = error["ctx"]["error"]
        if isinstance(cause, Problems):
            return [(f"{key}.{inner}" if key else inner, text) for inner, text in cause.problems]
        return [(key, str(cause))]
    number = isinstance(given, int | float) and not isinstance(given, bool)
    text = {
        "int_type": f"expected a whole number, got {given!r}" if number
        else f"expected a number, got {given!r}",
        "float_type": f"expected a number, got {given!r}",
        "bool_type": f"expected true or false, got {given!r}",
        "string_type": f"expected a string, got {_kind(given)}",
        "list_type": f"expected a list, got {_kind(given)}",
        "dict_type": f"expected a mapping, got {_kind(given)}",
        "dataclass_type": f"expected a mapping, got {_kind(given)}",
        "literal_error": f"{given!r} is not one of {error.get('ctx', {}).get('expected')}",
    }.get(kind, error["msg"])
    return [(key or "config", text)]


def _by_variable(key: str, overridden: Mapping[str, str]) -> str | None:
    """The variable that set the key, or a section or mapping holding it."""
    for set_key, name in sorted(overridden.items(), key=lambda item: -len(item[0])):
        if key == set_key or key.startswith((f"{set_key}.", f"{set_key}[")):
            return name
    return None


def config_file(path: str | Path | None, environ: Mapping[str, str]) -> tuple[Path | None, str]:
    """The config file to read and how it was named: --config, else KAFKA_HEALTH_CONFIG."""
    if path is not None:
        return Path(path), f"--config {path}"
    named = environ.get(CONFIG_FILE_ENV)
    if named:
        return Path(named), f"{CONFIG_FILE_ENV} {named}"
    return None, ""


def load_config(path: str | Path | None = None,
                environ: Mapping[str, str] | None = None) -> Config:
    """Read YAML (`path`, or else the file KAFKA_HEALTH_CONFIG names; none: the defaults),
    apply environment overrides, validate."""
    environ = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    file, named = config_file(path, environ)
    if file is not None:
        try:
            text = file.read_text()
        except OSError as err:
            raise ConfigError(f"{named}: cannot read ({err.strerror})") from err
        try:
            data = _parse_yaml(text) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{named}: not valid YAML ({_yaml_problem(err)})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{named}: the top level must be a mapping of sections")
    overridden = _apply_env(data, environ)
    try:
        return _CONFIG.validate_python(data)
    except ValidationError as err:
        problems = [problem for error in err.errors() for problem in _said(error)]
        raise ConfigError("\n".join(
            f"{variable}: {key}: {text}" if (variable := _by_variable(key, overridden))
            else f"{key}: {text}" for key, text in problems)) from None


_CONFIG = TypeAdapter(Config)
