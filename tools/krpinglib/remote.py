# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A session on another host, reached with ssh: Ssh holds one shared
connection, RemoteSession has the interface of session.Session with each
step one shell command there. The remote host needs the module loaded and
configfs mounted; nothing of krping's user space.

RemoteSession takes any transport with cmd(command, check=False,
timeout=None), which returns a CompletedProcess (text) and raises only
when the command could not run, and dest, the host's name: Ssh here,
the selftests' SshRemote (selftests/lib/remote.py) there."""

import errno
import math
import os
import time

from .abi import BANDWIDTH, FAILED_WC, LATENCY, PROGRESS, STATS
from .errors import CliError, Refused
from .features import Features, parse as parse_features
from .session import value_text

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

    def cmd(self, command, check=False, timeout=None):
        """Run a shell command there; a CompletedProcess (text). ssh's
        own failure (exit 255) raises CliError, and with check so does
        the command's."""
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
        if check and cp.returncode:
            raise CliError(f"{self.dest}: {command!r} exited "
                           f"{cp.returncode}: {cp.stderr.strip()}")
        return cp

    def check_module(self):
        if self.cmd(f"test -d {REMOTE_CONFIGFS}").returncode:
            raise CliError(f"{REMOTE_CONFIGFS} not found on {self.dest}: "
                           f"load rdma_krping there (modprobe rdma_krping)")

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
# dash's and busybox sh's words for a redirection into a missing directory
ERRNO_OF_TEXT.update({"Directory nonexistent": errno.ENOENT,
                      "nonexistent directory": errno.ENOENT})


def errno_of(stderr):
    """The errno a shell's error message names (the text after the last
    ': ' of its last line), or EIO when it names none."""
    lines = stderr.strip().splitlines()
    text = lines[-1].rsplit(": ", 1)[-1].strip() if lines else ""
    return ERRNO_OF_TEXT.get(text, errno.EIO)


def remote_features(transport):
    """The features of the transport's host, read once (None inside: its
    module has no features file)."""
    features = getattr(transport, "krping_features", None)
    if features is None:
        path = f"{REMOTE_CONFIGFS}/features"
        cp = transport.cmd(f"cat {path}", check=False)
        options = None
        if cp.returncode == 0:
            options = parse_features(cp.stdout)
        elif errno_of(cp.stderr) != errno.ENOENT:
            err = errno_of(cp.stderr)
            raise OSError(err, os.strerror(err), f"{path} on {transport.dest}")
        features = Features(options, transport.dest)
        transport.krping_features = features
    return features


def apply_script(directory, settings):
    """One shell command writing each (attribute, value) of settings in
    directory, in order, each in one write; it stops at the first
    refused one and names it on the last line of its stderr, after the
    shell's message (a directory gone is its attribute's ENOENT)."""
    import shlex

    return " && ".join(
        f"{{ printf %s {shlex.quote(value_text(v))} > {directory}/{a} || "
        f"{{ echo {a} >&2; exit 1; }}; }}" for a, v in settings)


