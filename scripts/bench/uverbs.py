#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""perftest over ropcie0 against perftest over rxe0, and against krping
over ropcie0: the RoPCIe thesis's table on our provider.

For ib_send_lat and ib_send_bw at each size, three tools run in turn,
each --reps times or more: perftest on ropcie0 (-R: an iWARP device,
user space through Debian's libipathverbs, every verb a system call),
perftest on rxe0 (its RoCE v2 GID) and krping over ropcie0 (the same
test in the kernel: slat, sbw). One table:

  size  test  ropcie  rxe  ratio  target  krping  pt/kr  syscall

  ratio    perftest over ropcie / perftest over rxe; decided by the
           bootstrap of bench.py (ok or MISSED in at least --confidence
           of 2000 resamples of the runs, else undecided). Targets:
           send_bw at 64 KiB >= 10, send_lat at 64 B <= 0.3; the other
           sizes are information.
  krping   krping over ropcie0, the same size, count and tx depth, polling
           as perftest does (--krping-poll 1)
  pt/kr    perftest over ropcie / krping over ropcie
  syscall  for send_lat, what the user-space path adds to one SEND's
           one-way latency: (perftest - krping) in usec; a one-way
           SEND of ib_send_lat is one post_send and one poll_cq that
           finds its receive, each an ib_uverbs system call

Latency is the median one-way latency (t_typical, perftest's RTT/2 of
the row's iterations: 1000 up to 4 KiB, fewer above, see --iters);
bandwidth the BW average in MB/s (2^20).

Across two hosts (--remote, make bench-pair) the servers run on the
other host: ropcie0 is the PCI link's device (--ropcie-addrs, this
host's address on it and the other's), rxe0 the one bench.py adds on
both hosts' data NIC (--rxe-addrs). On one host (make bench) both sides
run here: ropcie0 on the dummy rp0 (bench.py's ropcie_setup()) and
rxe0 loopback.

Normally run by scripts/bench/run.sh inside the test VMs; writes
uverbs.json and uverbs.txt to --out.
"""

import argparse
import math
import os
import subprocess
import sys
import time

import bench
from bench import fmt, log

sys.path.insert(0, os.path.join(bench.REPO, "selftests"))
from lib import krping, perftest  # noqa: E402
from lib.remote import RemoteError, SshRemote  # noqa: E402

SIZES = (64, 4096, 65536, 1048576)
TESTS = {"slat": "ib_send_lat", "sbw": "ib_send_bw"}
# (test, size): the thesis's claims on our link.
TARGETS = {("sbw", 65536): ">=10", ("slat", 64): "<=0.3"}


# What a pair that goes wrong raises: its asserts, a wait that timed
# out, a command or ssh that failed, output that was not JSON.
PAIR_FAILED = (AssertionError, OSError, TimeoutError, ValueError,
               subprocess.SubprocessError, krping.KrpingError, RemoteError)


def perftest_once(prog, srv, cli, size, iters, test):
    """One perftest pair with lib/perftest.py's retries of perftest's own
    races, again (up to 3 times) when perftest printed inf or nan (its
    clock calibration under TCG, as bench.Bench.perftest() knows); its
    figures, or None (said in the log)."""
    what = f"{prog} {size} to {srv.addr}"
    for _ in range(3):
        started = []
        try:
            out = perftest.run_checked(prog, srv, cli, size, iters, started,
                                       what, say=log)
        except PAIR_FAILED as e:
            log(f"{what}: {str(e)[:300]}")
            return None
        finally:
            for p in started:
                if p.poll() is None:
                    krping.kill_session(p)
                    p.wait()
        fig = bench.parse_perftest(out, test)
        if fig is None or all(math.isfinite(v) for v in fig.values()):
            return fig
        log(f"{prog} {size}: non-finite figures, again")
    return None


def krping_once(kb, test, size, iters, addr, poll):
    """One krping pair over ropcie0 (bench.Bench.krping()); its figures,
    or None (said in the log)."""
    try:
        return kb.krping(test, size, iters, addr=addr, poll=poll,
                         dev=bench.ROPCIE_DEV)
    except PAIR_FAILED as e:
        log(f"krping {test} {size} to {addr}: {str(e)[:300]}")
        return None


def decide(support, target, confidence):
    """ok/MISSED/undecided from bench.bootstrap()'s support of ratio
    meeting 1 (the ratio scaled by its target's limit), or "-"."""
    if support is None or target == "info":
        return "-"
    if support[0] >= confidence:
        return "ok"
    if support[0] <= 1 - confidence:
        return "MISSED"
    return f"undecided ({support[0]:.2f})"


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--tests", default=",".join(TESTS),
                    help="slat (ib_send_lat), sbw (ib_send_bw)")
    ap.add_argument("--iters", type=int, default=None,
                    help="iterations of every run (-n; krping's count); "
                    "default 1000 up to 4 KiB, then bench.py's counts "
                    "(LAT_ITERS, BW_ITERS) so that rxe's 1 MiB runs end")
    ap.add_argument("--reps", type=int, default=3,
                    help="runs of each tool per row at least")
    ap.add_argument("--max-reps", type=int, default=7,
                    help="runs of each tool per row at most: a row with a "
                    "target runs again until decided or MAX_REPS")
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--remote", metavar="HOST",
                    help="ssh destination of the other host: the servers "
                    "run there")
    ap.add_argument("--ropcie-addrs", default=bench.ROPCIE_ADDR,
                    help="LOCAL[,REMOTE]: ropcie0's addresses (default "
                    f"{bench.ROPCIE_ADDR}, one host)")
    ap.add_argument("--rxe-addrs", default="10.9.0.1",
                    help="LOCAL[,REMOTE]: rxe0's addresses (default "
                    "10.9.0.1, one host)")
    ap.add_argument("--rxe-netdev", default="data",
                    help="with --remote: rxe0's netdev on both hosts")
    ap.add_argument("--krping-poll", type=int, choices=(0, 1), default=1)
    ap.add_argument("--txdepth", type=int, default=bench.TXDEPTH)
    ap.add_argument("--port-base", type=int, default=18900)
    ap.add_argument("--cmd-timeout", type=int, default=180)
    ap.add_argument("--out", default=os.environ.get("KRPING_OUT", "."))
    args = ap.parse_args()
    args.max_reps = max(args.max_reps, args.reps)
    sizes = [int(s) for s in args.sizes.split(",")]
    tests = [t for t in args.tests.split(",") if t]
    if set(tests) - set(TESTS):
        ap.error(f"--tests: one of {', '.join(TESTS)}")

    remote = SshRemote(args.remote) if args.remote else None

    def hosts(addrs):
        """(server, client): the server on --remote when given."""
        local, _, far = addrs.partition(",")
        if remote:
            if not far:
                ap.error("--remote needs LOCAL,REMOTE addresses")
            return perftest.Host(far, remote), perftest.Host(local)
        return perftest.Host(local), perftest.Host(local)

    why = bench.ropcie_setup(args.remote)
    if not why and args.remote:
        why = bench.rxe_setup(args.rxe_netdev, args.remote)
    if why:
        log(f"no table: {why}")
        return 1
    ropcie = hosts(args.ropcie_addrs)
    rxe = hosts(args.rxe_addrs)
    # bench.Bench runs krping (tools/krping pair); its settings:
    kargs = argparse.Namespace(port_base=args.port_base, remote=args.remote,
                               txdepth=args.txdepth, dev="rxe0",
                               cmd_timeout=args.cmd_timeout,
                               addr=args.ropcie_addrs.split(",")[-1])
    kb = bench.Bench(kargs)
    t_start = time.monotonic()
    rows = []
    for test in tests:
        prog = TESTS[test]
        bw = test in bench.BW_TESTS
        key = "bw_average_mb_per_sec" if bw else "t_typical_usec"
        table = bench.BW_ITERS if bw else bench.LAT_ITERS
        for size in sizes:
            iters = args.iters or (1000 if size <= 4096
                                   else table.get(size, 100))
            target = TARGETS.get((test, size), "info")
            runs = {"ropcie": [], "rxe": [], "krping": []}
            support = None
            while True:
                # Alternating, as bench.py does: drift weighs on each.
                order = list(runs)
                if len(runs["rxe"]) % 2:
                    order.reverse()
                for who in order:
                    if who == "krping":
                        fig = krping_once(kb, test, size, iters, kargs.addr,
                                          bool(args.krping_poll))
                    else:
                        srv, cli = ropcie if who == "ropcie" else rxe
                        fig = perftest_once(prog, srv, cli, size, iters,
                                            test)
                    runs[who].append(fig and fig.get(key))
                n = len(runs["ropcie"])
                if n < args.reps:
                    continue
                if target != "info":
                    # ratio <= lim is ratio / lim <= 1: scale rxe's runs
                    lim = float(target[2:])
                    support = bench.bootstrap(
                        runs["ropcie"],
                        [v * lim if v else v for v in runs["rxe"]],
                        target[:2] + "1", f"uverbs/{test}/{size}")
                    mark = decide(support, target, args.confidence)
                    if not mark.startswith("undecided") and mark != "-":
                        break
                if target == "info" or n >= args.max_reps:
                    break
            med = {w: bench.median_of([{key: v} for v in r if v is not None],
                                      key)
                   for w, r in runs.items()}
            ratio = (med["ropcie"] / med["rxe"]
                     if med["ropcie"] is not None and med["rxe"] else None)
            pt_kr = (med["ropcie"] / med["krping"]
                     if med["ropcie"] is not None and med["krping"]
                     else None)
            syscall = (med["ropcie"] - med["krping"]
                       if not bw and None not in (med["ropcie"],
                                                   med["krping"]) else None)
            row = {"test": test, "program": prog, "size": size,
                   "iterations": iters,
                   "unit": "MB/s avg" if bw else "usec median",
                   "ropcie": med["ropcie"], "rxe": med["rxe"],
                   "ratio": ratio, "target": target,
                   "verdict": decide(support, target, args.confidence),
                   "support": support and round(support[0], 3),
                   "krping": med["krping"], "perftest_per_krping": pt_kr,
                   "syscall_usec": syscall, "runs": runs}
            rows.append(row)
            log(f"{prog} {size}: ropcie {fmt(med['ropcie'])} rxe "
                f"{fmt(med['rxe'])} krping {fmt(med['krping'])} "
                f"{row['verdict']}")

    elapsed = time.monotonic() - t_start
    where = (f"servers on {args.remote}" if args.remote else "one host")
    lines = [f"perftest over ropcie0 vs perftest over rxe0 vs krping over "
             f"ropcie0 ({where}), kernel {os.uname().release}, "
             f"reps {args.reps} to "
             f"{args.max_reps}, krping poll={args.krping_poll}",
             f"{'size':>8}  {'test':<4}  {'iters':>5}  {'ropcie':>9}  "
             f"{'rxe':>9}  "
             f"{'ratio':>6}  {'target':<6} {'verdict':<10}  {'krping':>9}  "
             f"{'pt/kr':>6}  {'syscall':>7}  unit"]
    for r in rows:
        lines.append(
            f"{r['size']:>8}  {r['test']:<4}  {r['iterations']:>5}  "
            f"{fmt(r['ropcie']):>9}  "
            f"{fmt(r['rxe']):>9}  {fmt(r['ratio'], 3):>6}  "
            f"{r['target']:<6} {r['verdict']:<10}  {fmt(r['krping']):>9}  "
            f"{fmt(r['perftest_per_krping'], 3):>6}  "
            f"{fmt(r['syscall_usec']):>7}  {r['unit']}")
    lines.append("each run (ropcie / rxe / krping):")
    for r in rows:
        lines.append(f"{r['size']:>8}  {r['test']:<4}  " + "  ".join(
            "/".join(fmt(v) for v in r["runs"][w]) for w in r["runs"]))
    lines.append("ratio: perftest over ropcie0 / perftest over rxe0; "
                 "pt/kr: perftest / krping, both over ropcie0; syscall: "
                 "(perftest - krping) one-way SEND latency over ropcie0, "
                 "what the system-call path adds")
    lines.append(f"measured in {elapsed:.0f} s")
    table = "\n".join(lines)
    print(table, flush=True)
    doc = {"kernel": os.uname().release, "remote": args.remote,
           "ropcie_addrs": args.ropcie_addrs, "rxe_addrs": args.rxe_addrs,
           "iters": args.iters, "reps": args.reps,
           "max_reps": args.max_reps, "confidence": args.confidence,
           "krping_poll": args.krping_poll, "seconds": round(elapsed, 1),
           "rows": rows, "krping_runs": kb.raw}
    bench.write_outputs(args.out, "uverbs", doc, table)
    bench.ropcie_teardown(args.remote)
    # A row without its figures, or a target row its runs left without
    # a bootstrap (fewer than two good runs of a tool), fails the bench.
    missing = [r for r in rows if r["ratio"] is None or
               (r["target"] != "info" and r["support"] is None)]
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
