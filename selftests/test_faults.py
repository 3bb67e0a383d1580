# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Faults under a live ping: the server's session, link or RDMA device
goes away in the middle of a run, or someone tries to unload the module.

The pair runs on the server address 10.9.0.2 (vb, rxe1 or siw1): rdma_cm
binds both ends of a connection to a local address to the device that
owns it, so a fault on that device hits the client too, and the test bed
is put back together after each fault (netdev up, device re-created if
needed, a fresh pair runs there) so later tests find it as it was.

What each test proves: the sessions end (failed, with an errno of a
small documented set: see krping/wait.c and krping/resources.c) within
FAULT_MAX seconds, their counters stay consistent, and afterwards
nothing of the run is left: no session directory, no krping kthread,
no QP, CQ, PD, MR or cm_id of krping in `rdma resource show`.

test_lifecycle.py already covers rmdir/stop of either side of a running
pair (test_peer_vanishes_mid_run, test_rmdir_running_server, ...) and
test_module.py rmmod refused while an idle or listening session exists.
"""

import errno
import json
import os
import subprocess
import time

import pytest

from lib import krping

# The fault hits the server's address, netdev and device.
ADDR = krping.CLIENT_ADDR
NETDEV = krping.CLIENT_IF
DEVICE = krping.RDMA_DEVICES[1]
OTHER_NETDEV = krping.SERVER_IF
OTHER_DEVICE = krping.RDMA_DEVICES[0]

FAULT_MAX = 90.0 if krping.SLOW else 30.0
STOP_MAX = 20.0

E = errno
# What krping/wait.c and krping/resources.c report when the peer or the
# device goes away:
# DISCONNECTED or a flushed completion -> ECONNRESET, DEVICE_REMOVAL ->
# ENODEV, the port going down -> ENETDOWN, a work completion error ->
# EIO / ETIMEDOUT (retries exceeded).
FAULT_ERRNOS = {
    "rmdir": {E.ECONNRESET, E.ETIMEDOUT, E.EIO},
    "link_down": {E.ENETDOWN, E.ECONNRESET, E.ETIMEDOUT, E.EIO},
    "link_delete": {E.ENODEV, E.ECONNRESET},
}
# iWARP: siw refuses a post to a QP that the peer's disconnect has put in
# CLOSING with ENOTCONN, and a ping that posts before the DISCONNECTED
# event arrives ends with that. A peer gone under a READ it answers
# raises QP_REQ_ERR (krping.PEER_LOST_IWARP_ERRNOS).
if krping.IWARP:
    for _errnos in FAULT_ERRNOS.values():
        _errnos.add(E.ENOTCONN)
    for _fault in ("rmdir", "link_down"):
        FAULT_ERRNOS[_fault].update(krping.PEER_LOST_IWARP_ERRNOS)


def sh(*cmd, check=True):
    return krping.run(list(cmd), check=check)


def device_exists(dev):
    return os.path.isdir(f"/sys/class/infiniband/{dev}")


def port_active(dev):
    try:
        with open(f"/sys/class/infiniband/{dev}/ports/1/state") as f:
            return "ACTIVE" in f.read()
    except OSError:
        return False


def gsi_in_error(dev):
    """rxe: is the device's GSI QP (QP1, the CM's MADs) in the error
    state? A MAD send that fails while the link is down leaves it there
    for good (ib_mad cannot bring an rxe QP back from ERR), and the
    device then takes no new connection."""
    cp = sh("rdma", "-j", "resource", "show", "qp", check=False)
    if cp.returncode:
        return False
    try:
        qps = json.loads(cp.stdout or "[]")
    except ValueError:
        return False
    return any(q.get("ifname") == dev and q.get("lqpn") == 1 and
               q.get("state") == "ERR" for q in qps)


def recreate(dev, netdev):
    if device_exists(dev):
        sh("rdma", "link", "delete", dev)
    sh("rdma", "link", "add", dev, "type", krping.PROVIDER, "netdev", netdev)
    krping.wait_for(lambda: port_active(dev), timeout=30,
                    what=f"{dev} ACTIVE")


def pair_works(addr):
    """A fresh 2-iteration pair runs on addr: 'done' both, or a reason."""
    pool = krping.SessionPool()
    try:
        srv, cli = pool.pair(count=2, size=64, addr=addr, validate=1)
        ends = krping.run_pair(srv, cli, timeout=60 if krping.SLOW else 20)
        if ends != ("done", "done"):
            return f"{ends}: {srv.describe()} | {cli.describe()}"
        return None
    except krping.KrpingError as e:
        return str(e)
    finally:
        pool.cleanup()


def restore_testbed():
    """Both netdevs up, both devices there and ACTIVE, and a pair runs on
    each address; re-create a device that does not work any more."""
    notes = []
    for netdev in (NETDEV, OTHER_NETDEV):
        sh("ip", "link", "set", netdev, "up")
    for dev, netdev, addr in ((DEVICE, NETDEV, ADDR),
                              (OTHER_DEVICE, OTHER_NETDEV,
                               krping.SERVER_ADDR)):
        if not device_exists(dev):
            sh("rdma", "link", "add", dev, "type", krping.PROVIDER,
               "netdev", netdev)
        krping.wait_for(lambda: port_active(dev), timeout=30,
                        what=f"{dev} ACTIVE")
        if gsi_in_error(dev):
            notes.append(f"{dev}: GSI QP in ERR, re-created")
            recreate(dev, netdev)
        why = pair_works(addr)
        if why:
            notes.append(f"{dev}: no pair ran ({why}), re-created")
            recreate(dev, netdev)
            why = pair_works(addr)
            assert why is None, f"{dev} still broken after re-creation: {why}"
    return notes


@pytest.fixture
def testbed():
    """Baseline of krping's RDMA resources; the test bed put back after."""
    leftovers = krping.krping_leftovers()
    assert not leftovers, f"left by earlier tests: {leftovers}"
    base = krping.rdma_resource_counts()
    yield base
    notes = restore_testbed()
    if notes:
        print("test bed restored: " + "; ".join(notes))


