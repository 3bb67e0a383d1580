# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Starting, stopping, refusing and removing sessions."""

import errno
import os
import threading
import time

import pytest

from lib import krping

# rmdir stops a running session; it must not take long.
RMDIR_MAX = 20.0

# A run whose peer goes away in the middle of it (stopped, removed) ends
# failed with ECONNRESET (Documentation/krping.rst, Troubleshooting), or
# on iWARP with what krping.PEER_LOST_IWARP_ERRNOS says.
PEER_GONE = (-errno.ECONNRESET,) + \
    tuple(-e for e in krping.PEER_LOST_IWARP_ERRNOS)


def listening_server(pool, **attrs):
    srv = pool.session("s", role="server", addr=krping.SERVER_ADDR,
                       port=krping.next_port(), **attrs)
    srv.start()
    srv.expect_state("listening")
    return srv


def running_pair(pool, **both):
    srv, cli = pool.pair(count=0, size=64, validate=1, **both)
    krping.start_running(srv, cli)
    return srv, cli


def assert_partial_stats(sess):
    role = sess.get("role")
    problems = krping.partial_ping_problems(role, sess.stats(),
                                            int(sess.get("size")))
    assert not problems, f"{sess.describe()}: {problems}"


def assert_peer_ended(peer, states=("done", "failed")):
    """The peer of a side that left ended as states allow: done (a server
    whose count=0 client left between iterations), or failed with
    PEER_GONE's errno (it left in the middle of one)."""
    end = peer.wait_end(krping.SHORT_TIMEOUT)
    assert end in states, peer.describe()
    if end == "failed":
        assert peer.error in PEER_GONE, peer.describe()
    else:
        assert peer.error == 0, peer.describe()
    assert peer.get("start") == "0"
    assert peer.stat("iterations") >= 1
    assert_partial_stats(peer)
    return end


# --- refusals at start ------------------------------------------------------

WHOLE_CONFIG_EINVAL = [
    ("no role", dict(addr="10.9.0.1")),
    ("no addr", dict(role="client")),
    ("no role no addr", dict()),
    ("role reset to none", dict(role="none", addr="10.9.0.1")),
    ("server_inv with dma", dict(role="client", addr="10.9.0.1",
                                 mem_mode="dma", server_inv=1)),
    ("read_inv with dma", dict(role="server", addr="10.9.0.1",
                               mem_mode="dma", read_inv=1)),
    ("duplex with ping", dict(role="client", addr="10.9.0.1", duplex=1)),
    ("duplex with wlat", dict(role="client", addr="10.9.0.1", duplex=1,
                              test="wlat")),
    ("link-local without scope", dict(role="client", addr="fe80::1")),
    ("duration_ms with ping", dict(role="client", addr="10.9.0.1",
                                   duration_ms=1000)),
    ("warmup with ping", dict(role="server", addr="10.9.0.1", warmup=5)),
    ("count + warmup past 32 bits", dict(role="client", addr="10.9.0.1",
                                         test="bw", count=2 ** 32 - 1,
                                         warmup=1)),
]


@pytest.mark.parametrize("why,attrs", WHOLE_CONFIG_EINVAL,
                         ids=[w for w, _ in WHOLE_CONFIG_EINVAL])
def test_start_refuses_bad_config(pool, why, attrs):
    s = pool.session("e", port=krping.next_port(), **attrs)
    before = s.config()
    assert krping.errname(s.try_start()) == "EINVAL", why
    assert s.state == "idle"
    assert s.get("start") == "0"
    assert s.config() == before
    assert krping.kthread_pids(s.name) == []


def test_start_refuses_unknown_scope_interface(pool):
    s = pool.session("e", role="client", addr="fe80::1%nosuchif0",
                     port=krping.next_port())
    assert krping.errname(s.try_start()) == "ENODEV"
    assert s.state == "idle"


def test_good_config_after_refusal_starts(pool):
    s = pool.session("e", addr=krping.SERVER_ADDR, port=krping.next_port())
    assert krping.errname(s.try_start()) == "EINVAL"
    s.set("role", "server")
    s.start()
    s.expect_state("listening")
    s.stop()
    assert s.state == "stopped"


# --- while running ------------------------------------------------------

