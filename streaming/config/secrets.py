"""Secrets in the config: references to where a value lives, read late and never shown."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from streaming.config.errors import ConfigError
from streaming.redact import redact_tree

SECTION = ConfigDict(extra="forbid")


@dataclass(config=SECTION)
class SecretRef:
    """Where a secret lives; its value is read late and never logged."""

    file: str | None = Field(None, description="a file holding the value (surrounding "
                                               "whitespace is dropped)")
    env: str | None = Field(None, description="an environment variable holding the value")

    def read(self, path: str) -> str:
        """The secret's value; `path` is the dotted key it was configured under, which names
        it in the error (the value itself never appears in one)."""
        if self.file:
            try:
                return Path(self.file).read_text().strip()
            except OSError as err:
                raise ConfigError(
                    f"{path}: file {self.file} cannot be read ({err.strerror})") from err
        if self.env:
            if self.env not in os.environ:
                raise ConfigError(f"{path}: environment variable {self.env} is not set")
            return os.environ[self.env]
        raise ConfigError(f"{path}: give either 'file' or 'env'")


def redacted(config: Any) -> dict[str, Any]:
    """The config as a dict safe to print or log (see streaming.redact for the rule)."""
    return redact_tree(dataclasses.asdict(config))
