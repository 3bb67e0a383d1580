# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""tools/krping, the command-line front end, against real sessions.

Runs the CLI (its main() in the test's process, and the script itself
as a person would where its start matters: see cli()) on the test bed's
first device (rxe0, or siw0) and checks its exit status, messages,
perftest-style table and JSON against the sessions' sysfs files, and that
it leaves no session behind. The JSON of every test type is validated
against Documentation/krping-results.schema.json (python3-jsonschema),
the thresholds' exit status and messages are checked with limits no run
can miss and limits no run can meet, and the Prometheus output of "show
--prometheus" is parsed strictly and compared with the sysfs files.
"""

import contextlib
import functools
import importlib
import io
import json
import math
import os
import re
import signal
import subprocess
import time
import sys
from pathlib import Path

import pytest

from lib import krping
from lib.krping import ping_stats

TOOL = Path(__file__).resolve().parent.parent / "tools" / "krping"
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
LAT_HEAD = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]"
            "    t_avg[usec]    t_stdev[usec]   99% percentile[usec]"
            "   99.9% percentile[usec]")
BW_HEAD = " #bytes     #iterations    BW average[MB/sec]   MsgRate[Mpps]"
SCHEMA = TOOL.parent.parent / "Documentation" / "krping-results.schema.json"
TESTS = ("ping", "wlat", "rlat", "bw", "fr", "slat", "sbw")
LAT_TESTS = ("ping", "wlat", "rlat", "slat")
BW_TESTS = ("bw", "sbw")

# The CLI's own logic is the same on every kernel: the debug kernel runs
# test_pair_ping_json as its representative, the rest is STOCK_ONLY.
pytestmark = pytest.mark.skipif(not TOOL.exists(),
                                reason=f"{TOOL} not present (installed copy?)")


def cli(*args, timeout=krping.TIMEOUT, env=None, check=None, process=False):
    """Run the CLI with these arguments; a CompletedProcess (text).

    In this process by default: the package's main() with its stdout and
    stderr captured, its exit status the returned one (or SystemExit's).
    Starting python costs 2 to 3 s under TCG (the script compiled, its
    modules read over 9p) and most tests are about what the script does,
    not how it starts. process=True (or an env) starts the script as a
    person does: test_help, test_pair_ping_json and the tests that
    interrupt it or give it a terminal do. In this process the
    per-test watchdog bounds a hang instead of timeout.
    """
    argv = [str(a) for a in args]
    if process or env is not None:
        cp = subprocess.run([PY, str(TOOL)] + argv, capture_output=True,
                            text=True, timeout=timeout, env=env)
    else:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = load_tool().cli.main(argv)
            except SystemExit as e:     # argparse: --help, usage errors
                rc = e.code
        cp = subprocess.CompletedProcess([str(TOOL)] + argv, rc,
                                         out.getvalue(), err.getvalue())
    if check is not None:
        assert cp.returncode == check, \
            f"exit {cp.returncode}\nstdout: {cp.stdout}\nstderr: {cp.stderr}"
    return cp


@functools.cache
def load_tool():
    """The package of tools/krping, krpinglib, with its modules the tests
    use as attributes (imported once: the tests that patch them use
    monkeypatch, which undoes that after the test)."""
    sys.path.insert(0, str(TOOL.parent))
    for part in ("cli", "remote", "report", "session", "settings"):
        importlib.import_module(f"krpinglib.{part}")
    return importlib.import_module("krpinglib")


@pytest.fixture(scope="module")
def tool():
    return load_tool()


def inproc(*args):
    """cli() in this process, as (status, stdout, stderr)."""
    cp = cli(*args)
    return cp.returncode, cp.stdout, cp.stderr


def interrupt_when_running(argv, session, timeout):
    """Run the CLI (argv), Ctrl-C it once its session here (named
    session) runs; return (exit status, stderr)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        s = krping.wait_session(session, timeout)
        s.wait_state("running", timeout)
        s.close()
        p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # what it said tells where it hung
            p.kill()
            _, err = p.communicate()
            raise AssertionError(f"still running {timeout:g} s after "
                                 f"SIGINT; its stderr: {err.strip()!r}") \
                from None
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err


def leftovers(prefix):
    return sorted(p.name for p in krping.CONFIGFS.iterdir()
                  if p.name.startswith(prefix))


@pytest.fixture
def name():
    """A session name prefix no other test uses; no session left after."""
    prefix = krping.unique_name("t")
    yield prefix
    left = leftovers(prefix)
    for n in left:
        os.rmdir(krping.CONFIGFS / n)
    assert left == [], f"the CLI left sessions behind: {left}"


def has_bench_results():
    try:
        s = krping.Session(krping.unique_name("p"))
    except OSError:
        return False
    try:
        return (s.sys / "latency").is_dir()
    finally:
        s.remove()


needs_bench = pytest.mark.skipif(
    "not has_bench_results()",
    reason="the module has no latency/ and bandwidth/ results yet")


def common(port=None, count=10):
    return ["--addr", krping.SERVER_ADDR,
            "--port", port or krping.next_port(), "--count", count]


# --------------------------------------------------------------------------

@krping.STOCK_ONLY
def test_help():
    rc, out, _ = inproc("--help")
    assert rc == 0
    for word in ("run", "pair", "show", "list", "stop", "reset", "rm"):
        assert word in out
    rc, out, _ = inproc("pair", "--help")
    assert rc == 0
    for opt in ("--all", "--json", "--keep", "--mem-mode", "--test",
                "--duplex", "--poll", "--txdepth", "--options",
                "--max-median", "--max-p99", "--max-p999", "--max-avg",
                "--min-bw", "--min-rate"):
        assert opt in out
    rc, out, _ = inproc("show", "--help")
    assert rc == 0 and "--prometheus" in out
    # and the script itself starts
    assert "usage: krping" in cli("--help", check=0, process=True).stdout


@krping.STOCK_ONLY
def test_tool_helpers(tool):
    k = tool
    sizes = k.settings.ALL_SIZES
    assert sizes == [2 ** i for i in range(1, 24)]
    assert sizes[0] == 2 and sizes[-1] == 8 * 1024 * 1024
    assert [k.cli.size_arg(x) for x in ("64", "4k", "64K", "1m", "4MB")] == \
        [64, 4096, 65536, 1 << 20, 4 << 20]
    assert k.report.LAT_HEAD == LAT_HEAD and k.report.BW_HEAD == BW_HEAD


@krping.STOCK_ONLY
def test_is_rxe(tool, tmp_path, monkeypatch):
    """rxe is told by its 'parent' file, or by node_desc "rxe"; siw,
    ropcie, hardware and a device that is not there are not rxe."""
    def dev(name, **files):
        d = tmp_path / name
        d.mkdir()
        for f, text in files.items():
            (d / f).write_text(text + "\n")
    dev("rxe0", parent="eth1", node_desc="rxe")
    dev("renamed", parent="eth2", node_desc="lab")
    dev("bare", node_desc="rxe")
    dev("siw0", node_desc="Software iWARP stack")
    dev("ropcie0", node_desc="ropcie loopback")
    dev("mlx5_0", node_desc="host mlx5_0")
    got = {n: tool.report.is_rxe(n, root=str(tmp_path))
           for n in ("rxe0", "renamed", "bare", "siw0", "ropcie0", "mlx5_0",
                     "absent", "")}
    assert got == {"rxe0": True, "renamed": True, "bare": True,
                   "siw0": False, "ropcie0": False, "mlx5_0": False,
                   "absent": False, "": False}
    # the note: rlat only, and only for a side on this host
    monkeypatch.setattr(tool.report, "is_rxe", lambda d: d == "rxe0")

    def run(test, host, device):
        return {"test": test,
                "sides": {"client": {"host": host, "device": device}}}
    assert tool.report.rlat_note([run("wlat", None, "rxe0"),
                           run("rlat", None, "rxe0")]) == tool.report.RLAT_RXE_NOTE
    assert tool.report.rlat_note([run("wlat", None, "rxe0")]) is None
    assert tool.report.rlat_note([run("rlat", None, "siw0")]) is None
    assert tool.report.rlat_note([run("rlat", "hostb", "rxe0")]) is None


@krping.STOCK_ONLY
def test_no_module_dir(tool, monkeypatch):
    monkeypatch.setattr(tool.session, "CONFIGFS", "/nonexistent/krping")
    rc, _, err = inproc("pair", "--addr", krping.SERVER_ADDR)
    assert rc == 2
    assert "/nonexistent/krping not found" in err
    assert "rdma_krping" in err


@krping.STOCK_ONLY
def test_pair_ping_json(name):
    cp = cli("pair", *common(count=10), "--size", 64, "--validate",
             "--json", "--name", name, check=0, process=True)
    out = json.loads(cp.stdout)
    assert out["skipped"] == [] and len(out["results"]) == 1
    run = out["results"][0]
    assert run["ok"] and run["test"] == "ping" and run["size"] == 64
    for role in ("client", "server"):
        side = run["sides"][role]
        assert side["state"] == "done" and side["error"] == 0, side
        assert side["device"] in krping.RDMA_DEVICES
        assert side["stats"] == ping_stats(role, 10, 64), side
        assert side["name"] == name + role[0]
        assert f"{role},addr={krping.SERVER_ADDR}" in side["options"]
        if side["latency"] is not None:
            lat = side["latency"]
            fig = side["figures"]
            assert lat["samples"] == 10
            assert fig["kind"] == "latency" and fig["samples"] == 10
            assert fig["t_typical_usec"] == lat["p50_ns"] / 1000
            assert fig["t_min_usec"] <= fig["t_typical_usec"] <= \
                fig["t_max_usec"]


@krping.STOCK_ONLY
def test_pair_ping_table(name):
    cp = cli("pair", *common(count=10), "--size", 4096, "--name", name,
             check=0)
    lines = cp.stdout.splitlines()
    if LAT_HEAD in lines:
        row = lines[lines.index(LAT_HEAD) + 1].split()
        assert len(row) == 9, lines
        assert row[:2] == ["4096", "10"]
        tmin, tmax, typ, avg, stdev, p99, p999 = map(float, row[2:])
        assert 0 < tmin <= typ <= p99 <= p999 <= tmax
        assert tmin <= avg <= tmax and stdev >= 0
    else:
        # a module without latency/ still gets its outcome reported
        assert any("done, 10 iterations" in l for l in lines), cp.stdout


@krping.STOCK_ONLY
def test_run_both_sides_with_option_strings(name):
    port = krping.next_port()
    opts = f"addr={krping.SERVER_ADDR},port={port},count=5,size=128"
    srv = subprocess.Popen([PY, str(TOOL), "run", "-o", f"server,{opts}",
                            "--name", name + "s", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        s = krping.wait_session(name + "s")
        s.wait_state("listening", krping.SHORT_TIMEOUT)
        s.close()
        cp = cli("run", "-o", f"client,{opts},validate", "--name",
                 name + "c", "--json", check=0)
        sout, serr = srv.communicate(timeout=krping.TIMEOUT)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    assert srv.returncode == 0, serr
    cside = json.loads(cp.stdout)["results"][0]["sides"]["client"]
    sside = json.loads(sout)["results"][0]["sides"]["server"]
    assert cside["stats"] == ping_stats("client", 5, 128)
    assert sside["stats"] == ping_stats("server", 5, 128)
    assert cside["options"].endswith(",validate")


@krping.STOCK_ONLY
def test_keep_show_list_reset_rm(name):
    cli("pair", *common(count=3), "--name", name, "--keep", check=0)
    assert leftovers(name) == [name + "c", name + "s"]
    rc, out, _ = inproc("list")
    assert rc == 0
    assert any(l.split()[:2] == [name + "c", "done"]
               for l in out.splitlines()), out
    rc, out, _ = inproc("show", name + "s", "--json")
    assert rc == 0
    assert json.loads(out)["stats"] == ping_stats("server", 3, 64)
    rc, out, _ = inproc("show", name + "c")
    assert rc == 0
    assert out.startswith(f"{name}c: done, error 0, device {krping.PROVIDER}")
    if (krping.SYSFS / (name + "c") / "reset").exists():
        assert inproc("reset", name + "c")[0] == 0
        assert krping.Session(name + "c", create=False).stats() == \
            dict.fromkeys(krping.STATS, 0)
    assert inproc("rm", name + "c", name + "s")[0] == 0
    assert leftovers(name) == []
    rc, _, err = inproc("rm")
    assert rc == 2 and "--all" in err


@krping.STOCK_ONLY
def test_connection_refused(name):
    cp = cli("run", "--client", *common(count=1), "--name", name, check=1)
    assert "error -111 (ECONNREFUSED)" in cp.stderr, cp.stderr
    assert "no server listens" in cp.stderr


@krping.STOCK_ONLY
def test_start_refused(name):
    cp = cli("pair", *common(count=1), "--duplex", "--name", name, check=2)
    assert "start refused: EINVAL" in cp.stderr, cp.stderr


@krping.STOCK_ONLY
def test_value_refused(name):
    cp = cli("pair", *common(count=1), "--txdepth", 2, "--name", name,
             check=2)
    # what the option takes comes from the module's features file
    assert ("txdepth=2 refused: ERANGE (Numerical result out of range): "
            "txdepth takes 4..16384\n") in cp.stderr, cp.stderr


@krping.STOCK_ONLY
def test_usage_errors():
    rc, _, err = inproc("run", "--addr", krping.SERVER_ADDR)
    assert rc == 2 and "--server or --client" in err
    rc, _, err = inproc("pair", "--count", 1)
    assert rc == 2 and "--addr is required" in err
    rc, _, err = inproc("pair", "--test", "nope")
    assert rc == 2 and "invalid choice" in err
    rc, _, err = inproc("show", "no-such-session")
    assert rc == 2 and "no session 'no-such-session'" in err
    rc, _, err = inproc("show")
    assert rc == 2 and "name the sessions" in err
    rc, _, err = inproc("show", "--json", "--prometheus")
    assert rc == 2 and "not both" in err


@krping.STOCK_ONLY
def test_sweep_skips_sizes_above_max(name):
    cp = cli("pair", *common(count=2), "--sizes", "64,8m", "--json",
             "--name", name, check=0)
    out = json.loads(cp.stdout)
    assert [r["size"] for r in out["results"]] == [64]
    assert out["skipped"] == [{"size": 8 << 20, "reason":
                               "larger than the module's maximum size "
                               "4194304 (4 MiB)"}]
    cp = cli("pair", *common(count=1), "--sizes", "16m", "--name", name,
             check=0)
    assert "16777216 skipped: larger than the module's maximum" in cp.stdout


@krping.STOCK_ONLY
def test_duration(name):
    cp = cli("pair", *common(count=0), "--duration", 1, "--json",
             "--name", name, check=0)
    run = json.loads(cp.stdout)["results"][0]
    srv = run["sides"]["server"]
    assert run["ok"], (srv["state"], srv["error"], cp.stderr)
    assert run["sides"]["client"]["state"] == "stopped"
    assert run["sides"]["client"]["stats"]["iterations"] > 0


@krping.STOCK_ONLY
def test_interrupt_removes_sessions(name):
    rc, err = interrupt_when_running(
        [PY, str(TOOL), "pair", *map(str, common(count=0)), "--name", name],
        name + "c", krping.SHORT_TIMEOUT)
    assert rc == 130, err
    assert "interrupted" in err


@krping.STOCK_ONLY
def test_interrupts_in_a_row_remove_sessions(name):
    """Ctrl-C held down: SIGINT every 10 ms from the run on, so that some
    arrive while the CLI stops and removes its sessions. It must finish
    that, exit 130 without a traceback, and leave nothing behind: the
    same port serves the next pair."""
    port = krping.next_port()
    p = subprocess.Popen([PY, str(TOOL), "pair", *map(str, common(port=port, count=0)),
                          "--name", name], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        s = krping.wait_session(name + "c")
        s.wait_state("running", krping.SHORT_TIMEOUT)
        s.close()
        deadline = time.monotonic() + krping.SHORT_TIMEOUT
        sent = 0
        while p.poll() is None and time.monotonic() < deadline:
            p.send_signal(signal.SIGINT)
            sent += 1
            time.sleep(0.01)
        _, err = p.communicate(timeout=krping.SHORT_TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert "Traceback" not in err, err
    assert p.returncode == 130, f"{sent} SIGINTs: {err}"
    assert leftovers(name) == []
    cli("pair", *common(port=port, count=2), "--name", name + "n", check=0)


def interrupt_once_started(tool, name, monkeypatch):
    """Have the CLI (in this process) send itself a SIGINT once it has
    started its client session name + "c"."""
    real_start = tool.session.Session.start

    def start_then_signal(self):
        real_start(self)
        if self.name == name + "c":
            os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(tool.session.Session, "start", start_then_signal)


@krping.STOCK_ONLY
def test_an_interrupt_during_cleanup_removes_every_session(name, tool, monkeypatch):
    """SIGINT while the CLI stops its first session after a Ctrl-C: the
    cleanup goes on and removes both."""
    real_stop = tool.session.Session.stop
    signalled = []

    def stop_then_signal(self):
        real_stop(self)
        if not signalled:
            signalled.append(self.name)
            os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(tool.session.Session, "stop", stop_then_signal)
    interrupt_once_started(tool, name, monkeypatch)
    rc, _, err = inproc("pair", *common(count=0), "--name", name)
    monkeypatch.undo()
    assert signalled, err
    assert rc == 130, err
    assert "still removing the sessions" in err
    assert "Traceback" not in err and "Interrupted" not in err, err
    assert leftovers(name) == []


class SignallingStderr(io.RawIOBase):
    """A raw stream onto a pipe that sends this process a SIGINT while it
    writes a line containing *trigger* (once): the signal's handler then
    runs inside the buffered write of that line, as a Ctrl-C lands in the
    middle of a print."""

    def __init__(self, trigger, descriptor=None):
        super().__init__()
        self.trigger = trigger.encode()
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.rfd, False)
        self.sent = False
        # What fileno() gives (a signal handler writes there): the pipe,
        # or another descriptor.
        self.descriptor = descriptor

    def writable(self):
        return True

    def fileno(self):
        return self.wfd if self.descriptor is None else self.descriptor

    def write(self, b):
        if not self.sent and self.trigger in bytes(b):
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)
        return os.write(self.wfd, b)

    def text(self):
        chunks = []
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.rfd, 65536):
                chunks.append(chunk)
        os.close(self.rfd)
        os.close(self.wfd)
        return b"".join(chunks).decode()


@krping.STOCK_ONLY
@pytest.mark.parametrize("descriptor", ["pipe", "full"])
def test_an_interrupt_inside_a_print_to_stderr(name, tool, monkeypatch,
                                               descriptor):
    """A second SIGINT that lands while the CLI prints "interrupted" to a
    real (buffered) stderr: its handler must not write to that stream
    again (a re-entered BufferedWriter raises RuntimeError), so the run
    still removes its sessions and returns 130. With stderr's descriptor
    on /dev/full, the handler's write fails (ENOSPC), and that must not
    end the cleanup either."""
    full = os.open("/dev/full", os.O_WRONLY) if descriptor == "full" else None
    raw = SignallingStderr("interrupted, stopping", full)
    stream = io.TextIOWrapper(io.BufferedWriter(raw), line_buffering=True)
    interrupt_once_started(tool, name, monkeypatch)
    with contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(stream):
        rc = tool.cli.main([str(a) for a in ("pair", *common(count=0),
                                          "--name", name)])
    monkeypatch.undo()
    stream.flush()
    err = raw.text()
    if full is not None:
        os.close(full)
    assert raw.sent, err
    assert rc == 130, err
    if full is None:
        assert "still removing the sessions" in err, err
    assert leftovers(name) == []


@krping.STOCK_ONLY
def test_a_signal_while_a_session_is_made_leaves_none(name, tool, monkeypatch):
    """SIGINT right after the CLI's mkdir of its session, before it could
    note the session anywhere: cleanup must still find and remove it."""
    real_mkdir = os.mkdir

    def mkdir_then_signal(path, *args, **kwargs):
        real_mkdir(path, *args, **kwargs)
        if os.path.basename(str(path)).startswith(name):
            os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(tool.session.os, "mkdir", mkdir_then_signal)
    rc, _, err = inproc("pair", *common(count=1), "--name", name)
    monkeypatch.undo()
    assert rc == 130, err
    assert "interrupted" in err
    assert leftovers(name) == []


@krping.STOCK_ONLY
@needs_bench
@pytest.mark.parametrize("test", ["wlat", "rlat", "bw", "slat", "sbw"])
def test_benchmark_table_and_json(name, tool, test):
    cp = cli("pair", *common(count=10), "--size", 4096, "--test", test,
             "--name", name, "--both", "--keep", check=0)
    head = BW_HEAD if test in ("bw", "sbw") else LAT_HEAD
    lines = cp.stdout.splitlines()
    assert head in lines, cp.stdout
    row = lines[lines.index(head) + 1].split()
    assert row[:2] == ["4096", "10"]
    rc, out, _ = inproc("show", name + "c", "--json")
    assert rc == 0
    side = json.loads(out)
    # the note under rlat on rxe (what perftest's ib_read_lat differs in)
    noted = tool.report.RLAT_RXE_NOTE in cp.stderr
    assert noted == (test == "rlat" and krping.PROVIDER == "rxe"), cp.stderr
    assert tool.report.is_rxe(side["device"]) == (krping.PROVIDER == "rxe")
    assert inproc("rm", name + "c", name + "s")[0] == 0
    fig = side["figures"]
    if test in ("bw", "sbw"):
        bw = side["bandwidth"]
        assert bw["bytes"] == 10 * 4096
        want = bw["bytes"] / (1 << 20) / (bw["duration_ns"] / 1e9)
        assert abs(fig["bw_average_mb_per_sec"] - want) < 1e-6
        assert abs(fig["bw_average_mb_per_sec"] - bw["mbytes_per_sec"]) <= 1
        assert float(row[2]) == pytest.approx(want, abs=0.006)
    else:
        assert fig["kind"] == "latency" and fig["samples"] == 10
        assert fig["t_typical_usec"] == side["latency"]["p50_ns"] / 1000
        assert float(row[4]) == pytest.approx(fig["t_typical_usec"],
                                              abs=0.006)


# --------------------------------------------------------------------------
# JSON schema

def strict_json(text):
    """json.loads that refuses NaN and Infinity, which are not JSON."""
    def refuse(word):
        raise ValueError(f"not JSON: {word}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def validator():
    jsonschema = pytest.importorskip(
        "jsonschema", reason="no python3-jsonschema (scripts/testbed/deps.sh "
        "installs it)")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def valid(validator, doc):
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator.iter_errors(doc)]
    assert errors == [], doc


# A document as "pair --test wlat --both --json --max-p99 100" prints it.
def sample_side(role):
    return {
        "name": "k1" + role[0], "host": None, "role": role, "test": "wlat",
        "size": 64, "count": 10, "mem_mode": "reg",
        "options": f"{role},addr=10.9.0.1,port=7174,count=10,size=64",
        "state": "done", "error": 0, "device": "rxe0",
        "stats": {"send_bytes": 32, "send_msgs": 2, "recv_bytes": 32,
                  "recv_msgs": 2, "write_bytes": 640, "write_msgs": 10,
                  "read_bytes": 0, "read_msgs": 0, "iterations": 10},
        "latency": {"samples": 10, "min_ns": 9000, "max_ns": 30000,
                    "mean_ns": 12000, "p50_ns": 11000, "p99_ns": 30000,
                    "p999_ns": 30000, "stdev_ns": 5000},
        "bandwidth": {"bytes": 0, "duration_ns": 0, "mbytes_per_sec": 0,
                      "msgs_per_sec": 0},
        "figures": {"bytes": 64, "iterations": 10, "kind": "latency",
                    "samples": 10, "t_min_usec": 9.0, "t_max_usec": 30.0,
                    "t_typical_usec": 11.0, "t_avg_usec": 12.0,
                    "t_stdev_usec": 5.0, "p99_usec": 30.0,
                    "p999_usec": 30.0}}


def sample_run():
    return {"results": [{
        "test": "wlat", "size": 64, "count": 10, "ok": True,
        "sides": {"server": sample_side("server"),
                  "client": sample_side("client")},
        "checks": [{"option": "--max-p99", "figure": "p99_usec",
                    "side": "client", "limit": 100.0, "value": 30.0,
                    "met": True}]}],
        "skipped": [],
        "thresholds": [{"option": "--max-p99", "figure": "p99_usec",
                        "limit": 100.0, "unit": "usec"}],
        "thresholds_met": True}


def broken(change):
    doc = sample_run()
    change(doc, doc["results"][0], doc["results"][0]["sides"]["client"])
    return doc


# Each breaks one rule of the schema.
BREAKAGES = {
    "no stats": lambda d, r, c: c.pop("stats"),
    "unknown state": lambda d, r, c: c.update(state="finished"),
    "undocumented field": lambda d, r, c: c.update(extra=1),
    "size as text": lambda d, r, c: r.update(size="64"),
    "positive error": lambda d, r, c: c.update(error=5),
    "counter below 0": lambda d, r, c: c["stats"].update(send_msgs=-1),
    "figures of another kind": lambda d, r, c: c["figures"].update(
        kind="bandwidth"),
    "met as text": lambda d, r, c: r["checks"][0].update(met="yes"),
    "unknown threshold": lambda d, r, c: d["thresholds"][0].update(
        option="--max-p50"),
    "unknown side": lambda d, r, c: r["sides"].update(
        third=sample_side("client")),
    "no thresholds_met": lambda d, r, c: d.pop("thresholds_met"),
}


@krping.STOCK_ONLY
def test_json_schema_rejects_broken_documents(validator, tool, capsys):
    # the sample passes, so each rejection below is the breakage's
    valid(validator, sample_run())
    valid(validator, sample_side("client"))
    valid(validator, [sample_side("client"), sample_side("server")])
    for what, change in BREAKAGES.items():
        assert not validator.is_valid(broken(change)), what
    assert not validator.is_valid({"results": []})
    assert not validator.is_valid([sample_side("client")])
    # NaN and Infinity are not JSON: the tool prints null instead
    with pytest.raises(ValueError):
        strict_json('{"a": NaN}')
    capsys.readouterr()
    tool.report.print_json({"a": [math.nan, 1.5, -math.inf], "b": math.inf})
    assert strict_json(capsys.readouterr().out) == \
        {"a": [None, 1.5, None], "b": None}


# Limits no run can miss (10 s of latency, 1 byte/s, 0.001 msgs/s).
PASSING = {"latency": ["--max-median", 1e7, "--max-p99", 1e7,
                       "--max-p999", 1e7, "--max-avg", 1e7],
           "bandwidth": ["--min-bw", 1e-6, "--min-rate", 1e-9]}


@krping.STOCK_ONLY
@needs_bench
@pytest.mark.parametrize("test", TESTS)
def test_json_schema_and_thresholds_met(name, validator, test):
    kind = ("latency" if test in LAT_TESTS else
            "bandwidth" if test in BW_TESTS else None)
    limits = PASSING.get(kind, [])
    size = 64 if test == "ping" else 4096
    cp = cli("pair", *common(count=10), "--size", size, "--test", test,
             "--both", "--json", "--keep", "--name", name, *limits,
             check=0)
    assert cp.stderr == ""
    doc = strict_json(cp.stdout)
    valid(validator, doc)
    run = doc["results"][0]
    assert run["ok"] and run["test"] == test and run["size"] == size
    assert [t["option"] for t in doc["thresholds"]] == limits[::2]
    assert [t["limit"] for t in doc["thresholds"]] == limits[1::2]
    # checked: the client, and the server where it measured something
    sides = ["client"] + (["server"] if run["sides"]["server"]["figures"]
                          else [])
    if not limits:
        assert doc["thresholds_met"] is None and run["checks"] == []
    else:
        assert doc["thresholds_met"] is True
        assert [(c["side"], c["option"]) for c in run["checks"]] == \
            [(s, o) for s in sides for o in limits[::2]]
    for c in run["checks"]:
        fig = run["sides"][c["side"]]["figures"]
        assert c["met"] and c["value"] == fig[c["figure"]], c
    # show: one side, several sides; list
    for names in ([name + "c"], [name + "c", name + "s"]):
        rc, out, _ = inproc("show", *names, "--json")
        assert rc == 0
        shown = strict_json(out)
        valid(validator, shown)
        if len(names) > 1:
            assert [s["name"] for s in shown] == names
            assert shown[1]["stats"] == run["sides"]["server"]["stats"]
        else:
            assert shown["stats"] == run["sides"]["client"]["stats"]
    rc, out, _ = inproc("list", "--json")
    assert rc == 0
    listed = strict_json(out)
    valid(validator, listed)
    assert {"name": name + "c", "state": "done", "role": "client",
            "test": test, "error": 0,
            "device": run["sides"]["client"]["device"]} in listed
    assert inproc("rm", name + "c", name + "s")[0] == 0


# --------------------------------------------------------------------------
# thresholds

@krping.STOCK_ONLY
def test_threshold_usage_errors(name):
    base = ["pair", "--addr", krping.SERVER_ADDR, "--name", name]
    for args, want in (
            (["--test", "wlat", "--min-bw", 1],
             "--min-bw applies to bw and sbw, not to test 'wlat'"),
            (["--test", "fr", "--min-rate", 1],
             "--min-rate applies to bw and sbw, not to test 'fr'"),
            (["--test", "sbw", "--max-p99", 100],
             "--max-p99 applies to ping, wlat, rlat and slat, not to test "
             "'sbw'"),
            (["-o", "test=bw", "--max-median", 5],
             "--max-median applies to ping, wlat, rlat and slat, not to "
             "test 'bw'")):
        rc, _, err = inproc(*base, *args)
        assert (rc, err) == (2, f"krping: {want}\n")
    rc, _, err = inproc("run", "--server", *base[1:],
                        "--test", "rlat", "--max-p999", 100)
    assert rc == 2
    assert "the server of 'rlat' reports no latency figures" in err
    for bad in ("0", "-5", "nan", "inf", "fast"):
        rc, _, err = inproc(*base, "--max-p99", bad)
        assert rc == 2 and "--max-p99" in err, err


@krping.STOCK_ONLY
@needs_bench
def test_threshold_missed(name):
    # a median of at most 1 ns: no run meets it, on either side
    cp = cli("pair", *common(count=10), "--test", "wlat", "--both",
             "--json", "--name", name, "--max-p99", 1e7,
             "--max-median", 0.001, check=3)
    doc = strict_json(cp.stdout)
    run = doc["results"][0]
    assert run["ok"] and doc["thresholds_met"] is False
    want = []
    for side in ("client", "server"):
        v = run["sides"][side]["figures"]["t_typical_usec"]
        want.append(f"krping: threshold missed: median {v:.2f} usec > "
                    f"--max-median 0.001 ({side}, 64 B)")
    assert cp.stderr.splitlines() == want
    # per side, in the order of --help
    assert [(c["side"], c["option"], c["met"]) for c in run["checks"]] == [
        ("client", "--max-median", False), ("client", "--max-p99", True),
        ("server", "--max-median", False), ("server", "--max-p99", True)]

    # bandwidth: a million Mpps is out of reach, 1 byte/s is not; the
    # table is printed as usual
    cp = cli("pair", *common(count=10), "--test", "bw", "--size", 4096,
             "--name", name, "--min-bw", 1e-6, "--min-rate", 1e6, check=3)
    assert BW_HEAD in cp.stdout.splitlines()
    lines = cp.stderr.splitlines()
    assert len(lines) == 1, cp.stderr
    assert re.fullmatch(r"krping: threshold missed: message rate "
                        r"\d+\.\d{6} Mpps < --min-rate 1e\+06 "
                        r"\(client, 4096 B\)", lines[0]), lines


# --------------------------------------------------------------------------
# Prometheus

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
SAMPLE_LINE = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)"
                         r"(?:\{(?P<labels>[^\n]*)\})? (?P<value>\S+)")
LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def parse_labels(text):
    labels, pos = {}, 0
    while pos < len(text):
        m = LABEL_PAIR.match(text, pos)
        assert m, f"bad label at {text[pos:]!r}"
        assert m[1] not in labels, f"label {m[1]} twice"
        labels[m[1]] = re.sub(r"\\(.)", lambda e: "\n" if e[1] == "n"
                              else e[1], m[2])
        pos = m.end()
        if pos < len(text):
            assert text[pos] == ",", text
            pos += 1
    return labels


def parse_prometheus(text):
    """A strict reader of the text exposition format as krping writes it:
    each family once, HELP then TYPE then its samples, all together;
    counters named *_total; well-formed labels; no series twice; finite
    decimal values. Returns ({family: type}, {(name, labels): value})."""
    assert text.endswith("\n") and "\n\n" not in text
    types, samples, current = {}, {}, None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert METRIC_NAME.fullmatch(name) and help_text, line
            assert name not in types, f"family {name} twice"
            types[name], current = None, name
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert name == current and types[name] is None, line
            assert kind in ("counter", "gauge"), line
            assert (kind == "counter") == name.endswith("_total"), line
            types[name] = kind
        else:
            m = SAMPLE_LINE.fullmatch(line)
            assert m, f"not a sample: {line!r}"
            assert m["name"] == current and types[current], line
            assert NUMBER.fullmatch(m["value"]), line
            key = (m["name"], frozenset(parse_labels(m["labels"] or "")
                                        .items()))
            assert key not in samples, f"series twice: {line}"
            samples[key] = float(m["value"])
    return types, samples


