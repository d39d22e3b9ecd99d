"""The few phrasing helpers the cause sentences and audit details share, so both read the
same way ("brokers 2 and 3", "1 partition", "4 partitions")."""

from __future__ import annotations

from collections.abc import Sequence


def and_list(items: Sequence[object]) -> str:
    """'2', '2 and 3', '1, 2 and 3'."""
    words = [str(i) for i in items]
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def counted(count: int, noun: str) -> str:
    """'1 partition', '4 partitions'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def brokers(ids: Sequence[object]) -> str:
    """'broker 2', 'brokers 2 and 3'."""
    return f"broker{'' if len(ids) == 1 else 's'} {and_list(ids)}"
