"""What every decoder shares: the observation a decoder yields and the error it raises.

Decoders stay small: they turn one parsed message into observations and say nothing
about identity, quarantine or Arrow; `streaming.decode.records` does that once for all.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class DecodeError(Exception):
    """The whole record is unusable; `reason` is a short machine-readable category."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(slots=True)
class Observation:
    """One value read from a message, before identity is resolved.

    `labels` holds everything the message said about the series, identity hints
    included (instance, cluster, ...); identity resolution takes those out.
    `ts` is epoch seconds or None when the message carried no time of its own.
    """

    ts: float | None
    metric: str | None
    attribute: str
    value: float
    kind: str
    labels: dict[str, str] = field(default_factory=dict)
    raw_name: str | None = None


@dataclass(slots=True)
class Rejected:
    """A single observation that broke a hard rule; the record gets one quarantine row."""

    reason: str
    detail: str