STATE_NAMES = ("idle", "resolving", "listening", "connecting", "running",
               "done", "failed", "stopped")


def expected_metrics(name):
    """{(metric, labels): value} of session name, from its sysfs and
    configfs files."""
    sysd, cfg = krping.SYSFS / name, krping.CONFIGFS / name

    def num(path):
        return int(krping.read_text(path))
    labels = {"session": name, "role": krping.read_text(cfg / "role"),
              "test": krping.read_text(cfg / "test"),
              "device": krping.read_text(sysd / "device")}
    state = krping.read_text(sysd / "state")
    out = {}

    def put(metric, value, **extra):
        out[(metric, frozenset({**labels, **extra}.items()))] = value
    for st in STATE_NAMES:
        put("krping_state", int(st == state), state=st)
    put("krping_error", num(sysd / "error"))
    put("krping_size_bytes", num(cfg / "size"))
    put("krping_count", num(cfg / "count"))
    for op in ("send", "recv", "write", "read"):
        put(f"krping_{op}_bytes_total", num(sysd / "stats" / f"{op}_bytes"))
        put(f"krping_{op}_messages_total",
            num(sysd / "stats" / f"{op}_msgs"))
    put("krping_iterations_total", num(sysd / "stats" / "iterations"))
    lat = sysd / "latency"
    put("krping_latency_samples", num(lat / "samples"))
    for k in ("min", "max", "mean", "p50", "p99", "p999", "stdev"):
        put(f"krping_latency_{k}_seconds", num(lat / f"{k}_ns") / 1e9)
    bw = sysd / "bandwidth"
    nbytes, dur = num(bw / "bytes"), num(bw / "duration_ns")
    put("krping_bandwidth_bytes", nbytes)
    put("krping_bandwidth_duration_seconds", dur / 1e9)
    put("krping_bandwidth_bytes_per_second",
        nbytes * 1e9 / dur if dur else 0)
    put("krping_bandwidth_messages_per_second", num(bw / "msgs_per_sec"))
    prog = sysd / "progress"
    for k in ("iterations", "bytes", "samples"):
        put(f"krping_progress_{k}", num(prog / k))
    put("krping_progress_elapsed_seconds", num(prog / "elapsed_ns") / 1e9)
    return out


