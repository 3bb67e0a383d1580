# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Tests of scripts/testbed/ivshmem-server, on the host (check.sh's bed
stage; by hand: /usr/bin/python3 -m pytest scripts/testbed/tests)

A Python client checks the protocol message by message (QEMU's
docs/specs/ivshmem-spec.rst), that the memory and the eventfds it hands
out are really shared, and that hostile clients harm no one else.  Two
real QEMUs (stopped with -S: no guest runs, no kernel boots) then check
that ivshmem-doorbell accepts the server and sees the memory as BAR2.
Every process a test starts is killed when the test ends, whatever
happened.
"""

import json
import mmap
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest

from procs import pid_alive

SERVER = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "ivshmem-server")
PYTHON = "/usr/bin/python3"
QEMU = shutil.which("qemu-system-x86_64")
MESSAGE = struct.Struct("<q")
TIMEOUT = 5.0  # for anything that should take milliseconds


def wait_for(predicate, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def stop(proc, sig=signal.SIGTERM):
    """End proc (first with sig) and reap it; returns its status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(TIMEOUT)
    return proc.returncode


class Server:
    def __init__(self, tmp_path, name, args, size, vectors):
        self.socket = str(tmp_path / f"{name}.sock")
        self.log_path = tmp_path / f"{name}.log"
        self.size, self.vectors = size, vectors
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [PYTHON, SERVER, "--socket", self.socket, "--size",
                 str(size), "--vectors", str(vectors), "--foreground",
                 *args], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=log)

    def log(self):
        return self.log_path.read_text()

    def wait_ready(self):
        wait_for(lambda: "listening on" in self.log()
                 or self.proc.poll() is not None, "the server")
        assert self.proc.poll() is None, self.log()

    def wait_log(self, pattern, count=1):
        """The matches of pattern, once the log has count of them."""
        def matches():
            found = re.findall(pattern, self.log(), re.M)
            return found if len(found) >= count else None
        return wait_for(matches, f"{count} x {pattern!r} in the log")

    def wait_end(self, peer_id):
        """What the log says of peer_id ("connected", "disconnected",
        "dropped"), once it says how the peer ended."""
        def story():
            found = re.findall(rf"^ivshmem-server: peer {peer_id} (\w+)",
                               self.log(), re.M)
            return found if found and found[-1] != "connected" else None
        return wait_for(story, f"the end of peer {peer_id} in the log")


@pytest.fixture
def start_server(tmp_path):
    servers = []

    def start(*args, size=65536, vectors=2, name="ivshmem"):
        server = Server(tmp_path, name, args, size, vectors)
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        stop(server.proc)


