# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""qps: one session runs several connections (each its own QP) at once.

Checks, for every test, that with qps=4 both sides end done with stats/
exactly qps times the counters of one connection, per_qp holding each
connection's own exact counters, latency/samples qps times those of one
connection and bandwidth/bytes qps times its bytes; that qps=1 runs as
before with one per_qp line; that the maximum (16) runs and 17 is
refused; that a peer of another qps is refused (the client fails with
ECONNREFUSED); that one connection's failure ends the others and the
session with its error; that a server whose client gives up its
request ends failed with the CM's verdict wherever the reject finds it;
that start=0 and rmdir in the middle of a qps=4 run end within the
bound of a single connection; that tools/krping's --qps runs them
and reports per_qp in JSON valid against its schema; and, on the debug
kernel (its handoff_delay_ms), that a group server whose runs never
get a thread and a server on a wildcard address given two requests at
once refuse the connections they cannot keep and leave no cm id.
"""

import errno
import json
import os
import struct
import time

import pytest

from lib import faults, krping
from lib.krping import (bench_stats, bench_latency_samples,
                        bench_reports_bandwidth, latency_problems,
                        bandwidth_problems, run_pair, session_latency,
                        session_bandwidth, session_per_qp)
from lib.ucma import Ucm
from test_bench import PEER_END, STOP_LIMIT, stop_mid_run
from test_cli import cli, common, valid, name, validator  # noqa: F401

COUNT = 10
QPS = 4
MAX_QPS = 16
SIZE = {"ping": 64, "wlat": 1024, "rlat": 1024, "bw": 4096, "fr": 65536,
        "slat": 1024, "sbw": 4096}


def check_side(s, test, role, count, size, qps, duplex=False):
    """Exact aggregate and per-QP figures of a side that ended done."""
    one = bench_stats(test, role, count, size, duplex)
    rows = session_per_qp(s)
    assert len(rows) == qps, f"{s.name} per_qp {rows}"
    for i, row in enumerate(rows):
        assert row == one, f"{s.name} qp {i}: {row} != {one}"
    st = s.stats()
    assert st == {k: qps * v for k, v in one.items()}, s.describe()
    lat = session_latency(s)
    samples = bench_latency_samples(test, role, count, duplex)
    assert lat["samples"] == qps * samples, f"{s.name} latency {lat}"
    assert latency_problems(lat) == [], f"{s.name} latency {lat}"
    bw = session_bandwidth(s)
    if bench_reports_bandwidth(test, role, duplex):
        assert bw["bytes"] == qps * count * size, f"{s.name} bandwidth {bw}"
        assert bw["duration_ns"] > 0, f"{s.name} bandwidth {bw}"
    else:
        assert bw == dict.fromkeys(krping.BANDWIDTH, 0), \
            f"{s.name} bandwidth {bw}"
    assert bandwidth_problems(bw, size) == [], f"{s.name} bandwidth {bw}"


def qps_pair(pool, test, qps=QPS, count=COUNT, **kw):
    size = SIZE[test]
    srv, cli = pool.pair(count=count, size=size, test=test, qps=qps, **kw)
    assert run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    assert srv.error == 0 and cli.error == 0
    assert krping.uses_test_device(cli), cli.describe()
    duplex = bool(kw.get("duplex"))
    check_side(cli, test, "client", count, size, qps, duplex)
    check_side(srv, test, "server", count, size, qps, duplex)
    return srv, cli


@pytest.mark.either
@pytest.mark.parametrize("test", ["ping", "wlat", "rlat", "bw", "fr", "slat",
                                  "sbw"])
def test_qps_exact(pool, test):
    """qps=4: every counter exactly 4 times one connection's, each
    connection's own in per_qp; ping validates its data."""
    extra = dict(validate=1) if test == "ping" else {}
    qps_pair(pool, test, **extra)


@pytest.mark.either
@pytest.mark.parametrize("test,extra", [
    ("bw", dict(duplex=1)),
    ("bw", dict(poll=1)),
    ("wlat", dict(poll=1)),
    ("sbw", dict(mem_mode="dma")),
], ids=lambda v: v if isinstance(v, str) else
    ",".join(f"{k}={x}" for k, x in v.items()))
def test_qps_variants(pool, test, extra):
    qps_pair(pool, test, **extra)