def test_attributes_busy_while_running(pool):
    srv = listening_server(pool, count=5)
    before = srv.config()
    changes = dict(role="client", addr="10.9.0.2", port="1", count="0",
                   size="128", test="ping", mem_mode="dma", txdepth="32",
                   tos="4", peer_timeout_ms="100", duration_ms="50",
                   warmup="2", qps="2", validate="1", verbose="1", duplex="0", poll="1",
                   server_inv="1", local_dma_lkey="1", read_inv="0",
                   options="client,addr=10.9.0.2")
    for attr, value in changes.items():
        err = srv.try_set(attr, value)
        assert krping.errname(err) == "EBUSY", f"{attr}={value}"
        # also the current value itself, and bad values
        err = srv.try_set(attr, before.get(attr, "x") or "x")
        assert krping.errname(err) == "EBUSY", f"{attr} (same value)"
    assert srv.config() == before
    assert srv.state == "listening"
    srv.stop()
    assert srv.state == "stopped"
    # settable again once stopped
    srv.set("size", 128)
    assert srv.get("size") == "128"


def test_start_twice_is_busy(pool):
    srv = listening_server(pool)
    assert krping.errname(srv.try_set("start", "1")) == "EBUSY"
    assert srv.state == "listening"
    assert len(krping.kthread_pids(srv.name)) == 1
    srv.stop()
    assert srv.state == "stopped"


def test_start_twice_is_busy_while_connected(pool):
    srv, cli = running_pair(pool)
    assert krping.errname(cli.try_set("start", "1")) == "EBUSY"
    assert krping.errname(srv.try_set("start", "1")) == "EBUSY"
    assert krping.errname(cli.try_set("count", "1")) == "EBUSY"
    assert cli.state == "running" and srv.state == "running"
    cli.stop()
    assert cli.state == "stopped"
    assert_peer_ended(srv)


def test_server_without_client_stopped(pool):
    srv = listening_server(pool)
    assert srv.get("start") == "1"
    t0 = time.monotonic()
    srv.stop()                       # start=0 waits for the thread
    assert time.monotonic() - t0 < RMDIR_MAX
    assert srv.state == "stopped"
    assert srv.error == 0
    assert srv.get("start") == "0"
    assert srv.stats() == {name: 0 for name in krping.STATS}
    krping.wait_for(lambda: not krping.kthread_pids(srv.name), timeout=10,
                    what="kthread gone")
    # stop again: nothing happens
    srv.stop()
    assert srv.state == "stopped"


def test_stop_wakes_poll(pool):
    """A poll() waiter sees the change to stopped (sysfs_notify)."""
    srv = listening_server(pool)
    result = {}

    def waiter():
        w = krping.Session(srv.name, create=False)
        try:
            result["state"] = w.wait_state("stopped", krping.SHORT_TIMEOUT)
        except Exception as e:          # reported below
            result["error"] = e
        finally:
            w.close()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.5)                     # let it block in poll()
    srv.stop()
    t.join(krping.SHORT_TIMEOUT + 5)
    assert not t.is_alive()
    assert result.get("state") == "stopped", result


def test_stop_running_client_then_server(pool):
    srv, cli = running_pair(pool)
    cli.stop()
    assert cli.state == "stopped" and cli.error == 0
    assert_partial_stats(cli)
    assert_peer_ended(srv)


def test_stop_running_server(pool):
    srv, cli = running_pair(pool)
    srv.stop()
    assert srv.state == "stopped" and srv.error == 0
    assert_partial_stats(srv)
    # the client (count=0) lost its peer in the middle of the ping-pong
    assert_peer_ended(cli, ("failed",))


def test_client_connection_refused(pool):
    """Nobody listens on the port: failed, error -111 (ECONNREFUSED).

    Several clients at once: on a REJ, rdma_cm moves the client's QP to the
    error state before it delivers REJECTED, so the flushed receives can
    come first; the flush must not decide the error (a slow kernel once
    ended such a client ECONNRESET)."""
    clis = [pool.session("c", role="client", addr=krping.SERVER_ADDR,
                         port=krping.next_port(), count=3) for _ in range(8)]
    for cli in clis:
        cli.start()
    for cli in clis:
        assert cli.wait_end() == "failed", cli.describe()
        assert cli.error == -errno.ECONNREFUSED, cli.describe()
        assert cli.get("start") == "0"
        assert cli.stat("iterations") == 0


def test_a_state_read_after_start_leaves_the_end_to_the_wait(pool):
    """A read of state between start() and the wait must not take the
    change the wait sleeps for: a client refused twice ends its second
    run in the state of its first, and the wait must still see it."""
    cli = pool.session("c", role="client", addr=krping.SERVER_ADDR,
                       port=krping.next_port(), count=1)
    cli.start()
    assert cli.wait_end() == "failed", cli.describe()
    cli.start()
    # the run ended, seen through a file of our own
    krping.wait_for(lambda: krping.read_text(cli.sys / "state") == "failed",
                    what="the second run's end")
    assert cli.state == "failed"
    assert cli.wait_end(timeout=5) == "failed", cli.describe()
    assert cli.error == -errno.ECONNREFUSED


