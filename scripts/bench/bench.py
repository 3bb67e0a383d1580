#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krping against perftest, side by side, on one RDMA device.

Runs, for each size, krping (tools/krping pair, i.e. a server and a
client session on this host) and the matching perftest program (server
and client processes on this host) with the same size, iteration count and
device, and prints one table:

  size  test  iters  krping  perftest  ratio  unit  target

  wlat  ib_write_lat  median one-way latency (t_typical, RTT/2)
  rlat  ib_read_lat   median READ round trip (t_typical)
  bw    ib_write_bw   BW average [MB/sec], MB = 2^20 bytes
  ping  model         krping's whole ping-pong iteration (4 SENDs of 16 B,
                      1 READ and 1 WRITE of size bytes, each waited for)
                      against the sum of perftest's parts:
                      4 x ib_send_lat(16 B) + ib_read_lat + 2 x ib_write_lat

Latency ratios are krping/perftest (target <= 1.0), bandwidth ratios
krping/perftest (target >= 1.0); the ping row is information only (its
model leaves out the memory registrations of every iteration). Both krping sessions run with poll=1,
as perftest busy-polls by default; bw runs both with the same txdepth.

Normally run by scripts/bench/run.sh (make bench) inside the test VM;
also works on a host with an RDMA device and the module loaded:

  scripts/bench/bench.py --dev rxe0 --addr 10.9.0.1 --gid-index 1

Writes the table and JSON to --out (default $KRPING_OUT or .).
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KRPING = os.path.join(REPO, "tools", "krping")

SIZES = [64, 4096, 65536, 1048576]
# Iterations per size, chosen so that the whole bench (both tools, every
# test, plus the VM boot) stays well under 15 minutes under QEMU TCG.
LAT_ITERS = {64: 1000, 4096: 1000, 65536: 300, 1048576: 50}
BW_ITERS = {64: 5000, 4096: 2000, 65536: 500, 1048576: 100}
SEND_SIZE = 16          # krping's ping messages
TXDEPTH = 128           # perftest's default tx depth for bw

PERFTEST = {"wlat": "ib_write_lat", "rlat": "ib_read_lat",
            "bw": "ib_write_bw", "send": "ib_send_lat"}


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def tcp_listening(port):
    """Is a TCP socket listening on port (perftest's out-of-band channel)?"""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if (fields[3] == "0A" and
                            int(fields[1].rsplit(":", 1)[1], 16) == port):
                        return True
        except OSError:
            pass
    return False


