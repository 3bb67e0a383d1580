# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Load: many pairs at once, runs without end that are stopped, and
start/stop cycles of one pair.

The 64 pairs share one device (10.9.0.1, each pair on its own port) and
run at the same time; every run must end done with exact counters, and
after removing them krping must have given back what it took: no
session directory, no kthread, no RDMA resource, and unreclaimable slab
and available memory back where they were (meminfo with caches dropped
and empty slabs shrunk). On a kernel with kmemleak (the debug kernel)
the test bed's scan after the suite is the leak check: two scans of
their own took 60 to 130 s of this test there, and a leak they found
would be in that scan too, with its allocation's stack.

KRPING_SLOW=1 (debug kernel) keeps the 64 pairs but cuts the counts.
test_lifecycle.py covers stopping one count=0 pair (either side) and
test_session.py many idle sessions.
"""

import errno
import threading
import time

from lib import krping
from lib.krping import ping_stats

PAIRS = 64
COUNT = 10 if krping.SLOW else 100
SIZES = (64, 100, 512, 1000, 2048, 4096)
# Leak tolerance: growth of SUnreclaim / shrinkage of MemAvailable after
# a second round of the same load (the first one warms the caches). A
# leak of 8 KiB per session of the round (128 sessions) is over it.
TOLERANCE_KB = 1024


def start_pairs(pool, pairs, count, addr=krping.SERVER_ADDR):
    """Create pairs (size and mem_mode mixed), servers listening first,
    then all clients started back to back. Returns [(srv, cli, size)]."""
    runs = []
    for i in range(pairs):
        size = SIZES[i % len(SIZES)]
        mem_mode = ("reg", "dma")[(i // len(SIZES)) % 2]
        srv, cli = pool.pair(count=count, size=size, addr=addr, validate=1,
                             mem_mode=mem_mode)
        runs.append((srv, cli, size))
    for srv, _, _ in runs:
        srv.start()
    for srv, _, _ in runs:
        srv.expect_state("listening")
    for _, cli, _ in runs:
        cli.start()
    return runs


def check_all_done(runs, count):
    bad = []
    for srv, cli, size in runs:
        ends = (srv.wait_end(), cli.wait_end())
        if (ends != ("done", "done")
                or cli.stats() != ping_stats("client", count, size)
                or srv.stats() != ping_stats("server", count, size)
                or srv.error or cli.error
                or srv.device != cli.device
                or cli.device not in krping.RDMA_DEVICES):
            bad.append(f"{srv.describe()} | {cli.describe()}")
    assert not bad, f"{len(bad)} of {len(runs)} pairs wrong:\n" + \
        "\n".join(bad[:8])


def load_round(count):
    """One round: PAIRS pairs started together, all done, all removed,
    and nothing of krping left. Returns the seconds it took."""
    pool = krping.SessionPool()
    t0 = time.monotonic()
    try:
        runs = start_pairs(pool, PAIRS, count)
        check_all_done(runs, count)
    finally:
        problems = pool.cleanup()
    took = time.monotonic() - t0
    assert problems == []
    krping.wait_for(lambda: not krping.krping_leftovers(), timeout=10,
                    what="no krping sessions or kthreads")
    return took


def test_64_concurrent_pairs(capsys):
    """64 pairs at once on one device, then all removed, twice: every run
    done with exact counters; after the second round (the first warms
    the caches) memory is back within TOLERANCE_KB and no RDMA resource
    of krping is left. On a debug kernel (KRPING_SLOW=1, where KASAN's
    quarantine makes meminfo meaningless anyway) one round, and the test
    bed's kmemleak scan after the suite is the leak check."""
    assert krping.krping_leftovers() == []
    base = krping.rdma_resource_counts()
    first = load_round(COUNT)
    if krping.SLOW:
        assert krping.rdma_resource_counts() == base
        with capsys.disabled():
            print(f"# {PAIRS} pairs x {COUNT} iterations: {first:.1f}s")
    else:
        before = krping.memory_snapshot()
        second = load_round(COUNT)
        assert krping.rdma_resource_counts() == base
        growth = krping.assert_memory_returned(before, TOLERANCE_KB)
        with capsys.disabled():
            print(f"# {PAIRS} pairs x {COUNT} iterations: {first:.1f}s, "
                  f"then {second:.1f}s; memory growth {growth} kB")


# How the server of a ping whose client was stopped may fail. The
# client's stop disconnects before anything of the run is freed
# (krping_teardown(): rdma_disconnect() moves its QP to error and sends
# the DREQ, then the drain): on RoCE the server's work in flight gets no
# answer, and rxe resends it without limit (retry_count 7), until the
# DREQ's DISCONNECTED ends the run: ECONNRESET. ETIMEDOUT would be the
# keepalive's (peer_timeout_ms, 30 s): a disconnect that never came. On
# iWARP the disconnect is the end of the TCP stream, and siw fails work
# in flight on it before the stream's close reaches the CM: a READ
# response cut short (IB_WC_GENERAL_ERR), a SEND or WRITE the socket
# refused (IB_WC_LOC_QP_OP_ERR): EIO; a READ response it cannot send:
# QP_REQ_ERR, EREMOTEIO (krping.PEER_LOST_IWARP_ERRNOS).
STOPPED_PEER_ERRORS = (-errno.ECONNRESET,) + \
    tuple(-e for e in krping.PEER_LOST_IWARP_ERRNOS)