class Client:
    """A client as QEMU is one: it only receives."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(path)
        self.fds = []  # everything received, closed by close()
        self.id = self.shm = None
        self.own = []  # the eventfds we are interrupted on
        self.peers = {}  # peer ID -> eventfds that interrupt it

    def recv(self):
        """The next message: (value, fd or None)."""
        data, fds = b"", []
        while len(data) < MESSAGE.size:
            chunk, got, flags, _ = socket.recv_fds(
                self.sock, MESSAGE.size - len(data), 2,
                socket.MSG_CMSG_CLOEXEC)
            self.fds += got
            assert not flags & socket.MSG_CTRUNC
            if not chunk:
                raise EOFError("server closed the connection")
            data += chunk
            fds += got
        assert len(fds) <= 1, "one fd per message at most"
        return MESSAGE.unpack(data)[0], fds[0] if fds else None

    def recv_n(self, count):
        return [self.recv() for _ in range(count)]

    def quiet(self, timeout=0.2):
        return not readable(self.sock.fileno(), timeout)

    def handshake(self, vectors):
        """Receive and check the setup; returns the raw messages."""
        msgs = [self.recv() for _ in range(3)]
        (version, fd0), (self.id, fd1), (minus1, self.shm) = msgs
        assert (version, fd0, fd1, minus1) == (0, None, None, -1)
        assert 0 <= self.id <= 0xFFFF and self.shm is not None
        while len(self.own) < vectors:
            value, fd = self.recv()
            msgs.append((value, fd))
            assert fd is not None
            if value == self.id:
                self.own.append(fd)
            else:
                assert not self.own, "peers come before own vectors"
                self.peers.setdefault(value, []).append(fd)
        assert all(len(fds) == vectors for fds in self.peers.values())
        return msgs

    def expect_peer(self, peer_id, vectors):
        msgs = self.recv_n(vectors)
        assert [(v, fd is not None) for v, fd in msgs] == \
            [(peer_id, True)] * vectors
        self.peers[peer_id] = [fd for _, fd in msgs]

    def expect_gone(self, peer_id):
        assert self.recv() == (peer_id, None)
        del self.peers[peer_id]

    def forget(self):
        """Close the fds received so far: with 64 vectors a few clients
        would hold more than a process may have open."""
        for fd in self.fds:
            os.close(fd)
        self.fds, self.shm, self.own = [], None, []
        self.peers = dict.fromkeys(self.peers)

    def close(self):
        self.sock.close()
        for fd in self.fds:
            os.close(fd)
        self.fds = []


@pytest.fixture
def clients():
    made = []

    def connect(path):
        client = Client(path)
        made.append(client)
        return client

    yield connect
    for client in made:
        client.close()


def fd_kind(fd):
    return os.readlink(f"/proc/self/fd/{fd}")


def readable(fd, timeout=0.0):
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(timeout * 1000))


def check_doorbells(sender, receiver):
    """Ringing receiver's vector v from sender wakes exactly vector v."""
    for vector, fd in enumerate(sender.peers[receiver.id]):
        os.eventfd_write(fd, 1)
        assert readable(receiver.own[vector], TIMEOUT)
        assert os.eventfd_read(receiver.own[vector]) == 1
        assert not any(readable(own) for own in receiver.own)


# The protocol, with Python clients.

def test_two_clients(start_server, clients, tmp_path):
    shm_path = tmp_path / "shm"
    server = start_server("--shm-path", str(shm_path), size=65536,
                          vectors=3)
    a = clients(server.socket)
    msgs = a.handshake(3)
    assert [(v, fd is not None) for v, fd in msgs] == \
        [(0, False), (0, False), (-1, True)] + [(0, True)] * 3
    assert a.quiet()

    b = clients(server.socket)
    msgs = b.handshake(3)
    assert [(v, fd is not None) for v, fd in msgs] == \
        [(0, False), (1, False), (-1, True)] + [(0, True)] * 3 \
        + [(1, True)] * 3
    a.expect_peer(1, 3)
    assert a.quiet() and b.quiet()
    assert re.findall(r"peer (\d+) connected", server.log()) == ["0", "1"]

    for client in (a, b):
        assert fd_kind(client.shm) == str(shm_path)
        assert os.fstat(client.shm).st_size == 65536
        for fd in client.own + [f for p in client.peers.values()
                                for f in p]:
            assert fd_kind(fd) == "anon_inode:[eventfd]"

    # One memory, seen by both clients and by the host through the file.
    with mmap.mmap(a.shm, 65536) as ma, mmap.mmap(b.shm, 65536) as mb, \
            open(shm_path, "r+b") as f, mmap.mmap(f.fileno(), 0) as mf:
        assert len(mf) == 65536
        ma[4096:4101] = b"hello"
        assert mb[4096:4101] == b"hello" and mf[4096:4101] == b"hello"
        mf[-3:] = b"end"
        assert ma[-3:] == b"end"

    check_doorbells(b, a)
    check_doorbells(a, b)

    b.close()
    a.expect_gone(1)
    server.wait_log(r"peer 1 disconnected")
    assert a.quiet()

    # The next client gets a fresh ID, and the last one is not reused.
    c = clients(server.socket)
    c.handshake(3)
    assert c.id == 2 and list(c.peers) == [0]
    a.expect_peer(2, 3)
    check_doorbells(c, a)


def test_memfd_by_default(start_server, clients):
    server = start_server(size=1 << 20, vectors=1)
    a = clients(server.socket)
    a.handshake(1)
    assert fd_kind(a.shm).startswith("/memfd:ivshmem")
    assert os.fstat(a.shm).st_size == 1 << 20


