# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""tools/krping while a benchmark runs: timed runs (--duration, kept by
the module), --warmup, one line per --interval from progress/, and the
progress bar on a terminal (only there).

As test_cli.py (its cli()), the output checked against the
sessions' sysfs files and the arithmetic of the counters.
"""

import json
import os
import pty
import re
import select
import subprocess
import time

import pytest

from lib import krping
from test_cli import (PY, TOOL, BW_HEAD, cli, common, needs_bench, valid,
                      has_bench_results,
                      name, validator)  # noqa: F401 (fixtures)

INTERVAL_HEAD = ("   #sec  #iterations       iter/sec   BW average[MB/sec]"
                 "    #samples")


def interval_rows(stdout):
    """The interval lines after their header: [(sec, iterations, rate,
    mb_per_sec, samples)]."""
    lines = stdout.splitlines()
    assert INTERVAL_HEAD in lines, stdout
    rows = []
    for line in lines[lines.index(INTERVAL_HEAD) + 1:]:
        f = line.split()
        if len(f) != 5:
            break
        rows.append((float(f[0]), int(f[1]), float(f[2]), float(f[3]),
                     int(f[4])))
    return rows


@krping.STOCK_ONLY
@needs_bench
@pytest.mark.parametrize("test", ["wlat", "slat", "sbw"])
def test_timed_run_with_warmup(name, validator, test):
    """--duration 1 --warmup 3: the module times the run (both sides end
    done, nobody is stopped), the warm-up is in stats/ but not sampled."""
    cp = cli("pair", *common(count=0), "--test", test, "--size", 4096,
             "--duration", 1, "--warmup", 3, "--json", "--both",
             "--name", name, check=0)
    valid(validator, json.loads(cp.stdout))
    run = json.loads(cp.stdout)["results"][0]
    assert run["ok"], cp.stderr
    cli_side, srv_side = run["sides"]["client"], run["sides"]["server"]
    assert (cli_side["state"], srv_side["state"]) == ("done", "done")
    n = cli_side["stats"]["iterations"]
    assert n > 3, cli_side
    assert srv_side["stats"]["iterations"] == n, (n, srv_side["stats"])
    if test != "sbw":
        assert cli_side["latency"]["samples"] == n - 3, cli_side
    else:
        assert cli_side["bandwidth"]["bytes"] == (n - 3) * 4096, cli_side
        assert cli_side["bandwidth"]["duration_ns"] >= 10**9, cli_side


@krping.STOCK_ONLY
@needs_bench
def test_interval_lines(name):
    """--interval: one line per interval from progress/ before the table;
    the seconds grow, the iterations never fall, the rates agree with
    the counts; no progress bar when stderr is not a terminal."""
    cp = cli("pair", *common(count=0), "--test", "bw", "--size", 4096,
             "--duration", 3, "--interval", 1, "--name", name, check=0)
    rows = interval_rows(cp.stdout)
    assert len(rows) >= 2, cp.stdout
    for (s0, i0, _, _, _), (s1, i1, rate, mbs, _) in zip(rows, rows[1:]):
        assert s1 > s0 and i1 >= i0, rows
        # the seconds are printed to the millisecond
        assert rate == pytest.approx((i1 - i0) / (s1 - s0), rel=0.02,
                                     abs=0.1), rows
        # MB/s comes from progress/bytes, read a little after
        # progress/iterations (the files are no snapshot; under TCG up to
        # some 10 ms, 2 % of a 0.4 s interval, seen in a check): over
        # a second that is within 3 %, and MB is 2^20 bytes (10^6 would
        # be 4.9 % more)
        assert mbs == pytest.approx(rate * 4096 / (1 << 20), rel=0.03), rows
    assert BW_HEAD in cp.stdout.splitlines(), cp.stdout
    assert "\r[" not in cp.stderr, cp.stderr


@krping.STOCK_ONLY
@needs_bench
def test_interval_json(name, validator):
    """With --json the interval lines are not printed but recorded."""
    cp = cli("pair", *common(count=0), "--test", "wlat", "--size", 64,
             "--duration", 1.5, "--interval", 0.3, "--json", "--name", name,
             check=0)
    valid(validator, json.loads(cp.stdout))
    run = json.loads(cp.stdout)["results"][0]
    lines = run["intervals"]
    assert len(lines) >= 2, run
    secs = [x["elapsed_sec"] for x in lines]
    assert secs == sorted(secs) and len(set(secs)) == len(secs), lines
    n = run["sides"]["client"]["stats"]["iterations"]
    assert all(x["iterations"] <= n for x in lines), (n, lines)
    # the files are read one by one, not as a snapshot: compare with the end
    assert all(x["samples"] <= n for x in lines), (n, lines)


def bar_frames(p_args, name):
    """Run the CLI with stderr on a terminal; return its exit status, its
    stdout and every bar frame it drew as (percent, done, total)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([PY, str(TOOL), *map(str, p_args), "--name",
                              name], stdout=subprocess.PIPE, stderr=slave,
                             text=True)
        os.close(slave)
        slave = None
        seen = b""
        deadline = time.monotonic() + krping.TIMEOUT
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:     # EIO: the tool closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            elif p.poll() is not None:
                break
        out, _ = p.communicate(timeout=krping.TIMEOUT)
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    frames = [tuple(int(x) for x in m) for m in
              re.findall(rb"\] +(\d+)% (\d+)/(\d+)", seen)]
    return p.returncode, out, frames, seen


@krping.STOCK_ONLY
@needs_bench
def test_progress_bar_counts_every_qp(name):
    """With --qps 2 the bar's total is both QPs' iterations (progress/
    counts them all): it never passes 100 %."""
    count = 50000
    rc, out, frames, seen = bar_frames(
        ["pair", *common(count=count), "--test", "bw", "--qps", 2], name)
    assert rc == 0, (out, seen)
    assert frames, seen
    assert all(total == 2 * count for _, _, total in frames), frames
    assert all(done <= total for _, done, total in frames), frames


@krping.STOCK_ONLY
@needs_bench
def test_progress_bar_on_a_terminal(name):
    """On a terminal, a finite benchmark draws a bar on stderr (and
    clears it before the table)."""
    rc, out, _, seen = bar_frames(
        ["pair", *common(count=0), "--test", "wlat", "--duration", "1.5"],
        name)
    assert rc == 0, (out, seen)
    assert b"\r[#" in seen and b"%" in seen, seen
    assert b"/1.5 s" in seen, seen
