#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Plots of a make bench result: krping beside perftest, against size.

Reads a bench.json that scripts/bench/bench.py wrote (make bench runs this
at its end; it can be run again on an old result) and draws, next to it:

  bench-latency.svg    one panel per latency test (wlat, rlat, slat): the
                       median (t_typical) and the 99th percentile in usec
                       against the size, krping and perftest
  bench-bandwidth.svg  one panel per bandwidth test (bw, sbw): the BW
                       average in MB/s (MB = 2^20 bytes) against the size,
                       krping and perftest

Each point is the median over the row's runs (bench.py --reps to
--max-reps: a row is measured until its verdict is decided), and its
bar spans the lowest and the highest run, which shows how much of a
difference is noise. The figures come from each run's own
record in "runs" (the table's rows keep only the medians), krping's on
the bench's device only, for the rows of the krping vs perftest table
(not the ropcie rows). The ping row is left out: its perftest figure is
a model, not a measurement. Files are named after
the JSON (bench-pair.json gives bench-pair-latency.svg); a panel without
data is left out, and no file is written when no test has data (make
bench-pair has no perftest rows).

Needs python3-matplotlib (Debian); draws with its Agg backend, no display.

Usage: scripts/bench/plot.py [--format svg|png] [--out DIR] BENCH.JSON
Exit status: 0 plots written (or nothing to plot), 1 the JSON cannot be
read, 2 usage error or no matplotlib.
"""

import argparse
import json
import os
import statistics
import sys

LAT_TESTS = ("wlat", "rlat", "slat")
BW_TESTS = ("bw", "sbw")
PERFTEST = {"wlat": "ib_write_lat", "rlat": "ib_read_lat",
            "slat": "ib_send_lat", "bw": "ib_write_bw", "sbw": "ib_send_bw"}
TOOLS = ("krping", "perftest")
COLOR = {"krping": "tab:blue", "perftest": "tab:orange"}


def runs_of(doc):
    """{(tool, test, size): [figures of each run]} of the runs behind the
    krping vs perftest rows of the table."""
    rows = {(r.get("test"), r.get("size")) for r in doc.get("rows", [])}
    out = {}
    for rec in doc.get("runs", []):
        fig = rec.get("result")
        if (rec.get("tool") not in TOOLS or not isinstance(fig, dict)
                or rec.get("discarded") or rec.get("rc")
                or (rec.get("test"), rec.get("size")) not in rows):
            continue
        if (rec["tool"] == "krping"
                and rec.get("dev", doc.get("device")) != doc.get("device")):
            continue            # krping over ropcie
        out.setdefault((rec["tool"], rec["test"], rec["size"]),
                       []).append(fig)
    return out


def series(runs, tool, test, key):
    """Sizes, medians and (lower, upper) bar lengths of one line."""
    sizes, mid, low, high = [], [], [], []
    for (t, name, size), figs in sorted(runs.items(),
                                        key=lambda kv: kv[0][2]):
        if t != tool or name != test:
            continue
        vals = [f[key] for f in figs
                if isinstance(f.get(key), (int, float))]
        if not vals:
            continue
        m = statistics.median(vals)
        sizes.append(size)
        mid.append(m)
        low.append(m - min(vals))
        high.append(max(vals) - m)
    return sizes, mid, (low, high)


def size_label(n):
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def panel(ax, runs, test, lines, ylabel):
    """Draw one test's lines; False if it had no data."""
    drawn = False
    sizes_seen = set()
    for tool in TOOLS:
        for key, style, what in lines:
            sizes, mid, bars = series(runs, tool, test, key)
            if not sizes:
                continue
            drawn = True
            sizes_seen.update(sizes)
            prog = "krping" if tool == "krping" else PERFTEST[test]
            ax.errorbar(sizes, mid, yerr=bars, color=COLOR[tool],
                        linestyle=style, marker="o", markersize=4,
                        capsize=3, label=f"{prog} {what}")
    if not drawn:
        return False
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted(sizes_seen)
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(s) for s in ticks])
    ax.minorticks_off()
    ax.set_xlabel("size [bytes]")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{test}: krping and {PERFTEST[test]}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    return True


def draw(plt, doc, runs, tests, lines, ylabel, path, fmt):
    tests = [t for t in tests
             if any(k[1] == t for k in runs)]
    if not tests:
        return None
    fig, axes = plt.subplots(1, len(tests), figsize=(5.5 * len(tests), 4.5),
                             squeeze=False)
    used = [t for t, ax in zip(tests, axes[0])
            if panel(ax, runs, t, lines, ylabel)]
    if not used:
        plt.close(fig)
        return None
    fig.suptitle(f"{doc.get('device', '?')}, kernel {doc.get('kernel', '?')}"
                 f", clocksource {doc.get('clocksource', '?')}, "
                 f"{doc.get('reps', '?')} to "
                 f"{doc.get('max_reps', doc.get('reps', '?'))} runs per "
                 f"point (median, bars: "
                 f"lowest to highest)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, format=fmt,         # no date in an SVG
                metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", metavar="BENCH.JSON")
    ap.add_argument("--format", choices=("svg", "png"), default="svg")
    ap.add_argument("--out", metavar="DIR",
                    help="where to write (default: beside the JSON)")
    args = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        # fixed ids in an SVG: the same JSON gives the same file
        matplotlib.rcParams["svg.hashsalt"] = "krping"
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: no matplotlib (apt-get install python3-matplotlib)",
              file=sys.stderr)
        return 2
    try:
        with open(args.json) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"plot: {args.json}: {e}", file=sys.stderr)
        return 1
    runs = runs_of(doc)
    out = args.out or os.path.dirname(os.path.abspath(args.json))
    base = os.path.basename(args.json)
    base = base[:-5] if base.endswith(".json") else base
    os.makedirs(out, exist_ok=True)
    written = [p for p in (
        draw(plt, doc, runs, LAT_TESTS,
             [("t_typical_usec", "-", "median"), ("p99_usec", "--", "p99")],
             "latency [usec]",
             os.path.join(out, f"{base}-latency.{args.format}"),
             args.format),
        draw(plt, doc, runs, BW_TESTS,
             [("bw_average_mb_per_sec", "-", "BW average")],
             "BW average [MB/s, MB = 2^20 B]",
             os.path.join(out, f"{base}-bandwidth.{args.format}"),
             args.format)) if p]
    for p in written:
        print(f"plot: {p}")
    if not written:
        print(f"plot: {args.json}: no krping and perftest runs to plot",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
