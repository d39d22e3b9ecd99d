"""Plain-text output for a terminal or a picture: bounded, printable identity strings and aligned tables.

Cluster and broker names come from the data (record keys, labels), so any text can reach
a terminal: control characters could rewrite the screen and a megabyte name would bury
the answer. Everything a command prints from the data goes through ``shown``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

MAX_SHOWN = 80


def shown(value: object, limit: int = MAX_SHOWN) -> str:
    """``value`` as one printable line of at most ``limit`` characters: control and other
    unprintable characters escaped, a longer text cut with an ellipsis."""
    text = "-" if value is None else str(value)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                       for c in text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def drawn(value: object, limit: int = MAX_SHOWN) -> str:
    """``shown`` for text matplotlib draws (titles, legends, tick labels): its dollar signs
    escaped, so a name from the data is never parsed as mathtext (``$\\frac{$`` would stop
    the drawing) and prints as written."""
    return shown(value, limit).replace("$", r"\$")


def text_table(headers: Sequence[str], rows: Iterable[Sequence[str]],
               left: Iterable[str] = ()) -> str:
    """Fixed-width columns under ``headers`` and a rule; columns named in ``left`` are
    left-aligned (names), the others right-aligned (numbers)."""
    body = [list(row) for row in rows]
    on_left = set(left)
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if h in on_left else c.rjust(w)
                         for c, w, h in zip(cells, widths, headers, strict=True)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, body)])
