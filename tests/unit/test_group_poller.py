"""The consumer-group poller when the cluster does not answer: the poll is a failure
said as one, never an empty list of groups (which would read as a cluster without any)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from streaming.clients.group_poller import GroupPoller, GroupsRead
from streaming.clients.groups import GroupSettings
from streaming.testbed.kafka import free_port


def test_an_unreachable_cluster_is_a_failed_read_not_an_empty_one() -> None:
    reads: list[GroupsRead] = []
    config = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    poller = GroupPoller("watched", config, GroupSettings(), 30, 1, reads.append)
    read = poller.poll_once(AdminClient(config))
    assert not read.up and read.poll is None and read.statuses == ()
    assert "timed out" in (read.error or "").lower(), read.error
