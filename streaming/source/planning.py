"""Range planning, on the driver: a batch's end offsets under the per-trigger cap, the
offset ranges from its start to its end, and the read tasks they are cut into. Plain
functions of offsets; the stream (streaming.source.stream) asks Kafka and calls them.

Read tasks are planned by records, not one per topic-partition as in Spark's source, for
the cost of a micro-batch on few cores: a small batch is one task (each task costs a
Python worker round trip and a consumer; three partitions on two cores ran in two waves),
a large one is cut into `maxTasks` equal shares, splitting big partitions, so every core
works to the end of the batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping

from streaming.source.errors import data_loss
from streaming.source.ranges import KafkaRange

# A task below this many records costs more in set-up than it saves in parallelism.
MIN_RECORDS_PER_TASK = 5_000

Offsets = Mapping[str, Mapping[str, int]]  # {"topic": {"0": 42}}, as in the checkpoint


def capped(start: Offsets, latest: dict[str, dict[str, int]], max_per_trigger: int
           ) -> dict[str, dict[str, int]]:
    """The batch's end: `latest`, or with more than `max_per_trigger` records behind it,
    the cap spread over the partitions in proportion to their backlog."""
    backlog = {}
    for topic, parts in latest.items():
        for p, end in parts.items():
            begin = start.get(topic, {}).get(p, 0)
            backlog[(topic, p)] = (begin, max(0, end - begin))
    total = sum(b for _, b in backlog.values())
    if total <= max_per_trigger:
        return latest
    out: dict[str, dict[str, int]] = {}
    for (topic, p), (begin, size) in backlog.items():
        share = int(max_per_trigger * size / total)
        out.setdefault(topic, {})[p] = begin + min(size, max(share, 1 if size else 0))
    return out


def batch_ranges(start: Offsets, end: Offsets, from_log_start: Collection[str],
                 log_start: Callable[[str, int], int], fail_on_data_loss: bool
                 ) -> list[KafkaRange]:
    """The non-empty ranges from `start` to `end`, by topic and partition. A partition new
    since `start`, or of a topic in `from_log_start` (recreated), reads from its log start
    (`log_start(topic, partition)`); an end below its start is data loss."""
    ranges: list[KafkaRange] = []
    for topic, parts in end.items():
        for p, stop in parts.items():
            begin = start.get(topic, {}).get(p)
            if begin is None or topic in from_log_start:  # a new partition, or a new topic
                begin = log_start(topic, int(p))
            if stop < begin:
                data_loss(fail_on_data_loss,
                          f"{topic}-{p}: end offset {stop} is below the checkpointed {begin}; "
                          "the topic was recreated or the broker lost data")
                begin = min(stop, log_start(topic, int(p)))
            if stop > begin:
                ranges.append(KafkaRange(topic, int(p), begin, stop))
    ranges.sort(key=lambda r: (r.topic, r.partition))
    return ranges


def plan_tasks(ranges: list[KafkaRange], max_tasks: int,
               min_records: int = MIN_RECORDS_PER_TASK) -> list[list[KafkaRange]]:
    """Cut a batch's ranges into at most `max_tasks` shares of nearly equal record counts,
    none (but a lone one) under `min_records`; a range may be split across shares."""
    total = sum(r.size for r in ranges)
    if total == 0:
        return []
    tasks = max(1, min(max_tasks, total // max(min_records, 1)))
    share = math.ceil(total / tasks)
    planned: list[list[KafkaRange]] = []
    current: list[KafkaRange] = []
    room = share
    for whole in ranges:
        start = whole.start
        while start < whole.end:
            take = min(whole.end - start, room)
            current.append(KafkaRange(whole.topic, whole.partition, start, start + take))
            start += take
            room -= take
            if room == 0:
                planned.append(current)
                current, room = [], share
    if current:
        planned.append(current)
    return planned
