"""Numbers written as text by an exporter, read as strictly as the exporters write them.

Why not float() or int() alone: Python also reads surrounding whitespace, underscores
between digits ("1_000") and digits of other scripts ("９９"), none of which Prometheus,
jmx_exporter or an OTLP exporter writes (Go's strconv.ParseFloat refuses them, and so does a
JSON number). A value written so is malformed, and must be quarantined as one rather than
accepted as a number the producer never meant.
"""

from __future__ import annotations


def _plain(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"not a text: {type(text).__name__}")
    if not text.isascii() or "_" in text or text != text.strip():
        raise ValueError(f"not a plain number: {text[:40]!r}")
    return text


def plain_float(text: str) -> float:
    """float(text), "NaN", "+Inf" and "Infinity" included, refusing what _plain refuses."""
    return float(_plain(text))


def plain_int(text: str) -> int:
    """int(text) in base 10, refusing what _plain refuses."""
    return int(_plain(text))