def test_client_refused_by_stopped_server(pool):
    """The port is free again once the server is stopped."""
    srv = listening_server(pool)
    srv.stop()
    cli = pool.session("c", role="client", addr=krping.SERVER_ADDR,
                       port=int(srv.get("port")), count=3)
    cli.start()
    assert cli.wait_end() == "failed", cli.describe()
    assert cli.error == -errno.ECONNREFUSED, cli.describe()


def test_client_to_unreachable_address_fails(pool):
    """An address no device can route to ends failed with a negative errno
    within a bounded time (no hang)."""
    cli = pool.session("c", role="client", addr="10.9.0.77",
                       port=krping.next_port(), count=3)
    cli.start()
    assert cli.wait_end(90) == "failed", cli.describe()
    # documented: the address did not resolve in time
    assert cli.error == -errno.ETIMEDOUT, cli.describe()


def test_two_servers_same_port(pool):
    """The second listener on a port fails with EADDRINUSE."""
    srv = listening_server(pool)
    dup = pool.session("s", role="server", addr=krping.SERVER_ADDR,
                       port=int(srv.get("port")))
    dup.start()
    assert dup.wait_end() == "failed", dup.describe()
    assert dup.error == -errno.EADDRINUSE, dup.describe()
    assert srv.state == "listening"


# --- rmdir ----------------------------------------------------------------

def test_rmdir_listening_server(pool):
    srv = listening_server(pool)
    name = srv.name
    took = srv.remove()
    assert took < RMDIR_MAX
    assert not srv.cfg.exists() and not srv.sys.exists()
    krping.wait_for(lambda: not krping.kthread_pids(name), timeout=10,
                    what="kthread gone")


def test_rmdir_running_client(pool):
    srv, cli = running_pair(pool)
    took = cli.remove()
    assert took < RMDIR_MAX
    assert not cli.sys.exists()
    assert_peer_ended(srv)


def test_rmdir_running_server(pool):
    srv, cli = running_pair(pool)
    took = srv.remove()
    assert took < RMDIR_MAX
    assert not srv.sys.exists()
    assert_peer_ended(cli, ("failed",))


def test_rmdir_both_running(pool):
    srv, cli = running_pair(pool)
    assert cli.remove() < RMDIR_MAX
    assert srv.remove() < RMDIR_MAX


def test_state_file_of_removed_session(pool):
    """A state file kept open across rmdir fails at once (ENODEV): waiting
    on a removed session cannot hang."""
    srv = listening_server(pool)
    w = krping.Session(srv.name, create=False)
    w._fd()
    assert srv.remove() < RMDIR_MAX
    t0 = time.monotonic()
    try:
        with pytest.raises(OSError) as exc:
            w.wait_state("done", krping.SHORT_TIMEOUT)
    finally:
        w.close()
    assert exc.value.errno == errno.ENODEV
    assert time.monotonic() - t0 < 5


def test_rmdir_client_in_connect(pool):
    """rmdir while a client is still trying an unreachable address."""
    cli = pool.session("c", role="client", addr="10.9.0.77",
                       port=krping.next_port(), count=3)
    cli.start()
    time.sleep(0.2)
    assert cli.remove() < RMDIR_MAX


@pytest.mark.parametrize("gone", ["client", "server"])
def test_peer_vanishes_mid_run(pool, gone):
    """One side goes away mid-run (count>0 on both): the other ends failed
    with ECONNRESET (PEER_GONE)."""
    srv, cli = pool.pair(count=100000, size=64, validate=1)
    srv.start()
    srv.expect_state("listening")
    cli.start()
    cli.expect_state("running")
    left, peer = (cli, srv) if gone == "client" else (srv, cli)
    krping.wait_for(lambda: peer.stat("iterations") >= 2,
                    what=f"2 {peer.get('role')} iterations")
    left.remove()
    end = peer.wait_end(krping.SHORT_TIMEOUT)
    assert end == "failed", peer.describe()
    assert peer.error in PEER_GONE, peer.describe()
    assert_partial_stats(peer)


def test_sigkill_stops_session(pool):
    srv = listening_server(pool)
    pids = krping.kthread_pids(srv.name)
    assert len(pids) == 1
    os.kill(pids[0], 9)
    assert srv.wait_end(krping.SHORT_TIMEOUT) == "stopped", srv.describe()
    assert srv.error == 0
    assert srv.get("start") == "0"
