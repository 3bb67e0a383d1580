#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Whether a change of rdma_krping.ko changed its figures: krping's
benchmarks over rxe0 with the module built before the change
(--before-ko) against the one vm-run loaded (KRPING_KO, this tree's),
loaded in turn in one guest. Each round runs every row with both
modules back to back, each first in every other round, so that a drift
of the host's speed falls on both runs of a round's ratio.

One row per test and size:

  size  test  before  after  after/before  90% interval  verdict

  before, after  the median of the runs with that module: the latency
                 tests' median one-way latency (t_typical, usec), the
                 bandwidth tests' BW average (MB/s, 2^20)
  after/before   the median of the rounds' ratios
  interval       5th to 95th percentile of that median over 2000
                 bootstrap resamples of the rounds
  verdict        "same" when the whole interval lies within --margin of
                 1, "slower" or "faster" when it lies wholly beyond on
                 that side, else "undecided": more rounds (--reps) would
                 be needed (always below 5 rounds)

Normally run by scripts/bench/run.sh (KRPING_BENCH_TABLES=ab, with
KRPING_AB_BEFORE naming the git revision to build the before module
from) in a 6.12 guest of one vCPU; writes ab.json and ab.txt to --out.
"""

import os
import subprocess
import sys
import time

import bench
from bench import log

# (test, size, iterations, figure, unit, a larger figure is better)
ROWS = (("ping", 64, 500, "t_typical_usec", "usec median", False),
        ("wlat", 64, 1000, "t_typical_usec", "usec median", False),
        ("rlat", 64, 1000, "t_typical_usec", "usec median", False),
        ("slat", 64, 1000, "t_typical_usec", "usec median", False),
        ("bw", 65536, 2000, "bw_average_mb_per_sec", "MB/s avg", True),
        ("sbw", 65536, 2000, "bw_average_mb_per_sec", "MB/s avg", True),
        ("bwq4", 65536, 500, "bw_average_mb_per_sec", "MB/s avg", True))


def load_krping(ko):
    """rdma_krping loaded afresh from ko (no session may be left)."""
    cp = subprocess.run(["rmmod", "rdma_krping"], capture_output=True,
                        text=True)
    if cp.returncode and "not currently loaded" not in cp.stderr:
        raise RuntimeError(f"rmmod rdma_krping: {cp.stderr.strip()}")
    bench.sh("insmod", ko)


def verdict(interval, margin, larger_is_better):
    low, high = interval
    if low >= 1 - margin and high <= 1 + margin:
        return "same"
    if high < 1 - margin:
        return "faster" if not larger_is_better else "slower"
    if low > 1 + margin:
        return "slower" if not larger_is_better else "faster"
    return "undecided"


def main():
    ap = bench.paired_parser(__doc__, port_base=19600)
    ap.add_argument("--before-ko", required=True, metavar="KO",
                    help="rdma_krping.ko built before the change")
    ap.add_argument("--reps", type=int, default=20,
                    help="rounds; each runs every row with both modules")
    ap.add_argument("--margin", type=float, default=0.03,
                    help="the change below which the verdict is same")
    ap.add_argument("--tests", default=",".join(r[0] for r in ROWS),
                    help="the rows to run, comma-separated")
    args = ap.parse_args()
    args.addr, args.remote, args.dev = "10.9.0.1", None, "rxe0"
    after_ko = os.environ.get("KRPING_KO")
    if not after_ko:
        sys.exit("ab.py: KRPING_KO not set (vm-run sets it)")
    if not os.path.isfile(args.before_ko):
        sys.exit(f"ab.py: {args.before_ko}: no such file")
    wanted = args.tests.split(",")
    rows = [r for r in ROWS if r[0] in wanted]
    if len(rows) != len(wanted):
        sys.exit(f"ab.py: --tests: one of {[r[0] for r in ROWS]}")
    b = bench.Bench(args)
    runs = {(r[0], side): [] for r in rows for side in ("before", "after")}
    t0 = time.monotonic()
    try:
        for n in range(args.reps):
            order = ("before", "after") if n % 2 == 0 else ("after",
                                                            "before")
            for side in order:
                load_krping(args.before_ko if side == "before"
                            else after_ko)
                for test, size, iters, key, _, _ in rows:
                    fig = b.krping(test, size, iters)
                    runs[(test, side)].append(fig and fig.get(key))
            log(f"round {n + 1} of {args.reps} done in "
                f"{time.monotonic() - t0:.0f} s")
    finally:
        # The module vm-run loaded stays loaded, however the rounds end.
        load_krping(after_ko)
    out_rows = []
    lines = [f"{'size':>8}  {'test':5} {'before':>9} {'after':>9} "
             f"{'after/before':>12}  {'90% interval':13}  verdict"]
    for test, size, iters, key, unit, larger in rows:
        row, line = bench.paired_row(
            test, size, iters, unit,
            (("before", runs[(test, "before")]),
             ("after", runs[(test, "after")])), key,
            lambda iv: verdict(iv, args.margin, larger), 12)
        out_rows.append(row)
        lines.append(line)
    lines.append(f"# {args.reps} rounds over rxe0, each module first in "
                 f"every other; margin {args.margin:.0%}; latency: usec "
                 f"median, bandwidth: MB/s average (2^20)")
    bench.publish(args.out, "ab",
                  {"rows": out_rows, "reps": args.reps,
                   "before_ko": args.before_ko, "after_ko": after_ko,
                   "margin": args.margin, "raw": b.raw}, lines)


if __name__ == "__main__":
    main()