@pytest.mark.either
@pytest.mark.parametrize("test", ["wlat", "bw"])
def test_qps_server_follows_its_client(pool, test):
    """A group server without a count runs its client's, which each
    connection's hello carries: every connection of both sides ends done
    with exactly the client's count."""
    qps_pair(pool, test, server=dict(count=0))


@pytest.mark.either
def test_qps_plans_that_disagree_end_both_with_einval(pool):
    """A group whose client runs one iteration more than its server: every
    connection learns the other side's plan, and both sessions end
    failed with EINVAL, nothing run."""
    srv, cli = pool.pair(count=COUNT, size=SIZE["wlat"], test="wlat", qps=2,
                         client=dict(count=COUNT + 1))
    assert run_pair(srv, cli, timeout=krping.SHORT_TIMEOUT) == \
        ("failed", "failed"), f"{srv.describe()} | {cli.describe()}"
    assert (srv.error, cli.error) == (-errno.EINVAL, -errno.EINVAL), \
        f"{srv.describe()} | {cli.describe()}"
    for s in (srv, cli):
        assert s.stat("iterations") == 0, s.describe()


@pytest.mark.either
def test_qps_one_unchanged(pool):
    """qps=1 (the default): one per_qp line equal to stats/."""
    srv, cli = qps_pair(pool, "bw", qps=1)
    for s in (srv, cli):
        assert session_per_qp(s) == [s.stats()]
        assert "qps" not in s.get("options")


@pytest.mark.either
def test_qps_max(pool):
    """The maximum runs, with exact counters."""
    qps_pair(pool, "bw", qps=MAX_QPS, count=4)


@krping.STOCK_ONLY
def test_qps_range(pool):
    """The attribute's range through configfs and the option string (the
    parser's own cases run in KUnit)."""
    s = pool.session("q")
    assert s.get("qps") == "1"
    assert s.try_set("qps", str(MAX_QPS)) == 0
    assert s.get("qps") == str(MAX_QPS)
    assert f"qps={MAX_QPS}" in s.get("options")
    for bad in ("0", str(MAX_QPS + 1), "4294967295"):
        assert s.try_set("qps", bad) == errno.ERANGE, bad
        assert s.get("qps") == str(MAX_QPS)
    assert s.try_set("options", f"client,addr={krping.SERVER_ADDR},"
                     f"qps={MAX_QPS + 1}") == errno.ERANGE
    assert s.try_set("options", f"client,addr={krping.SERVER_ADDR},"
                     "bw,qps=3") == 0
    assert s.get("qps") == "3"
    assert s.get("options").rstrip("\n").endswith(",qps=3")


@pytest.mark.parametrize("server_qps,client_qps", [(4, 2), (1, 2), (2, 1)])
def test_qps_mismatch_refused(pool, server_qps, client_qps):
    """A client whose qps differs from the server's (its hello names its
    qps) is refused, as a connection the server cannot take; the client
    fails with ECONNREFUSED, the server keeps listening."""
    srv, cli = pool.pair(count=COUNT, size=64, test="bw",
                         server=dict(qps=server_qps),
                         client=dict(qps=client_qps))
    srv.start()
    srv.expect_state("listening")
    cli.start()
    assert cli.wait_end() == "failed", cli.describe()
    assert cli.error == -errno.ECONNREFUSED, cli.describe()
    assert srv.state in ("listening", "connecting"), srv.describe()
    srv.stop()
    assert srv.state == "stopped", srv.describe()


HELLO_MAGIC = 0x6b727067                # krping/run.h
FOREIGN_QPN = 0xfffff0                  # no QP of this host's


def hello(qps, index, count):
    """A krping hello (krping/run.h) announcing qps and the index of the
    connection among them, as a krping client's connection request does."""
    return struct.pack(">III", HELLO_MAGIC, qps << 8 | index << 16, count)


# The IB CM's own race, which no server can see: ib_cm takes each MAD
# in a work item on the per-CPU workqueue of the CPU that polled it, so
# a REJ polled on another CPU than its REQ can be handled first, and
# then no id is found for it and it is dropped. Traced on 6.12 (11 of
# 3100 requests, REQ and REJ always polled on different CPUs; the
# server's CM then resent its REP every 4.3 s): see Documentation/
# testing.rst, "A REJ that the CM drops".
CM_DROPS_REJ = ("ib_cm dropped the REJ: drivers/infiniband/core/cm.c, "
                "cm_recv_handler() queues each MAD on the ib_cm per-CPU "
                "workqueue of the CPU that polled it, and a REJ handled "
                "before cm_req_handler() has made its REQ's id findable "
                "(cm_match_req(), cm_finalize_id()) is found by no "
                "cm_acquire_rejected_id(): cm_rej_handler() returns "
                "-EINVAL")