def test_hostile_clients(start_server, clients):
    server = start_server(vectors=2)
    a = clients(server.socket)
    a.handshake(2)

    # Sends garbage after its setup.
    g = clients(server.socket)
    g.handshake(2)
    a.expect_peer(g.id, 2)
    g.sock.sendall(b"garbage")
    a.expect_gone(g.id)
    server.wait_log(rf"peer {g.id} dropped: sent data")

    # Sends an fd: the server must not keep it open.
    r, w = os.pipe()
    h = clients(server.socket)
    socket.send_fds(h.sock, [b"x"], [w])
    os.close(w)
    h_id = int(server.wait_log(r"peer (\d+) dropped: sent data", 2)[-1])
    a.expect_peer(h_id, 2)
    a.expect_gone(h_id)
    assert readable(r, TIMEOUT) and os.read(r, 1) == b""
    os.close(r)

    # Hangs up in the middle of its setup (a QEMU killed as it starts).
    # The server may still be sending it the rest then, or not: it is a
    # peer that disconnected either way, and the others hear of it.
    m = clients(server.socket)
    assert m.recv() == (0, None)
    m.sock.close()
    m_id = int(server.wait_log(r"peer (\d+) connected", 4)[-1])
    assert server.wait_end(m_id) == ["connected", "disconnected"]
    a.expect_peer(m_id, 2)
    a.expect_gone(m_id)

    # Hangs up at once, maybe before the server even accepts it: the
    # same.
    q = clients(server.socket)
    q.sock.close()
    q_id = int(server.wait_log(r"peer (\d+) connected", 5)[-1])
    assert server.wait_end(q_id) == ["connected", "disconnected"]
    a.expect_peer(q_id, 2)
    a.expect_gone(q_id)

    # None of that disturbed the first client or the server.
    assert a.quiet() and a.peers == {}
    c = clients(server.socket)
    c.handshake(2)
    assert list(c.peers) == [a.id]
    a.expect_peer(c.id, 2)
    check_doorbells(a, c)
    check_doorbells(c, a)
    ids = re.findall(r"peer (\d+) connected", server.log())
    assert len(ids) == len(set(ids))
    assert server.proc.poll() is None


def test_max_peers(start_server, clients):
    server = start_server("--max-peers", "2", vectors=1)
    a = clients(server.socket)
    a.handshake(1)
    b = clients(server.socket)
    b.handshake(1)
    a.expect_peer(b.id, 1)
    extra = clients(server.socket)
    with pytest.raises(EOFError):
        extra.recv()
    server.wait_log(r"refusing a client: 2 peers connected")
    assert a.quiet() and b.quiet()
    b.close()
    a.expect_gone(b.id)
    c = clients(server.socket)
    c.handshake(1)
    a.expect_peer(c.id, 1)


def server_fds(server):
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


def come_and_go(server, clients, vectors):
    """A client that connects and leaves; returns its ID."""
    client = clients(server.socket)
    client.handshake(vectors)
    client.close()
    return client.id


def test_hangup_while_queued(start_server, clients):
    # A client hangs up before the server has sent it all its setup: more
    # than its socket holds (5 peers of 64 vectors: 387 messages with an
    # fd each; a socket holds about 280), the rest waiting in the server.
    # The server may notice that a queued send fails (EPIPE) before it
    # reads the hang-up: a disconnect all the same, and the others hear of
    # the client coming and going.
    server = start_server(vectors=64)
    peers = []
    for _ in range(5):
        new = clients(server.socket)
        new.handshake(64)
        for peer in peers:
            peer.expect_peer(new.id, 64)
        peers.append(new)
        for peer in peers:
            peer.forget()
    idle = server_fds(server)
    m = clients(server.socket)
    assert m.recv() == (0, None)
    m_id = int(server.wait_log(r"peer (\d+) connected", 6)[-1])
    # Its socket and eventfds, and duplicates of the queued messages' fds.
    wait_for(lambda: server_fds(server) > idle + 1 + 64,
             "part of the setup to be queued")
    m.sock.close()
    assert server.wait_end(m_id) == ["connected", "disconnected"]
    for peer in peers:
        peer.expect_peer(m_id, 64)
        peer.expect_gone(m_id)
        peer.forget()
        assert peer.quiet()
    wait_for(lambda: server_fds(server) == idle, "m's fds closed")
    assert server.proc.poll() is None