def live_pair(pool, count=1000000):
    """A pair on ADDR in the middle of a validated ping run."""
    srv, cli = pool.pair(count=count, size=64, addr=ADDR, validate=1)
    krping.start_running(srv, cli, iterations=3)
    assert srv.device == cli.device == DEVICE, cli.describe()
    return srv, cli


def check_failed(sess, fault, t0):
    """sess ended failed, with an errno of the fault's set, in time, with
    consistent counters."""
    end = sess.wait_end(max(0.1, FAULT_MAX - (time.monotonic() - t0)))
    took = time.monotonic() - t0
    assert end == "failed", f"{fault}: {sess.describe()}"
    assert -sess.error in FAULT_ERRNOS[fault], \
        f"{fault}: unexpected error: {sess.describe()}"
    assert sess.get("start") == "0"
    problems = krping.partial_ping_problems(sess.get("role"), sess.stats(), 64)
    assert not problems, f"{fault}: {sess.describe()}: {problems}"
    assert took < FAULT_MAX
    print(f"{fault}: {sess.name} ({sess.get('role')}) failed "
          f"{krping.errname(sess.error)} after {took:.2f}s")
    return sess.error


def check_nothing_left(pool, base):
    assert pool.cleanup() == []
    krping.wait_for(lambda: not krping.krping_leftovers(), timeout=10,
                    what="no krping sessions or kthreads")
    now = krping.rdma_resource_counts()
    assert now == base, f"RDMA resources before {base}, after {now}"