# At most this many of a run's ten requests may meet that race: each
# one must show its signature (the REJ at the port, the REP resent), so
# a lost verdict of krping's own fails anyway, and the rest, at least
# six, keep the test asserting krping's end on the CM's verdict. At the
# measured rates (0.35 % on 6.12, 1.25 % on 6.1 beside a running check)
# five drops in ten never happen; two, allowed, come once in 20 checks.
CM_DROPS_ALLOWED = 4
CM_COUNTERS = ("cm_rx_msgs/req", "cm_rx_msgs/rej", "cm_rx_msgs/rep")


def cm_counters(dev):
    """The IB CM's message counters of port 1 of dev (ib_cm's sysfs)."""
    port = f"/sys/class/infiniband/{dev}/ports/1"
    return {c: int(krping.read_text(f"{port}/{c}")) for c in CM_COUNTERS}


@pytest.mark.skipif(krping.PROVIDER != "rxe",
                    reason="a connect without a QP of one's own is RoCE's: "
                    "iw_cm needs the caller's QP, ropcie refuses another's")
def test_qps_one_connection_fails(pool, capsys):
    """One of a session's connections fails, the others did not: a user
    of /dev/infiniband/rdma_cm takes a qps=2 server's connection 1
    first (its request carries a hello of qps 2, index 1), so that a
    krping client's connection 1 is refused while its connection 0 is
    taken. The client then ends failed with ECONNREFUSED within PEER_END
    of its start (its connections' setup included), its other run
    stopped with it. The server's run 0 fails when that peer leaves
    (ECONNRESET, or ECONNREFUSED for a connection the client gave up
    before it was established: the CM's reject) and stops run 1, which
    still waits for the user's connection; when the client gave up
    before its connection 0 reached the server (the port counted one
    REQ of it, connection 1's), run 0 waits for it like any server, and
    a stop ends the session within STOP_LIMIT. So it does when the REQ
    of connection 0 and its REJ both reached the port, but the CM
    dropped the REJ (CM_DROPS_REJ, said in a TAP comment;
    test_client_that_gives_up_ends_the_server_refused shows that krping
    takes every REJECTED the CM gives it). per_qp and stats/ agree on
    both sides, and nothing of them is left."""
    before = krping.rdma_resource_counts()
    dev = krping.local_rdma_device(krping.SERVER_ADDR)
    assert dev, f"no RDMA device holds {krping.SERVER_ADDR}"
    srv, cli = pool.pair(count=COUNT, size=SIZE["bw"], test="bw", qps=2)
    srv.start()
    srv.expect_state("listening")
    ucm = Ucm()
    events = []
    try:
        cid = ucm.create_id()
        ucm.resolve_addr(cid, krping.SERVER_ADDR, int(srv.get("port")))
        ucm.expect(cid, "ADDR_RESOLVED", events)
        ucm.resolve_route(cid)
        ucm.expect(cid, "ROUTE_RESOLVED", events)
        ucm.connect(cid, FOREIGN_QPN, hello(2, 1, COUNT))
        # the server's run 1 accepted it (its REP came back)
        ucm.expect(cid, "CONNECT_RESPONSE", events)
        cm0 = cm_counters(dev)
        t0 = time.monotonic()
        cli.start()
        assert cli.wait_end() == "failed", cli.describe()
        took = time.monotonic() - t0
        assert cli.error == -errno.ECONNREFUSED, cli.describe()
        # The server's run 0 fails if the client's connection 0 reached
        # it before the client gave up; if not, it still waits for it, as
        # any server waits for its client, and run 1 for the user's
        # connection (up to krping's connect timeout): a stop ends both.
        try:
            state = srv.wait_end(PEER_END)
        except krping.StateTimeout:
            state = None
        if state is None:
            cm = cm_counters(dev)
            grew = {c: cm[c] - cm0[c] for c in CM_COUNTERS}
            # Connection 1's REQ, and connection 0's if it came: then
            # its REJ came too (with connection 1's refusal, two), and
            # only the CM's drop of it leaves run 0 without a verdict.
            if grew["cm_rx_msgs/req"] >= 2:
                assert grew["cm_rx_msgs/rej"] >= 2, \
                    (grew, "connection 0 came, no REJ of it, no verdict",
                     srv.describe())
                with capsys.disabled():
                    print(f"# no verdict for connection 0 in "
                          f"{PEER_END:.0f} s, REQs {grew['cm_rx_msgs/req']}"
                          f" and REJs {grew['cm_rx_msgs/rej']} at {dev}: "
                          f"{CM_DROPS_REJ}")
            t1 = time.monotonic()
            srv.stop()
            stopped_in = time.monotonic() - t1
            assert srv.state == "stopped", srv.describe()
            assert stopped_in <= STOP_LIMIT, f"stop took {stopped_in:.2f} s"
        else:
            assert state == "failed", srv.describe()
            assert srv.error in (-errno.ECONNRESET, -errno.ECONNREFUSED), \
                srv.describe()
    finally:
        ucm.close()
    print(f"client failed {took:.2f} s after its start, server "
          f"{state or 'stopped'}; user's events {events}")
    assert took <= PEER_END, f"took {took:.2f} s"
    for s in (srv, cli):
        rows = session_per_qp(s)
        assert len(rows) == 2, f"{s.name} {rows}"
        assert s.stats() == {k: sum(r[k] for r in rows)
                             for k in krping.STATS}, s.describe()
    assert pool.cleanup() == []
    krping.wait_for(lambda: not krping.krping_leftovers(), timeout=10,
                    what="no krping sessions or kthreads")
    assert krping.rdma_resource_counts() == before