class Bench:
    def __init__(self, args):
        self.args = args
        self.port = args.port_base
        self.raw = []

    def next_port(self):
        self.port += 1
        return self.port

    # -- perftest -----------------------------------------------------
    def perftest(self, test, size, iters):
        """perftest's figures; a run that printed inf/nan (perftest's
        clock calibration goes wrong now and then under TCG) is rerun."""
        for attempt in range(3):
            fig = self.perftest_once(test, size, iters)
            if fig is None or all(math.isfinite(v) for v in fig.values()):
                return fig
            self.raw[-1]["discarded"] = "non-finite figures"
            self.raw[-1]["result"] = {k: str(v) for k, v in fig.items()}
            log(f"{PERFTEST[test]} {size}: non-finite figures, again")
        return None

    def perftest_once(self, test, size, iters):
        a = self.args
        prog = PERFTEST[test]
        port = self.next_port()
        common = [prog, "-d", a.dev, "-x", str(a.gid_index), "-s", str(size),
                  "-n", str(iters), "-p", str(port), "-F"]
        if test == "bw":
            common += ["-t", str(a.txdepth)]
        client = common + [a.addr]
        t0 = time.monotonic()
        srv = subprocess.Popen(common, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 30
            while not tcp_listening(port):
                if srv.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{prog} server did not listen: "
                                       f"{srv.communicate()[0][-500:]}")
                time.sleep(0.05)
            cp = subprocess.run(client, capture_output=True, text=True,
                                timeout=a.cmd_timeout)
            sout = srv.communicate(timeout=30)[0]
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()
        secs = time.monotonic() - t0
        rec = {"tool": "perftest", "test": test, "size": size,
               "iters": iters, "cmd": " ".join(client), "rc": cp.returncode,
               "secs": round(secs, 2)}
        fig = parse_perftest(cp.stdout, test)
        if cp.returncode != 0 or fig is None:
            rec["error"] = (cp.stdout + cp.stderr)[-800:]
            self.raw.append(rec)
            log(f"{' '.join(client)} failed (rc {cp.returncode})")
            return None
        rec["result"] = fig
        rec["server_output_tail"] = sout[-300:]
        self.raw.append(rec)
        return fig

    # -- krping -------------------------------------------------------
    def krping(self, test, size, iters):
        a = self.args
        port = self.next_port()
        cmd = [sys.executable, KRPING, "pair", "--addr", a.addr,
               "--port", str(port), "--test", test, "--size", str(size),
               "--count", str(iters), "--json", "--timeout",
               str(a.cmd_timeout)]
        if test != "ping":
            cmd.append("--poll")
        if test == "bw":
            cmd += ["--txdepth", str(a.txdepth)]
        t0 = time.monotonic()
        cp = subprocess.run(cmd, capture_output=True, text=True,
                            timeout=a.cmd_timeout + 60)
        secs = time.monotonic() - t0
        rec = {"tool": "krping", "test": test, "size": size, "iters": iters,
               "cmd": " ".join(cmd[1:]), "rc": cp.returncode,
               "secs": round(secs, 2)}
        fig = None
        try:
            out = json.loads(cp.stdout)
            run = out["results"][0]
            rec["sides"] = run["sides"]
            fig = run["sides"]["client"]["figures"]
        except (ValueError, KeyError, IndexError):
            pass
        if cp.returncode != 0 or fig is None:
            rec["error"] = cp.stderr[-800:]
            self.raw.append(rec)
            log(f"krping {test} {size}: failed (rc {cp.returncode}): "
                f"{cp.stderr.strip()[-300:]}")
            return None
        rec["result"] = fig
        self.raw.append(rec)
        return fig