def refusal(cp, settings, where):
    """Refused for the failed apply_script() cp."""
    lines = cp.stderr.strip().splitlines()
    attr = lines[-1] if lines else "?"
    return Refused(errno_of("\n".join(lines[:-1])), attr,
                   dict(settings).get(attr), where)


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

    def __init__(self, ssh, name, create=True):
        self.ssh = ssh
        self.name = name
        self.cfg = f"{REMOTE_CONFIGFS}/{name}"
        self.sys = f"{REMOTE_SYSFS}/{name}"
        self.created = False
        if create:
            cp = ssh.cmd(f"mkdir {self.cfg}", check=False)
            if cp.returncode:
                # the shell's message, which names more than the errno
                raise OSError(errno_of(cp.stderr),
                              cp.stderr.strip() or "mkdir failed",
                              f"{self.cfg} on {ssh.dest}")
            self.created = True

    def where(self):
        return self.ssh.dest

    def features(self):
        return remote_features(self.ssh)

    def apply(self, settings):
        """Write (attribute, value) pairs in order, in one command; the
        first refused one raises Refused."""
        if not settings:
            return
        cp = self.ssh.cmd(apply_script(self.cfg, settings), check=False)
        if cp.returncode:
            raise refusal(cp, settings, self.ssh.dest)

    def set(self, attr, value):
        self.apply([(attr, value)])

    def _cat(self, path):
        # the read builtin, cat only for the message of a failed open
        cp = self.ssh.cmd(f"{{ read -r l < {path}; }} 2>/dev/null && "
                          f"printf '%s\\n' \"$l\" || cat {path}",
                          check=False)
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

    @property
    def error(self):
        return int(self._cat(f"{self.sys}/error"))

    @property
    def device(self):
        return self._cat(f"{self.sys}/device")

    def close(self):
        pass

    def start(self):
        """Write start=1 (Refused if the module refuses). The write sets
        the state to resolving before it returns (krping_session_start()),
        so an end state a wait reads after it is the new run's, however
        soon it ended."""
        self.set("start", 1)

    def stop(self):
        self.ssh.cmd(f"printf 0 > {self.cfg}/start 2>/dev/null", check=False)

    def wait(self, states, timeout=None, seen=None):
        """Poll the remote state until it is in states; return it, or
        None after timeout seconds (None: no limit); seen, a list, gets
        each state read that differs from the one before. The write of start
        sets the state to resolving before it returns
        (krping_session_start()), so after a start() an end state is
        that run's, however soon it ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        want = " ".join(states)
        while True:
            chunk = self.WAIT_CHUNK
            if deadline is not None:
                chunk = min(chunk, max(0.0, deadline - time.monotonic()))
            # prints the states it read, each that differs from the one
            # before, and exits 0 on one of states (the last printed), or 3
            # at the end of the chunk; 10 reads a second, with the shell's
            # builtins
            # only: a program started costs the remote's CPU (a `sleep`
            # under TCG takes 0.2 s of it, the CPU a krping run there
            # needs), so bash naps in `read -t` on a fifo only it holds;
            # another shell runs sleep. cat only to report a state file
            # it cannot read.
            script = (f"f={self.sys}/state; {NAP_SETUP}"
                      "read -r up _ < /proc/uptime || exit 2; "
                      f"end=$(( ${{up%%.*}} + {math.ceil(chunk)} )); "
                      "last=; while :; do { read -r s < $f; } 2>/dev/null "
                      "|| { cat $f; exit 2; }; "
                      "[ \"$s\" = \"$last\" ] || { echo $s; last=$s; }; "
                      f"case \" {want} \" in *\" $s \"*) exit 0;; esac; "
                      "read -r up _ < /proc/uptime || exit 2; "
                      "[ ${up%%.*} -ge $end ] && exit 3; "
                      "nap; done")
            cp = self.ssh.cmd(script, check=False, timeout=chunk + 30)
            read = cp.stdout.split()
            if seen is not None:
                seen.extend(st for i, st in enumerate(read)
                            if i or not seen or seen[-1] != st)
            if cp.returncode == 0 and read:
                return read[-1]
            if cp.returncode != 3:
                raise OSError(errno_of(cp.stderr),
                              f"{self.sys}/state on {self.ssh.dest}")
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def remove(self):
        cp = self.ssh.cmd(f"rmdir {self.cfg}", check=False)
        if cp.returncode and errno_of(cp.stderr) != errno.ENOENT:
            raise OSError(errno_of(cp.stderr),
                          f"rmdir {self.cfg} on {self.ssh.dest}")

    def progress(self):
        cp = self.ssh.cmd(f"cd {self.sys}/progress && grep -H '' "
                          + " ".join(PROGRESS), check=False)
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
            "2>/dev/null; true", check=False)
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
        cp = self.ssh.cmd(f"cat {self.sys}/{path}", check=False)
        if cp.returncode:
            if errno_of(cp.stderr) == errno.ENOENT:
                return None
            raise OSError(errno_of(cp.stderr),
                          f"{self.sys}/{path} on {self.ssh.dest}")
        return cp.stdout
