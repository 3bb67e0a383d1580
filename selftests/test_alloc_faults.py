# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Allocation-failure injection: each allocation our modules make on the
paths a user drives fails once, in turn, and each failure must end
cleanly: an errno in a session's error, a refused write or mkdir, a
failed insmod or `rdma link add`; never a hang, an oops, a WARN, a
KASAN or UBSAN report, or (checked by the stage after the run) a leak.

failslab's stack filter limits the failures to allocations with one
module's code in the innermost frames of the stack (lib/faults.py:
what the module allocates and what the kernel functions it calls
allocate themselves): rdma_krping for sessions of
every test type (configfs, the session thread's setup, connecting,
each benchmark's own buffers), ropcie for its device and its verbs and
connection setup under a ping, the whole module area for loading a
module (its init). Page allocations (fail_page_alloc) are not walked:
the kernel answers each failed one with a stack dump (warn_alloc) that
the test bed's log check cannot tell from a real splat.

The debug kernel only; the debug-siw stage runs it (over siw, and over
ropcie's own device). Each walk prints how many points it walked.
"""

import os
import subprocess

import pytest

from lib import faults, krping
from lib import ropcie as rp

WHY = faults.unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"{WHY}")


def injector():
    try:
        return faults.Injector()
    except faults.CountUnknown as e:
        pytest.skip(str(e))

# How long a run may take before it counts as hung; a connection that
# lost its peer to an injected failure is refused or times out sooner.
RUN_TIMEOUT = krping.TIMEOUT
SIZE = {"ping": 64, "wlat": 64, "rlat": 64, "bw": 4096, "fr": 4096}
LIMIT = 300             # allocation points a walk may find


def kernel_clean(log, what):
    bad = krping.kernel_bug_lines(log.read())
    assert not bad, f"{what}: {bad}"


def walk_all(what, code_range, scenario, capsys):
    """Walk scenario's allocation points in code_range, print the count
    into the TAP, and check that the filter caught any."""
    inj = injector()
    points, outcomes = faults.walk(inj, code_range, scenario, LIMIT)
    with capsys.disabled():
        print(f"# {what}: {points} allocation points walked, "
              f"{inj.injected} failures injected: {outcomes}")
    assert points > 0, f"{what}: no allocation filtered: is the filter right?"


def error_of(e):
    """errno name of a refused configfs or sysfs write."""
    while e is not None and not isinstance(e, OSError):
        e = e.__cause__
    return krping.errname(e.errno) if e is not None else "?"


def pair_scenario(test, addr, device=None):
    """A client and a server of test over addr, one iteration; returns
    how the run ended, asserting that it ended cleanly."""
    def run():
        pool = krping.SessionPool()
        log = krping.Kmsg()
        try:
            try:
                srv, cli = pool.pair(count=1, size=SIZE[test], test=test,
                                     addr=addr, validate=1)
            except (OSError, krping.KrpingError) as e:
                return f"setup refused: {error_of(e)}"
            if srv.try_start():
                return "server start refused"
            st = srv.wait_state(("listening",) + krping.TERMINAL,
                                RUN_TIMEOUT)
            if st != "listening":
                assert st == "failed" and srv.error < 0, srv.describe()
                return "server failed before listening"
            if cli.try_start():
                srv.stop()
                return "client start refused"
            cst = cli.wait_end(RUN_TIMEOUT)
            if cst == "failed":
                assert cli.error < 0, cli.describe()
                # The server may wait for a client that gave up: stop it.
                if srv.wait_state(krping.TERMINAL + ("listening",),
                                  RUN_TIMEOUT) == "listening":
                    srv.stop()
                sst = srv.wait_end(RUN_TIMEOUT)
            else:
                sst = srv.wait_end(RUN_TIMEOUT)
            for s, state in ((srv, sst), (cli, cst)):
                if state == "failed":
                    assert s.error < 0, s.describe()
                else:
                    assert state in ("done", "stopped") and s.error == 0, \
                        s.describe()
            if device and sst == cst == "done":
                assert srv.device == device, srv.describe()
            return f"server {sst}, client {cst}"
        finally:
            problems = pool.cleanup()
            kernel_clean(log, f"{test} over {addr}")
            log.close()
            assert not problems, problems
    return run


# rlat and bw allocate what wlat and ping do (their walks had 39 and 38
# points, as those): their setup is the same code, and a benchmark's
# loop allocates nothing. fr registers MRs of its own.
@pytest.mark.parametrize("test", ["ping", "wlat", "fr"])
def test_session_allocations(test, capsys):
    """Every allocation with rdma_krping on the stack, of creating,
    configuring, starting and connecting a pair of test, and of the
    benchmark's own setup, fails in turn."""
    scenario = pair_scenario(test, krping.SERVER_ADDR)
    walk_all(test, faults.module_text(krping.MODULE), scenario, capsys)
    # Afterwards the same run works.
    assert scenario() == "server done, client done"


@pytest.fixture
def ropcie_device():
    rp.require_loaded()
    rp.ensure_setup()
    yield
    rp.teardown_setup()


def test_ropcie_allocations(ropcie_device, capsys):
    """Every allocation with ropcie on the stack while a ping pair runs
    over ropcie0: its PD, CQ, QP and MR setup and its connection
    handling."""
    scenario = pair_scenario("ping", rp.ADDR, device=rp.ROPCIE_DEV)
    walk_all("ropcie ping", faults.module_text("ropcie"), scenario, capsys)
    assert scenario() == "server done, client done"


FAULT_DEV, FAULT_NETDEV = "ropcief0", "rpf0"


def link_add_scenario():
    """`rdma link add` of a ropcie device; it either appears whole (and
    is deleted again) or not at all."""
    log = krping.Kmsg()
    try:
        cp = subprocess.run(["rdma", "link", "add", FAULT_DEV, "type",
                             "ropcie", "netdev", FAULT_NETDEV],
                            capture_output=True, text=True,
                            timeout=krping.SHORT_TIMEOUT)
        there = rp.link_exists(FAULT_DEV)
        if cp.returncode:
            assert not there, f"failed add left {FAULT_DEV}: {cp.stderr}"
            return "add refused"
        assert there, "rdma link add succeeded without a device"
        rp.sh("rdma", "link", "delete", FAULT_DEV)
        assert not rp.link_exists(FAULT_DEV)
        return "added"
    finally:
        kernel_clean(log, "rdma link add")
        log.close()


def test_ropcie_link_add_allocations(ropcie_device, capsys):
    """Every allocation with ropcie on the stack of `rdma link add`."""
    rp.sh("ip", "link", "add", FAULT_NETDEV, "type", "dummy")
    rp.sh("ip", "link", "set", FAULT_NETDEV, "up")
    try:
        walk_all("rdma link add", faults.module_text("ropcie"),
                 link_add_scenario, capsys)
        assert link_add_scenario() == "added"
    finally:
        rp.sh("rdma", "link", "delete", FAULT_DEV, check=False)
        rp.sh("ip", "link", "del", FAULT_NETDEV, check=False)


def load_scenario(name, ko, present):
    """insmod ko (after rmmod name): it either loads whole or fails and
    leaves nothing of it."""
    def run():
        log = krping.Kmsg()
        try:
            cp = subprocess.run(["insmod", ko], capture_output=True,
                                text=True, timeout=krping.SHORT_TIMEOUT)
            loaded = krping.module_loaded(name)
            if cp.returncode:
                assert not loaded, f"failed insmod left {name} loaded"
                for p in present:
                    assert not os.path.exists(p), f"failed insmod left {p}"
                return "insmod refused"
            assert loaded
            for p in present:
                assert os.path.exists(p), f"insmod succeeded without {p}"
            assert krping.delete_module(name) == 0, f"rmmod {name}"
            return "loaded"
        finally:
            kernel_clean(log, f"insmod {name}")
            log.close()
    return run


@pytest.mark.destructive
@pytest.mark.parametrize("name", ["rdma_krping", "ropcie"])
def test_module_load_allocations(name, capsys):
    """Every allocation of loading the module (its init, and what the
    RDMA core does for it there) fails in turn. The module is loaded
    again afterwards."""
    if name == "ropcie":
        ko = rp.module_file("ROPCIE_KO")
    else:
        ko = os.environ.get("KRPING_KO", "")
        if not ko or not os.path.exists(ko):
            pytest.skip(f"KRPING_KO not set: cannot load {name} again")
    present = {"rdma_krping": ["/sys/kernel/config/krping",
                               "/sys/kernel/krping"],
               "ropcie": []}[name]
    if name == "ropcie":
        rp.teardown_setup()
    if krping.module_loaded(name):
        assert krping.delete_module(name) == 0, f"rmmod {name}"
    try:
        walk_all(f"insmod {name}", faults.MODULE_AREA,
                 load_scenario(name, ko, present), capsys)
    finally:
        if not krping.module_loaded(name):
            subprocess.run(["insmod", ko], check=True,
                           timeout=krping.SHORT_TIMEOUT)
