"""Caches of decode answers keyed by text a producer wrote (MBean names, attributes,
timestamps): bounded in entries and in the key text they keep.

Why both: a fleet repeats the same names every scrape, so the decoders remember what each
name resolved to; but a producer chooses the names, and a cache bounded only by its
number of entries keeps whatever length they come in. 200,000 MBean names of 50 KB each
(quarantined as label_too_long, yet resolved once) would hold 10 GB in a read task's
worker for as long as it lives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

# A key text longer than this is resolved every time, never kept: Kafka's longest names
# (a 249-character topic in a partition's MBean) fit several times over.
CACHED_KEY_CHARS = 1024
# The key text one cache of resolved names keeps at most: a 40,000-partition fleet's
# per-partition MBean names, about 100 characters each, take a third of it.
ANSWER_KEY_CHARS = 64_000_000

Result = TypeVar("Result")


class AnswerCache(dict):
    """A dict that takes new entries while it holds fewer than `entries` keys and fewer
    than `chars` characters of key text, each key's parts at most CACHED_KEY_CHARS long.
    Entries are never evicted: what a fleet repeats is what it sends first and most."""

    def __init__(self, entries: int, chars: int) -> None:
        super().__init__()
        self.entries = entries
        self.chars = chars
        self.kept_chars = 0

    def put(self, key: tuple[str, ...], value: Any) -> None:
        if key in self:
            self[key] = value
            return
        size = sum(len(part) for part in key)
        if (len(self) < self.entries and self.kept_chars + size <= self.chars
                and all(len(part) <= CACHED_KEY_CHARS for part in key)):
            self.kept_chars += size
            self[key] = value


def cached_when_short(maxsize: int) -> Callable[[Callable[[str], Result]],
                                                Callable[[str], Result]]:
    """functools.lru_cache(maxsize) for a function of one text, applied only to texts of
    at most CACHED_KEY_CHARS characters; a longer one is computed and not kept."""

    def wrap(function: Callable[[str], Result]) -> Callable[[str], Result]:
        cached = functools.lru_cache(maxsize=maxsize)(function)

        @functools.wraps(function)
        def call(text: str) -> Result:
            return cached(text) if len(text) <= CACHED_KEY_CHARS else function(text)

        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return call

    return wrap
