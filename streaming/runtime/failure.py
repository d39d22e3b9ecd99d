"""A failed query's cause in one line, for the last line an operator reads.

A Python data source's or foreachBatch's exception reaches the driver as a JVM exception
whose text holds Spark's wrapper, the Python traceback and the query's plan: hundreds of
lines, where the project's own exception (e.g. "cannot read offsets from Kafka at ...") is
one line in the middle."""

from __future__ import annotations

import re

# "streaming.source.errors.KafkaUnavailableError: cannot read offsets ...": a class
# (capitalized) in one of the project's modules, at the start of a line
_OWN = re.compile(r"^(streaming(?:\.[a-z_]\w*)+\.([A-Z]\w*)): (.+)$", re.MULTILINE)
# "PermissionError: [Errno 1] Failed to open local file ...": the last line of a Python
# traceback for a built-in or library exception (a JVM class name carries its package)
_PYTHON = re.compile(r"^()([A-Z]\w*(?:Error|Exception)): (.+)$", re.MULTILINE)


def own_cause(text: str) -> str | None:
    """The last of the project's exceptions named in `text`, else the last Python
    exception's (a tables folder the job may not write, a library's error), as
    "Name: message"."""
    found = _OWN.findall(text) or _PYTHON.findall(text)
    if not found:
        return None
    _, name, message = found[-1]
    return f"{name}: {message.strip()}"