def test_lagging_client(start_server, clients):
    server = start_server("--max-peers", "4", vectors=64)
    lazy = clients(server.socket)
    lazy.handshake(64)
    idle = server_fds(server)

    # What lazy's socket cannot hold waits in the server, fds and all,
    # and arrives in order once lazy reads.
    ids = [come_and_go(server, clients, 64) for _ in range(10)]
    server.wait_log(r"peer \d+ disconnected", 10)
    assert server_fds(server) > idle + 64, "nothing was queued"
    for peer_id in ids:
        lazy.expect_peer(peer_id, 64)
        lazy.expect_gone(peer_id)
    assert lazy.quiet()
    wait_for(lambda: server_fds(server) == idle, "the queue to drain")

    # One that stays behind for good is dropped, and nobody else is.
    for _ in range(60):
        come_and_go(server, clients, 64)
        if f"peer {lazy.id} dropped" in server.log():
            break
    server.wait_log(rf"peer {lazy.id} dropped: not reading")
    wait_for(lambda: server_fds(server) == idle - 65, "lazy's fds closed")
    a = clients(server.socket)
    a.handshake(64)
    assert a.peers == {}
    b = clients(server.socket)
    b.handshake(64)
    a.expect_peer(b.id, 64)
    check_doorbells(a, b)


# The command line and the process.

@pytest.mark.parametrize("args, message", [
    (["--size", "3000", "--vectors", "1"], "not a power of two"),
    (["--size", "2048", "--vectors", "1"], "at least 4096"),
    (["--size", "1M+1", "--vectors", "1"], "not a size"),
    (["--size", "1M", "--vectors", "0"], "from 1 to 64"),
    (["--size", "1M", "--vectors", "65"], "from 1 to 64"),
    (["--size", "1M", "--vectors", "2", "--max-peers", "0"], "from 1"),
    (["--vectors", "2"], "required: --size"),
])
def test_bad_usage(tmp_path, args, message):
    run = subprocess.run([PYTHON, SERVER, "--socket",
                          str(tmp_path / "s.sock"), *args],
                         capture_output=True, text=True, timeout=10)
    assert run.returncode == 2
    assert message in run.stderr
    assert not (tmp_path / "s.sock").exists()


