# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Unloading and reloading rdma_krping (marked destructive: runs last).

Needs KRPING_KO, the path of rdma_krping.ko to insmod again afterwards.
"""

import errno
import os
import subprocess
import time

import pytest

from lib import krping

pytestmark = pytest.mark.destructive

KO = os.environ.get("KRPING_KO", "")


@pytest.fixture
def reloadable():
    if not KO or not os.path.isfile(KO):
        pytest.skip("KRPING_KO does not name the module file; cannot reload")
    if not krping.module_loaded():
        pytest.skip(f"{krping.MODULE} is built in or not loaded")
    leftovers = krping.session_names()
    if leftovers:
        pytest.fail(f"sessions left by earlier tests: {leftovers}")
    yield
    # whatever happened, leave the module loaded for whoever runs next
    if not krping.module_loaded():
        subprocess.run(["insmod", KO], capture_output=True, timeout=60)


def insmod():
    cp = subprocess.run(["insmod", KO], capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 0, f"insmod {KO}: {cp.stderr.strip()}"


def test_rmmod_refused_while_session_exists(reloadable, pool):
    s = pool.session("m", role="server", addr=krping.SERVER_ADDR,
                     port=krping.next_port())
    assert krping.module_refcnt() >= 1, "a session must pin the module"
    # delete_module(2) returns EWOULDBLOCK (== EAGAIN) for a module in use;
    # rmmod reports it as "in use" (and exits 1).
    err = krping.delete_module()
    assert err in (errno.EWOULDBLOCK, errno.EBUSY), krping.errname(err)
    cp = subprocess.run(["rmmod", krping.MODULE], capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode != 0
    assert "in use" in cp.stderr, cp.stderr
    assert krping.module_loaded()
    assert s.cfg.is_dir() and s.sys.is_dir() and s.state == "idle"
    # and also while it runs
    s.start()
    s.expect_state("listening")
    err = krping.delete_module()
    assert err in (errno.EWOULDBLOCK, errno.EBUSY), krping.errname(err)
    assert s.state == "listening"
    s.remove()


def test_rmmod_and_insmod(reloadable):
    # a few sessions that have run, all removed again
    pool = krping.SessionPool()
    try:
        srv, cli = pool.pair(count=3, size=64, validate=1)
        assert krping.run_pair(srv, cli) == ("done", "done")
        pool.session("m")
    finally:
        assert pool.cleanup() == []
    deadline = time.monotonic() + 10
    while krping.module_refcnt() and time.monotonic() < deadline:
        time.sleep(0.1)          # nothing pollable for a module refcount
    assert krping.module_refcnt() == 0
    cp = subprocess.run(["rmmod", krping.MODULE], capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert not krping.module_loaded()
    assert not krping.CONFIGFS.exists(), "configfs dir left behind"
    assert not krping.SYSFS.exists(), "sysfs dir left behind"

    insmod()
    assert krping.CONFIGFS.is_dir() and krping.SYSFS.is_dir()
    assert os.listdir(krping.CONFIGFS) == ["features"]
    assert os.listdir(krping.SYSFS) == []
    # the reloaded module works
    srv, cli = pool.pair(count=3, size=64, validate=1)
    try:
        assert krping.run_pair(srv, cli) == ("done", "done")
        assert cli.stat("iterations") == 3
    finally:
        assert pool.cleanup() == []


def test_reload_cycles(reloadable):
    for _ in range(3):
        s = krping.Session(krping.unique_name("m"))
        s.remove()
        cp = subprocess.run(["rmmod", krping.MODULE], capture_output=True,
                            text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        insmod()
    assert krping.CONFIGFS.is_dir()