@krping.STOCK_ONLY
@needs_bench
def test_prometheus(name):
    cli("pair", *common(count=10), "--test", "wlat", "--name", name + "l",
        "--keep", check=0)
    cli("pair", *common(count=10), "--test", "bw", "--size", 4096,
        "--name", name + "b", "--keep", check=0)
    ours = [name + "lc", name + "ls", name + "bc", name + "bs"]
    try:
        rc, out, _ = inproc("show", "--prometheus")
        assert rc == 0
        types, samples = parse_prometheus(out)
        assert types["krping_send_bytes_total"] == "counter"
        assert types["krping_latency_p99_seconds"] == "gauge"
        for n in ours:
            want = expected_metrics(n)
            got = {k: v for k, v in samples.items()
                   if ("session", n) in k[1]}
            assert got == want, n
        # sysfs as the figures came: a finished bw client wrote 10 x 4096
        bc = expected_metrics(name + "bc")
        assert [v for (m, _), v in bc.items()
                if m == "krping_bandwidth_bytes"] == [40960]
        # named sessions only
        rc, out, _ = inproc("show", "--prometheus", name + "ls")
        assert rc == 0
        assert parse_prometheus(out)[1] == expected_metrics(name + "ls")
    finally:
        assert inproc("rm", *ours)[0] == 0


@krping.STOCK_ONLY
def test_prometheus_parser_is_strict():
    good = ('# HELP a_total x\n# TYPE a_total counter\n'
            'a_total{session="s\\"1",role="client"} 3\n')
    assert parse_prometheus(good)[1] == {
        ("a_total", frozenset({("session", 's"1'), ("role", "client")})): 3}
    for bad in (good.replace("# HELP a_total x\n", ""),        # no HELP
                good.replace("counter", "gauge"),              # _total gauge
                good + 'a_total{session="s\\"1",role="client"} 4\n',
                good.replace(" 3\n", " NaN\n"),
                good.replace('",role', '" role'),
                good + "# HELP a_total x\n"):
        with pytest.raises(AssertionError):
            parse_prometheus(bad)
