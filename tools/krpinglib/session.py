# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A session on this host: its configfs directory (settings, start) and
its sysfs directory (state and results), read and written directly.
The mechanism only: what the kernel refuses comes back as OSError (a
refused write as errors.Refused), for the command line to word and for
the selftests (selftests/lib/krping.py) to check."""

import errno
import os
import select
import time

from .abi import BANDWIDTH, FAILED_WC, LATENCY, PROGRESS, STATS, TERMINAL
from .errors import CliError, Refused
from .features import Features, parse as parse_features

CONFIGFS = os.environ.get("KRPING_CONFIGFS", "/sys/kernel/config/krping")
SYSFS = os.environ.get("KRPING_SYSFS", "/sys/kernel/krping")


def read_text(path):
    with open(path, "rb", buffering=0) as f:
        data = f.read()
    text = data.decode()
    return text[:-1] if text.endswith("\n") else text


def value_text(value):
    """The text an attribute takes for a Python value (a bool as 0/1)."""
    if isinstance(value, bool):
        return str(int(value))
    return str(value)


def write_text(path, value):
    """value (bytes as they are) in one write(2), as configfs stores per
    write; raises OSError with the kernel's errno, EIO for a short one."""
    data = value if isinstance(value, bytes) else value_text(value).encode()
    fd = os.open(path, os.O_WRONLY)
    try:
        n = os.write(fd, data)
    finally:
        os.close(fd)
    if n != len(data):
        raise OSError(errno.EIO, f"short write to {path}: {n} of "
                      f"{len(data)} bytes")


def read_int(path):
    try:
        return int(read_text(path))
    except FileNotFoundError:
        return None


class Session:
    """One session: configfs settings plus sysfs results. create makes
    it (mkdir: FileExistsError, PermissionError, ...); without, a
    missing one is FileNotFoundError."""

    def __init__(self, name, create=True):
        self.name = name
        self.cfg = os.path.join(CONFIGFS, name)
        self.sys = os.path.join(SYSFS, name)
        self.fd = None
        self.stale = None
        self.created = False
        if create:
            os.mkdir(self.cfg)
            self.created = True
        elif not os.path.isdir(self.cfg):
            raise FileNotFoundError(errno.ENOENT, f"no session {name!r} "
                                    f"({self.cfg} missing)", self.cfg)

    def where(self):
        """The host the session is on (None: this one)."""
        return None

    def features(self):
        return local_features()

    def set(self, attr, value):
        try:
            write_text(os.path.join(self.cfg, attr), value)
        except OSError as e:
            raise Refused(e.errno, attr, value) from None

    def apply(self, settings):
        """Write (attribute, value) pairs in order; the first refused
        one raises Refused."""
        for attr, value in settings:
            self.set(attr, value)

    def get(self, attr):
        return read_text(os.path.join(self.cfg, attr))

    @property
    def error(self):
        return int(read_text(os.path.join(self.sys, "error")))

    @property
    def device(self):
        return read_text(os.path.join(self.sys, "device"))

    # -- state --------------------------------------------------------
    def _fd(self):
        if self.fd is None:
            self.fd = os.open(os.path.join(self.sys, "state"), os.O_RDONLY)
        return self.fd

    def read_state(self):
        fd = self._fd()
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 64).decode().strip()

    @property
    def state(self):
        # A fresh read: one through wait()'s descriptor would take the
        # change poll() is to report, and a wait after start() could then
        # miss a run that has already ended.
        return read_text(os.path.join(self.sys, "state"))

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def start(self):
        """Write start=1 (Refused if the module refuses). A wait after
        it never takes the previous run's end state: it needs a state
        change first."""
        state = self.read_state()
        self.stale = state if state in TERMINAL else None
        try:
            self.set("start", 1)
        except OSError:
            self.stale = None
            raise

    def stop(self):
        try:
            write_text(os.path.join(self.cfg, "start"), 0)
        except OSError:
            pass

    # poll() wakes for a change of the state file: this many wakeups
    # without the state wanted mean it wakes without one, and the wait
    # would spin.
    MAX_WAKEUPS = 10000

    def wait(self, states, timeout=None, seen=None):
        """Sleep in poll() until the state is in states; return it, or
        None after timeout seconds (None: no limit). seen, a list, gets
        each state read that differs from the one before."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = select.poll()
        poller.register(self._fd(), select.POLLPRI | select.POLLERR)
        wakeups = 0
        while True:
            if self.stale is not None and poller.poll(0):
                self.stale = None
            state = self.read_state()
            if seen is not None and (not seen or seen[-1] != state):
                seen.append(state)
            if state in states and state != self.stale:
                return state
            if deadline is None:
                wait_ms = -1
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait_ms = max(1, int(left * 1000))
            # a state change, a signal (EINTR is retried by python) or
            # the deadline wakes us
            if poller.poll(wait_ms):
                wakeups += 1
                if wakeups > self.MAX_WAKEUPS:
                    raise OSError(errno.EIO, f"{self.name}: state poll() "
                                  f"keeps waking without a change "
                                  f"(seen {seen})")

    def remove(self):
        self.close()
        try:
            os.rmdir(self.cfg)
        except FileNotFoundError:
            pass

    def progress(self):
        """progress/ of the running benchmark ({} if the module has none)."""
        d = os.path.join(self.sys, "progress")
        try:
            return {k: read_int(os.path.join(d, k)) for k in PROGRESS}
        except FileNotFoundError:
            return {}

    # -- results ------------------------------------------------------
    def results(self):
        r = {"name": self.name, "host": None}
        features = self.features()
        for attr in ("role", "test", "size", "count", "mem_mode", "options",
                     "qps"):
            r[attr] = None
            if attr == "options" or features.has(attr):
                try:
                    r[attr] = self.get(attr)
                except FileNotFoundError:
                    pass        # a module without a features file
        for k in ("size", "count", "qps"):
            if r[k] is not None:
                r[k] = int(r[k])
        r["state"] = self.state
        r["error"] = self.error
        r["device"] = self.device
        for k in FAILED_WC:
            r[k] = self.read_result(k)
        r["stats"] = {k: read_int(os.path.join(self.sys, "stats", k))
                      for k in STATS}
        for group, keys in (("latency", LATENCY), ("bandwidth", BANDWIDTH),
                            ("progress", PROGRESS)):
            d = os.path.join(self.sys, group)
            r[group] = ({k: read_int(os.path.join(d, k)) for k in keys}
                        if os.path.isdir(d) else None)
        return r

    def read_result(self, path):
        """The text of a file under the session's sysfs directory (path
        relative to it), or None if the module has no such file."""
        try:
            return read_text(os.path.join(self.sys, path))
        except FileNotFoundError:
            return None


_local_features = {}


def local_features():
    """This host's features, read once (None inside: no such file)."""
    if CONFIGFS not in _local_features:
        try:
            options = parse_features(read_text(os.path.join(CONFIGFS,
                                                            "features")))
        except FileNotFoundError:
            options = None
        _local_features[CONFIGFS] = Features(options, "this host")
    return _local_features[CONFIGFS]


def check_module():
    if not os.path.isdir(CONFIGFS):
        raise CliError(f"{CONFIGFS} not found: is rdma_krping loaded "
                       f"(modprobe rdma_krping) and configfs mounted "
                       f"(mount -t configfs none /sys/kernel/config)?")


def session_names():
    try:
        # the sessions: the directories beside the features file
        return sorted(e.name for e in os.scandir(CONFIGFS) if e.is_dir())
    except FileNotFoundError:
        check_module()
        return []
