# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A session on this host: its configfs directory (settings, start) and
its sysfs directory (state and results), read and written directly."""

import errno
import os
import select
import time

from .abi import BANDWIDTH, FAILED_WC, LATENCY, PROGRESS, STATS, TERMINAL
from .errors import CliError, START_HINTS, describe_errno
from .features import Features, parse as parse_features

CONFIGFS = os.environ.get("KRPING_CONFIGFS", "/sys/kernel/config/krping")
SYSFS = os.environ.get("KRPING_SYSFS", "/sys/kernel/krping")


def read_text(path):
    with open(path, "rb", buffering=0) as f:
        data = f.read()
    text = data.decode()
    return text[:-1] if text.endswith("\n") else text


def write_text(path, value):
    """One write(2); raises OSError with the kernel's errno."""
    data = str(value).encode()
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_int(path):
    try:
        return int(read_text(path))
    except FileNotFoundError:
        return None


class Session:
    """One session: configfs settings plus sysfs results."""

    def __init__(self, name, create=True):
        self.name = name
        self.cfg = os.path.join(CONFIGFS, name)
        self.sys = os.path.join(SYSFS, name)
        self.fd = None
        self.stale = None
        self.created = False
        if create:
            try:
                os.mkdir(self.cfg)
            except FileExistsError:
                raise CliError(f"session {name!r} exists already "
                               f"({self.cfg}); pick another --name or "
                               f"remove it with 'krping rm {name}'") from None
            except PermissionError:
                raise CliError(f"cannot create {self.cfg}: permission "
                               f"denied (run as root)") from None
            self.created = True
        elif not os.path.isdir(self.cfg):
            raise CliError(f"no session {name!r} ({self.cfg} missing)")

    def where(self):
        """The host the session is on (None: this one)."""
        return None

    def features(self):
        return local_features()

    def set(self, attr, value):
        try:
            write_text(os.path.join(self.cfg, attr), value)
        except OSError as e:
            raise CliError(f"{self.name}: {attr}={value!r} refused: "
                           f"{describe_errno(e.errno)}"
                           f"{self.features().hint(attr)}") from None

    def apply(self, settings):
        """Write (attribute, value) pairs in order."""
        self.features().check(settings)
        for attr, value in settings:
            self.set(attr, value)

    def get(self, attr):
        return read_text(os.path.join(self.cfg, attr))

    def error(self):
        return int(read_text(os.path.join(self.sys, "error")))

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
        return self.read_state()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def start(self):
        state = self.read_state()
        # a wait after start must not take the previous run's end state
        self.stale = state if state in TERMINAL else None
        try:
            write_text(os.path.join(self.cfg, "start"), 1)
        except OSError as e:
            self.stale = None
            hint = START_HINTS.get(e.errno)
            test = self.get("test")
            if e.errno == errno.EOPNOTSUPP:
                hint = f"the loaded module does not implement test {test!r}"
            raise CliError(f"{self.name}: start refused: "
                           f"{describe_errno(e.errno)}"
                           + (f": {hint}" if hint else "")) from None

    def stop(self):
        try:
            write_text(os.path.join(self.cfg, "start"), 0)
        except OSError:
            pass

    def wait(self, states, timeout=None):
        """Sleep in poll() until the state is in states; return it, or
        None after timeout seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = select.poll()
        poller.register(self._fd(), select.POLLPRI | select.POLLERR)
        while True:
            if self.stale is not None and poller.poll(0):
                self.stale = None
            state = self.read_state()
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
            poller.poll(wait_ms)

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
        r["state"] = self.read_state()
        r["error"] = int(read_text(os.path.join(self.sys, "error")))
        r["device"] = read_text(os.path.join(self.sys, "device"))
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
