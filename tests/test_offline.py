"""Proof that the suite runs with no network: tests/run_all.sh cuts it and sets MTLIB_OFFLINE=1."""

import os
import socket

import pytest


@pytest.mark.skipif(
    os.environ.get("MTLIB_OFFLINE") != "1",
    reason="runs only inside tests/run_all.sh, which cuts the network (unshare -n) and sets "
    "MTLIB_OFFLINE=1; outside it the network is up, so there is nothing to prove",
)
def test_the_network_is_really_cut():
    with pytest.raises(OSError):
        socket.create_connection(("151.101.0.223", 443), timeout=3)  # a public address (PyPI's CDN)
    with socket.socket() as server:  # loopback still works: nbval's kernels need it
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        socket.create_connection(server.getsockname(), timeout=3).close()