def test_count0_pairs_stopped_after_a_while(pool):
    """8 pairs with count=0 (run until stopped) really keep running (the
    counters still grow after a while), then all clients are stopped at
    once from threads: each ends stopped with error 0 and counters of a
    run cut anywhere; its server ends done (client gone between
    iterations) or failed with ECONNRESET (in the middle of one; on
    iWARP also EIO: STOPPED_PEER_ERRORS)."""
    runs = start_pairs(pool, 8, 0)
    for srv, cli, _ in runs:
        cli.expect_state("running")
    krping.wait_for(lambda: all(c.stat("iterations") >= 5 for _, c, _ in runs),
                    what="5 iterations on every client")
    mid = [c.stat("iterations") for _, c, _ in runs]
    time.sleep(1.0)
    later = [c.stat("iterations") for _, c, _ in runs]
    assert all(b > a for a, b in zip(mid, later)), (mid, later)
    assert all(s.state == "running" and c.state == "running"
               for s, c, _ in runs)

    took = {}

    def stop(cli):
        t0 = time.monotonic()
        cli.stop()
        took[cli.name] = time.monotonic() - t0

    threads = [threading.Thread(target=stop, args=(c,)) for _, c, _ in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(krping.SHORT_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "start=0 hung"
    for srv, cli, size in runs:
        assert cli.state == "stopped" and cli.error == 0, cli.describe()
        assert took[cli.name] < 20, f"{cli.name}: stop took {took[cli.name]}"
        assert cli.get("start") == "0"
        problems = krping.partial_ping_problems("client", cli.stats(), size)
        assert not problems, f"{cli.describe()}: {problems}"
        end = srv.wait_end(krping.SHORT_TIMEOUT)
        assert end in ("done", "failed"), srv.describe()
        if end == "failed":
            assert srv.error in STOPPED_PEER_ERRORS, srv.describe()
        else:
            assert srv.error == 0
        problems = krping.partial_ping_problems("server", srv.stats(), size)
        assert not problems, f"{srv.describe()}: {problems}"
        assert krping.kthread_pids(cli.name) == []


CYCLES = 5


def test_start_stop_start_cycles(pool):
    """One pair of sessions through CYCLES start/stop cycles, each stopped
    at another point (server listening alone, client running, server
    running, both running), each ending cleanly with counters that
    start from zero; then a last run with count=20 completes with exact
    counters. Never more than one kthread per session."""
    srv, cli = pool.pair(count=0, size=256, validate=1)

    def one_thread_at_most():
        assert len(krping.kthread_pids(srv.name)) <= 1
        assert len(krping.kthread_pids(cli.name)) <= 1

    for cycle in range(CYCLES):
        how = ("listening", "client", "server", "both", "client")[cycle]
        srv.start()
        srv.expect_state("listening")
        # start zeroed the last run's counters
        assert srv.stats() == {k: 0 for k in krping.STATS}, srv.describe()
        one_thread_at_most()
        if how == "listening":
            srv.stop()
            assert srv.state == "stopped" and srv.error == 0
            assert srv.stats() == {k: 0 for k in krping.STATS}
            continue
        cli.start()
        cli.expect_state("running")
        # counters were reset by start: the client starts from 0 again
        krping.wait_for(lambda: cli.stat("iterations") >= 3,
                        what=f"cycle {cycle}: 3 iterations")
        one_thread_at_most()
        if how == "client":
            cli.stop()
            assert cli.state == "stopped" and cli.error == 0
            assert srv.wait_end() in ("done", "failed"), srv.describe()
        elif how == "server":
            srv.stop()
            assert srv.state == "stopped" and srv.error == 0
            assert cli.wait_end() == "failed", cli.describe()
            assert cli.error < 0, cli.describe()
        else:
            cli.stop()
            srv.stop()
            assert cli.state == "stopped" and cli.error == 0
            assert srv.state in ("stopped", "done", "failed"), srv.describe()
        for s in (srv, cli):
            problems = krping.partial_ping_problems(s.get("role"), s.stats(),
                                                    256)
            assert not problems, f"cycle {cycle}: {s.describe()}: {problems}"
            assert s.get("start") == "0"
        krping.wait_for(lambda: not krping.kthread_pids(srv.name) and
                        not krping.kthread_pids(cli.name), timeout=10,
                        what=f"cycle {cycle}: kthreads gone")

    srv.set("count", 20)
    cli.set("count", 20)
    assert krping.run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    assert cli.stats() == ping_stats("client", 20, 256), cli.describe()
    assert srv.stats() == ping_stats("server", 20, 256), srv.describe()
