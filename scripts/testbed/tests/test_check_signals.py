# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A make check ended by a signal ends every program its stages started.

A time limit ends make check with TERM (CI sends it to the command it
started: .ci/run execs make, which hands TERM to check.sh); a user ends
it with Ctrl-C (INT to the terminal's process group). Either way the
stage that runs a guest must not leave its QEMU behind. The check here
is a real one: the smoke stage, whose guest is Debian's 6.12 under TCG,
with a cache of its own (the outer check holds its cache's lock) that
shares the outer cache's modules and initramfs.
"""

import os
import signal
import subprocess
import time

import pytest

import modules

REPO = os.path.dirname(os.path.dirname(modules.TB))
STOP_GRACE = 10         # check.sh: TERM, then KILL after this long
QEMU_START = 120        # the guest's QEMU is running within this long


def children():
    """{pid: ppid} of every process."""
    tree = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        tree[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return tree


def descendants(root):
    tree = children()
    found, todo = set(), [root]
    while todo:
        p = todo.pop()
        for c, pp in tree.items():
            if pp == p and c not in found:
                found.add(c)
                todo.append(c)
    return found


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def alive(pid):
    """Running, not a zombie waiting for its parent."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["term-to-make", "int-to-group"])
def test_a_check_ended_by_a_signal_leaves_no_guest(tmp_path, how):
    outer = os.environ.get("KRPING_CACHE", "/var/cache/krping")
    kver = modules.release()
    if not os.path.exists(f"{outer}/ko/{kver}/rdma_krping.ko"):
        pytest.fail(f"no rdma_krping.ko for {kver} in {outer}: the build "
                    "stage, which this stage needs, publishes it")
    cache = tmp_path / "cache"
    cache.mkdir()
    for d in ("ko", "initramfs"):
        os.makedirs(f"{outer}/{d}", exist_ok=True)
        (cache / d).symlink_to(f"{outer}/{d}")
    env = {**os.environ, "KRPING_CACHE": str(cache),
           "KRPING_RESULTS": str(tmp_path / "results"),
           "KRPING_SMOKE_KVER": "6.12"}
    log = open(tmp_path / "check.log", "w")
    check = subprocess.Popen(["make", "-C", REPO, "check-smoke"], env=env,
                             stdin=subprocess.DEVNULL, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    started = set()
    try:
        end = time.monotonic() + QEMU_START
        while not any((comm(p) or "").startswith("qemu-system")
                      for p in descendants(check.pid)):
            assert check.poll() is None, \
                (tmp_path / "check.log").read_text()[-3000:]
            assert time.monotonic() < end, \
                f"no QEMU after {QEMU_START} s: " + \
                (tmp_path / "check.log").read_text()[-3000:]
            time.sleep(0.2)
        started = descendants(check.pid)
        names = {p: comm(p) for p in started}
        t0 = time.monotonic()
        if how == "term-to-make":
            check.send_signal(signal.SIGTERM)
        else:
            os.killpg(check.pid, signal.SIGINT)
        rc = check.wait(timeout=STOP_GRACE + 30)
        took = time.monotonic() - t0
        # make reports its recipe's death by the signal
        assert rc != 0, rc
        left = [f"{p} {names[p]}" for p in started if alive(p)]
        assert left == [], (left, (tmp_path / "check.log").read_text()[-3000:])
        assert took <= STOP_GRACE + 5, f"took {took:.1f} s"
        print(f"# {how}: {len(started)} processes ended in {took:.1f} s, "
              f"QEMU among them; make exited {rc}")
    finally:
        if check.poll() is None:
            os.killpg(check.pid, signal.SIGKILL)
            check.wait()
        for p in started:
            if alive(p):
                os.kill(p, signal.SIGKILL)
        log.close()