def run_server(*args, timeout=10):
    return subprocess.run([PYTHON, SERVER, "--size", "4096", "--vectors",
                           "1", "--foreground", *args],
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_socket_in_use(start_server, tmp_path):
    # A socket file no one listens on is stale: it is replaced.
    path = tmp_path / "ivshmem.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    server = start_server()
    assert server.socket == str(path)

    run = run_server("--socket", server.socket)
    assert run.returncode == 1
    assert "already listening on" in run.stderr
    assert os.path.exists(server.socket) and server.proc.poll() is None

    not_socket = tmp_path / "file"
    not_socket.write_text("keep me")
    run = run_server("--socket", str(not_socket))
    assert run.returncode == 1 and "is not a socket" in run.stderr
    assert not_socket.read_text() == "keep me"


def test_sigterm_cleans_up(start_server, clients, tmp_path):
    pidfile = tmp_path / "pid"
    server = start_server("--pidfile", str(pidfile))
    assert pidfile.read_text() == f"{server.proc.pid}\n"
    a = clients(server.socket)
    a.handshake(2)
    assert stop(server.proc) == 0
    assert "exiting on SIGTERM" in server.log()
    assert not os.path.exists(server.socket) and not pidfile.exists()
    # The server leaves without sending disconnect notices.
    with pytest.raises(EOFError):
        a.recv()


def test_detaches(tmp_path, clients):
    sock, pidfile = tmp_path / "d.sock", tmp_path / "d.pid"
    log, lock = tmp_path / "d.log", tmp_path / "d.lock"
    pid = None
    try:
        # An fd the starter leaves open to its children, as check.sh's
        # lock: the detached server must not keep it.
        with open(log, "w") as err, open(lock, "w") as held:
            run = subprocess.run(
                [PYTHON, SERVER, "--socket", str(sock), "--size", "8192",
                 "--vectors", "1", "--pidfile", str(pidfile)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err, timeout=10, pass_fds=(held.fileno(),))
        assert run.returncode == 0
        # Ready as soon as the command returns.
        pid = int(pidfile.read_text())
        assert pid_alive(pid) and sock.exists()
        assert f"(pid {pid})" in log.read_text()
        fd_dir = f"/proc/{pid}/fd"
        targets = [os.readlink(f"{fd_dir}/{fd}") for fd in os.listdir(fd_dir)]
        assert str(lock) not in targets, targets
        a = clients(str(sock))
        a.handshake(1)
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not pid_alive(pid), "the detached server")
        assert not sock.exists() and not pidfile.exists()
    finally:
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


# Real QEMU: two stopped machines with ivshmem-doorbell.

class Qmp:
    def __init__(self, path):
        def connect():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(TIMEOUT)
            try:
                sock.connect(path)
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                return None
            return sock
        self.sock = wait_for(connect, f"QMP at {path}")
        self.file = self.sock.makefile("rwb")
        assert "QMP" in json.loads(self.file.readline())
        self.execute("qmp_capabilities")

    def execute(self, command):
        self.file.write(json.dumps({"execute": command}).encode() + b"\n")
        self.file.flush()
        while True:
            line = self.file.readline()
            assert line, "QEMU closed QMP"
            reply = json.loads(line)
            if "event" not in reply:
                assert "return" in reply, reply
                return reply["return"]

    def close(self):
        self.file.close()
        self.sock.close()


def ivshmem_bars(pci):
    """BAR number -> size of every ivshmem device in query-pci."""
    found = []
    for bus in pci:
        for dev in bus["devices"]:
            if (dev["id"]["vendor"], dev["id"]["device"]) == \
                    (0x1af4, 0x1110):
                found.append({r["bar"]: r["size"] for r in dev["regions"]})
    return found


@pytest.fixture
def qemus(tmp_path):
    started = []

    def start(name, sock, vectors):
        log = open(tmp_path / f"{name}.log", "w")
        proc = subprocess.Popen(
            [QEMU, "-S", "-display", "none", "-nodefaults",
             "-no-user-config", "-accel", "tcg", "-machine", "q35",
             "-m", "64", "-chardev", f"socket,path={sock},id=iv",
             "-device", f"ivshmem-doorbell,chardev=iv,vectors={vectors}",
             "-qmp", f"unix:{tmp_path / name}.qmp,server=on,wait=off"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        started.append(proc)
        return proc, str(tmp_path / f"{name}.qmp")

    yield start
    for proc in started:
        stop(proc, signal.SIGKILL)


@pytest.mark.skipif(QEMU is None, reason="no qemu-system-x86_64")
def test_qemu(start_server, qemus, tmp_path):
    size = 1 << 20
    server = start_server(size=size, vectors=2)
    vm_a, qmp_a = qemus("a", server.socket, 2)
    vm_b, qmp_b = qemus("b", server.socket, 2)
    ids = server.wait_log(r"peer (\d+) connected", 2)
    assert len(set(ids)) == 2

    monitors = {}
    try:
        for name, path in (("a", qmp_a), ("b", qmp_b)):
            monitors[name] = Qmp(path)
            bars = ivshmem_bars(monitors[name].execute("query-pci"))
            assert len(bars) == 1 and bars[0][2] == size, bars
            assert monitors[name].execute("query-status")["status"] == \
                "prelaunch"
        # Which QEMU got which ID is up to the order they connected in.
        vm_a.kill()
        vm_a.wait(TIMEOUT)
        gone = server.wait_log(r"peer (\d+) disconnected")
        assert len(gone) == 1 and gone[0] in ids
        assert monitors["b"].execute("query-status")["status"] == \
            "prelaunch"
        assert vm_b.poll() is None

        # A server that goes away leaves its guests running.
        assert stop(server.proc) == 0
        assert monitors["b"].execute("query-status")["status"] == \
            "prelaunch"
        assert vm_b.poll() is None
        assert (tmp_path / "b.log").read_text() == ""
    finally:
        for monitor in monitors.values():
            monitor.close()