# How long the user below waits between its request and giving it up:
# from at once to after the server's REP, so that the REJ finds the
# server before its QP exists, while it accepts, and after it.
GIVE_UP_AFTER_S = (0, 0, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                   0.05)
@pytest.mark.skipif(krping.PROVIDER != "rxe",
                    reason="a connect without a QP of one's own is RoCE's: "
                    "iw_cm needs the caller's QP, ropcie refuses another's")
@pytest.mark.parametrize("qps", [1, 2])
def test_client_that_gives_up_ends_the_server_refused(pool, qps, capsys):
    """A client that gives up its connection request (a user of
    /dev/infiniband/rdma_cm destroying its id: the CM sends a REJ) ends
    the server's run failed with ECONNREFUSED (the CM's REJECTED) or
    ECONNRESET (its receives flushed first), wherever the REJ finds it:
    before it created its QP, while it accepts, after its REP. Never
    EINVAL, which the CM's moved-on state gives the QP's creation and
    the accept (seen on 6.1 under load, in a run of qps=2). A server of
    qps=2 then stops its other run. Nothing of either is left.

    A server that the CM has told nothing within PEER_END is taken only
    where the CM itself dropped the REJ (CM_DROPS_REJ): the REJ reached
    the port (its counter grew) and the server's CM went on resending
    its REP (a REJ it had taken would have stopped that). The run still
    waits in "connecting", a stop ends it within STOP_LIMIT, and the
    test says so in a TAP comment; more than CM_DROPS_ALLOWED of the
    ten requests fail the test."""
    before = krping.rdma_resource_counts()
    dev = krping.local_rdma_device(krping.SERVER_ADDR)
    assert dev, f"no RDMA device holds {krping.SERVER_ADDR}"
    ucm = Ucm()
    ends = []
    dropped = []
    try:
        for i, delay in enumerate(GIVE_UP_AFTER_S):
            srv = pool.session(f"g{i}", role="server",
                               addr=krping.SERVER_ADDR,
                               port=krping.next_port(), test="bw",
                               count=COUNT, size=64, qps=qps)
            srv.start()
            srv.expect_state("listening")
            cid = ucm.create_id()
            ucm.resolve_addr(cid, krping.SERVER_ADDR, int(srv.get("port")))
            ucm.expect(cid, "ADDR_RESOLVED", [])
            ucm.resolve_route(cid)
            ucm.expect(cid, "ROUTE_RESOLVED", [])
            cm0 = cm_counters(dev)
            ucm.connect(cid, FOREIGN_QPN, hello(qps, 0, COUNT))
            time.sleep(delay)
            ucm.destroy_id(cid)
            try:
                state = srv.wait_end(PEER_END)
            except krping.StateTimeout:
                state = None
            if state is None:
                cm = cm_counters(dev)
                grew = {c: cm[c] - cm0[c] for c in CM_COUNTERS}
                assert srv.state == "connecting", (delay, srv.describe())
                # The REJ came, and the server's REP was resent: the CM
                # never took the REJ, and krping was told nothing.
                assert grew["cm_rx_msgs/rej"] >= 1 and \
                    grew["cm_rx_msgs/rep"] >= 2, \
                    (delay, grew, "no verdict, yet the CM took the REJ",
                     srv.describe())
                t1 = time.monotonic()
                srv.stop()
                stopped_in = time.monotonic() - t1
                ends.append((delay, "stopped", round(stopped_in, 2)))
                dropped.append((delay, grew))
                assert srv.state == "stopped", (delay, srv.describe())
                assert stopped_in <= STOP_LIMIT, (delay, stopped_in)
                continue
            ends.append((delay, state, srv.error))
            assert state == "failed", (delay, srv.describe())
            assert srv.error in (-errno.ECONNREFUSED, -errno.ECONNRESET), \
                (delay, srv.describe())
    finally:
        ucm.close()
        print("server ends (give-up delay s, state, error):", ends)
    if dropped:
        with capsys.disabled():
            for delay, grew in dropped:
                print(f"# qps={qps}, request given up after {delay} s: "
                      f"no verdict in {PEER_END:.0f} s, "
                      f"REJs {grew['cm_rx_msgs/rej']} and "
                      f"REPs {grew['cm_rx_msgs/rep']} at {dev}: "
                      f"{CM_DROPS_REJ}")
    assert len(dropped) <= CM_DROPS_ALLOWED, \
        f"{len(dropped)} of {len(GIVE_UP_AFTER_S)} requests lost: {ends}"
    assert pool.cleanup() == []
    krping.wait_for(lambda: not krping.krping_leftovers(), timeout=10,
                    what="no krping sessions or kthreads")
    assert krping.rdma_resource_counts() == before


