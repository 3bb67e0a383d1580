# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Full ping-pong runs between a krping server and a krping client."""

import errno
import os
import select
import socket
import struct
import subprocess
import sys
import time

import pytest

from lib import krping
from lib.krping import run_pair, ping_stats

SIZES = [1, 64, 4096, 65536, 1048576]


def count_for(size):
    # Keep big buffers short: TCG moves a few tens of MB/s.
    return 10 if size <= 65536 else 3


def check_run(srv, cli, count, size, sstate, cstate):
    assert (sstate, cstate) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    assert srv.error == 0 and cli.error == 0
    assert krping.uses_test_device(srv), srv.describe()
    assert krping.uses_test_device(cli), cli.describe()
    assert cli.stats() == ping_stats("client", count, size), cli.describe()
    assert srv.stats() == ping_stats("server", count, size), srv.describe()
    assert srv.get("start") == "0" and cli.get("start") == "0"


def ping_pair(pool, count, size, **kw):
    srv, cli = pool.pair(count=count, size=size, validate=1, **kw)
    sstate, cstate = run_pair(srv, cli)
    check_run(srv, cli, count, size, sstate, cstate)
    return srv, cli


@pytest.mark.either
@pytest.mark.parametrize("mem_mode", ["reg", "dma"])
@pytest.mark.parametrize("size", SIZES)
def test_ping(pool, size, mem_mode):
    ping_pair(pool, count_for(size), size, mem_mode=mem_mode)


@pytest.mark.either
@pytest.mark.parametrize("size", [64, 65536])
def test_ping_server_inv(pool, size):
    ping_pair(pool, count_for(size), size, server_inv=1)


@pytest.mark.either
@pytest.mark.parametrize("mem_mode", ["reg", "dma"])
@pytest.mark.parametrize("size", [64, 65536])
def test_ping_local_dma_lkey(pool, size, mem_mode):
    ping_pair(pool, count_for(size), size, local_dma_lkey=1,
              mem_mode=mem_mode)


