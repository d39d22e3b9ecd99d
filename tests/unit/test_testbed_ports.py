"""The test bed's ports: chosen where no outgoing connection can take them, and a node
that cannot bind says so in the error itself."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from streaming.testbed.kafka import KafkaCluster, KafkaError, free_port


def test_free_ports_come_from_below_the_ephemeral_range_and_never_twice() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert max(ports) < low


def test_a_node_that_cannot_bind_its_port_says_why_in_the_error(tmp_path: Path) -> None:
    cluster = KafkaCluster(1, agents=False, directory=str(tmp_path), name="taken")
    try:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", cluster.nodes[0].port))
            squatter.listen()
            with pytest.raises(KafkaError, match="exited with code") as failed:
                cluster.start(timeout=90)
        assert "Address already in use" in str(failed.value)
    finally:
        cluster.stop()