def did_work(st):
    """Has a client connection done benchmark work beyond its setup?"""
    return any(st[k] for k in ("iterations", "write_msgs", "read_msgs")) or \
        st["send_msgs"] > 1


def start_running(srv, cli, qps):
    srv.start()
    srv.expect_state("listening")
    cli.start()
    cli.expect_state("running")
    srv.expect_state("running")
    # every connection is well inside its loop (bw and sbw count their
    # iterations only at the end)
    krping.wait_for(lambda: all(did_work(r) for r in session_per_qp(cli)),
                    what=f"{cli.name}'s {qps} connections at work")
    time.sleep(0.3)


@pytest.mark.parametrize("test,side,how", [
    ("bw", "client", "stop"),
    ("bw", "server", "rmdir"),
    ("wlat", "client", "rmdir"),
    ("rlat", "server", "stop"),
    ("sbw", "client", "stop"),
])
def test_qps_stop_mid_run(pool, test, side, how):
    """start=0 or rmdir of a qps=4 session in the middle of its runs
    returns within the bound of one connection; the peer ends too."""
    srv, cli = pool.pair(count=0, size=SIZE[test], test=test, poll=1,
                         qps=QPS)
    start_running(srv, cli, QPS)
    sides = stop_mid_run(srv, cli, side, how)
    peer = sides[0]
    if how == "stop":
        assert sides[1].error == 0, sides[1].describe()
    for s in sides:
        rows = session_per_qp(s)
        assert len(rows) == QPS, f"{s.name} {rows}"
        st = s.stats()
        assert st == {k: sum(r[k] for r in rows) for k in krping.STATS}, \
            f"{s.name}: {st} vs {rows}"
        assert latency_problems(session_latency(s)) == []
        assert bandwidth_problems(session_bandwidth(s), SIZE[test]) == []
    took = peer.remove()
    assert took <= STOP_LIMIT, f"rmdir of the peer took {took:.2f}s"


