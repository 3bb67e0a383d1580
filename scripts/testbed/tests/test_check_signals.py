# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A make check ended by a signal ends every program its stages started.

A time limit ends make check with TERM (CI sends it to the command it
started: .ci/run execs make, which hands TERM to check.sh); a user ends
it with Ctrl-C (INT to the terminal's process group) or by closing the
terminal (HUP). Each way the stage that runs a guest must not leave its
QEMU behind. The check here is a real one: the smoke stage, whose guest
is Debian's 6.12 under TCG, with a cache of its own (the outer check
holds its cache's lock) that shares the outer cache's modules and
initramfs.
"""

import fcntl
import os
import pty
import signal
import subprocess
import termios
import threading
import time

import pytest

import modules
from procs import comm, descendants, pid_alive

REPO = os.path.dirname(os.path.dirname(modules.TB))
STOP_GRACE = 10         # check.sh: TERM, then KILL after this long
QEMU_START = 120        # the guest's QEMU is running within this long


class Terminated(Exception):
    pass


def on_term(signum, frame):
    raise Terminated()


def take_terminal():
    """In the child, after setsid(): its stdin becomes its terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def drain(fd):
    """Read a terminal's output until it is closed."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


@pytest.mark.parametrize("how", ["term-to-make", "int-to-group",
                                 "terminal-closed"])
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
    logfile = tmp_path / "check.log"
    # The nested check is a session of its own: a TERM that ends this
    # test must still end it (finally below).
    old_term = signal.signal(signal.SIGTERM, on_term)
    master = None
    if how == "terminal-closed":
        master, slave = pty.openpty()
        check = subprocess.Popen(["make", "-C", REPO, "check-smoke"], env=env,
                                 stdin=slave, stdout=slave, stderr=slave,
                                 start_new_session=True,
                                 preexec_fn=take_terminal)
        os.close(slave)
        threading.Thread(target=drain, args=(master,), daemon=True).start()
    else:
        with open(logfile, "w") as log:
            check = subprocess.Popen(["make", "-C", REPO, "check-smoke"],
                                     env=env, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def log_tail():
        return logfile.read_text()[-3000:] if logfile.exists() else ""
    started = set()
    try:
        end = time.monotonic() + QEMU_START
        while not any((comm(p) or "").startswith("qemu-system")
                      for p in descendants(check.pid)):
            assert check.poll() is None, log_tail()
            assert time.monotonic() < end, \
                f"no QEMU after {QEMU_START} s: {log_tail()}"
            time.sleep(0.2)
        started = descendants(check.pid)
        names = {p: comm(p) for p in started}
        t0 = time.monotonic()
        if how == "term-to-make":
            check.send_signal(signal.SIGTERM)
        elif how == "int-to-group":
            os.killpg(check.pid, signal.SIGINT)
        else:
            # As a shell does when its terminal goes: the terminal hangs
            # up (writes to it fail from now on), and the shell sends
            # HUP to each of its jobs, make's group.
            os.close(master)
            master = None
            os.killpg(check.pid, signal.SIGHUP)
        rc = check.wait(timeout=STOP_GRACE + 30)
        took = time.monotonic() - t0
        # make reports its recipe's death by the signal
        assert rc != 0, rc
        deadline = time.monotonic() + 5
        while True:
            left = [f"{p} {names[p]}" for p in started if pid_alive(p)]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert left == [], (left, log_tail())
        assert took <= STOP_GRACE + 5, f"took {took:.1f} s"
        sig = {"term-to-make": "TERM", "int-to-group": "INT"}.get(how)
        if sig:
            assert f"{sig}: ending the running stages" in log_tail(), \
                log_tail()
        print(f"# {how}: {len(started)} processes ended in {took:.1f} s, "
              f"QEMU among them; make exited {rc}")
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if master is not None:
            os.close(master)
        if check.poll() is None:
            os.killpg(check.pid, signal.SIGKILL)
            check.wait()
        for p in started:
            if pid_alive(p):
                os.kill(p, signal.SIGKILL)
