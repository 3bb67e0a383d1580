# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""What an rping (rdma-core's librdmacm example) exit status means.

rping of Debian 12 (rdmacm-utils 44.0) has a race at exit: its main
thread destroys the rdma_cm event channel while its CM thread still
reads it, and when the CM thread wakes first it prints
"rdma_get_cm_event: Bad file descriptor" and exits the process with -1
(255), whatever the ping did. Later rdma-core stops the CM thread
through an eventfd and joins it before it destroys the channel. A run
that validated every ping and then lost that race printed nothing but
its pings (with -v) and the DISCONNECT line before it; a failed ping
prints why ("data
mismatch!", "rping client failed", a failed completion) and is never
taken for the race.
"""

import shutil
import subprocess
import tempfile

from lib import krping

RPING = shutil.which("rping") or "/usr/bin/rping"
RACE_LINE = "rdma_get_cm_event: Bad file descriptor"
# Lines of a run that completed (the peer's disconnect, then the race).
QUIET_LINES = {"client DISCONNECT EVENT...", "server DISCONNECT EVENT...",
               RACE_LINE}
# The line -v prints for each validated ping, on either side.
PING_PREFIXES = ("ping data: ", "server ping data: ")


def lost_exit_race(rc, output):
    """Did rping fail only by its exit race (rc 255, nothing else said)?"""
    lines = [ln.strip() for ln in (output or "").splitlines()
             if ln.strip() and not ln.startswith(PING_PREFIXES)]
    return (rc == 255 and bool(lines) and lines[-1] == RACE_LINE and
            set(lines) <= QUIET_LINES)


def exit_ok(rc, output):
    """rping's run passed: exit 0, or its exit race after a clean run."""
    return rc == 0 or lost_exit_race(rc, output)


class Rping:
    """An rping process with bounded waits; killed in close(). Its
    output goes to a file, not a pipe: with -v rping prints every ping
    (a line of up to 64 KiB) and would block on a pipe that is read only
    once it ended."""

    def __init__(self, args):
        self.args = [RPING] + args
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(self.args, stdout=self.log,
                                     stderr=subprocess.STDOUT, text=True)
        self.output = None

    def _collect(self):
        self.log.seek(0)
        self.output = self.log.read()

    def wait(self, timeout=krping.TIMEOUT):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise AssertionError(f"still running after {timeout}s: "
                                 f"{self.describe()}")
        self._collect()
        return self.proc.returncode

    def wait_ok(self):
        """Wait; did the run pass (exit 0, or rping's own exit race after
        a clean run)?"""
        rc = self.wait()
        if lost_exit_race(rc, self.output):
            print(f"# rping lost its exit race: {self.describe()}")
        return exit_ok(rc, self.output)

    def wait_listening(self, port):
        """Until rping's rdma_cm listener on port shows up (bounded)."""
        def ready():
            if self.proc.poll() is not None:
                self._collect()
                raise AssertionError("rping exited before listening: "
                                     + self.describe())
            return port in (krping.cm_listeners() or set())
        krping.wait_for(ready, timeout=krping.SHORT_TIMEOUT, interval=0.1,
                        what=f"rping listening on port {port}")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._collect()

    def describe(self):
        """The command, its status and its output, each line cut short
        (a ping line of -v is as long as the ping)."""
        lines = [ln[:120] for ln in (self.output or "").strip().splitlines()]
        return (f"{' '.join(self.args)} -> {self.proc.returncode}: "
                + "\n".join(lines[-20:]))