@krping.STOCK_ONLY
def test_cli_qps_warmup_is_not_in_the_figures(name, validator):
    """A bw row's #iterations counts one QP's measured operations: with
    --warmup and --qps 2 it is the count, as perftest's."""
    cp = cli("pair", *common(count=COUNT), "--test", "bw", "--size", 4096,
             "--qps", 2, "--warmup", 5, "--json", "--name", name, check=0)
    doc = json.loads(cp.stdout)
    valid(validator, doc)
    run = doc["results"][0]
    assert run["ok"], cp.stderr
    side = run["sides"]["client"]
    assert side["stats"]["iterations"] == 2 * (COUNT + 5), side
    assert side["figures"]["iterations"] == COUNT, side


@krping.STOCK_ONLY
def test_cli_qps(name, validator):
    """krping pair --qps 4: the table's figures are the sums, per_qp in
    the JSON (valid against the schema) and after the table."""
    cp = cli("pair", *common(count=COUNT), "--test", "bw", "--size", 4096,
             "--qps", QPS, "--json", "--both", "--name", name, check=0)
    doc = json.loads(cp.stdout)
    valid(validator, doc)
    run = doc["results"][0]
    assert run["ok"], cp.stderr
    for role, side in run["sides"].items():
        assert side["state"] == "done", side
        one = bench_stats("bw", role, COUNT, 4096)
        assert [{k: r[k] for k in krping.STATS} for r in side["per_qp"]] == \
            [one] * QPS, side
        assert [r["qp"] for r in side["per_qp"]] == list(range(QPS))
        assert side["stats"] == {k: QPS * v for k, v in one.items()}, side
    cli_side = run["sides"]["client"]
    assert cli_side["bandwidth"]["bytes"] == QPS * COUNT * 4096, cli_side
    assert cli_side["qps"] == QPS, cli_side
    # perftest's #iterations: one QP's measured operations
    assert cli_side["figures"]["iterations"] == COUNT, cli_side
    cp = cli("pair", *common(count=COUNT), "--test", "bw", "--size", 4096,
             "--qps", QPS, "--name", name + "t", check=0)
    assert cp.returncode == 0, cp.stderr
    assert "per QP, 4096 bytes, client" in cp.stdout, cp.stdout
    assert cp.stdout.count(f"iterations {COUNT}") == QPS, cp.stdout


# The debug kernel's knob that widens the windows where a server hands a
# connection request to a run (krping_handoff_delay(); kernels built
# without CONFIG_FAULT_INJECTION have none).
HANDOFF_DELAY = "/sys/module/rdma_krping/parameters/handoff_delay_ms"


@pytest.fixture
def handoff_delay():
    """Set the hand-off delay (ms); back to 0 at the end."""
    if not os.path.exists(HANDOFF_DELAY):
        why = "no handoff_delay_ms (a kernel without CONFIG_FAULT_INJECTION)"
        # The test bed's debug kernel has it: missing there is a failure.
        if krping.SLOW:
            pytest.fail(why, pytrace=False)
        pytest.skip(why)

    def set_delay(ms):
        krping.write_text(HANDOFF_DELAY, str(ms))
    yield set_delay
    set_delay(0)


def cm_ids_at_least(n):
    return krping.rdma_resource_counts()["cm_id"] >= n


# How long a group server waits between listening and starting its
# runs' threads under the knob: long enough for a client's requests to
# arrive and for the test to arm failslab meanwhile, on the debug kernel
# (the only one with the knob) of a host twice as slow as usual, where
# they took more than 4 s.
GROUP_HANDOFF_MS = 8000
# Frames of failslab's stack filter that reach krping_run() from the
# allocation in kthread_create() (the allocator's own, then
# __kthread_create_on_node() and kthread_create_on_node()).
THREAD_CREATE_DEPTH = 12


