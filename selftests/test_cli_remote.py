# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""tools/krping pair --remote HOST: one side here, the other on the
remote host through ssh (lib/env.py's REMOTE_ARGS is the HOST).

The CLI must print both sides' results, count exactly, and leave no
session on either host, whether the run ends, is refused or is
interrupted with Ctrl-C.
"""

import errno
import json
import subprocess
import time

import pytest

from lib import env, krping
from lib.krping import bench_latency_samples, histogram_problems
from lib.remote import SshRemote
from test_cli import (PY, TOOL, interrupt_when_running, leftovers, tool,
                      valid, validator)  # noqa: F401 (fixtures)
from test_histogram import bars

pytestmark = [pytest.mark.two_host,
              pytest.mark.skipif(not TOOL.exists(),
                                 reason=f"{TOOL} not present")]

COUNT = 50
SIDES = pytest.mark.parametrize("remote_side", ["server", "client"],
                                ids=lambda s: f"remote-{s}")


@pytest.fixture
def topo():
    return env.topology()


@pytest.fixture
def remote(topo):
    return SshRemote(topo.remote_args)


def remote_leftovers(remote, prefix):
    out = remote.cmd(f"ls {krping.CONFIGFS}").stdout.split()
    return sorted(n for n in out if n.startswith(prefix))


@pytest.fixture
def name(remote):
    """A session name prefix; no session of it may be left on either
    host afterwards."""
    prefix = krping.unique_name("r")
    yield prefix
    here = leftovers(prefix)
    there = remote_leftovers(remote, prefix)
    for n in here:
        (krping.CONFIGFS / n).rmdir()
    for n in there:
        remote.cmd(f"rmdir {krping.CONFIGFS}/{n}", check=False)
    assert (here, there) == ([], []), \
        f"left behind: here {here}, on the remote host {there}"


def server_addr(topo, remote_side):
    return topo.remote_addr if remote_side == "server" else topo.local_addr


def remote_cli(topo, name, remote_side, *args):
    return [PY, str(TOOL), "pair", "--remote", topo.remote_args,
            "--remote-side", remote_side, "--name", name,
            "--addr", server_addr(topo, remote_side),
            "--port", str(krping.next_port()), *map(str, args)]


def run(argv, timeout=krping.TIMEOUT * 2):
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout)


@SIDES
@pytest.mark.parametrize("test", ["ping", "wlat", "rlat", "bw"])
def test_remote_pair_json(topo, name, remote_side, test):
    size = 4096
    cp = run(remote_cli(topo, name, remote_side, "--test", test, "--size",
                        size, "--count", COUNT, "--validate", "--json")
             if test == "ping" else
             remote_cli(topo, name, remote_side, "--test", test, "--size",
                        size, "--count", COUNT, "--json"))
    assert cp.returncode == 0, cp.stderr
    run_ = json.loads(cp.stdout)["results"][0]
    assert run_["ok"], cp.stderr
    sides = run_["sides"]
    assert sides[remote_side]["host"] == topo.remote_args
    local_side = "client" if remote_side == "server" else "server"
    assert sides[local_side]["host"] is None
    for side, res in sides.items():
        assert res["state"] == "done", (side, res)
        assert res["error"] == 0, (side, res)
        assert res["size"] == size and res["count"] == COUNT
    cli_stats = sides["client"]["stats"]
    assert cli_stats["iterations"] == COUNT, cli_stats
    if test == "ping":
        for side in ("client", "server"):
            assert sides[side]["stats"] == krping.ping_stats(side, COUNT,
                                                             size), side
    elif test == "wlat":
        assert cli_stats["write_msgs"] == COUNT
        assert sides["server"]["stats"]["write_msgs"] == COUNT
    elif test == "rlat":
        assert cli_stats["read_msgs"] == COUNT
        assert cli_stats["read_bytes"] == COUNT * size
    else:
        assert cli_stats["write_msgs"] == COUNT
        assert cli_stats["write_bytes"] == COUNT * size
    fig = sides["client"]["figures"]
    assert fig is not None
    if test == "bw":
        assert fig["kind"] == "bandwidth" and \
            fig["bw_average_mb_per_sec"] > 0
    else:
        assert fig["kind"] == "latency" and fig["samples"] == COUNT


@SIDES
def test_remote_pair_table_labels_the_hosts(topo, name, remote_side):
    cp = run(remote_cli(topo, name, remote_side, "--test", "wlat",
                        "--count", 20))
    assert cp.returncode == 0, cp.stderr
    rows = [l for l in cp.stdout.splitlines() if l.startswith(" 64 ")]
    where = {"server": "this host", "client": "this host"}
    where[remote_side] = topo.remote_args
    want = sorted(f"({side} on {host})" for side, host in where.items())
    assert sorted(r.split("   ")[-1].strip() for r in rows) == want, \
        cp.stdout


@SIDES
def test_remote_histogram(topo, validator, name, remote_side):
    """--histogram with one side on the remote host, whose histogram the
    CLI reads there: in JSON (--both, valid against the schema) each
    side's buckets add up to its samples and hold its min and max; in
    the text after the table (both sides, as the table with --remote)
    each side's bars add up to its samples."""
    cp = run(remote_cli(topo, name, remote_side, "--test", "wlat",
                        "--count", COUNT, "--histogram", "--json", "--both"))
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    valid(validator, doc)
    for side, res in doc["results"][0]["sides"].items():
        hist = [(b["low_ns"], b["high_ns"], b["count"])
                for b in res["histogram"]]
        assert res["latency"]["samples"] == \
            bench_latency_samples("wlat", side, COUNT), (side, res)
        assert histogram_problems(hist, res["latency"]) == [], (side, res)
    cp = run(remote_cli(topo, name + "t", remote_side, "--test", "wlat",
                        "--count", COUNT, "--histogram"))
    assert cp.returncode == 0, cp.stderr
    # with --remote the table shows both sides, and so do the histograms
    parts = cp.stdout.split("latency histogram, 64 bytes, ")[1:]
    assert sorted(p.split()[0] for p in parts) == ["client", "server"], \
        cp.stdout
    for part in parts:
        side = part.split()[0]
        assert sum(c for _, _, c in bars(part)) == \
            bench_latency_samples("wlat", side, COUNT), cp.stdout


@SIDES
def test_remote_interrupt_removes_both_sides(topo, remote, name,
                                             remote_side):
    local = name + ("c" if remote_side == "server" else "s")
    rc, err = interrupt_when_running(
        remote_cli(topo, name, remote_side, "--count", 0), local,
        krping.TIMEOUT)
    assert rc == 130, err
    assert "interrupted" in err
    # the name fixture checks that neither host kept a session


def test_remote_value_refused(topo, name):
    # The remote server refuses tos=256 (0..255) before anything starts;
    # the message names the host, the attribute, the remote errno and
    # what the remote module's features file says the option takes.
    cp = run(remote_cli(topo, name, "server", "--tos", 256, "--count", 1))
    assert cp.returncode == 2, cp.stderr
    assert (f"on {topo.remote_args}: tos=256 refused: ERANGE (Numerical "
            f"result out of range): tos takes 0..255\n") in cp.stderr, \
        cp.stderr


def test_remote_unreachable(topo, name):
    # Nothing listens on port 1 here: ssh fails at once, before any
    # session exists.
    t0 = time.monotonic()
    cp = run([PY, str(TOOL), "pair", "--remote=-p 1 root@127.0.0.1",
              "--name", name, "--addr", topo.local_addr, "--count", "1"])
    assert cp.returncode == 2, cp.stderr
    assert "ssh failed" in cp.stderr and "refused" in cp.stderr, cp.stderr
    assert time.monotonic() - t0 < krping.SHORT_TIMEOUT


# The processes the remote kernel has created since boot, read there with
# the shell's builtins (the long-lived shell of lib/remote.py starts none).
FORKS = ("while read -r k v _; do [ \"$k\" = processes ] && "
         "{ echo $v; break; }; done < /proc/stat")
WAIT_SECS = 3
# A wait's own processes: the shell sshd starts for the command, mkfifo
# and rm for the fifo it pauses on, and the subshell of the read after
# it (lib/remote.py runs each command in one): 4. Kernel threads
# that start meanwhile count too, hence the room. With sleep(1) a 3.3 s
# wait created 15 under TCG (two-host, 2026-11-29), more on a faster
# machine.
WAIT_FORKS = 8


def test_remote_wait_starts_no_program(tool, topo, remote, name):
    """The CLI's wait for a remote session's state must not start a
    program for each look: under TCG each costs the remote guest 0.1 to
    0.2 s of the CPU that the run it watches needs. The guests' root
    shell is bash, so the wait pauses in read -t; with sleep(1) it
    would start one program per look (10 a second)."""
    ssh = tool.remote.Ssh(topo.remote_args)
    try:
        sess = tool.remote.RemoteSession(ssh, name + "w")
        try:
            before = int(remote.cmd(FORKS).stdout)
            t0 = time.monotonic()
            state = sess.wait(["running"], timeout=WAIT_SECS)
            secs = time.monotonic() - t0
            forks = int(remote.cmd(FORKS).stdout) - before
        finally:
            sess.remove()
    finally:
        ssh.close()
    assert state is None, f"an idle session reached {state!r}"
    assert secs >= WAIT_SECS, f"the wait ended after {secs:.2f} s"
    assert forks <= WAIT_FORKS, \
        f"{forks} processes started on the remote host in a " \
        f"{secs:.1f} s wait"


# An address no interface of the remote host has (TEST-NET-3): a server
# bound to it fails at rdma_bind_addr(), milliseconds after its start.
NOT_THERE = "203.0.113.9"
RERUNS = 3
RERUN_WAIT_S = 20


def test_remote_rerun_that_ends_at_once_is_seen(tool, topo, name):
    """The CLI's wait for a remote run that ends in the same state as the
    run before it, within one look of the wait: each returns that state
    at once, none waits for its timeout. start=1 sets the state to
    resolving before the write returns (krping_session_start()), so an
    end state read after a start is the new run's."""
    ssh = tool.remote.Ssh(topo.remote_args)
    try:
        sess = tool.remote.RemoteSession(ssh, name + "f")
        try:
            sess.apply([("role", "server"), ("addr", NOT_THERE),
                        ("port", "18999")])
            for i in range(RERUNS):
                t0 = time.monotonic()
                sess.start()
                state = sess.wait(["done", "failed", "stopped"],
                                  timeout=RERUN_WAIT_S)
                secs = time.monotonic() - t0
                assert state == "failed", f"run {i}: {state!r}"
                assert sess.error == -errno.EADDRNOTAVAIL, f"run {i}"
                assert secs < RERUN_WAIT_S / 2, f"run {i}: {secs:.1f} s"
        finally:
            sess.remove()
    finally:
        ssh.close()


def test_lib_remote_rerun_that_ends_at_once_is_seen(topo, remote, name):
    """The same for the selftests' remote session (lib/krping.py)."""
    sess = krping.RemoteSession(remote, name + "g")
    try:
        sess.configure(role="server", addr=NOT_THERE, port=18998)
        for i in range(RERUNS):
            t0 = time.monotonic()
            sess.start()
            state = sess.wait_state(("done", "failed", "stopped"),
                                    timeout=RERUN_WAIT_S)
            secs = time.monotonic() - t0
            assert state == "failed", f"run {i}: {state!r}"
            assert sess.error == -errno.EADDRNOTAVAIL, f"run {i}"
            assert secs < RERUN_WAIT_S / 2, f"run {i}: {secs:.1f} s"
    finally:
        sess.remove()
