#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""What ropcie's fault injection costs its data path while no fault is
armed: krping over ropcie0 with the faults' static key off (ropcie
freshly loaded: every check a no-op jump) against the same with the key
on (one fault armed for no QP, then disarmed: every completion and every
refusable request goes through the checks of fault.c and finds nothing
to do), or, with --out-ko, against a ropcie.ko whose checks are compiled
out (KCFLAGS=-DROPCIE_FAULT_CHECKS=0). The key never goes back off while
ropcie is loaded, so each run loads ropcie again; the two states take
turns, each first in every other round, so that a drift of the host's
load falls on both.

One row per test and size:

  size  test  off  on  on/off  90% interval  verdict

  off, on   the median of the runs in that state (with --out-ko: out,
            off): wlat's median one-way latency (t_typical, usec), bw's
            BW average (MB/s, 2^20)
  on/off    the median of the rounds' ratios (with --out-ko: off/out):
            each round runs both states back to back, so a drift of the
            host's speed falls on both runs of a ratio
  interval  5th to 95th percentile of that median over 2000 bootstrap
            resamples of the rounds (paired_bootstrap())
  verdict   "no cost" when the whole interval lies within --margin of 1
            on the costly side (latency up to 1 + margin, bandwidth down
            to 1 - margin), "costs" when it lies wholly beyond, else
            "undecided": more rounds (--reps) would be needed (always
            below 5 rounds)

The key-on state is an upper bound of the key-off one: with the key off
the checks are not executed at all. Normally run by scripts/bench/run.sh
(KRPING_BENCH_TABLES=faults) in a 6.12 guest of one vCPU (on two, the
runs fall in two modes); writes faults.json and faults.txt to --out.
"""

import os
import subprocess
import sys
import time

import bench
from bench import log

sys.path.insert(0, os.path.join(bench.REPO, "selftests"))
from lib import krping  # noqa: E402

ROWS = (("wlat", 64, 1000, "t_typical_usec", "usec median"),
        ("bw", 65536, 2000, "bw_average_mb_per_sec", "MB/s avg"))
FAULTS = f"/sys/kernel/debug/ropcie/{bench.ROPCIE_DEV}"


def reload_ropcie(ko):
    """ropcie loaded afresh from ko (its static key off), ropcie0 on rp0."""
    bench.ropcie_teardown(None)
    subprocess.run(["rmmod", "ropcie"], capture_output=True)
    bench.sh("insmod", ko)
    why = bench.ropcie_setup(None)
    if why:
        raise RuntimeError(f"ropcie0: {why}")


def key_on():
    """Turn the faults' static key on, and leave no fault armed: a fault
    for a QP that cannot exist, armed, then disarmed."""
    if not os.path.ismount("/sys/kernel/debug"):
        bench.sh("mount", "-t", "debugfs", "none", "/sys/kernel/debug")
    d = f"{FAULTS}/fail_respond"
    for name, value in (("qpn", 0xffffff), ("times", 1), ("times", 0),
                        ("qpn", -1)):
        krping.write_text(f"{d}/{name}", value)


def verdict(test, interval, margin):
    low, high = interval
    if test == "bw":
        low, high = 1 / high, 1 / low   # as a cost: off/on
    if high <= 1 + margin:
        return "no cost"
    if low > 1 + margin:
        return "costs"
    return "undecided"


def main():
    ap = bench.paired_parser(__doc__, port_base=19200)
    ap.add_argument("--reps", type=int, default=10,
                    help="rounds; each runs every row once in each state")
    ap.add_argument("--margin", type=float, default=0.05,
                    help="the cost below which the verdict is no cost")
    ap.add_argument("--out-ko", metavar="KO",
                    help="compare the key off with this ropcie.ko, built "
                    "with KCFLAGS=-DROPCIE_FAULT_CHECKS=0")
    args = ap.parse_args()
    args.addr, args.remote, args.dev = bench.ROPCIE_ADDR, None, "rxe0"
    if not os.environ.get("ROPCIE_KO"):
        sys.exit("faults.py: ROPCIE_KO not set (vm-run sets it)")
    b = bench.Bench(args)
    other = "out" if args.out_ko else "on"
    runs = {(t, s, st): [] for t, s, _, _, _ in ROWS for st in ("off", other)}
    t0 = time.monotonic()
    try:
        for r in range(args.reps):
            for state in (("off", other) if r % 2 == 0 else (other, "off")):
                reload_ropcie(args.out_ko if state == "out"
                              else os.environ["ROPCIE_KO"])
                if state == "on":
                    key_on()
                for test, size, iters, key, _ in ROWS:
                    fig = b.krping(test, size, iters,
                                   addr=bench.ROPCIE_ADDR, poll=True,
                                   dev=bench.ROPCIE_DEV)
                    runs[(test, size, state)].append(fig and fig.get(key))
            log(f"round {r + 1} of {args.reps} done in "
                f"{time.monotonic() - t0:.0f} s")
    finally:
        # The module vm-run loaded stays loaded, however the rounds end.
        reload_ropcie(os.environ["ROPCIE_KO"])
        bench.ropcie_teardown(None)
    rows = []
    # The costlier state over the cheaper: on/off, or off/out.
    hi, lo = ("off", "out") if args.out_ko else ("on", "off")
    lines = [f"{'size':>8}  {'test':5} {lo:>9} {hi:>9} {hi + '/' + lo:>7}"
             f"  {'90% interval':13}  verdict"]
    for test, size, iters, key, unit in ROWS:
        row, line = bench.paired_row(
            test, size, iters, unit,
            ((lo, runs[(test, size, lo)]), (hi, runs[(test, size, hi)])),
            key, lambda iv: verdict(test, iv, args.margin), 7)
        rows.append(row)
        lines.append(line)
    lines.append(f"# {args.reps} rounds, each state first in every other; "
                 f"margin {args.margin:.0%}; wlat: usec median, "
                 f"bw: MB/s average (2^20)")
    bench.publish(args.out, "faults",
                  {"rows": rows, "reps": args.reps, "states": [lo, hi],
                   "out_ko": args.out_ko, "margin": args.margin,
                   "raw": b.raw}, lines)


if __name__ == "__main__":
    main()