@pytest.mark.either
@pytest.mark.parametrize("extra", [
    dict(poll=1),
    dict(verbose=1),
    dict(txdepth=4),
    dict(txdepth=16384),
    dict(tos=32),
    dict(server_inv=1, local_dma_lkey=1, poll=1),
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_ping_variants(pool, extra):
    ping_pair(pool, 10, 64, **extra)


@pytest.mark.either
@pytest.mark.parametrize("size", [64, 65536])
def test_ping_read_inv(pool, size):
    """read_inv=1: the server's READ of the client's buffer invalidates the
    client's key (IB_WR_RDMA_READ_WITH_INV). iWARP (siw) has it: the run
    completes with exact counters. RoCE (rxe) does not: the client refuses
    at setup with -EOPNOTSUPP before it connects, so the server is still
    listening (and stops cleanly)."""
    if krping.IWARP:
        ping_pair(pool, count_for(size), size, read_inv=1)
        return
    srv, cli = pool.pair(count=3, size=size, validate=1, read_inv=1)
    srv.start()
    srv.expect_state("listening")
    cli.start()
    assert cli.wait_end() == "failed", cli.describe()
    assert cli.error == -errno.EOPNOTSUPP, cli.describe()
    assert cli.stats() == dict.fromkeys(krping.STATS, 0)
    assert srv.state == "listening", srv.describe()
    srv.stop()
    assert srv.state == "stopped" and srv.error == 0, srv.describe()


@pytest.mark.either
def test_ping_without_validate(pool):
    srv, cli = pool.pair(count=5, size=128)
    check_run(srv, cli, 5, 128, *run_pair(srv, cli))


@pytest.mark.either
@pytest.mark.parametrize("mem_mode", ["reg", "dma"])
def test_ping_max_size(pool, mem_mode):
    """The largest size the ABI takes (4 MiB) runs where the device can
    register it. siw cannot: its page list holds 256 pages and it takes
    only 4 KiB pages, so 1 MiB is its largest registration. The side that
    registers first (the client in reg mode, the server's iWARP READ sink
    in dma mode) then fails with -EMSGSIZE before any data moves, and the
    other side ends cleanly."""
    if not krping.IWARP:
        ping_pair(pool, 1, 4194304, mem_mode=mem_mode)
        return
    srv, cli = pool.pair(count=1, size=4194304, validate=1,
                         mem_mode=mem_mode)
    srv.start()
    srv.expect_state("listening")
    cli.start()
    assert cli.wait_end() == "failed", cli.describe()
    if srv.state == "listening":
        srv.stop()
    sstate = srv.wait_end(krping.SHORT_TIMEOUT)
    assert -errno.EMSGSIZE in (srv.error, cli.error), \
        srv.describe() + " | " + cli.describe()
    assert sstate in ("stopped", "failed"), srv.describe()
    assert cli.stats()["iterations"] == 0 and srv.stats()["iterations"] == 0


def test_server_listens_on_any_address(pool):
    port = krping.next_port()
    srv = pool.session("s", role="server", addr="0.0.0.0", port=port,
                       count=5, validate=1)
    cli = pool.session("c", role="client", addr=krping.CLIENT_ADDR,
                       port=port, count=5, validate=1)
    check_run(srv, cli, 5, 64, *run_pair(srv, cli))


PROBES = 20
RESET = struct.pack("ii", 1, 0)         # SO_LINGER on, 0 s: close sends RST


def client_after_probes(srv, cli):
    """Once the probes' closes have reached the provider, the server
    still listens, and a client of count=5 size=64 runs to the end with
    it; then the server's session goes."""
    time.sleep(0.5)
    assert srv.state == "listening", srv.describe()
    cli.start()
    check_run(srv, cli, 5, 64, srv.wait_end(), cli.wait_end())
    srv.remove()


def test_server_survives_a_port_probe(pool):
    """TCP connections to a listening server's port that close at once
    (a port scan; every other one resets) leave it listening: each
    probe is taken or refused as the first, a client that comes after
    them runs to the end, and the server's session ends and goes
    cleanly. On iWARP the port is the server's own TCP listener, which
    takes the probes; without scripts/testbed/patches/0004-*.patch siw
    took a probe's close for its listener's: the port refused the next
    probes and the listener's endpoint was freed (KASAN at rmdir:
    use-after-free in siw_destroy_listen), and without 0005 each probe
    leaked its endpoint (kmemleak on the debug kernel); 0005's first
    version freed the endpoint of a probe whose FIN was queued when siw
    accepted it twice (KASAN in siw_cm_work_handler, caught by the
    debug kernel's log check). On RoCE nothing listens on TCP there and
    every probe is refused."""
    srv, cli = pool.pair(count=5, size=64, validate=1)
    srv.start()
    srv.expect_state("listening")
    taken = 0
    port = int(srv.get("port"))
    before = set(krping.ephemeral_sockets_to(port))
    for i in range(PROBES):
        try:
            with krping.tcp_socket() as s:
                s.settimeout(5)
                s.connect((krping.SERVER_ADDR, port))
                if i % 2:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
                taken += 1
        except ConnectionRefusedError:
            pass
    assert taken == (PROBES if krping.IWARP else 0)
    assert set(krping.ephemeral_sockets_to(port)) - before == set()
    client_after_probes(srv, cli)


BURST = 24


def open_burst(addr, n, timeout):
    """Open n TCP connections to addr back to back and wait up to
    timeout seconds for each to connect or fail; returns the sockets and
    how many connected. The connects are issued at SCHED_FIFO on CPU 0
    while a SCHED_FIFO spinner holds every other CPU, so that no work
    queue runs until the last connect is out: the loopback handshakes
    complete in the connects' own softirqs, and the listener sees the
    burst before its CM work has taken any of it."""
    cpus = os.sched_getaffinity(0)
    others = cpus - {min(cpus)}
    spin = subprocess.Popen([sys.executable, "-c", SPINNER, str(len(others))],
                            stdout=subprocess.PIPE) if others else None
    socks, pending, connected = [], set(), 0
    try:
        if spin:
            assert spin.stdout.readline() == b"spinning\n"
        os.sched_setaffinity(0, {min(cpus)})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(40))
        try:
            for _ in range(n):
                s = krping.tcp_socket()
                s.setblocking(False)
                assert s.connect_ex(addr) in (0, errno.EINPROGRESS)
                socks.append(s)
                pending.add(s)
        finally:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            os.sched_setaffinity(0, cpus)
    finally:
        if spin:
            spin.kill()
            spin.wait()
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        _, ready, _ = select.select([], list(pending), [], 0.5)
        for s in ready:
            pending.discard(s)
            connected += s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
    assert not pending, f"{len(pending)} of {n} connects still pending"
    return socks, connected


# One SCHED_FIFO thread per CPU but the first, each spinning on its CPU
# (a second) until killed: what a host whose CPUs are all busy looks like
# to a work queue.
SPINNER = """
import os, sys, threading, time
cpus = sorted(os.sched_getaffinity(0))[1:1 + int(sys.argv[1])]
ready = threading.Barrier(len(cpus) + 1)
def spin(cpu):
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(40))
    ready.wait()
    end = time.monotonic() + 1
    while time.monotonic() < end:
        pass
for cpu in cpus:
    threading.Thread(target=spin, args=(cpu,), daemon=True).start()
ready.wait()
print("spinning", flush=True)
time.sleep(2)
"""


def test_server_survives_a_burst_of_connections(pool):
    """Three times the listener's backlog (8) of TCP connections opened
    at once to a server's port, while no work queue can run, and then
    closed (every other one resets) leave it listening, and a client
    that comes after them runs to the end. siw gave its listener one
    accept work item per backlog slot, but the accept queue holds
    backlog + 1 connections and the work being handled keeps its item:
    in such a burst a connection found none and was not accepted until
    a later one's work took it, so the client behind the burst waited
    in the queue and the server never saw it (the server still
    listening after 180 s; scripts/testbed/patches/0006-*). The
    connects beyond the queue are answered with SYN cookies or retried
    by TCP, so all of them connect on iWARP; on RoCE every one is
    refused."""
    srv, cli = pool.pair(count=5, size=64, validate=1)
    srv.start()
    srv.expect_state("listening")
    port = int(srv.get("port"))
    before = set(krping.ephemeral_sockets_to(port))
    socks, connected = open_burst((krping.SERVER_ADDR, port), BURST, 30)
    for i, s in enumerate(socks):
        if i % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
        s.close()
    assert connected == (BURST if krping.IWARP else 0)
    assert set(krping.ephemeral_sockets_to(port)) - before == set()
    client_after_probes(srv, cli)


def test_server_count_zero_runs_the_clients_count(pool):
    """A server with count=0 runs the count its krping client announced
    in its hello, and both end done."""
    srv, cli = pool.pair(count=7, size=64, validate=1, server=dict(count=0))
    sstate, cstate = run_pair(srv, cli)
    check_run(srv, cli, 7, 64, sstate, cstate)


def test_states_and_kthread_during_run(pool):
    """start reads 1 and the kthread krping/<name> exists while a session
    runs; both go away when it ends."""
    srv, cli = pool.pair(count=0, size=64, validate=1)
    srv.start()
    srv.expect_state("listening")
    assert srv.get("start") == "1"
    assert len(krping.kthread_pids(srv.name)) == 1
    cli.start()
    cli.expect_state("running")
    srv.expect_state("running")
    assert cli.get("start") == "1"
    assert len(krping.kthread_pids(cli.name)) == 1
    assert srv.device in krping.RDMA_DEVICES
    assert cli.device in krping.RDMA_DEVICES
    krping.wait_for(lambda: cli.stat("iterations") >= 3,
                    what="3 iterations on the client")
    cli.stop()
    assert cli.state == "stopped"
    assert cli.error == 0
    assert cli.get("start") == "0"
    # a count=0 server ends done when the client goes away between
    # iterations, failed (negative errno) when in the middle of one
    end = srv.wait_end()
    assert end in ("done", "failed"), srv.describe()
    if end == "failed":
        assert srv.error < 0, srv.describe()
    else:
        assert srv.error == 0, srv.describe()
    for s in (srv, cli):
        krping.wait_for(lambda: not krping.kthread_pids(s.name),
                        timeout=10, what=f"kthread of {s.name} gone")
    # the counters are consistent with the iterations they report
    assert cli.stat("iterations") >= 3
    for s, role in ((cli, "client"), (srv, "server")):
        problems = krping.partial_ping_problems(role, s.stats(), 64)
        assert not problems, f"{s.describe()}: {problems}"


@pytest.mark.either
def test_two_concurrent_pairs(pool):
    pairs = [(pool.pair(count=10, size=size, validate=1), size)
             for size in (64, 4096)]
    for (srv, _), _ in pairs:
        srv.start()
    for (srv, _), _ in pairs:
        srv.expect_state("listening")
    for (_, cli), _ in pairs:
        cli.start()
    for (srv, cli), size in pairs:
        cstate = cli.wait_end()
        sstate = srv.wait_end()
        check_run(srv, cli, 10, size, sstate, cstate)


def test_four_clients_one_port_each(pool):
    """Four pairs started at once, all running at the same time."""
    pairs = [pool.pair(count=0, size=256, validate=1) for _ in range(4)]
    krping.start_pairs(pairs)
    for srv, cli in pairs:
        cli.expect_state("running")
    for srv, cli in pairs:
        krping.wait_for(lambda: cli.stat("iterations") >= 2,
                        what=f"{cli.name} iterating")
    # all four are still running together
    assert all(c.state == "running" for _, c in pairs)
    for srv, cli in pairs:
        cli.stop()
        assert cli.state == "stopped"
        assert srv.wait_end() in ("done", "failed")


def test_restart_finished_session_resets_counters(pool):
    srv, cli = ping_pair(pool, 5, 64)
    # Second run with other counts: counters restart from zero.
    srv.set("count", 3)
    cli.set("count", 3)
    srv.start()
    srv.expect_state("listening")
    assert srv.stats() == {name: 0 for name in krping.STATS}
    assert srv.error == 0
    cli.start()
    cstate = cli.wait_end()
    sstate = srv.wait_end()
    check_run(srv, cli, 3, 64, sstate, cstate)


def test_restart_failed_session(pool):
    """A client that failed (nobody listening) can be started again and
    then succeeds; error is reset."""
    srv, cli = pool.pair(count=4, size=64, validate=1)
    cli.start()
    assert cli.wait_end() == "failed"
    assert cli.error < 0
    sstate, cstate = run_pair(srv, cli)
    check_run(srv, cli, 4, 64, sstate, cstate)


def test_restart_stopped_server(pool):
    srv, cli = pool.pair(count=4, size=64, validate=1)
    srv.start()
    srv.expect_state("listening")
    srv.stop()
    assert srv.state == "stopped"
    check_run(srv, cli, 4, 64, *run_pair(srv, cli))


def test_client_to_second_device_address(pool):
    """Server on vb's address (10.9.0.2): the other device."""
    port = krping.next_port()
    srv = pool.session("s", role="server", addr=krping.CLIENT_ADDR,
                       port=port, count=5, validate=1)
    cli = pool.session("c", role="client", addr=krping.CLIENT_ADDR,
                       port=port, count=5, validate=1)
    check_run(srv, cli, 5, 64, *run_pair(srv, cli))


@pytest.mark.parametrize("verbose", [1, 0])
def test_verbose_logs_ping_data(pool, dyndbg, verbose):
    """verbose=1: the client logs each iteration's data ("rdma-ping-<n>: "
    first); verbose=0: it logs none."""
    log = krping.Kmsg()
    try:
        srv, cli = ping_pair(pool, 4, 100, verbose=verbose)
        lines = [l for l in log.read() if f"{cli.name}: " in l
                 and "rdma-ping-" in l]
    finally:
        log.close()
    if verbose:
        for i in range(4):
            assert any(f"rdma-ping-{i}: " in l for l in lines), \
                f"iteration {i} not logged: {lines}"
    else:
        assert lines == []


def test_verbose_escapes_what_is_not_printable(pool):
    """The peer writes what verbose logs: a 16-byte ping ends in a NUL
    within the logged prefix, which must appear escaped (\\0), as any
    byte that is not printable would. /dev/kmsg itself shows the
    backslash as \\x5c."""
    log = krping.Kmsg()
    try:
        srv, cli = ping_pair(pool, 1, 16, verbose=1)
        lines = [l for l in log.read() if f"{cli.name}: ping data: " in l]
    finally:
        log.close()
    assert lines and lines[0].endswith("rdma-ping-0: AB\\x5c0"), lines


@pytest.mark.parametrize("test", ["ping", "wlat"])
def test_reg_mode_advertises_no_kernel_address(pool, dyndbg, test):
    """mem_mode=reg: the address a side advertises with its rkey is an
    offset in the registered pages, not the buffer's kernel address (a
    peer must not learn where the kernel keeps its memory)."""
    if not dyndbg:
        pytest.skip("no dynamic debug: the advertisement is a pr_debug")
    log = krping.Kmsg()
    try:
        if test == "ping":
            srv, cli = ping_pair(pool, 2, 4096, mem_mode="reg")
        else:
            srv, cli = pool.pair(test="wlat", count=4, size=4096,
                                 mem_mode="reg")
            assert run_pair(srv, cli) == ("done", "done"), cli.describe()
        lines = [l for l in log.read() if "advertises addr" in l]
    finally:
        log.close()
    # a ping's server advertises nothing: it reads and writes the
    # client's buffers
    for side in (srv, cli) if test != "ping" else (cli,):
        addrs = [int(l.split("advertises addr ")[1].split()[0], 16)
                 for l in lines if f": {side.name}: advertises addr " in l]
        assert addrs, f"{side.name} advertised nothing: {lines}"
        # at most the offset in a page of the largest size krping uses
        assert all(a < (1 << 30) for a in addrs), lines


@pytest.mark.parametrize("server_count", [5, 0])
def test_ping_server_disconnects_first(pool, dyndbg, server_count):
    """Two krping sides agree in their hello that the server disconnects
    once its last go-ahead has completed (so that it can never be flushed
    by the client's disconnect); a count=0 server takes the client's."""
    if not dyndbg:
        pytest.skip("no dynamic debug: the server's ending line is a "
                    "pr_debug")
    log = krping.Kmsg()
    try:
        srv, cli = ping_pair(pool, 5, 4096, server=dict(count=server_count))
        line = krping.ending_line(log, srv)
    finally:
        log.close()
    assert "krping client, count 5, the server disconnects first" in line


def test_ping_client_wants_more_than_the_server(pool):
    """Server count 3, client count 5: the server ends done after 3 and
    disconnects; the client learns it at once (not after the 30 s the
    server would wait for an rping client) and ends failed, -ECONNRESET."""
    srv, cli = pool.pair(count=3, size=64, validate=1,
                         client=dict(count=5))
    srv.start()
    srv.expect_state("listening")
    cli.start()
    cli.expect_state("running")
    t0 = time.monotonic()
    cstate = cli.wait_end()
    elapsed = time.monotonic() - t0
    sstate = srv.wait_end()
    assert sstate == "done" and srv.error == 0, srv.describe()
    # the client's fourth advertisement may have arrived before the end
    assert srv.stat("iterations") == 3, srv.describe()
    assert not krping.partial_ping_problems("server", srv.stats(), 64)
    assert cstate == "failed" and cli.error == -errno.ECONNRESET, \
        cli.describe()
    assert cli.stat("iterations") == 3, cli.describe()
    assert not krping.partial_ping_problems("client", cli.stats(), 64)
    # 3 iterations, then the 1 s the client grants a peer's last work
    assert elapsed < 20, f"the client took {elapsed:.1f} s to learn it"


def test_ping_client_wants_fewer_than_the_server(pool):
    """Server count 5, client count 3: the client ends done after 3 and
    disconnects first; the server, short of its count, ends failed."""
    srv, cli = pool.pair(count=5, size=64, validate=1,
                         client=dict(count=3))
    sstate, cstate = run_pair(srv, cli)
    assert cstate == "done" and cli.error == 0, cli.describe()
    assert cli.stats() == ping_stats("client", 3, 64), cli.describe()
    assert sstate == "failed" and srv.error == -errno.ECONNRESET, \
        srv.describe()
    assert srv.stats() == ping_stats("server", 3, 64), srv.describe()
