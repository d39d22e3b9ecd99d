"""How a configuration problem is said: the key's dotted path, what is wrong, how to fix it."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration problem, phrased as key + what is wrong + how to fix it."""


class Problems(ValueError):
    """What a section's check found, each as (key within the section, what is wrong and the
    fix); the loader prefixes the section's own dotted path. A check reports every problem
    it sees at once: an operator fixes one file edit, not one restart per typo."""

    def __init__(self, *problems: tuple[str, str]) -> None:
        super().__init__("; ".join(f"{key}: {text}" for key, text in problems))
        self.problems = problems
