"""The paced cycle collector: far fewer collections, cycles still reclaimed, applied once.

Each case runs in a fresh interpreter: the policy changes process-wide state."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PRELUDE = """
import gc
from streaming.common.gc_policy import pace_cycle_collector

def young_collections(containers):
    before = gc.get_stats()[0]["collections"]
    keep = [[] for _ in range(containers)]
    return gc.get_stats()[0]["collections"] - before, keep
"""


def run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                            capture_output=True, text=True, timeout=60, check=True)
    return result.stdout.strip()


def test_a_read_chunk_of_allocations_triggers_almost_no_collections() -> None:
    out = run("""
        default, _ = young_collections(50_000)
        pace_cycle_collector()
        paced, _ = young_collections(50_000)
        print(default, paced)
    """)
    default, paced = map(int, out.split())
    assert default >= 50  # one per 700 allocations by CPython's default
    assert paced <= 1


def test_cycles_made_after_pacing_are_still_reclaimed_without_an_explicit_collect() -> None:
    out = run("""
        import weakref
        pace_cycle_collector()
        class Node: pass
        a, b = Node(), Node()
        a.other, b.other = b, a
        probe = weakref.ref(a)
        del a, b
        young_collections(200_000)
        print(probe() is None)
    """)
    assert out == "True"


def test_pacing_twice_freezes_only_what_existed_the_first_time() -> None:
    out = run("""
        pace_cycle_collector()
        frozen = gc.get_freeze_count()
        later = [[] for _ in range(1000)]
        pace_cycle_collector()
        print(gc.get_freeze_count() == frozen)
    """)
    assert out == "True"
