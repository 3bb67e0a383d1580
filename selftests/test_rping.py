# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Wire compatibility with rping from rdma-core, both directions."""

import os

import pytest

from lib import krping
from lib.rping import RPING, Rping
from lib.krping import ping_stats

SIZES = [64, 4096, 65535]      # rping takes 23..65535
# The debug kernel runs the odd size that spans pages; the others take
# the same kernel path (stock_only).
SIZES_DEBUG_ONE = krping.representatives(sorted(SIZES, reverse=True),
                                         key=lambda s: 0)
COUNT = 10


@pytest.fixture
def rping_ok():
    if not os.access(RPING, os.X_OK):
        pytest.skip(f"{RPING} not installed (package rdmacm-utils)")
    if not os.path.exists("/dev/infiniband/rdma_cm"):
        pytest.skip("/dev/infiniband/rdma_cm missing (rdma_ucm not loaded "
                    "or no devtmpfs)")
    if krping.cm_listeners() is None:
        pytest.skip("`rdma -j resource show cm_id` does not work here")


@pytest.fixture
def rpings():
    procs = []
    yield procs
    for p in procs:
        p.close()


def test_rping_with_rping(rping_ok, rpings):
    """Calibration: rping against itself on the bed, exit status 0."""
    port = krping.next_port()
    srv = Rping(["-s", "-a", krping.SERVER_ADDR, "-p", str(port), "-C",
                 str(COUNT), "-V", "-S", "64"])
    rpings.append(srv)
    srv.wait_listening(port)
    cli = Rping(["-c", "-a", krping.SERVER_ADDR, "-p", str(port), "-C",
                 str(COUNT), "-V", "-S", "64"])
    rpings.append(cli)
    assert cli.wait_ok(), cli.describe()
    assert srv.wait_ok(), srv.describe()


@pytest.mark.parametrize("mem_mode", ["reg", "dma"])
@pytest.mark.parametrize("size", SIZES_DEBUG_ONE)
def test_krping_client_rping_server(rping_ok, rpings, pool, size, mem_mode):
    port = krping.next_port()
    srv = Rping(["-s", "-a", krping.SERVER_ADDR, "-p", str(port), "-C",
                 str(COUNT), "-V", "-S", str(size)])
    rpings.append(srv)
    srv.wait_listening(port)
    cli = pool.session("c", role="client", addr=krping.SERVER_ADDR, port=port,
                       count=COUNT, size=size, validate=1, mem_mode=mem_mode)
    cli.start()
    end = cli.wait_end()
    if end != "done":
        # rping would wait for a client that has given up: say what
        # ended the client now, not rping's timeout later.
        srv.close()
        pytest.fail(f"{cli.describe()} | {srv.describe()}")
    ok = srv.wait_ok()
    assert cli.error == 0
    assert cli.device in krping.RDMA_DEVICES
    assert cli.stats() == ping_stats("client", COUNT, size), cli.describe()
    assert ok, srv.describe()


@pytest.mark.parametrize("server_count", [COUNT, 0], ids=["count=N", "count=0"])
@pytest.mark.parametrize("mem_mode", ["reg", "dma"])
@pytest.mark.parametrize("size", SIZES_DEBUG_ONE)
def test_rping_client_krping_server(rping_ok, rpings, pool, size, mem_mode,
                                    server_count):
    port = krping.next_port()
    srv = pool.session("s", role="server", addr=krping.SERVER_ADDR, port=port,
                       count=server_count, size=size, mem_mode=mem_mode)
    srv.start()
    srv.expect_state("listening")
    assert port in krping.cm_listeners(), "krping listener not visible"
    cli = Rping(["-c", "-a", krping.SERVER_ADDR, "-p", str(port), "-C",
                 str(COUNT), "-V", "-S", str(size)])
    rpings.append(cli)
    ok = cli.wait_ok()
    end = srv.wait_end()
    assert ok, cli.describe() + " | " + srv.describe()
    assert end == "done", srv.describe() + " | " + cli.describe()
    assert srv.error == 0
    assert srv.device in krping.RDMA_DEVICES
    assert srv.stats() == ping_stats("server", COUNT, size), srv.describe()


def test_rping_client_disconnects_first(rping_ok, rpings, pool, dyndbg):
    """rping sends no krping hello, so a krping server with a count lets
    rping disconnect first, as an rping server would, and ends done."""
    if not dyndbg:
        pytest.skip("no dynamic debug: the server's ending line is a "
                    "pr_debug")
    port = krping.next_port()
    srv = pool.session("s", role="server", addr=krping.SERVER_ADDR, port=port,
                       count=COUNT, size=64)
    log = krping.Kmsg()
    try:
        srv.start()
        srv.expect_state("listening")
        cli = Rping(["-c", "-a", krping.SERVER_ADDR, "-p", str(port), "-C",
                     str(COUNT), "-V", "-S", "64"])
        rpings.append(cli)
        ok = cli.wait_ok()
        end = srv.wait_end()
        line = krping.ending_line(log, srv)
    finally:
        log.close()
    assert ok and end == "done", srv.describe() + " | " + cli.describe()
    assert srv.stats() == ping_stats("server", COUNT, 64), srv.describe()
    assert f"foreign client, count {COUNT}, the client disconnects first" \
        in line
