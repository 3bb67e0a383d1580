# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""tools/krping, the command-line front end, against real sessions.

Runs the CLI as a person would (a subprocess) on the test bed's first
device (rxe0, or siw0) and checks its exit status, messages,
perftest-style table and JSON against the sessions' sysfs files, and that
it leaves no session behind.
"""

import importlib.machinery
import importlib.util
import json
import os
import signal
import subprocess
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

# The CLI's own logic is the same on every kernel: the debug kernel runs
# test_pair_ping_json as its representative, the rest is STOCK_ONLY.
pytestmark = pytest.mark.skipif(not TOOL.exists(),
                                reason=f"{TOOL} not present (installed copy?)")


def cli(*args, timeout=krping.TIMEOUT, env=None, check=None):
    cp = subprocess.run([PY, str(TOOL)] + [str(a) for a in args],
                        capture_output=True, text=True, timeout=timeout,
                        env=env)
    if check is not None:
        assert cp.returncode == check, \
            f"exit {cp.returncode}\nstdout: {cp.stdout}\nstderr: {cp.stderr}"
    return cp


def load_tool():
    loader = importlib.machinery.SourceFileLoader("krping_cli", str(TOOL))
    spec = importlib.util.spec_from_loader("krping_cli", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tool():
    return load_tool()


def inproc(tool, capsys, *args):
    """Run the tool's main() in this process (quick commands: no python
    start-up, which costs seconds under TCG); (status, stdout, stderr)."""
    capsys.readouterr()
    try:
        rc = tool.main([str(a) for a in args])
    except SystemExit as e:             # argparse: --help, usage errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def interrupt_when_running(argv, session, timeout):
    """Run the CLI (argv), Ctrl-C it once its session here (named
    session) runs; return (exit status, stderr)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        krping.wait_for(lambda: (krping.SYSFS / session).is_dir(),
                        timeout=timeout, what=f"session {session}")
        s = krping.Session(session, create=False)
        s.wait_state("running", timeout)
        s._close()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=timeout)
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
def test_help(tool, capsys):
    rc, out, _ = inproc(tool, capsys, "--help")
    assert rc == 0
    for word in ("run", "pair", "show", "list", "stop", "reset", "rm"):
        assert word in out
    rc, out, _ = inproc(tool, capsys, "pair", "--help")
    assert rc == 0
    for opt in ("--all", "--json", "--keep", "--mem-mode", "--test",
                "--duplex", "--poll", "--txdepth", "--options"):
        assert opt in out
    # and the script itself starts
    assert "usage: krping" in cli("--help", check=0).stdout


@krping.STOCK_ONLY
def test_tool_helpers(tool):
    k = tool
    assert k.ALL_SIZES == [2 ** i for i in range(1, 24)]
    assert k.ALL_SIZES[0] == 2 and k.ALL_SIZES[-1] == 8 * 1024 * 1024
    assert [k.size_arg(x) for x in ("64", "4k", "64K", "1m", "4MB")] == \
        [64, 4096, 65536, 1 << 20, 4 << 20]
    assert k.LAT_HEAD == LAT_HEAD and k.BW_HEAD == BW_HEAD


@krping.STOCK_ONLY
def test_no_module_dir(tool, capsys, monkeypatch):
    monkeypatch.setattr(tool, "CONFIGFS", "/nonexistent/krping")
    rc, _, err = inproc(tool, capsys, "pair", "--addr", krping.SERVER_ADDR)
    assert rc == 2
    assert "/nonexistent/krping not found" in err
    assert "rdma_krping" in err


def test_pair_ping_json(name):
    cp = cli("pair", *common(count=10), "--size", 64, "--validate",
             "--json", "--name", name, check=0)
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
        krping.wait_for(lambda: (krping.SYSFS / (name + "s")).is_dir(),
                        what="the server session")
        s = krping.Session(name + "s", create=False)
        s.wait_state("listening", krping.SHORT_TIMEOUT)
        s._close()
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
def test_keep_show_list_reset_rm(name, tool, capsys):
    cli("pair", *common(count=3), "--name", name, "--keep", check=0)
    assert leftovers(name) == [name + "c", name + "s"]
    rc, out, _ = inproc(tool, capsys, "list")
    assert rc == 0
    assert any(l.split()[:2] == [name + "c", "done"]
               for l in out.splitlines()), out
    rc, out, _ = inproc(tool, capsys, "show", name + "s", "--json")
    assert rc == 0
    assert json.loads(out)["stats"] == ping_stats("server", 3, 64)
    rc, out, _ = inproc(tool, capsys, "show", name + "c")
    assert rc == 0
    assert out.startswith(f"{name}c: done, error 0, device {krping.PROVIDER}")
    if (krping.SYSFS / (name + "c") / "reset").exists():
        assert inproc(tool, capsys, "reset", name + "c")[0] == 0
        assert krping.Session(name + "c", create=False).stats() == \
            dict.fromkeys(krping.STATS, 0)
    assert inproc(tool, capsys, "rm", name + "c", name + "s")[0] == 0
    assert leftovers(name) == []
    rc, _, err = inproc(tool, capsys, "rm")
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
    assert "txdepth=2 refused: ERANGE" in cp.stderr, cp.stderr


@krping.STOCK_ONLY
def test_usage_errors(tool, capsys):
    rc, _, err = inproc(tool, capsys, "run", "--addr", krping.SERVER_ADDR)
    assert rc == 2 and "--server or --client" in err
    rc, _, err = inproc(tool, capsys, "pair", "--count", 1)
    assert rc == 2 and "--addr is required" in err
    rc, _, err = inproc(tool, capsys, "pair", "--test", "nope")
    assert rc == 2 and "invalid choice" in err
    rc, _, err = inproc(tool, capsys, "show", "no-such-session")
    assert rc == 2 and "no session 'no-such-session'" in err


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
@needs_bench
@pytest.mark.parametrize("test", ["wlat", "rlat", "bw", "slat", "sbw"])
def test_benchmark_table_and_json(name, tool, capsys, test):
    cp = cli("pair", *common(count=10), "--size", 4096, "--test", test,
             "--name", name, "--both", "--keep", check=0)
    head = BW_HEAD if test in ("bw", "sbw") else LAT_HEAD
    lines = cp.stdout.splitlines()
    assert head in lines, cp.stdout
    row = lines[lines.index(head) + 1].split()
    assert row[:2] == ["4096", "10"]
    rc, out, _ = inproc(tool, capsys, "show", name + "c", "--json")
    assert rc == 0
    side = json.loads(out)
    assert inproc(tool, capsys, "rm", name + "c", name + "s")[0] == 0
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
