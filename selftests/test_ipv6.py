# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Ping over IPv6 (rxe, or siw): a global (ULA) address and a link-local
one."""

import ipaddress
import json
from pathlib import Path

import pytest

from lib import krping
from lib.krping import run_pair, ping_stats

ULA_SERVER = "fd00:9::1"
ULA_CLIENT = "fd00:9::2"


def gids(dev):
    """The IPv6 GIDs of dev's port 1 (RoCE derives them from the netdev's
    addresses)."""
    gids = set()
    for p in Path(f"/sys/class/infiniband/{dev}/ports/1/gids").glob("*"):
        try:
            text = p.read_text().strip()
        except OSError:         # unused entries read EINVAL
            continue
        gids.add(ipaddress.IPv6Address(text))
    return gids


def wait_gid(addr):
    """Wait until the server's device has addr in its GID table. iWARP
    has no IP-based GIDs: rdma_cm resolves its addresses through the
    netdev, so there is nothing to wait for."""
    if krping.IWARP:
        return
    dev = krping.RDMA_DEVICES[0]
    want = ipaddress.IPv6Address(addr)
    krping.wait_for(lambda: want in gids(dev), timeout=15,
                    what=f"{addr} in {dev}'s GID table")


def ip(*args, check=True):
    return krping.run(["ip"] + list(args), check=check)


def link_local(ifname):
    cp = ip("-j", "-6", "addr", "show", "dev", ifname, "scope", "link")
    for link in json.loads(cp.stdout or "[]"):
        for a in link.get("addr_info", []):
            if a.get("family") == "inet6" and not a.get("tentative"):
                return a["local"]
    return None


@pytest.fixture
def ula():
    """fd00:9::1/64 on va and fd00:9::2/64 on vb, no DAD; removed after."""
    if not Path("/proc/net/if_inet6").exists():
        pytest.skip("IPv6 disabled in this kernel")
    added = []
    try:
        for addr, dev in ((ULA_SERVER, krping.SERVER_IF),
                          (ULA_CLIENT, krping.CLIENT_IF)):
            ip("-6", "addr", "add", f"{addr}/64", "dev", dev, "nodad")
            added.append((addr, dev))
        # rxe learns IPv6 addresses into its GID table asynchronously
        wait_gid(ULA_SERVER)
        yield
    finally:
        for addr, dev in added:
            ip("-6", "addr", "del", f"{addr}/64", "dev", dev, check=False)


# The memory mode is no IPv6 matter: the debug kernel runs one.
@pytest.mark.parametrize("mem_mode", krping.representatives(
    ["reg", "dma"], key=lambda m: 0))
def test_ping_ipv6(pool, ula, mem_mode):
    srv, cli = pool.pair(count=10, size=4096, validate=1, mem_mode=mem_mode,
                         addr=ULA_SERVER)
    sstate, cstate = run_pair(srv, cli)
    assert (sstate, cstate) == ("done", "done"), \
        srv.describe() + " | " + cli.describe()
    assert cli.stats() == ping_stats("client", 10, 4096)
    assert srv.stats() == ping_stats("server", 10, 4096)
    assert srv.device in krping.RDMA_DEVICES
    assert cli.get("addr") == ULA_SERVER


def test_ping_ipv6_server_on_any(pool, ula):
    port = krping.next_port()
    srv = pool.session("s", role="server", addr="::", port=port, count=5,
                       validate=1)
    cli = pool.session("c", role="client", addr=ULA_CLIENT, port=port,
                       count=5, validate=1)
    assert run_pair(srv, cli) == ("done", "done"), \
        srv.describe() + " | " + cli.describe()
    assert cli.stat("iterations") == 5


def test_ping_ipv6_link_local(pool):
    """fe80::...%va: the scope names the interface."""
    ll = krping.wait_for(lambda: link_local(krping.SERVER_IF), timeout=15,
                         what="a link-local address on va")
    addr = f"{ll}%{krping.SERVER_IF}"
    wait_gid(ll)
    srv, cli = pool.pair(count=5, size=64, validate=1, addr=addr)
    assert cli.get("addr") == addr
    assert run_pair(srv, cli) == ("done", "done"), \
        srv.describe() + " | " + cli.describe()
    assert cli.stats() == ping_stats("client", 5, 64)
    assert srv.device == krping.RDMA_DEVICES[0], srv.describe()