def test_qps_server_whose_runs_get_no_thread(pool, handoff_delay):
    """A group server whose runs' threads never start gives back the
    connections it handed to them: its listener hands both of a qps=2
    client's requests to runs 0 and 1 while the session's thread still
    waits before starting their threads (the knob), then the allocation
    of the first thread's creation fails (failslab), so neither run has
    a thread. The server ends failed with ENOMEM, the client fails with
    ECONNREFUSED (the server refused what it had taken) within PEER_END,
    and no cm id, QP or other resource of either is left. A connection
    kept by a run that was freed under it would be a cm id left behind,
    and its next event a use after free (KASAN)."""
    why = faults.unavailable()
    if why:
        pytest.skip(why)
    try:
        inj = faults.Injector()
    except faults.CountUnknown as e:
        pytest.skip(str(e))
    before = krping.rdma_resource_counts()
    srv, cli = pool.pair(count=COUNT, size=SIZE["bw"], test="bw", qps=2)
    handoff_delay(GROUP_HANDOFF_MS)
    armed = fired = False
    try:
        inj.setup(faults.module_text(krping.MODULE), THREAD_CREATE_DEPTH)
        t0 = time.monotonic()
        srv.start()
        srv.expect_state("listening")
        cli.start()
        # the listener, the client's two ids and the two the server took
        krping.wait_for(lambda: cm_ids_at_least(before["cm_id"] + 5),
                        timeout=GROUP_HANDOFF_MS / 1000,
                        what="the client's requests at the server")
        inj.arm(1)
        armed = True
        took = time.monotonic() - t0
        assert took < GROUP_HANDOFF_MS / 1000, \
            f"armed {took:.2f} s after the start, after the runs started"
        send = srv.wait_end(krping.SHORT_TIMEOUT)
        fired = inj.fired()
    finally:
        if armed and not fired and not inj.fired():
            inj.lose_count()
        inj.teardown()
    assert fired, "no allocation of krping failed"
    assert send == "failed" and srv.error == -errno.ENOMEM, srv.describe()
    try:
        cend = cli.wait_end(PEER_END)
    except krping.StateTimeout:
        cend = None
        cli.stop()
    assert cend == "failed", \
        f"the client's connections were kept: {cli.describe()}"
    assert cli.error == -errno.ECONNREFUSED, cli.describe()
    assert pool.cleanup() == []
    krping.wait_for(lambda: not krping.krping_leftovers(), timeout=10,
                    what="no krping sessions or kthreads")
    krping.wait_for(lambda: krping.rdma_resource_counts() == before,
                    timeout=10, what=f"the RDMA resources of {before}")


# How long a single-run server's CM handler waits between seeing that it
# has no connection yet and taking the request (the knob).
SINGLE_HANDOFF_MS = 1000
TWO_REQUEST_ROUNDS = 3


@pytest.mark.skipif(krping.PROVIDER != "rxe",
                    reason="iw_cm hands every CM event over one ordered "
                    "workqueue, so two requests never race")
def test_server_on_any_address_takes_one_of_two_requests(pool, handoff_delay):
    """A server on the wildcard address takes one connection, however
    many requests come at once: rdma_cm listens on each device with an
    id of its own, and requests that reach two devices are handed over
    in parallel (on RoCE, ib_cm's work of the CPU that polled each). The
    knob holds each request between the server's check for a connection
    and its taking it, and two clients, one to each device's address,
    connect at once; in each round one client runs to the end with the
    server, the other fails with ECONNREFUSED within PEER_END, and
    nothing of them is left. A second request taken over the first
    would leave the first client waiting for an answer and its cm id at
    the server behind, whose next event finds the freed run."""
    before = krping.rdma_resource_counts()
    handoff_delay(SINGLE_HANDOFF_MS)
    for r in range(TWO_REQUEST_ROUNDS):
        port = krping.next_port()
        srv = pool.session("s", role="server", addr="0.0.0.0", port=port,
                           count=2, validate=1)
        clis = [pool.session("c", role="client", addr=a, port=port,
                             count=2, validate=1)
                for a in (krping.SERVER_ADDR, krping.CLIENT_ADDR)]
        srv.start()
        srv.expect_state("listening")
        for c in clis:
            c.start()
        ends = []
        for c in clis:
            try:
                ends.append(c.wait_end(SINGLE_HANDOFF_MS / 1000 + PEER_END))
            except krping.StateTimeout:
                ends.append(c.state)
        assert sorted(ends) == ["done", "failed"], \
            (r, [c.describe() for c in clis], srv.describe())
        loser = clis[ends.index("failed")]
        assert loser.error == -errno.ECONNREFUSED, (r, loser.describe())
        assert srv.wait_end(PEER_END) == "done", (r, srv.describe())
        assert pool.cleanup() == []
    krping.wait_for(lambda: not krping.krping_leftovers(), timeout=10,
                    what="no krping sessions or kthreads")
    krping.wait_for(lambda: krping.rdma_resource_counts() == before,
                    timeout=10, what=f"the RDMA resources of {before}")
