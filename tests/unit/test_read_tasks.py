"""How the Python source cuts a batch's offset ranges into read tasks."""

from __future__ import annotations

import pickle

import pytest

from streaming.config import IdentityConfig
from streaming.decode.records import DecodeContext
from streaming.source.kafka_python import KafkaRange, plan_tasks


def covered(tasks: list[list[KafkaRange]]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Per topic-partition, the offset intervals the tasks read, merged where they touch."""
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in sorted((r for task in tasks for r in task),
                    key=lambda r: (r.topic, r.partition, r.start)):
        spans = out.setdefault((r.topic, r.partition), [])
        if spans and spans[-1][1] == r.start:
            spans[-1] = (spans[-1][0], r.end)
        else:
            spans.append((r.start, r.end))
    return out


def test_a_small_batch_is_one_task_over_every_partition() -> None:
    ranges = [KafkaRange("m", p, 100, 3_100) for p in range(3)]  # 9k records
    tasks = plan_tasks(ranges, max_tasks=2, min_records=25_000)
    assert len(tasks) == 1
    assert covered(tasks) == {("m", p): [(100, 3_100)] for p in range(3)}


@pytest.mark.parametrize("sizes", [[500_000], [300_000, 100_000, 100_000], [7, 250_000, 1]])
def test_a_large_batch_is_split_evenly_and_read_exactly_once(sizes: list[int]) -> None:
    ranges = [KafkaRange("m", p, 1_000, 1_000 + size) for p, size in enumerate(sizes)]
    tasks = plan_tasks(ranges, max_tasks=2, min_records=25_000)
    assert len(tasks) == 2
    counts = [sum(r.size for r in task) for task in tasks]
    assert abs(counts[0] - counts[1]) <= 1
    assert covered(tasks) == {("m", p): [(1_000, 1_000 + size)] for p, size in enumerate(sizes)}
    assert all(r.size > 0 for task in tasks for r in task)


def test_no_task_falls_under_the_minimum_when_it_could_be_avoided() -> None:
    ranges = [KafkaRange("m", p, 0, 20_000) for p in range(3)]  # 60k records, 8 cores
    tasks = plan_tasks(ranges, max_tasks=8, min_records=25_000)
    assert [sum(r.size for r in task) for task in tasks] == [30_000, 30_000]


def test_nothing_to_read_plans_no_task() -> None:
    assert plan_tasks([], max_tasks=2) == []


def test_decode_context_survives_the_option_string() -> None:
    context = DecodeContext(topic_formats={"m": "jolokia"}, topic_clusters={"m": "east"},
                            identity=IdentityConfig(default_cluster="x",
                                                    instance_map={"h:1": "3"}),
                            max_skew_seconds=60.0, max_message_bytes=1024)
    back = DecodeContext.from_json(context.to_json())
    assert back == context
    assert pickle.loads(pickle.dumps(back)) == context
