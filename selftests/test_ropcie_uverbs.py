# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""ropcie from user space: Debian's own libibverbs (its stock
libipathverbs provider, Documentation/ropcie.rst "User space") opens
ropcie0; rdma-core's rping runs against itself and against krping over
it; a pyverbs program (uverbs_peer.py) checks what a user may name, and
the device ends in bounded time under a process that holds it.
"""

import importlib.util
import os
import re
import signal
import subprocess
import time

import pytest

from lib import krping, ropcie, uverbs_peer
from lib.krping import ping_stats
from lib.ropcie import ADDR, ROPCIE_DEV, ensure_setup, teardown_setup
from lib.rping import RPING, Rping
from lib.uverbs_peer import WC_SUCCESS, WC_LOC_PROT_ERR, WC_WR_FLUSH_ERR

COUNT = 10
SIZES = [64, 4096, 65535]       # rping takes 23..65535
# The kernels but 6.12 run the size that spans pages; the others take
# the same kernel path (stock_only, conftest.py).
SIZES_ONE = krping.representatives(sorted(SIZES, reverse=True),
                                   key=lambda s: 0)
NOBODY = 65534
# ROPCIE_MAX_USER_QP (ropcie/ropcie.h): user QPs a device holds at most.
MAX_USER_QP = 128


@pytest.fixture(scope="module", autouse=True)
def ropcie_env():
    ropcie.require_loaded()
    for tool, package in ((RPING, "rdmacm-utils"),
                          ("/usr/bin/ibv_devinfo", "ibverbs-utils")):
        if not os.access(tool, os.X_OK):
            ropcie.missing(f"{tool} not installed (package {package})")
    # Found, not imported: only uverbs_peer.py loads libibverbs.
    if importlib.util.find_spec("pyverbs.cmid") is None:
        ropcie.missing("pyverbs not installed (package python3-pyverbs)")
    ensure_setup()
    yield
    teardown_setup()


@pytest.fixture(autouse=True)
def ropcie_ready(ropcie_env):
    # A test that deleted the device leaves it to us.
    ensure_setup()


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        if isinstance(p, Rping):
            p.close()
        elif p.poll() is None:
            p.kill()
            p.wait()


def peer(procs, *args, user=None):
    """Start uverbs_peer.py ARGS (as NOBODY when user is set)."""
    p = uverbs_peer.start(*args, user=user)
    procs.append(p)
    return p


peer_result = uverbs_peer.result
first_line = uverbs_peer.first_line


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def rping_args(role, port, size, count=COUNT):
    return [f"-{role}", "-a", ADDR, "-p", str(port), "-C", str(count),
            "-v", "-V", "-S", str(size)]


def ping_lines(output):
    """The pings rping -v printed (one per validated iteration)."""
    return len(re.findall(r"ping data: rdma-ping-\d+", output or ""))


def test_ibv_devinfo_opens_ropcie():
    """libibverbs binds ropcie0 to a provider without a warning and reads
    its port: iWARP, active."""
    cp = subprocess.run(["ibv_devinfo", "-d", ROPCIE_DEV], capture_output=True,
                        text=True, timeout=krping.SHORT_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == "", cp.stderr
    assert re.search(r"hca_id:\s+ropcie0", cp.stdout), cp.stdout
    assert re.search(r"transport:\s+iWARP", cp.stdout), cp.stdout
    assert re.search(r"state:\s+PORT_ACTIVE", cp.stdout), cp.stdout


@pytest.mark.parametrize("size", SIZES_ONE)
def test_rping_user_to_user(procs, size):
    """rping against rping over ropcie0: every ping validated, on both
    sides, exactly COUNT of them."""
    port = krping.next_port()
    srv = Rping(rping_args("s", port, size))
    procs.append(srv)
    srv.wait_listening(port)
    cli = Rping(rping_args("c", port, size))
    procs.append(cli)
    assert cli.wait_ok(), cli.describe()
    assert srv.wait_ok(), srv.describe()
    assert ping_lines(cli.output) == COUNT, cli.describe()
    assert ping_lines(srv.output) == COUNT, srv.describe()


@pytest.mark.parametrize("size", SIZES_ONE)
def test_rping_client_krping_server(procs, pool, size):
    """A user-space QP talks to a kernel QP: rping's client against a
    krping server over ropcie0."""
    port = krping.next_port()
    srv = pool.session("s", role="server", addr=ADDR, port=port,
                       count=COUNT, size=size)
    srv.start()
    srv.expect_state("listening")
    cli = Rping(rping_args("c", port, size))
    procs.append(cli)
    ok = cli.wait_ok()
    end = srv.wait_end()
    assert ok, cli.describe() + " | " + srv.describe()
    assert end == "done", srv.describe() + " | " + cli.describe()
    assert srv.device == ROPCIE_DEV, srv.describe()
    assert srv.stats() == ping_stats("server", COUNT, size), srv.describe()
    assert ping_lines(cli.output) == COUNT, cli.describe()


@pytest.mark.parametrize("size", SIZES_ONE)
def test_krping_client_rping_server(procs, pool, size):
    """And the reverse: krping's client against rping's server."""
    port = krping.next_port()
    srv = Rping(rping_args("s", port, size))
    procs.append(srv)
    srv.wait_listening(port)
    cli = pool.session("c", role="client", addr=ADDR, port=port,
                       count=COUNT, size=size, validate=1)
    cli.start()
    end = cli.wait_end()
    if end != "done":
        srv.close()
        pytest.fail(f"{cli.describe()} | {srv.describe()}")
    assert srv.wait_ok(), srv.describe()
    assert cli.device == ROPCIE_DEV, cli.describe()
    assert cli.stats() == ping_stats("client", COUNT, size), cli.describe()
    assert ping_lines(srv.output) == COUNT, srv.describe()


# Late, the same paths on every kernel as a SEND the worker runs
# (stock_only beyond 6.12, conftest.py).
@pytest.mark.parametrize("receives", [
    "posted", pytest.param("late", marks=krping.STOCK_ONLY)])
def test_user_qp_cannot_use_the_kernels_dma_lkey(procs, profiling, receives,
                                                 tmp_path):
    """A user's SEND from its own MR arrives; the same SGE with lkey 0
    (the kernel's local DMA lkey, any kernel address) completes with
    LOC_PROT_ERR and moves no byte: the QP goes to error, and the
    server's second receive is flushed.

    Each SEND runs in its poster's system call (ropcie_inline_ok()),
    unless it finds no receive posted (late: the server posts its
    receives only once the client's first SEND is posted): that one
    waits on the QP's worker until the receive comes."""
    port = krping.next_port()
    late = receives == "late"
    go = tmp_path / "post-receives"
    srv = peer(procs, "server", ADDR, port, *([go] if late else []))
    assert first_line(srv) == {"listening": True}
    cli = peer(procs, "client", ADDR, port)
    assert first_line(cli) == {"posted": "mr_lkey"}
    go.touch()
    cli = peer_result(cli)
    res = peer_result(srv)
    print(f"# client {cli} | server {res}")
    assert cli["mr_lkey"]["status"] == WC_SUCCESS, cli
    assert cli["dma_lkey"]["status"] == WC_LOC_PROT_ERR, cli
    assert res["first"]["status"] == WC_SUCCESS, res
    assert res["first"]["byte_len"] == 64 and res["data_ok"], res
    assert res["second"]["status"] == WC_WR_FLUSH_ERR, res
    # Each completion names its own QP (ropcie_uverbs_name_qp()).
    assert {cli[k]["qp_num"] for k in ("mr_lkey", "dma_lkey")} == \
        {cli["qpn"]}, cli
    assert {res[k]["qp_num"] for k in ("first", "second")} == \
        {res["qpn"]}, res
    stages, executed = ropcie.read_profile()
    assert stages["exec"]["count"] == 2, stages
    if late:
        # The second may find the worker still letting go of the SQ.
        assert executed["worker"] >= 1, executed
    else:
        assert executed == {"worker": 0, "inline": 2}, executed


# The same decision on every kernel (ropcie_may_connect()).
@krping.STOCK_ONLY
def test_user_qp_of_another_process_is_refused(procs):
    """A user's QP given to rdma_connect must be the caller's own: an
    unprivileged process that names a root process's QP (in INIT, so
    connectable) gets EACCES, and a number that is no QP gets EINVAL."""
    holder = peer(procs, "hold", ROPCIE_DEV)
    qpn = first_line(holder)["qpn"]
    port = krping.next_port()
    theirs = peer_result(peer(procs, "connect", ADDR, port, qpn,
                              user=as_nobody))
    nobody = peer_result(peer(procs, "connect", ADDR, port, 0xfffff0,
                              user=as_nobody))
    assert theirs == {"connect": "EACCES"}, theirs
    assert nobody == {"connect": "EINVAL"}, nobody


@pytest.fixture
def kernel_qp():
    """The number of a kernel QP in INIT on ropcie0, as a kernel consumer
    holds it between rdma_create_qp() and its own connect (ropcie_test.ko
    role=hold)."""
    ko = ropcie.module_file("ROPCIE_TEST_KO")
    subprocess.run(["rmmod", "ropcie_test"], capture_output=True)
    cp = subprocess.run(["insmod", ko, "role=hold", f"addr={ADDR}"],
                        capture_output=True, text=True,
                        timeout=krping.SHORT_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    try:
        with open("/sys/module/ropcie_test/parameters/results") as f:
            line = f.read().strip()
        m = re.fullmatch(r"ok hold: qpn (\d+)", line)
        assert m, line
        yield int(m.group(1))
    finally:
        cp = subprocess.run(["rmmod", "ropcie_test"], capture_output=True,
                            text=True, timeout=krping.SHORT_TIMEOUT)
        assert cp.returncode == 0, cp.stderr


# The same decision on every kernel (ropcie_may_connect()).
@krping.STOCK_ONLY
def test_kernel_qp_cannot_be_connected_by_a_user(procs, kernel_qp):
    """An unprivileged process that names a kernel consumer's QP (in INIT,
    before its owner's connect) in rdma_connect, with a listener ready to
    take the connection, gets EACCES: the QP answers only to the rdma_cm
    id it was made on."""
    port = krping.next_port()
    srv = peer(procs, "server", ADDR, port)
    assert first_line(srv) == {"listening": True}
    res = peer_result(peer(procs, "connect", ADDR, port, kernel_qp,
                           user=as_nobody))
    assert res == {"connect": "EACCES"}, res


# The same decision on every kernel (ropcie_may_connect()).
@krping.STOCK_ONLY
def test_kernel_qp_cannot_be_accepted_by_a_user(procs, kernel_qp):
    """The same through rdma_accept: an unprivileged listener that
    answers a request naming a kernel QP gets EACCES, and the connecting
    process is refused."""
    port = krping.next_port()
    acceptor = peer(procs, "accept", ADDR, port, kernel_qp, user=as_nobody)
    assert first_line(acceptor) == {"listening": True}
    connector = peer(procs, "connect", ADDR, port)
    res = peer_result(acceptor)
    refused = peer_result(connector)
    print(f"# acceptor {res} | connector {refused}")
    assert res == {"accept": "EACCES"}, res
    assert refused == {"connect": "ECONNREFUSED"}, refused


def test_destroyed_qp_leaves_no_completion(procs):
    """A QP destroyed with a flushed receive still in the CQ (its first
    one, polled before, proves the flush ran): the CQ no longer holds it
    (mlx4 and mlx5 clean their CQs of a destroyed QP too)."""
    res = peer_result(peer(procs, "destroy-poll", ROPCIE_DEV,
                           user=as_nobody))
    assert res == {"first": 7, "polled": 0, "wcs": []}, res


# Messages through queues one entry deep: each a chance for a post to
# race the completion that freed its entry.
STREAM = 1000


@krping.STOCK_ONLY
def test_completion_frees_its_queue_entry(procs):
    """A polled completion means its work request's entry is free: with
    SQ and RQ one entry deep, each side busy-polls and posts its next
    entry at once, STREAM times, and no post ever fails (ENOMEM told
    the poster that the entry of a completion it had already seen was
    still taken). Every message arrives in order, validated."""
    port = krping.next_port()
    srv = peer(procs, "stream-server", ADDR, port, STREAM)
    assert first_line(srv) == {"listening": True}
    cli = peer(procs, "stream-client", ADDR, port, STREAM)
    sent = peer_result(cli)
    got = peer_result(srv)
    assert sent == {"sent": STREAM, "failed_posts": {}, "bad": []}, sent
    assert got == {"received": STREAM, "failed_posts": {}, "bad": []}, got


def test_user_mr_honours_rlimit_memlock(procs):
    """An unprivileged process pins no more than RLIMIT_MEMLOCK."""
    import resource

    def limited():
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (1 << 20, 1 << 20))
        as_nobody()

    small = peer_result(peer(procs, "reg", ROPCIE_DEV, 64 << 10,
                             user=limited))
    big = peer_result(peer(procs, "reg", ROPCIE_DEV, 8 << 20, user=limited))
    assert small == {"reg": "ok"}, small
    assert big == {"reg": "ENOMEM"}, big


def test_reg_mr_fault_fails_one_registration(procs):
    """debugfs ropcie0/fail_reg_mr with times=1: a user's ibv_reg_mr gets
    ENOMEM once, the next one succeeds."""
    d = ropcie.fault_dir()
    ropcie.faults_off(d)
    try:
        ropcie.arm(d / "fail_reg_mr", times=1)
        first = peer_result(peer(procs, "reg", ROPCIE_DEV, 64 << 10))
        second = peer_result(peer(procs, "reg", ROPCIE_DEV, 64 << 10))
        assert ropcie.read(d / "fail_reg_mr" / "times") == "0"
    finally:
        ropcie.faults_off(d)
    assert (first, second) == ({"reg": "ENOMEM"}, {"reg": "ok"})


def kernel_ping_runs(pool):
    """A krping ping over ropcie0 runs to its end."""
    s, c = pool.pair(count=COUNT, size=4096, addr=ADDR, validate=1)
    s.start()
    s.expect_state("listening")
    c.start()
    assert c.wait_end() == "done", c.describe()
    assert s.wait_end() == "done", s.describe()


def released(p):
    """Tell a holding peer to go on; its result."""
    p.stdin.write("go\n")
    p.stdin.flush()
    return peer_result(p)


@krping.STOCK_ONLY
def test_user_qps_are_capped_per_device(procs, pool):
    """A device holds at most MAX_USER_QP user QPs, whichever processes
    ask: the first process gets MAX_USER_QP and then ENOSPC, a second
    one ENOSPC at once; kernel QPs are not counted (a krping ping runs
    meanwhile); once the first process ends, the second gets its QP."""
    first = peer(procs, "qps", ROPCIE_DEV, MAX_USER_QP + 1)
    assert first_line(first, timeout=krping.TIMEOUT) == \
        {"created": MAX_USER_QP, "error": "ENOSPC"}
    second = peer(procs, "qps", ROPCIE_DEV, 1, user=as_nobody)
    assert first_line(second) == {"created": 0, "error": "ENOSPC"}
    assert released(second) == {"held": 0}
    kernel_ping_runs(pool)
    assert released(first) == {"held": MAX_USER_QP}
    third = peer(procs, "qps", ROPCIE_DEV, 1, user=as_nobody)
    assert first_line(third) == {"created": 1, "error": None}
    assert released(third) == {"held": 1}


def test_killed_user_process_releases_everything(procs, pool):
    """rping's client killed mid-run: its QP, CQs, MRs (their pinned
    pages) and PD are gone within a bound, rping's server ends, and a
    krping ping over ropcie0 then runs."""
    port = krping.next_port()
    srv = Rping(["-s", "-a", ADDR, "-p", str(port), "-C", "0",
                 "-S", "65535"])
    procs.append(srv)
    srv.wait_listening(port)
    cli = Rping(["-c", "-a", ADDR, "-p", str(port), "-C", "0",
                 "-S", "65535"])
    procs.append(cli)
    pid = cli.proc.pid
    krping.wait_for(lambda: ropcie.user_resources("qp", pid),
                    timeout=krping.TIMEOUT, what="rping's client QP")
    time.sleep(1.0)
    assert cli.proc.poll() is None, cli.describe()
    mrs = ropcie.user_resources("mr", pid)
    assert mrs, "rping's client registered no MR"
    cli.proc.send_signal(signal.SIGKILL)
    cli.wait()
    krping.wait_for(lambda: not ropcie.holds_resources(pid),
                    timeout=krping.SHORT_TIMEOUT,
                    what="the killed client's resources released")
    srv.wait()
    kernel_ping_runs(pool)


def test_link_delete_while_a_process_holds_the_device(procs):
    """rdma link delete while a process holds a context, PD, CQ, QP and
    MR of ropcie0 returns within a bound (ib_core takes the objects from
    the process), and the process's next verb fails with EIO."""
    holder = peer(procs, "hold", ROPCIE_DEV)
    first_line(holder)
    t0 = time.monotonic()
    cp = subprocess.run(["rdma", "link", "delete", ROPCIE_DEV],
                        capture_output=True, text=True,
                        timeout=krping.SHORT_TIMEOUT)
    took = time.monotonic() - t0
    print(f"# rdma link delete took {took:.2f} s")
    assert cp.returncode == 0, cp.stderr
    assert not ropcie.link_exists()
    assert released(holder) == {"after": "EIO"}