def inject(fault, srv, cli):
    """Break the server's side; return the sessions that must end."""
    if fault == "rmdir":
        assert srv.remove() < STOP_MAX
        assert not srv.sys.exists()
        return [cli]
    if fault == "link_delete":
        # returns once rdma_cm's DEVICE_REMOVAL handlers are through
        sh("rdma", "link", "delete", DEVICE)
        assert not device_exists(DEVICE)
        return [srv, cli]
    sh("ip", "link", "set", NETDEV, "down")
    return [srv, cli]


@pytest.mark.parametrize("fault", ["rmdir", "link_delete", "link_down"])
def test_server_fault_mid_run(pool, testbed, fault):
    """The server's side goes away in the middle of a validated run.

    rmdir of the server: the client fails (ECONNRESET). `rdma link
    delete` of the device: rdma_cm's DEVICE_REMOVAL fails both (ENODEV)
    before the delete returns, and they release all they had on it.
    `ip link set down` of the netdev: the port goes down and both fail
    (ENETDOWN from the port event; or a failed completion, or the flush,
    whichever the run saw first). Without the port event the side that
    only waits for its peer's next message would wait for ever: no CM
    message reaches it either (rxe's GSI QP ends in ERR, see
    gsi_in_error), and the RC transport retries nothing for a receive.
    Every end is within FAULT_MAX, and nothing of the runs is left.
    """
    srv, cli = live_pair(pool)
    t0 = time.monotonic()
    try:
        must_end = inject(fault, srv, cli)
        errs = [check_failed(s, fault, t0) for s in must_end]
        if fault == "link_delete":
            assert -errno.ENODEV in errs, f"{srv.describe()} | {cli.describe()}"
    finally:
        if fault == "link_down":
            sh("ip", "link", "set", NETDEV, "up", check=False)
    check_nothing_left(pool, testbed)
    notes = restore_testbed()
    if notes:
        print(f"{fault}: test bed restored: " + "; ".join(notes))


@pytest.fixture
def module_kept():
    """Whatever happens, leave rdma_krping loaded (KRPING_KO) after."""
    if not krping.module_loaded():
        pytest.skip(f"{krping.MODULE} is built in or not loaded")
    yield
    ko = os.environ.get("KRPING_KO", "")
    if not krping.module_loaded() and ko:
        subprocess.run(["insmod", ko], capture_output=True, timeout=60)


def test_rmmod_refused_under_running_pair(pool, module_kept):
    """rmmod while a pair is in the middle of a run is refused (EAGAIN, as
    delete_module(2) answers for a module in use; rmmod says "in use"),
    the module's reference count does not move, the run goes on
    undisturbed and completes with exact counters, and a new pair runs
    after. (test_module.py unloads the module for real.)"""
    # long enough to be mid-run when rmmod is tried (~80 ms an
    # iteration on the debug kernel, ~1.5 ms on the stock one)
    count, size = (300, 64) if krping.SLOW else (2000, 1024)
    srv, cli = pool.pair(count=count, size=size, addr=ADDR, validate=1)
    krping.start_running(srv, cli, iterations=3)
    refcnt = krping.module_refcnt()
    for _ in range(3):
        err = krping.delete_module()
        assert err in (errno.EAGAIN, errno.EBUSY), krping.errname(err)
    cp = subprocess.run(["rmmod", krping.MODULE], capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode != 0 and "in use" in cp.stderr, cp.stderr
    assert krping.module_loaded()
    assert krping.module_refcnt() == refcnt
    assert cli.state == "running" and srv.state == "running", \
        f"{srv.describe()} | {cli.describe()}"
    assert (srv.wait_end(), cli.wait_end()) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    assert cli.stats() == krping.ping_stats("client", count, size)
    assert srv.stats() == krping.ping_stats("server", count, size)
    # refused again once the runs are over (the directories pin it)
    err = krping.delete_module()
    assert err in (errno.EAGAIN, errno.EBUSY), krping.errname(err)
    srv2, cli2 = pool.pair(count=3, size=64, validate=1)
    assert krping.run_pair(srv2, cli2) == ("done", "done")
