# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""perftest, unmodified, on ropcie0: both sides in user space on one
host, their QPs connected through rdma_cm (-R: ropcie is an iWARP
device), every byte through ropcie's loopback. Each of the five tools
the RoPCIe thesis measured with must end with exit 0 on both sides and
the client's exact iteration count (lib/perftest.py, which also says
which of perftest's own races a run is repeated for). Figures are not
checked: make bench measures. A perftest killed mid-run leaves nothing
behind, and rdma link delete under a waiting perftest server ends in
bounded time.

Needs ropcie.ko loaded and perftest installed.
"""

import json
import os
import signal
import subprocess
import time

import pytest

from lib import krping, ropcie
from lib.perftest import Host, refused, run_checked, tap_note
from lib.ropcie import ADDR, ensure_setup, teardown_setup

PROGRAMS = ("ib_send_lat", "ib_send_bw", "ib_write_lat", "ib_write_bw",
            "ib_read_lat")
# On 6.1 and the newest kernel, READs stand for the five (stock_only,
# conftest.py): the rest post the same work requests through the same
# paths, and user SENDs and WRITEs run on every kernel in
# test_ropcie_uverbs.py's rping tests. The debug kernel runs none of this
# file (scripts/testbed/check.sh, DEBUG_SIW_SKIP).
REPRESENTATIVES = ("ib_read_lat",)
SIZE = 4096
ITERS = 200


@pytest.fixture(scope="module", autouse=True)
def ropcie_env():
    ropcie.require_loaded()
    missing = [p for p in PROGRAMS if not os.access(f"/usr/bin/{p}", os.X_OK)]
    if missing:
        ropcie.missing(f"{' '.join(missing)} not installed (package perftest)")
    ensure_setup()
    yield
    teardown_setup()


@pytest.mark.parametrize("prog", [
    p if p in REPRESENTATIVES else pytest.param(p, marks=krping.STOCK_ONLY)
    for p in PROGRAMS])
def test_perftest_on_ropcie(started, prog, capsys):
    ensure_setup()
    host = Host(ADDR)
    assert host.device() == ropcie.ROPCIE_DEV and host.rdma_cm
    run_checked(prog, host, host, SIZE, ITERS, started, "ropcie0 loopback",
                say=tap_note(capsys))


def listening_server(prog, extra, started):
    """prog's server on ropcie0, listening: (its Host, its process, the
    arguments a client of it takes before the address, its port)."""
    ensure_setup()
    host = Host(ADDR)
    port = krping.next_port()
    args = f"-d {ropcie.ROPCIE_DEV} -R -p {port} {extra} -F"
    srv = host.popen(f"{prog} {args}")
    started.append(srv)
    krping.wait_for(lambda: host.listening(port), interval=0.2,
                    what=f"{prog} listening on port {port}")
    return host, srv, args, port


def perftest_pid(shell):
    """The pid of the perftest that Host.popen()'s shell runs (the
    shell leads a session of its own; timeout(1) puts perftest in a
    process group of its own inside it)."""
    cp = subprocess.run(["pgrep", "-s", str(shell.pid), "^ib_"],
                        capture_output=True, text=True)
    pids = [int(p) for p in cp.stdout.split()]
    return pids[0] if len(pids) == 1 else None


@krping.STOCK_ONLY
def test_ib_write_bw_killed_mid_run_releases_everything(started, capsys):
    """SIGKILL to ib_write_bw's client while it streams 64 KiB WRITEs:
    its QP, CQs, MRs (the pages ib_umem pinned) and PD leave restrack
    within SHORT_TIMEOUT, its server ends within SHORT_TIMEOUT, and the
    next pair on ropcie0 runs every iteration."""
    say = tap_note(capsys)
    host, srv, args, _ = listening_server("ib_write_bw", "-s 65536 -D 60",
                                          started)
    cli = host.popen(f"ib_write_bw {args} {ADDR}")
    started.append(cli)
    pid = krping.wait_for(lambda: perftest_pid(cli), interval=0.2,
                          what="ib_write_bw's client process")
    # Streaming: its QP is in restrack and its MR registered (perftest
    # registers before it connects, and the test runs 60 s).
    krping.wait_for(lambda: ropcie.user_resources("qp", pid),
                    interval=0.2, what="the client's QP")
    time.sleep(2.0)
    assert cli.poll() is None, krping.finish(cli, 1)[1][-600:]
    assert ropcie.user_resources("mr", pid), "the client registered no MR"
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    krping.wait_for(lambda: not ropcie.holds_resources(pid),
                    what="the killed client's QP, CQ, MR and PD released")
    say(f"the killed client's resources were released in "
        f"{time.monotonic() - t0:.2f} s")
    rc, out = krping.finish(srv, krping.SHORT_TIMEOUT)
    assert rc not in (-signal.SIGKILL, 124), \
        f"ib_write_bw's server did not end without its client: {out[-600:]}"
    say(f"the server ended with exit {rc} in {time.monotonic() - t0:.2f} s")
    krping.finish(cli, krping.SHORT_TIMEOUT)
    run_checked("ib_write_bw", host, host, 4096, 100, started,
                "after the kill", say=say)


def listening_on(dev, port):
    """Does an rdma_cm id listen on port on the device dev?"""
    out = krping.run(["rdma", "-j", "resource", "show", "cm_id"]).stdout
    return any(e.get("ifname") == dev and e.get("state") == "LISTEN" and
               str(e.get("src-addr", "")).endswith(f":{port}")
               for e in json.loads(out or "[]"))


def test_link_delete_while_a_perftest_server_waits(started, capsys):
    """rdma link delete ropcie0 while ib_send_bw's server waits for its
    client (it holds a context of ropcie0 and listens on the wildcard
    address): the delete returns within SHORT_TIMEOUT, the server goes
    on listening (rdma_cm keeps a wildcard listener when one device
    goes), and once ropcie0 is back a client that reaches it finds the
    server's context taken: both end with an error within
    SHORT_TIMEOUT, and a new pair then runs every iteration."""
    say = tap_note(capsys)
    host, srv, args, port = listening_server("ib_send_bw", "", started)
    t0 = time.monotonic()
    cp = ropcie.sh("rdma", "link", "delete", ropcie.ROPCIE_DEV, check=False)
    say(f"rdma link delete took {time.monotonic() - t0:.2f} s")
    assert cp.returncode == 0, cp.stderr
    assert not ropcie.link_exists()
    time.sleep(1.0)
    assert srv.poll() is None, krping.finish(srv, 1)[1][-600:]
    ensure_setup()
    # rdma_cm listens for it on the new ropcie0 (a listener of its own
    # there, beside those on the other devices): the client reaches it.
    krping.wait_for(lambda: listening_on(ropcie.ROPCIE_DEV, port),
                    interval=0.2, what=f"the waiting server listening on "
                    f"the new {ropcie.ROPCIE_DEV}")
    cli = host.popen(f"ib_send_bw {args} {ADDR}")
    started.append(cli)
    t0 = time.monotonic()
    crc, cout = krping.finish(cli, krping.SHORT_TIMEOUT)
    src, sout = krping.finish(srv, krping.SHORT_TIMEOUT)
    say(f"client exit {crc}, server exit {src}, "
        f"{time.monotonic() - t0:.2f} s after the client began")
    # perftest's exit for an error it reports (a crash or a kill is not).
    assert src == 1, \
        f"ib_send_bw's server, its context taken: exit {src}: {sout[-600:]}"
    assert crc == 1, \
        f"ib_send_bw's client of that server: exit {crc}: {cout[-600:]}"
    assert not refused(cout), f"the client found no listener: {cout[-600:]}"
    run_checked("ib_send_bw", host, host, 4096, 100, started,
                "ropcie0 added again", say=say)
