# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A session on another host, reached with ssh: Ssh holds one shared
connection, RemoteSession has the interface of session.Session with each
step one shell command there. The remote host needs the module loaded and
configfs mounted; nothing of krping's user space."""

import errno
import math
import os
import time

from .abi import BANDWIDTH, FAILED_WC, LATENCY, PROGRESS, STATS
from .errors import CliError, START_HINTS, describe_errno
from .features import Features, parse as parse_features

# shlex, shutil, subprocess and tempfile are imported where a remote host
# is used: they are more than half of the modules the CLI would load, and
# a local run starts that much sooner.

# Where the sessions of a --remote host are (its standard paths).
REMOTE_CONFIGFS = "/sys/kernel/config/krping"
REMOTE_SYSFS = "/sys/kernel/krping"


class Ssh:
    """One remote host, reached with ssh over one shared connection.

    A master connection (ssh -M) is opened once; every command then runs
    over it, a round trip instead of a new handshake. ssh and the master
    run in sessions of their own, so a Ctrl-C reaches only this program,
    which can still remove the remote sessions over the master. dest is
    what ssh takes, with options before it if needed ("-p 2222
    root@hostb"); BatchMode: a host that asks for a password fails at
    once instead of waiting for a terminal.
    """

    TIMEOUT = 60.0              # one command (a wait gives its own)

    def __init__(self, dest):
        import shlex
        import tempfile

        self.dest = dest
        self.args = shlex.split(dest)
        if not self.args:
            raise CliError("--remote: empty ssh destination")
        self.dir = tempfile.mkdtemp(prefix="krping-ssh-")
        self.control = os.path.join(self.dir, "control")
        self.master = None
        self._features = None
        self._open()

    def _base(self):
        return ["ssh", "-o", "BatchMode=yes", "-o",
                f"ControlPath={self.control}"]

    def _open(self):
        import subprocess

        log = open(os.path.join(self.dir, "master.log"), "w+")
        self.master = subprocess.Popen(
            self._base() + ["-M", "-N", "-o", "ControlPersist=no",
                            *self.args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=log, start_new_session=True)
        deadline = time.monotonic() + self.TIMEOUT
        while not os.path.exists(self.control):
            if self.master.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                why = log.read().strip() or "no answer"
                log.close()
                self.close()
                raise CliError(f"--remote {self.dest}: ssh failed: {why}")
            time.sleep(0.05)
        log.close()

    def cmd(self, command, timeout=None):
        """Run a shell command there; a CompletedProcess (text). ssh's
        own failure (exit 255) raises CliError."""
        import subprocess

        try:
            cp = subprocess.run(self._base() + [*self.args, command],
                                stdin=subprocess.DEVNULL, capture_output=True,
                                text=True, start_new_session=True,
                                timeout=timeout or self.TIMEOUT)
        except subprocess.TimeoutExpired:
            raise CliError(f"{self.dest}: no answer from {command!r} in "
                           f"{timeout or self.TIMEOUT:g}s") from None
        if cp.returncode == 255:
            raise CliError(f"{self.dest}: ssh failed: {cp.stderr.strip()}")
        return cp

    def check_module(self):
        if self.cmd(f"test -d {REMOTE_CONFIGFS}").returncode:
            raise CliError(f"{REMOTE_CONFIGFS} not found on {self.dest}: "
                           f"load rdma_krping there (modprobe rdma_krping)")

    def features(self):
        """The host's features (read once; None inside: no such file)."""
        if self._features is None:
            cp = self.cmd(f"cat {REMOTE_CONFIGFS}/features")
            options = None
            if cp.returncode == 0:
                options = parse_features(cp.stdout)
            elif errno_of(cp.stderr) != errno.ENOENT:
                raise CliError(f"{REMOTE_CONFIGFS}/features on {self.dest}: "
                               f"{cp.stderr.strip()}")
            self._features = Features(options, self.dest)
        return self._features

    def close(self):
        import shutil
        import subprocess

        if self.master is not None:
            if self.master.poll() is None:
                subprocess.run(self._base() + ["-O", "exit", *self.args],
                               stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL,
                               start_new_session=True, timeout=10)
                try:
                    self.master.wait(5)
                except subprocess.TimeoutExpired:
                    self.master.kill()
                    self.master.wait()
            self.master = None
        shutil.rmtree(self.dir, ignore_errors=True)


# Remote shells report a failed write as "...: <strerror>".
ERRNO_OF_TEXT = {os.strerror(e): e for e in errno.errorcode}


def errno_of(stderr):
    """The errno a remote shell's error message names, or EIO."""
    lines = stderr.strip().splitlines()
    text = lines[-1].rsplit(": ", 1)[-1].strip() if lines else ""
    return ERRNO_OF_TEXT.get(text, errno.EIO)


# The remote wait's pause of 0.1 s without starting a program where the
# shell is bash: read(1) with a timeout from a fifo that no one writes
# (opened read-write, so it never ends either), removed at once.
NAP_SETUP = ("nap() { sleep 0.1; }; "
             "if [ -n \"${BASH_VERSION-}\" ]; then "
             "n=${TMPDIR:-/tmp}/krping-wait.$$; "
             "if mkfifo -m 600 \"$n\" 2>/dev/null && exec 3<>\"$n\"; then "
             "nap() { read -r -t 0.1 -u 3; }; fi; rm -f \"$n\"; fi; ")


class RemoteSession:
    """A session on the --remote host: the interface of Session, each
    step one shell command over ssh. The remote host needs the module
    loaded and configfs mounted; nothing of krping's user space."""

    # How long one remote wait loop may run before it reports back (a
    # longer wait is several): bounds a loop that outlives this program.
    WAIT_CHUNK = 30

    def __init__(self, ssh, name):
        self.ssh = ssh
        self.name = name
        self.cfg = f"{REMOTE_CONFIGFS}/{name}"
        self.sys = f"{REMOTE_SYSFS}/{name}"
        self.created = False
        cp = ssh.cmd(f"mkdir {self.cfg}")
        if cp.returncode:
            err = errno_of(cp.stderr)
            if err == errno.EEXIST:
                raise CliError(f"session {name!r} exists already on "
                               f"{ssh.dest}; pick another --name")
            raise CliError(f"cannot create {self.cfg} on {ssh.dest}: "
                           f"{cp.stderr.strip()}")
        self.created = True

    def where(self):
        return self.ssh.dest

    def features(self):
        return self.ssh.features()

    def apply(self, settings):
        """Write (attribute, value) pairs in order, in one command."""
        import shlex

        if not settings:
            return
        features = self.ssh.features()
        features.check(settings)
        script = f"cd {self.cfg} && " + " && ".join(
            f"{{ printf %s {shlex.quote(str(v))} > {a} || "
            f"{{ echo {a} >&2; exit 1; }}; }}" for a, v in settings)
        cp = self.ssh.cmd(script)
        if cp.returncode:
            lines = cp.stderr.strip().splitlines()
            attr = lines[-1] if lines else "?"
            value = dict(settings).get(attr)
            err = errno_of("\n".join(lines[:-1]))
            raise CliError(f"{self.name} on {self.ssh.dest}: {attr}="
                           f"{value!r} refused: {describe_errno(err)}"
                           f"{features.hint(attr)}")

    def set(self, attr, value):
        self.apply([(attr, value)])

    def _cat(self, path):
        # the read builtin, cat only for the message of a failed open
        cp = self.ssh.cmd(f"{{ read -r l < {path}; }} 2>/dev/null && "
                          f"printf '%s\\n' \"$l\" || cat {path}")
        if cp.returncode:
            raise OSError(errno_of(cp.stderr), f"{path} on {self.ssh.dest}")
        return cp.stdout.rstrip("\n")

    def get(self, attr):
        return self._cat(f"{self.cfg}/{attr}")

    def read_state(self):
        return self._cat(f"{self.sys}/state")

    @property
    def state(self):
        return self.read_state()

    def error(self):
        return int(self._cat(f"{self.sys}/error"))

    def close(self):
        pass

    def start(self):
        cp = self.ssh.cmd(f"printf 1 > {self.cfg}/start")
        if cp.returncode:
            err = errno_of(cp.stderr)
            hint = START_HINTS.get(err)
            raise CliError(f"{self.name} on {self.ssh.dest}: start refused: "
                           f"{describe_errno(err)}"
                           + (f": {hint}" if hint else ""))

    def stop(self):
        self.ssh.cmd(f"printf 0 > {self.cfg}/start 2>/dev/null")

    def wait(self, states, timeout=None):
        """Poll the remote state until it is in states; return it, or
        None after timeout seconds (None: no limit). The write of start
        sets the state to resolving before it returns
        (krping_session_start()), so after a start() an end state is
        that run's, however soon it ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        want = " ".join(states)
        while True:
            chunk = self.WAIT_CHUNK
            if deadline is not None:
                chunk = min(chunk, max(0.0, deadline - time.monotonic()))
            # prints the state reached and exits 0, or exits 3 at the end
            # of the chunk; 10 reads a second, with the shell's builtins
            # only: a program started costs the remote's CPU (a `sleep`
            # under TCG takes 0.2 s of it, the CPU a krping run there
            # needs), so bash naps in `read -t` on a fifo only it holds;
            # another shell runs sleep. cat only to report a state file
            # it cannot read.
            script = (f"f={self.sys}/state; {NAP_SETUP}"
                      "read -r up _ < /proc/uptime || exit 2; "
                      f"end=$(( ${{up%%.*}} + {math.ceil(chunk)} )); "
                      "while :; do { read -r s < $f; } 2>/dev/null || "
                      "{ cat $f; exit 2; }; "
                      f"case \" {want} \" in *\" $s \"*) "
                      "echo $s; exit 0;; esac; "
                      "read -r up _ < /proc/uptime || exit 2; "
                      "[ ${up%%.*} -ge $end ] && exit 3; "
                      "nap; done")
            cp = self.ssh.cmd(script, timeout=chunk + 30)
            if cp.returncode == 0:
                return cp.stdout.strip()
            if cp.returncode != 3:
                raise OSError(errno_of(cp.stderr),
                              f"{self.sys}/state on {self.ssh.dest}")
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def remove(self):
        cp = self.ssh.cmd(f"rmdir {self.cfg}")
        if cp.returncode and errno_of(cp.stderr) != errno.ENOENT:
            raise OSError(errno_of(cp.stderr),
                          f"rmdir {self.cfg} on {self.ssh.dest}")

    def progress(self):
        cp = self.ssh.cmd(f"cd {self.sys}/progress && grep -H '' "
                          + " ".join(PROGRESS))
        values = dict(line.split(":", 1) for line in cp.stdout.splitlines()
                      if ":" in line)
        try:
            return {k: int(values[k]) for k in PROGRESS}
        except (KeyError, ValueError):
            return {}

    def results(self):
        """One command reads every figure there (name:value lines)."""
        cp = self.ssh.cmd(
            f"cd {self.cfg} && grep -H '' role test size count mem_mode "
            f"options qps; cd {self.sys} && grep -rH '' state error device "
            "failed_wr wc_status stats latency bandwidth progress "
            "2>/dev/null; true")
        values = {}
        for line in cp.stdout.splitlines():
            path, _, value = line.partition(":")
            values[path] = value
        if "state" not in values:
            raise OSError(errno.ENOENT, f"{self.sys} on {self.ssh.dest}: "
                          f"{cp.stderr.strip()}")

        def num(key):
            v = values.get(key)
            return int(v) if v not in (None, "") else None
        r = {"name": self.name, "host": self.ssh.dest}
        for attr in ("role", "test", "size", "count", "mem_mode", "options",
                     "qps"):
            r[attr] = values.get(attr)
        for k in ("size", "count", "qps"):
            r[k] = num(k)
        r["state"] = values["state"]
        r["error"] = num("error")
        r["device"] = values.get("device", "")
        for k in FAILED_WC:
            r[k] = values.get(k)
        r["stats"] = {k: num(f"stats/{k}") for k in STATS}
        for group, keys in (("latency", LATENCY), ("bandwidth", BANDWIDTH),
                            ("progress", PROGRESS)):
            present = any(p.startswith(group + "/") for p in values)
            r[group] = ({k: num(f"{group}/{k}") for k in keys}
                        if present else None)
        return r

    def read_result(self, path):
        """The text of a file under the session's sysfs directory there
        (path relative to it), or None if the module has no such file."""
        cp = self.ssh.cmd(f"cat {self.sys}/{path}")
        if cp.returncode:
            if errno_of(cp.stderr) == errno.ENOENT:
                return None
            raise OSError(errno_of(cp.stderr),
                          f"{self.sys}/{path} on {self.ssh.dest}")
        return cp.stdout
