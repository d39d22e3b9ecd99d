"""A local session's driver JVM listens on the loopback only: its RPC and block manager
ports have no authentication by default, and no executor off this host to talk to."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp{,6}'s local address: 32-bit words in the host's (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    host_order = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(host_order)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def listening(pid: int) -> Iterator[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """The (address, port) each of the process's listening TCP sockets is bound to."""
    sockets = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            sockets.add(target[8:-1])
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in sockets:  # 0A: LISTEN
                    host, port = fields[1].split(":")
                    yield _address(host), int(port, 16)


def test_a_local_driver_listens_on_the_loopback_only(spark: Any) -> None:
    jvm = spark.sparkContext._gateway.proc.pid
    bound = list(listening(jvm))
    assert len(bound) >= 2, bound  # the RPC server and the block manager at least
    assert all(address.is_loopback for address, _ in bound), bound