def parse_perftest(text, test):
    """The figures of perftest's result line (the line after the header)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "#bytes" in line and i + 1 < len(lines):
            f = lines[i + 1].split()
            try:
                if test == "bw":
                    return {"bytes": int(f[0]), "iterations": int(f[1]),
                            "bw_peak_mb_per_sec": float(f[2]),
                            "bw_average_mb_per_sec": float(f[3]),
                            "msg_rate_mpps": float(f[4])}
                return {"bytes": int(f[0]), "iterations": int(f[1]),
                        "t_min_usec": float(f[2]), "t_max_usec": float(f[3]),
                        "t_typical_usec": float(f[4]),
                        "t_avg_usec": float(f[5]),
                        "t_stdev_usec": float(f[6]),
                        "p99_usec": float(f[7]), "p999_usec": float(f[8])}
            except (IndexError, ValueError):
                return None
    return None


def median_of(figs, key):
    vals = [f[key] for f in figs if f is not None]
    return statistics.median(vals) if vals else None


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dev", default="rxe0", help="RDMA device (rxe0)")
    ap.add_argument("--addr", default="10.9.0.1",
                    help="address of --dev (10.9.0.1)")
    ap.add_argument("--gid-index", type=int, default=1,
                    help="perftest -x: the RoCE v2 IPv4 GID (1 on rxe)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--tests", default="wlat,rlat,bw,ping")
    ap.add_argument("--reps", type=int, default=3,
                    help="measure each row REPS times per tool, "
                    "alternating (krping, perftest, perftest, krping, ...); "
                    "the median is reported")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every iteration count")
    ap.add_argument("--txdepth", type=int, default=TXDEPTH)
    ap.add_argument("--port-base", type=int, default=18600)
    ap.add_argument("--cmd-timeout", type=int, default=180)
    ap.add_argument("--out", default=os.environ.get("KRPING_OUT", "."))
    args = ap.parse_args()

    sizes = [int(s) for s in args.sizes.split(",")]
    tests = args.tests.split(",")
    b = Bench(args)
    t_start = time.monotonic()

    def iters_for(test, size):
        table = BW_ITERS if test == "bw" else LAT_ITERS
        n = table.get(size) or (1000 if size <= 4096 else 100)
        return max(1, int(n * args.scale))

    plan = [(t, s, iters_for(t, s)) for t in tests for s in sizes]
    log("plan (test size iterations): " +
        ", ".join(f"{t} {s} x{n}" for t, s, n in plan))

    rows = []

    def measure(test, size, iters):
        kr, pt = [], []
        for rep in range(args.reps):
            order = ("k", "p") if rep % 2 == 0 else ("p", "k")
            for who in order:
                if who == "k":
                    kr.append(b.krping(test, size, iters))
                elif test != "ping":
                    pt.append(b.perftest(test, size, iters))
        return kr, pt

    # ib_send_lat with krping's message size, for the ping model
    send16 = None
    if "ping" in tests:
        send16 = median_of([b.perftest("send", SEND_SIZE, 1000)
                            for _ in range(args.reps)], "t_typical_usec")
    parts = {}
    for test, size, iters in plan:
        kr, pt = measure(test, size, iters)
        if test == "bw":
            key, unit, target = "bw_average_mb_per_sec", "MB/s avg", ">=1"
        else:
            key, unit, target = "t_typical_usec", "usec median", "<=1"
        kv = median_of(kr, key)
        if test == "ping":
            w, r = parts.get(("wlat", size)), parts.get(("rlat", size))
            pv = (4 * send16 + r + 2 * w
                  if None not in (w, r, send16) else None)
            perf_desc = ("4*ib_send_lat(16B)+ib_read_lat+2*ib_write_lat"
                         if pv is not None else "model needs wlat and rlat rows")
        else:
            pv = median_of(pt, key)
            parts[(test, size)] = pv
            perf_desc = PERFTEST[test]
        ratio = kv / pv if kv is not None and pv else None
        met = None
        if test == "ping":
            target = "info"     # a model, not a like-for-like measurement
        elif ratio is not None:
            met = ratio <= 1.0 if target == "<=1" else ratio >= 1.0
        row = {"size": size, "test": test, "iterations": iters,
               "krping": kv, "perftest": pv, "ratio": ratio, "unit": unit,
               "perftest_program": perf_desc, "target": target, "met": met,
               "krping_runs": [f and f.get(key) for f in kr],
               "perftest_runs": [f and f.get(key) for f in pt]}
        rows.append(row)
        log(f"{test} {size} x{iters}: krping {fmt(kv)} perftest {fmt(pv)} "
            f"ratio {fmt(ratio, 3)}")

    elapsed = time.monotonic() - t_start
    head = (f"{'size':>8}  {'test':<5} {'iters':>6}  {'krping':>10}  "
            f"{'perftest':>10}  {'ratio':>6}  {'unit':<12} target")
    lines = [f"krping vs perftest on {args.dev} ({args.addr}), "
             f"kernel {os.uname().release}, reps {args.reps}", head]
    for r in rows:
        mark = {True: "ok", False: "MISSED", None: "-"}[r["met"]]
        lines.append(f"{r['size']:>8}  {r['test']:<5} {r['iterations']:>6}  "
                     f"{fmt(r['krping']):>10}  {fmt(r['perftest']):>10}  "
                     f"{fmt(r['ratio'], 3):>6}  {r['unit']:<12} "
                     f"{r['target']} {mark}")
    if args.reps > 1:
        lines.append("each run (the figures above are the medians):")
        for r in rows:
            runs = lambda v: "/".join(fmt(x) for x in v) or "-"  # noqa: E731
            lines.append(f"{r['size']:>8}  {r['test']:<5} krping "
                         f"{runs(r['krping_runs'])}  perftest "
                         f"{runs(r['perftest_runs'])}")
    if send16 is not None:
        lines.append(f"ping model: ib_send_lat {SEND_SIZE} B median "
                     f"{send16:.2f} usec; wlat/rlat from the rows above")
    lines.append(f"latency: median (t_typical) in usec, ratio "
                 f"krping/perftest; bw: BW average MB/s (2^20), ratio "
                 f"krping/perftest; measured in {elapsed:.0f} s")
    table = "\n".join(lines)
    print(table, flush=True)

    doc = {"kernel": os.uname().release, "device": args.dev,
           "addr": args.addr, "gid_index": args.gid_index,
           "reps": args.reps, "txdepth": args.txdepth,
           "send_lat_16b_usec": send16, "seconds": round(elapsed, 1),
           "rows": rows, "runs": b.raw}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "bench.txt"), "w") as f:
        f.write(table + "\n")
    missing = [r for r in rows if r["ratio"] is None]
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
