# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""
Small helper library for the krping selftests.

A krping test session is a configfs directory
(/sys/kernel/config/krping/<name>/, one attribute per option plus "start")
whose results live in sysfs (/sys/kernel/krping/<name>/: state, error,
device, stats/*). This module wraps both behind a Session object:

    pool = SessionPool()
    srv = pool.session("s", role="server", addr=SERVER_ADDR, port=p, count=10)
    cli = pool.session("c", role="client", addr=SERVER_ADDR, port=p, count=10)
    run_pair(srv, cli)           # server listening first, both end done
    assert cli.stats()["iterations"] == 10
    pool.cleanup()               # rmdir whatever is left, even after errors

Every wait is bounded. Session.wait_state() sleeps in poll(2) on the sysfs
"state" file (the module calls sysfs_notify on each change), it never
spins. The paths can be moved with KRPING_CONFIGFS / KRPING_SYSFS.
"""

import ctypes
import errno
import itertools
import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from . import single_host

# The CLI's session classes (tools/krpinglib), extended below with what
# the tests check.
from krpinglib import remote as cli_remote
from krpinglib import session as cli_session
from krpinglib.errors import Refused
from krpinglib.session import read_text, write_text  # noqa: F401
from krpinglib.session import value_text as fmt

CONFIGFS = Path(os.environ.get("KRPING_CONFIGFS", "/sys/kernel/config/krping"))
SYSFS = Path(os.environ.get("KRPING_SYSFS", "/sys/kernel/krping"))
MODULE = "rdma_krping"

# The single-host topology (lib/single_host.py builds it): rxe0 on veth
# va (10.9.0.1/24), rxe1 on veth vb (10.9.0.2/24); siw0/siw1 instead with
# KRPING_PROVIDER=siw.
SERVER_ADDR, CLIENT_ADDR = single_host.ADDRS
SERVER_IF, CLIENT_IF = single_host.NETDEVS
PROVIDER = os.environ.get("KRPING_PROVIDER", "rxe")
RDMA_DEVICES = single_host.devices(PROVIDER)


def rdma_device_of(addr, sh):
    """The RDMA device on the interface that holds addr, or None; sh(cmd)
    runs a shell command on that host and returns its stdout."""
    words = sh(f"ip -o addr show to {addr}").split()
    if len(words) < 2:
        return None
    for link in json.loads(sh("rdma -j link show") or "[]"):
        if link.get("netdev") == words[1]:
            return link.get("ifname")
    return None


def local_rdma_device(addr):
    """rdma_device_of() on this host; None when the tools fail."""
    def sh(cmd):
        return subprocess.run(["sh", "-c", cmd], capture_output=True,
                              text=True, timeout=30).stdout
    try:
        return rdma_device_of(addr, sh)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _iwarp():
    """KRPING_PROVIDER names the provider where it is set (the single
    host's topology, and both guests of the test bed's pairs). Without it,
    across two hosts (a lab's own devices), the device that holds
    LOCAL_ADDR tells: an iWARP device's node type is 4 (RNIC)."""
    if "KRPING_PROVIDER" in os.environ:
        return PROVIDER == "siw"
    from . import env
    try:
        topo = env.topology()
    except env.ConfigError:
        return False
    dev = local_rdma_device(topo.local_addr) if topo.two_host else None
    try:
        node_type = Path(f"/sys/class/infiniband/{dev}/node_type").read_text()
    except (OSError, TypeError):
        return False
    return node_type.split(":")[0].strip() == "4"


# iWARP: READ sinks need remote write access, read_inv is allowed, no GIDs
# to wait for.
IWARP = _iwarp()

# What a run whose peer went away mid-run may end with beside ECONNRESET
# (the disconnect or a flushed completion). On iWARP (siw) the peer's
# TCP stream ends under work in flight, before the CM sees the close:
# that work completes in error (EIO), and a READ response siw can no
# longer send raises QP_REQ_ERR on the responder (EREMOTEIO,
# krping/resources.c).
PEER_LOST_IWARP_ERRNOS = (errno.EIO, errno.EREMOTEIO) if IWARP else ()

# TCG is slow: a 10-iteration ping takes about a second, a connection
# attempt a few; the debug kernel (KRPING_SLOW=1: KASAN, lockdep, kmemleak)
# is several times slower again. Every wait in the suite is bounded by one
# of these.
SLOW = os.environ.get("KRPING_SLOW", "0") == "1"
TIMEOUT = float(os.environ.get("KRPING_TEST_TIMEOUT", "180" if SLOW else "60"))
SHORT_TIMEOUT = 90.0 if SLOW else 30.0

STATES = ("idle", "resolving", "listening", "connecting", "running",
          "done", "failed", "stopped")
TERMINAL = ("done", "failed", "stopped")

STATS = ("send_bytes", "send_msgs", "recv_bytes", "recv_msgs",
         "write_bytes", "write_msgs", "read_bytes", "read_msgs",
         "iterations")

BOOL_ATTRS = ("validate", "verbose", "duplex", "poll", "server_inv",
              "local_dma_lkey", "read_inv")
# Every configfs attribute holding a setting (not "options", not "start").
OPTION_ATTRS = ("role", "addr", "port", "count", "size", "test",
                "mem_mode", "txdepth", "tos", "peer_timeout_ms",
                "duration_ms", "warmup", "qps") + BOOL_ATTRS
ALL_ATTRS = OPTION_ATTRS + ("options", "start")
# How the module parses each attribute: one parser per kind.
ATTR_KIND = {"role": "enum", "test": "enum", "mem_mode": "enum",
             "addr": "addr", "port": "number", "count": "number",
             "size": "number", "txdepth": "number", "tos": "number",
             "peer_timeout_ms": "number", "duration_ms": "number",
             "warmup": "number", "qps": "number",
             "options": "options", "start": "start",
             **{b: "bool" for b in BOOL_ATTRS}}

DEFAULTS = {
    "role": "none", "addr": "", "port": "7174", "count": "0", "size": "64",
    "test": "ping", "mem_mode": "reg", "txdepth": "64", "tos": "0",
    "peer_timeout_ms": "30000", "duration_ms": "0", "warmup": "0",
    "qps": "1",
    "validate": "0", "verbose": "0", "duplex": "0", "poll": "0",
    "server_inv": "0", "local_dma_lkey": "0", "read_inv": "0",
}

# Bytes of one ping advertisement {u64 buf; u32 rkey; u32 size}.
ADV_BYTES = 16


class KrpingError(Exception):
    """A session did not behave as the test needed."""


class StateTimeout(KrpingError):
    pass


def write_errno(path, value):
    """Write and return 0 or the errno of the failure."""
    try:
        write_text(path, value)
    except OSError as e:
        return e.errno
    return 0


# Names for errno values that have two (errno.errorcode picks the other).
_ERRNAMES = {errno.EOPNOTSUPP: "EOPNOTSUPP", errno.EAGAIN: "EAGAIN",
             errno.EDEADLK: "EDEADLK"}


def errname(err):
    """'EINVAL' for 22, 'OK' for 0, negative values as in the error file."""
    if err == 0:
        return "OK"
    name = _ERRNAMES.get(abs(err)) or errno.errorcode.get(abs(err), str(abs(err)))
    return ("-" if err < 0 else "") + name


# The debug-kernel stages of make check run ten times slower and deselect
# this (pytest -m "not stock_only"): tests whose kernel path is the same on
# every kernel and is covered on the debug kernel by a representative
# (representatives()), by KUnit or by another test. Debian's 6.12 runs
# them all; 6.1 and the newest kernel deselect them as well.
STOCK_ONLY = pytest.mark.stock_only


def representatives(params, key):
    """pytest parameters: the first of each key(param) as it is, the
    others marked STOCK_ONLY. A param is a tuple of arguments, or a
    single argument."""
    seen, out = set(), []
    for p in params:
        k = key(p)
        if k in seen:
            args = p if isinstance(p, tuple) else (p,)
            out.append(pytest.param(*args, marks=STOCK_ONLY))
        else:
            seen.add(k)
            out.append(p)
    return out


_names = itertools.count(1)
_ports = itertools.count(int(os.environ.get("KRPING_TEST_PORT_BASE", "20000")))


def next_port():
    """A port no other test of this run has used (rping's 7174 is avoided)."""
    return next(_ports)


def ephemeral_ports():
    """The kernel's ip_local_port_range, as a range."""
    path = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low, high = path.read_text().split()
    return range(int(low), int(high) + 1)


def tcp_socket():
    """A TCP socket bound to a port of the tests' own range, which lies
    below ip_local_port_range.

    rdma_cm picks an iWARP client's local port in ip_local_port_range
    without asking the TCP stack (siw has no port mapper), and siw's
    bind() of it fails with EADDRINUSE where a socket without
    SO_REUSEADDR holds that port, as a closed one does for a minute in
    TIME_WAIT. So the tests' own TCP connections stay out of that range.
    """
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # A run of the tests before this one may have left the port in
        # TIME_WAIT; siw's listener and clients set SO_REUSEADDR too, so
        # neither collides with such a socket.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", next_port()))
    except BaseException:
        s.close()
        raise
    return s


def ephemeral_sockets_to(port):
    """The TCP sockets (any state) connected to port whose local port
    lies in ip_local_port_range, as `ss` lines."""
    out = run(["ss", "-Htan", f"dport = :{port}"]).stdout.splitlines()
    ephemeral = ephemeral_ports()
    found = []
    for line in out:
        words = line.split()
        if len(words) >= 4 and int(words[3].rsplit(":", 1)[1]) in ephemeral:
            found.append(line)
    return found


def unique_name(prefix="k"):
    """Session names stay short: the kthread 'krping/<name>' keeps 15 chars."""
    return f"{prefix}{next(_names)}"


class SessionChecks:
    """What the tests ask of a session, here or on the remote host, on
    top of the CLI's session classes (tools/krpinglib): settings that
    raise KrpingError or return an errno, waits that raise StateTimeout,
    a one-line description for failure messages."""

    label = ""                  # after the name in messages

    def try_set(self, attr, value):
        """Set and return 0 or the errno of the refusal."""
        try:
            self.set(attr, value)
        except OSError as e:
            return e.errno
        return 0

    def configure(self, **attrs):
        """Write the attributes in order (a remote session: in one
        command); the first refused one raises KrpingError."""
        try:
            self.apply(list(attrs.items()))
        except Refused as e:
            raise KrpingError(
                f"{self.name}{self.label}: {e.attr}={fmt(e.value)!r} "
                f"refused: {errname(e.errno)}") from e
        return self

    def config(self):
        """Snapshot of every readable configfs attribute."""
        snap = {a: self.get(a) for a in OPTION_ATTRS}
        snap["options"] = self.get("options")
        snap["start"] = self.get("start")
        return snap

    def stop(self):
        """Write start=0; raises what the module refuses (the CLI's
        stop() ignores it, the tests check it)."""
        self.set("start", 0)

    def try_start(self):
        """start(), returning 0 or the errno of the refusal."""
        try:
            self.start()
        except OSError as e:
            return e.errno
        return 0

    @property
    def running(self):
        return self.get("start") == "1"

    def stat(self, name):
        return self.stats()[name]

    def describe(self):
        """One line for failure messages."""
        try:
            return (f"{self.name}{self.label}: state={self.state} "
                    f"error={errname(self.error)} device={self.device!r} "
                    f"stats={self.stats()}")
        except Exception as e:          # for failure messages only
            return f"{self.name}{self.label}: unreadable ({e})"

    def wait_state(self, states, timeout=TIMEOUT):
        """Wait until the state is one of states; return it, or raise
        StateTimeout after timeout seconds. After start(), the end state
        of the previous run is not taken (the session's wait())."""
        if isinstance(states, str):
            states = (states,)
        for s in states:
            if s not in STATES:
                raise ValueError(f"unknown state {s!r}")
        seen = []
        state = self.wait(states, timeout, seen=seen)
        if state is None:
            raise StateTimeout(
                f"{self.name}{self.label}: no state in {states} within "
                f"{timeout:g}s; seen {seen}; {self.describe()}")
        return state

    def expect_state(self, state, timeout=TIMEOUT):
        """Wait for state or any end state; fail unless it is state."""
        got = self.wait_state((state,) + tuple(s for s in TERMINAL
                                               if s != state), timeout)
        if got != state:
            raise KrpingError(f"{self.name}{self.label}: expected {state}, "
                              f"got {got}; {self.describe()}")
        return got

    def wait_end(self, timeout=TIMEOUT):
        return self.wait_state(TERMINAL, timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.removed:
            self.remove()


class Session(SessionChecks, cli_session.Session):
    """One krping session on this host: configfs directory (cfg) and
    sysfs results directory (sys), as Paths. A wait sleeps in poll() on
    the sysfs state file."""

    def __init__(self, name, create=True):
        super().__init__(name, create)
        self.cfg = Path(self.cfg)
        self.sys = Path(self.sys)
        self.removed = False

    def __repr__(self):
        return f"Session({self.name!r})"

    @property
    def failed_wc(self):
        """(failed_wr, wc_status): the first work request of the run
        whose completion failed, and its status; ("", "") for none."""
        return (read_text(self.sys / "failed_wr"),
                read_text(self.sys / "wc_status"))

    def stat(self, name):
        return int(read_text(self.sys / "stats" / name))

    def stats(self):
        return {name: self.stat(name) for name in STATS}

    def read_ints(self, directory):
        """{file: int} of a directory of counters in the results
        (stats, latency, bandwidth)."""
        d = self.sys / directory
        return {f.name: int(read_text(f)) for f in d.iterdir()
                if f.is_file() and f.name not in NOT_INTS}

    @property
    def exists(self):
        return self.cfg.exists()

    def remove(self):
        """rmdir the session; return how long rmdir took (seconds)."""
        self.close()
        t0 = time.monotonic()
        os.rmdir(self.cfg)
        self.removed = True
        return time.monotonic() - t0


class RemoteSession(SessionChecks, cli_remote.RemoteSession):
    """A session on the remote host of a two-host topology (lib/env.py),
    driven through its remote's cmd() (lib/remote.py): each step one
    command there, a wait one loop there."""

    label = " (remote)"

    def __init__(self, remote, name, create=True):
        super().__init__(remote, name, create)
        self.remote = remote
        self.removed = False

    def __repr__(self):
        return f"RemoteSession({self.name!r} on {self.remote})"

    @property
    def failed_wc(self):
        """As Session.failed_wc, in one command there."""
        from lib.remote import cat_command
        out = self.remote.cmd(f"{cat_command(self.sys + '/failed_wr')}; "
                              f"{cat_command(self.sys + '/wc_status')}"
                              ).stdout
        failed_wr, wc_status = (out.split("\n") + ["", ""])[:2]
        return failed_wr, wc_status

    def stats(self):
        st = self.remote.read_ints(f"{self.sys}/stats")
        return {name: st[name] for name in STATS}

    def read_ints(self, directory):
        return self.remote.read_ints(f"{self.sys}/{directory}")

    @property
    def exists(self):
        return self.remote.cmd(f"test -d {self.cfg}", check=False) \
            .returncode == 0

    def remove(self):
        """rmdir the session there; return how long it took (seconds)."""
        t0 = time.monotonic()
        cp = self.remote.cmd(f"rmdir {self.cfg}", check=False)
        if cp.returncode:
            err = cli_remote.errno_of(cp.stderr)
            raise OSError(err, f"rmdir {self.cfg} (remote): "
                          f"{os.strerror(err)}")
        self.removed = True
        return time.monotonic() - t0


class SessionPool:
    """Creates uniquely named sessions and removes them all in cleanup().

    In a two-host topology (lib/env.py) pair() puts one side on the
    remote host; session(remote=True) makes a remote one by hand.
    """

    def __init__(self, remote_side="server"):
        self.sessions = []
        self._remote = None
        self.remote_side = remote_side

    @property
    def remote(self):
        """The remote host of the topology (lib/remote.py), or None."""
        if self._remote is None:
            from lib import env, remote
            self._remote = remote.connect(env.topology())
        return self._remote

    def session(self, prefix="k", remote=False, **attrs):
        name = unique_name(prefix)
        if remote:
            if self.remote is None:
                raise KrpingError("no remote host configured (REMOTE_TYPE)")
            s = RemoteSession(self.remote, name)
        else:
            s = Session(name)
        self.sessions.append(s)
        s.configure(**attrs)
        return s

    def pair(self, count=10, size=64, port=None, server=None, client=None,
             remote_side=None, **both):
        """A server and a client connecting to it.

        On one host both are here and the server listens on SERVER_ADDR.
        With a remote host, remote_side ("server" or "client", default
        the pool's) runs there, the other here, and the server listens on its own host's
        address on the link (REMOTE_ADDR or LOCAL_ADDR).
        both: attributes for both sides; server/client: per-side extras.
        """
        from lib import env
        topo = env.topology()
        remote_side = remote_side or self.remote_side
        remote_srv = topo.two_host and remote_side == "server"
        remote_cli = topo.two_host and remote_side == "client"
        if topo.two_host and not (remote_srv or remote_cli):
            raise ValueError(f"remote_side {remote_side!r}")
        addr = SERVER_ADDR
        if topo.two_host:
            addr = topo.remote_addr if remote_srv else topo.local_addr
        port = next_port() if port is None else port
        common = dict(addr=addr, port=port, count=count, size=size)
        common.update(both)
        srv = self.session("s", remote=remote_srv, role="server",
                           **dict(common, **(server or {})))
        cli = self.session("c", remote=remote_cli, role="client",
                           **dict(common, **(client or {})))
        return srv, cli

    def forget_remote(self):
        """The remote host lost its sessions (powered off): do not try
        to remove them."""
        for s in self.sessions:
            if isinstance(s, RemoteSession):
                s.removed = True

    def cleanup(self):
        """rmdir every session still present; return a list of problems."""
        problems = []
        for s in reversed(self.sessions):
            if s.removed:
                continue
            s.close()
            try:
                if not s.exists:
                    continue
                s.remove()
            except OSError as e:
                problems.append(f"rmdir {s.cfg}: {errname(e.errno)}")
            except Exception as e:      # the remote host went away
                problems.append(f"rmdir {s.cfg}: {e}")
        self.sessions.clear()
        return problems


def uses_test_device(s):
    """Did the session run on a device of the test topology? On one host
    one of RDMA_DEVICES; across two hosts any (a lab names its own)."""
    from lib import env
    device = s.device
    if env.topology().two_host:
        return device != ""
    return device in RDMA_DEVICES


def wait_session(name, timeout=SHORT_TIMEOUT):
    """The session named name that another process (the CLI) creates,
    once its state file is there: sysfs shows the results directory a
    moment before its files (kobject_add() creates the one, then the
    attribute groups)."""
    # mkdir makes the sysfs directory before configfs shows the item's
    # (configfs_mkdir() attaches it after make_item()): wait for both.
    wait_for(lambda: (SYSFS / name / "state").exists() and
             (CONFIGFS / name).is_dir(), timeout=timeout,
             what=f"session {name}")
    return Session(name, create=False)


def run_pair(srv, cli, timeout=TIMEOUT):
    """Start srv, wait until it listens, start cli, wait for both to end.

    Returns (server end state, client end state). Raises if the server does
    not reach 'listening' before the client is started.
    """
    srv.start()
    srv.expect_state("listening", timeout)
    cli.start()
    try:
        cstate = cli.wait_end(timeout)
    except StateTimeout as e:
        raise StateTimeout(f"{e} | peer {srv.describe()}") from None
    # A client that failed may never have reached the server.
    stimeout = timeout if cstate == "done" else min(timeout, SHORT_TIMEOUT)
    try:
        sstate = srv.wait_end(stimeout)
    except StateTimeout as e:
        raise StateTimeout(f"{e} | peer {cli.describe()}") from None
    return sstate, cstate


def start_running(srv, cli, iterations=2):
    """Start srv, then cli, and return once both are running and the client
    has completed `iterations` iterations (for tests that stop, remove or
    break a pair mid-run)."""
    srv.start()
    srv.expect_state("listening")
    cli.start()
    cli.expect_state("running")
    srv.expect_state("running")
    wait_for(lambda: cli.stat("iterations") >= iterations,
             what=f"{iterations} client iterations")


def start_pairs(pairs):
    """Start every server of pairs ((server, client) sessions), wait for
    each to listen, then start every client, back to back."""
    for srv, _ in pairs:
        srv.start()
    for srv, _ in pairs:
        srv.expect_state("listening")
    for _, cli in pairs:
        cli.start()


def ping_stats(role, n, size):
    """Exact counters of a ping run of n iterations of size bytes."""
    if role == "client":
        return dict(send_msgs=2 * n, send_bytes=2 * ADV_BYTES * n,
                    recv_msgs=2 * n, recv_bytes=2 * ADV_BYTES * n,
                    write_msgs=0, write_bytes=0, read_msgs=0, read_bytes=0,
                    iterations=n)
    return dict(send_msgs=2 * n, send_bytes=2 * ADV_BYTES * n,
                recv_msgs=2 * n, recv_bytes=2 * ADV_BYTES * n,
                write_msgs=n, write_bytes=n * size,
                read_msgs=n, read_bytes=n * size, iterations=n)


def partial_ping_problems(role, st, size):
    """Counters of a ping run that ended somewhere inside an iteration
    (stopped, peer gone): what is inconsistent with st['iterations']?"""
    n = st["iterations"]
    # Completions count when they land, also after the thread stopped
    # waiting for them: a stop during the last step of an iteration can
    # leave that whole iteration's messages counted but not the iteration.
    if role == "client":
        # per iteration: SEND adv, RECV go-ahead, SEND adv, RECV go-ahead
        bounds = dict(send_msgs=(2 * n, 2 * n + 2), recv_msgs=(2 * n, 2 * n + 2),
                      read_msgs=(0, 0), write_msgs=(0, 0))
    else:
        # per iteration: RECV adv, READ, SEND go-ahead, RECV adv, WRITE,
        # SEND go-ahead (the iteration counts when that SEND completes);
        # the client may already have sent the next advertisement then
        bounds = dict(recv_msgs=(2 * n, 2 * n + 3), send_msgs=(2 * n, 2 * n + 2),
                      read_msgs=(n, n + 1), write_msgs=(n, n + 1))
    problems = [f"{k}={st[k]} not in [{lo}, {hi}]"
                for k, (lo, hi) in bounds.items() if not lo <= st[k] <= hi]
    for kind, unit in (("send", ADV_BYTES), ("recv", ADV_BYTES),
                       ("read", size), ("write", size)):
        if st[f"{kind}_bytes"] != unit * st[f"{kind}_msgs"]:
            problems.append(f"{kind}_bytes={st[kind + '_bytes']} != "
                            f"{unit} * {kind}_msgs={st[kind + '_msgs']}")
    return problems


def wait_for(pred, timeout=SHORT_TIMEOUT, interval=0.05, what="condition"):
    """For facts nothing can poll (a counter, a process list, an rdma_cm
    listener of another program): check, sleep interval, bounded."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not true within {timeout:g}s")
        time.sleep(interval)


# --- processes, kernel log, module -----------------------------------------

def kthread_pids(name):
    """PIDs whose comm is the session's kthread name (truncated to 15)."""
    comm = f"krping/{name}"[:15]
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/comm") as f:
                if f.read().rstrip("\n") == comm:
                    pids.append(int(entry.name))
        except OSError:
            pass
    return pids


class Kmsg:
    """Kernel log records written after construction (/dev/kmsg); seen
    holds every one read so far."""

    def __init__(self):
        self.seen = []
        try:
            self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.fd = None

    def read(self):
        lines = []
        if self.fd is None:
            return lines
        while True:
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:      # overwritten records
                    continue
                break
            if not rec:
                break
            head, _, msg = rec.decode(errors="replace").partition(";")
            text = msg.split("\n", 1)[0]
            # continuation lines (" KEY=value") are dropped
            lines.append(text)
        self.seen += lines
        return lines

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# Kernel log lines that mean the kernel is broken, whatever the test says.
KERNEL_BUG_MARKERS = ("BUG:", "WARNING:", "Oops", "general protection fault",
                      "KASAN", "UBSAN", "kernel BUG", "refcount_t:",
                      "list_add corruption", "list_del corruption",
                      "INFO: task", "hung_task", "soft lockup",
                      "rcu_sched self-detected", "rcu: INFO",
                      "Call Trace:", "kmemleak")


# On the KCSAN kernel the stage sorts KCSAN's reports after the run
# (scripts/testbed/kcsan-reports): a race in rxe must not fail a test.
KCSAN_SORTED = os.environ.get("KRPING_KCSAN_REPORTS") == "sort"


# "traps: prog[pid] general protection fault ip:... in lib.so": the
# kernel reporting a user process it killed (show_signal_msg), not a
# kernel fault; the process's own test judges it. /dev/kmsg's lines
# start with it, dmesg's after the time stamp.
USER_FAULT = re.compile(r"(^|\s)traps: \S+\[\d+\] ")

# A failed page or vmalloc allocation dumps the stack (warn_alloc): the
# kernel's answer to memory pressure or to an injected failure, not a bug.
WARN_ALLOC = (": page allocation failure: ", ": vmalloc error: ")

# rxe scheduling the task of a QP whose last reference is gone: a packet
# over rxe's loopback to a QP being destroyed. A bug of rxe's own
# (Documentation/testing.rst, patch 0007, which the debug kernel
# carries), in the format of the 7.x kernels (the newest stage); 6.12's
# "WARNING: CPU: n PID: n at ..." stays a bug. Its report is not a bug
# here, up to the end of its trace, a new report's first line, or
# RXE_RACE_LINES lines; anything else is.
RXE_SCHED_RACE = re.compile(
    r"WARNING: drivers/infiniband/sw/rxe/rxe_task\.c:\d+ at rxe_sched_task")
SPLAT_END = ("---[ end trace", "[ cut here ]")
RXE_RACE_LINES = 80


def kernel_bug_lines(lines):
    bad = []
    walloc = False
    rxe_race = 0        # lines of the race's report still to skip
    for l in lines:
        if RXE_SCHED_RACE.search(l):
            rxe_race = RXE_RACE_LINES
            continue
        if rxe_race:
            rxe_race -= 1
            if any(m in l for m in SPLAT_END):
                rxe_race = 0
                continue
            if not any(m in l for m in KERNEL_BUG_MARKERS
                       if m != "Call Trace:"):
                continue
            rxe_race = 0
        if any(m in l for m in WARN_ALLOC):
            walloc = True
        if walloc and "Call Trace:" in l:
            continue
        if walloc and "</TASK>" in l:
            walloc = False
        if any(m in l for m in KERNEL_BUG_MARKERS) and \
                not USER_FAULT.search(l) and \
                not (KCSAN_SORTED and "BUG: KCSAN:" in l):
            bad.append(l)
    return bad


def module_loaded(name=MODULE):
    return Path(f"/sys/module/{name}").exists()


def module_refcnt(name=MODULE):
    return int(read_text(f"/sys/module/{name}/refcnt"))


def delete_module(name=MODULE):
    """delete_module(2) with O_NONBLOCK, as rmmod does; returns 0 or errno."""
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.delete_module(name.encode(), os.O_NONBLOCK)
    return ctypes.get_errno() if rc != 0 else 0


def run(cmd, timeout=SHORT_TIMEOUT, check=True):
    """Run a command; return CompletedProcess (text output)."""
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and cp.returncode != 0:
        raise KrpingError(f"{' '.join(cmd)} exited {cp.returncode}: "
                          f"{cp.stdout.strip()} {cp.stderr.strip()}")
    return cp


def kill_session(proc):
    """SIGKILL to a Popen and, where it leads a session of its own
    (start_new_session), to every process of that session: a shell's
    children, also those in process groups of their own (timeout(1)
    makes one), which would otherwise live on and hold its pipes."""
    if proc.returncode is not None:
        return                  # reaped: its pid may be another's now
    try:
        leads = os.getsid(proc.pid) == proc.pid
    except ProcessLookupError:
        leads = False
    if leads:
        subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)], check=False)
    proc.kill()


def finish(proc, timeout):
    """Wait for a Popen with piped text output, killing it (and its
    session, kill_session()) after timeout seconds; returns (returncode,
    its stdout and stderr as one text). Raises KrpingError when its pipes
    stay open SHORT_TIMEOUT after the kill (a process the kill cannot
    reach, or one in uninterruptible sleep, holds them)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(proc)
        try:
            out, err = proc.communicate(timeout=SHORT_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise KrpingError(f"{proc.args!r}: its output stays open "
                              f"{SHORT_TIMEOUT:g} s after SIGKILL") from None
    return proc.returncode, f"{out}\n{err}".strip()


def cm_listeners():
    """Local rdma_cm listening ports as seen by `rdma resource show cm_id`."""
    cp = run(["rdma", "-j", "resource", "show", "cm_id"], check=False)
    if cp.returncode != 0:
        return None
    return parse_cm_listeners(cp.stdout)


def parse_cm_listeners(text):
    """The listening ports in `rdma -j resource show cm_id` output (of
    this host or another), or None if it is not that JSON."""
    ports = set()
    try:
        data = json.loads(text or "[]")
    except ValueError:
        return None
    for entry in data:
        if entry.get("state") != "LISTEN":
            continue
        # "src-addr": "10.9.0.1:7174" (iproute2 6.1); newer ones may also
        # have "src-port"
        if "src-port" in entry:
            ports.add(int(entry["src-port"]))
        elif ":" in entry.get("src-addr", ""):
            ports.add(int(entry["src-addr"].rsplit(":", 1)[1]))
    return ports


def wait_listener(port, timeout=SHORT_TIMEOUT):
    """Wait until some process has an rdma_cm listener on port."""
    return wait_for(lambda: (cm_listeners() or set()) & {port},
                    timeout=timeout, interval=0.1,
                    what=f"an rdma_cm listener on port {port}")


# --- benchmarks: latency/, bandwidth/, reset --------------------------------

DYNDBG = "/sys/kernel/debug/dynamic_debug/control"


def ending_line(log, srv):
    """A ping server's debug line (dynamic debug on) that says which side
    disconnects first; log is a Kmsg opened before the run."""
    lines = [l for l in log.read() if f"{srv.name}: " in l
             and "disconnects first" in l]
    assert len(lines) == 1, lines
    return lines[0]


LATENCY = ("samples", "min_ns", "max_ns", "mean_ns", "p50_ns", "p99_ns",
           "p999_ns", "stdev_ns")
BANDWIDTH = ("bytes", "duration_ns", "mbytes_per_sec", "msgs_per_sec")
PROGRESS = ("iterations", "bytes", "samples", "elapsed_ns")
# latency/ also has the histogram, a table rather than one number
HISTOGRAM = "histogram"
LATENCY_FILES = LATENCY + (HISTOGRAM,)
NOT_INTS = (HISTOGRAM,)
BENCH_TESTS = ("wlat", "rlat", "bw", "fr", "slat", "sbw")
MB = 1 << 20            # mbytes_per_sec counts MB of 2^20 bytes, as perftest
# 16-byte SENDs (and RECVs) of each side around a benchmark: its buffer's
# advertisement before, an end marker after
BENCH_SETUP_MSGS = 2


def session_latency(s):
    """{name: int} of /sys/kernel/krping/<name>/latency/."""
    values = s.read_ints("latency")
    return {k: values[k] for k in LATENCY}


def session_bandwidth(s):
    """{name: int} of /sys/kernel/krping/<name>/bandwidth/."""
    values = s.read_ints("bandwidth")
    return {k: values[k] for k in BANDWIDTH}


def session_progress(s):
    """{name: int} of /sys/kernel/krping/<name>/progress/."""
    values = s.read_ints("progress")
    return {k: values[k] for k in PROGRESS}


def session_per_qp(s):
    """per_qp as [{counter: int}], one dict per connection, by index."""
    if isinstance(s, RemoteSession):
        text = s.remote.read(f"{s.sys}/per_qp")
    else:
        text = (s.sys / "per_qp").read_text()
    lines = text.splitlines()
    header = lines[0].split()
    assert header[0] == "qp" and sorted(header[1:]) == sorted(STATS), text
    rows = []
    for i, line in enumerate(lines[1:]):
        values = [int(v) for v in line.split()]
        assert values[0] == i and len(values) == len(header), text
        rows.append(dict(zip(header[1:], values[1:])))
    return rows


def session_histogram(s):
    """latency/histogram as [(low_ns, high_ns, count)], ascending."""
    if isinstance(s, RemoteSession):
        text = s.remote.read(f"{s.sys}/latency/{HISTOGRAM}")
    else:
        text = read_text(s.sys / "latency" / HISTOGRAM)
    return [tuple(int(x) for x in line.split())
            for line in text.splitlines()]


def histogram_problems(hist, lat):
    """What is wrong with a histogram against its latency/ figures: the
    counts add up to the samples, the buckets ascend without overlapping,
    the first holds min_ns and the last max_ns."""
    bad = []
    if sum(c for _, _, c in hist) != lat["samples"]:
        bad.append(f"counts add up to {sum(c for _, _, c in hist)}, "
                   f"not {lat['samples']} samples")
    for i, (low, high, count) in enumerate(hist):
        if not low <= high or count < 1:
            bad.append(f"bucket {i} {(low, high, count)}")
        if i and low <= hist[i - 1][1]:
            bad.append(f"bucket {i} {(low, high)} overlaps or precedes "
                       f"{hist[i - 1][:2]}")
    if hist and not hist[0][0] <= lat["min_ns"] <= hist[0][1]:
        bad.append(f"min_ns {lat['min_ns']} not in the first bucket "
                   f"{hist[0][:2]}")
    if hist and not hist[-1][0] <= lat["max_ns"] <= hist[-1][1]:
        bad.append(f"max_ns {lat['max_ns']} not in the last bucket "
                   f"{hist[-1][:2]}")
    return bad


def session_reset(s, value=1):
    """Write value to the session's sysfs reset file; 0 or the errno."""
    return write_errno(s.sys / "reset", value)


def bench_stats(test, role, n, size, duplex=False, timed=False):
    """Exact stats/ of a completed run of test with n iterations (count
    plus warmup), size bytes (the benchmark ABI of issue 3; ping as
    ping_stats). timed: a run with duration_ms, whose slat and sbw client
    closes with an empty SEND."""
    if test == "ping":
        return ping_stats(role, n, size)
    st = _bench_stats(test, role, n, size, duplex)
    if timed and test in ("slat", "sbw"):
        key = "send_bytes" if role == "client" else "recv_bytes"
        st[key] -= ADV_BYTES
    return st


def _bench_stats(test, role, n, size, duplex):
    # every benchmark has a setup and an end exchange of 16-byte messages
    n_setup = BENCH_SETUP_MSGS
    st = dict(send_msgs=n_setup, send_bytes=n_setup * ADV_BYTES,
              recv_msgs=n_setup, recv_bytes=n_setup * ADV_BYTES,
              write_msgs=0, write_bytes=0,
              read_msgs=0, read_bytes=0, iterations=0)
    client = role == "client"
    if test == "slat":
        # n data SENDs each way, on top of the setup and end messages
        st.update(send_msgs=n_setup + n, send_bytes=n_setup * ADV_BYTES + n * size,
                  recv_msgs=n_setup + n, recv_bytes=n_setup * ADV_BYTES + n * size,
                  iterations=n)
    elif test == "sbw":
        # n data SENDs of the client into n receives of the server (the
        # server's grant WRITEs are flow control and are not counted)
        if client:
            st.update(send_msgs=n_setup + n,
                      send_bytes=n_setup * ADV_BYTES + n * size)
        else:
            st.update(recv_msgs=n_setup + n,
                      recv_bytes=n_setup * ADV_BYTES + n * size)
        st.update(iterations=n)
    elif test == "wlat" or (test == "bw" and (client or duplex)):
        st.update(write_msgs=n, write_bytes=n * size, iterations=n)
    elif test == "rlat" and client:
        st.update(read_msgs=n, read_bytes=n * size, iterations=n)
    elif test == "fr" and client:
        st.update(iterations=n)
    return st


def bench_latency_samples(test, role, n, duplex=False, warmup=0):
    """latency/samples of a completed run of n measured iterations after
    warmup ones."""
    if test in ("wlat", "slat"):
        # half round trips: the server's first write or SEND has no start
        # time (after a warm-up, the warm-up's last one is its start)
        return n if role == "client" or warmup else max(n - 1, 0)
    if test == "ping" or (test == "rlat" and role == "client"):
        return n
    return 0


def bench_reports_bandwidth(test, role, duplex=False):
    return (test == "bw" and (role == "client" or duplex)) or \
        (test == "sbw" and role == "client")


def measured_work(test, role, n, size):
    """(iterations, bytes) of n measured iterations in progress/ of a
    side: what the side itself completes (a passive server: nothing)."""
    if test in ("wlat", "slat", "sbw") or role == "client":
        return n, (0 if test == "fr" else n * size)
    return 0, 0


def check_progress(s, test, role, n, size, samples):
    """progress/ of a side that ended after n measured iterations."""
    prog = session_progress(s)
    iters, nbytes = measured_work(test, role, n, size)
    assert (prog["iterations"], prog["bytes"]) == (iters, nbytes), \
        f"{s.name} progress {prog}"
    assert prog["samples"] == samples, f"{s.name} progress {prog}"
    assert (prog["elapsed_ns"] > 0) == (iters > 0), f"{s.name} {prog}"
    return prog


def check_timed_pair(srv, cli, test, size, warmup, duration_ms):
    """Run a timed pair (duration_ms set on the client, and on the server
    or taken from the client's hello) and check that both end done,
    that the client measured at least duration_ms, and that every
    counter is exact for the iterations the client did (the server's
    equal them). Returns that number."""
    states = run_pair(srv, cli)
    assert states == ("done", "done"), f"{srv.describe()} | {cli.describe()}"
    n = cli.stat("iterations")
    assert n > warmup, cli.describe()
    for s, role in ((cli, "client"), (srv, "server")):
        assert s.stats() == bench_stats(test, role, n, size, timed=True), \
            f"{s.describe()}: {n} iterations"
        lat = session_latency(s)
        samples = bench_latency_samples(test, role, n - warmup,
                                        warmup=warmup)
        assert lat["samples"] == samples, f"{s.name} latency {lat}"
        assert latency_problems(lat) == [], f"{s.name} latency {lat}"
        bw = session_bandwidth(s)
        if bench_reports_bandwidth(test, role):
            assert bw["bytes"] == (n - warmup) * size, f"{s.name} {bw}"
            assert bw["duration_ns"] >= duration_ms * 10**6, bw
        assert bandwidth_problems(bw, size) == [], f"{s.name} {bw}"
        prog = check_progress(s, test, role, n - warmup, size, samples)
        if role == "client":
            assert prog["elapsed_ns"] >= duration_ms * 10**6, prog
    return n


def latency_problems(lat):
    """What is inconsistent in a latency/ snapshot (empty list: fine)."""
    p = []
    if lat["samples"] == 0:
        nonzero = {k: v for k, v in lat.items() if v}
        if nonzero:
            p.append(f"no samples but {nonzero}")
        return p
    order = ("min_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns")
    for a, b in zip(order, order[1:]):
        if lat[a] > lat[b]:
            p.append(f"{a}={lat[a]} > {b}={lat[b]}")
    if not lat["min_ns"] <= lat["mean_ns"] <= lat["max_ns"]:
        p.append(f"mean_ns={lat['mean_ns']} outside [{lat['min_ns']}, "
                 f"{lat['max_ns']}]")
    if lat["stdev_ns"] > lat["max_ns"] - lat["min_ns"]:
        p.append(f"stdev_ns={lat['stdev_ns']} > max-min")
    return p


def bandwidth_problems(bw, size):
    """What is inconsistent in a bandwidth/ snapshot of messages of size
    bytes."""
    p = []
    if bw["bytes"] == 0:
        nonzero = {k: v for k, v in bw.items() if v}
        if nonzero:
            p.append(f"no bytes but {nonzero}")
        return p
    d = bw["duration_ns"]
    if bw["bytes"] % size:
        p.append(f"bytes={bw['bytes']} not a multiple of size {size}")
    msgs = bw["bytes"] // size
    if d <= 0:
        return [f"bytes={bw['bytes']} with duration_ns={d}"]
    mbps = bw["bytes"] * 10**9 / d / MB
    if abs(bw["mbytes_per_sec"] - mbps) > 1:
        p.append(f"mbytes_per_sec={bw['mbytes_per_sec']}, bytes/duration "
                 f"gives {mbps:.3f}")
    mps = msgs * 10**9 / d
    if abs(bw["msgs_per_sec"] - mps) > 1 + mps * 1e-6:
        p.append(f"msgs_per_sec={bw['msgs_per_sec']}, {msgs} msgs/duration "
                 f"gives {mps:.3f}")
    return p


# --- leaks: memory and krping's own objects ---------------------------------

MEMINFO_KEYS = ("MemAvailable", "Slab", "SUnreclaim", "Percpu", "VmallocUsed")
# Pages on the per-CPU free lists are free, but meminfo counts them as in
# use (MemFree and MemAvailable leave them out). 6.12 tunes each list's
# high mark up while a CPU frees in bursts (up to about a low watermark
# per CPU: 3-4 MB in a 2 GB guest) and decays it over tens of seconds, so
# after a power cut MemAvailable alone came out 4-6 MB short.
PCP_KEY = "FreeOnPcpLists"


def meminfo():
    """/proc/meminfo as {key: kB}."""
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            fields = rest.split()
            if fields:
                info[key] = int(fields[0])
    return info


def pcp_free_kb():
    """kB of free pages on the per-CPU page lists (/proc/zoneinfo's
    pagesets: a count per CPU and zone)."""
    pages = 0
    with open("/proc/zoneinfo") as f:
        for line in f:
            key, _, value = line.strip().partition(":")
            if key == "count":
                pages += int(value)
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def memory_snapshot(settle=1.0):
    """meminfo figures with the noise taken out as far as we can: wait for
    RCU-freed objects (task structs of ended kthreads) to go, drop the page
    cache and reclaimable slabs, and give empty slabs back to the page
    allocator (/sys/kernel/slab/*/shrink). MemAvailable counts the free
    pages on the per-CPU lists; the whole of meminfo is kept (key "all")
    to say what moved when a check fails."""
    time.sleep(settle)
    for _ in range(2):
        write_errno("/proc/sys/vm/drop_caches", "3")
        for shrink in Path("/sys/kernel/slab").glob("*/shrink"):
            write_errno(shrink, "1")
    info = meminfo()
    pcp = pcp_free_kb()
    snap = {k: info.get(k, 0) for k in MEMINFO_KEYS}
    snap["MemAvailable"] += pcp
    snap[PCP_KEY] = pcp
    snap["all"] = info
    return snap


def memory_growth(before, after):
    """{key: kB more in after} (MemAvailable: kB less; it includes the
    per-CPU lists, whose own growth is PCP_KEY's, for information)."""
    growth = {k: after[k] - before[k] for k in MEMINFO_KEYS + (PCP_KEY,)}
    growth["MemAvailable"] = -growth["MemAvailable"]
    return growth


def memory_movers(before, after, min_kb=256):
    """The meminfo lines (and the per-CPU lists' free pages) that moved by
    min_kb or more between two memory_snapshot()s, as {key: kB more}."""
    a, b = dict(after["all"]), dict(before["all"])
    a[PCP_KEY], b[PCP_KEY] = after[PCP_KEY], before[PCP_KEY]
    return {k: a[k] - b.get(k, 0) for k in a
            if abs(a[k] - b.get(k, 0)) >= min_kb}


def assert_memory_returned(before, tolerance_kb=1024, avail_tolerance_kb=4096,
                           after=None, settle_s=6.0):
    """Unreclaimable slab back within tolerance_kb and available memory
    within avail_tolerance_kb of before (both memory_snapshot()s; the
    test's own python heap counts in MemAvailable); returns the growth.
    Measured noise of a repeated load on the TCG guest: about 200 kB of
    SUnreclaim and 1 MB of MemAvailable either way. A snapshot over the
    limits is taken again, for up to settle_s seconds (RCU and the
    workqueues that free behind a closed connection); a leak stays over
    them."""
    limits = {"SUnreclaim": tolerance_kb, "MemAvailable": avail_tolerance_kb}
    deadline = time.monotonic() + settle_s
    while True:
        snap = memory_snapshot() if after is None else after
        growth = memory_growth(before, snap)
        over = {k: v for k, v in growth.items()
                if k in limits and v > limits[k]}
        if not over:
            return growth
        if after is not None or time.monotonic() > deadline:
            raise KrpingError(f"memory not returned (tolerance {limits} kB, "
                              f"{settle_s:.0f} s to settle): growth {growth} "
                              f"kB; meminfo lines that moved (kB more "
                              f"after): {memory_movers(before, snap)}")


def session_names():
    """The sessions in configfs: its directories (beside its features
    file)."""
    return sorted(e.name for e in os.scandir(CONFIGFS) if e.is_dir())


def krping_leftovers():
    """What of krping is still there: configfs and sysfs session dirs and
    krping/ kthreads (an empty list when nothing is)."""
    left = [f"configfs {n}" for n in session_names()]
    left += [f"sysfs {n}" for n in sorted(os.listdir(SYSFS))]
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/comm") as f:
                comm = f.read().rstrip("\n")
        except OSError:
            continue
        if comm.startswith("krping/"):
            left.append(f"kthread {entry.name} {comm}")
    return left


def rdma_resource_counts():
    """{kind: count} of the RDMA resources (qp, cq, pd, mr, cm_id) that
    `rdma resource show` lists for kernel users other than ib_core's own
    (its GSI QPs, MAD CQs and PDs). Raises KrpingError when the rdma tool
    fails or prints what is not JSON: a leak check without counts would
    compare nothing with nothing and pass."""
    counts = {}
    for kind in ("qp", "cq", "pd", "mr", "cm_id"):
        cmd = ["rdma", "-j", "resource", "show", kind]
        try:
            cp = run(cmd, check=False)
        except OSError as e:
            raise KrpingError(f"{' '.join(cmd)}: {e}") from None
        if cp.returncode != 0:
            raise KrpingError(f"{' '.join(cmd)} exited {cp.returncode}: "
                              f"{cp.stderr.strip() or cp.stdout.strip()}")
        try:
            entries = json.loads(cp.stdout or "[]")
        except ValueError as e:
            raise KrpingError(f"{' '.join(cmd)}: not JSON ({e}): "
                              f"{cp.stdout.strip()[:200]!r} "
                              f"{cp.stderr.strip()}") from None
        counts[kind] = sum(1 for e in entries
                           if e.get("comm") not in ("[ib_core]", "ib_core"))
    return counts
