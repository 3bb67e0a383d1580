# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The report of runs: perftest-style figures of a side's results, the
table's header and rows, whether a run ended well and why not, the note
under rlat on rxe, the per-QP counters, the latency histograms and the
JSON output."""

import errno
import json
import math
import os
import sys

from .errors import ERROR_HINTS, errname
from .session import read_text

MB = 1 << 20                    # perftest's MB/sec


# --------------------------------------------------------------------------
# figures and tables

def figures(res):
    """perftest-style figures of one side's results, or None if that side
    measured nothing (a passive side)."""
    size = res["size"]
    lat = res.get("latency") or {}
    bw = res.get("bandwidth") or {}
    out = {"bytes": size, "iterations": res["stats"]["iterations"]}
    if lat.get("samples"):
        us = lambda k: lat[k] / 1000.0          # noqa: E731
        out.update(kind="latency", samples=lat["samples"],
                   t_min_usec=us("min_ns"), t_max_usec=us("max_ns"),
                   t_typical_usec=us("p50_ns"), t_avg_usec=us("mean_ns"),
                   t_stdev_usec=us("stdev_ns"), p99_usec=us("p99_ns"),
                   p999_usec=us("p999_ns"))
        return out
    if bw.get("bytes") and bw.get("duration_ns"):
        secs = bw["duration_ns"] / 1e9
        # perftest's #iterations: the measured operations of one QP
        out["iterations"] = bw["bytes"] // size // (res.get("qps") or 1)
        out.update(kind="bandwidth",
                   bw_average_mb_per_sec=bw["bytes"] / MB / secs,
                   msg_rate_mpps=(bw["msgs_per_sec"] or 0) / 1e6)
        return out
    if res.get("test") == "fr" and out["iterations"]:
        out.update(kind="count")
        return out
    return None


LAT_HEAD = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]"
            "    t_avg[usec]    t_stdev[usec]   99% percentile[usec]"
            "   99.9% percentile[usec]")
BW_HEAD = " #bytes     #iterations    BW average[MB/sec]   MsgRate[Mpps]"
FR_HEAD = " #bytes     #iterations    (fast registrations)"


def header(kind):
    return {"latency": LAT_HEAD, "bandwidth": BW_HEAD}.get(kind, FR_HEAD)


def row(fig):
    if fig["kind"] == "latency":
        return (f" {fig['bytes']:<7d} {fig['samples']:<9d}"
                f"{fig['t_min_usec']:>13.2f}{fig['t_max_usec']:>15.2f}"
                f"{fig['t_typical_usec']:>17.2f}{fig['t_avg_usec']:>15.2f}"
                f"{fig['t_stdev_usec']:>17.2f}{fig['p99_usec']:>23.2f}"
                f"{fig['p999_usec']:>25.2f}")
    if fig["kind"] == "bandwidth":
        return (f" {fig['bytes']:<10d} {fig['iterations']:<10d}"
                f"{fig['bw_average_mb_per_sec']:>22.2f}"
                f"{fig['msg_rate_mpps']:>16.6f}")
    return f" {fig['bytes']:<10d} {fig['iterations']}"


class Printer:
    """Prints the table as rows come in (one header per kind)."""

    def __init__(self, enabled, both):
        self.enabled = enabled
        self.both = both
        self.kind = None

    def line(self, text=""):
        if self.enabled:
            print(text, flush=True)

    def result(self, run):
        if not self.enabled:
            return
        sides = run["sides"]
        shown = []
        for side in ("client", "server") if "client" in sides else ("server",):
            if side not in sides:
                continue
            fig = sides[side].get("figures")
            if fig is None:
                continue
            if side == "server" and shown and not self.both:
                continue
            shown.append((side, fig, sides[side].get("host")))
        if not shown:
            # failures are reported on stderr; say why a finished run
            # has no row
            for side, res in sides.items():
                if res["state"] != "done":
                    continue
                why = ("this module has no latency/ or bandwidth/ results"
                       if res["latency"] is None and res["bandwidth"] is None
                       else f"nothing measured on the {side} side")
                self.line(f" {run['size']:<7d} {side} {res['name']}: done, "
                          f"{res['stats']['iterations']} iterations; {why}")
            return
        for side, fig, host in shown:
            if fig["kind"] != self.kind:
                self.kind = fig["kind"]
                self.line("-" * 79)
                self.line(header(self.kind))
            label = ""
            if len(shown) > 1 or (side == "server" and "client" in sides):
                label = f"   ({side})"
            if any(r.get("host") for r in sides.values()):
                label = f"   ({side} on {host or 'this host'})"
            self.line(row(fig) + label)

    def skipped(self, size, reason):
        self.line(f" {size:<7d} skipped: {reason}")



# How the peer of a ping that --duration stopped may end: it saw the
# disconnect (ECONNRESET), or its work in flight failed first as the
# transport tore the connection down (EIO on iWARP: siw; ETIMEDOUT after
# the transport's retries).
PEER_LEFT_ERRORS = (errno.ECONNRESET, errno.EIO, errno.ETIMEDOUT)


def run_ok(run, duration):
    """Did every side end as a finished run? After a ping's --duration
    (duration: this tool stopped it) the stopped side is fine, and so is
    a peer that saw it leave."""
    for res in run["sides"].values():
        if res["state"] == "done":
            continue
        if duration and (res["state"] == "stopped" or
                         (res["state"] == "failed" and
                          -res["error"] in PEER_LEFT_ERRORS)):
            continue
        return False
    return True


def failure_text(run):
    lines = []
    for side, res in run["sides"].items():
        if res["state"] == "done" or (res["state"] == "failed" and
                                      res["error"] == -errno.ECONNRESET and
                                      any(r["state"] == "failed" and
                                          r["error"] != -errno.ECONNRESET
                                          for r in run["sides"].values())):
            continue
        err = res["error"]
        what = f"{side} session {res['name']} ended {res['state']}"
        if err:
            hint = ERROR_HINTS.get(-err)
            what += f", error {err} ({errname(err)})"
            if res.get("failed_wr"):
                what += (f", its {res['failed_wr']} completed with "
                         f"{res.get('wc_status')}")
            if hint:
                what += f": {hint}"
        lines.append(what)
    return lines


# Under a table of rlat runs on rxe (see rlat_note()).
RLAT_RXE_NOTE = (
    "note: rlat on rxe measures how rxe schedules a kernel consumer's "
    "READs as much as the READs: a user-space tool (ib_read_lat) posts "
    "into rxe's running work, krping waits for new work more often. "
    "Compare rlat with ib_read_lat on hardware, or compare wlat and slat "
    "on rxe (Documentation/krping.rst, \"Comparing with perftest (make "
    "bench)\").")


def is_rxe(device, root="/sys/class/infiniband"):
    """Is this host's RDMA device an rxe (soft RoCE) device? rxe is the
    one that names its Ethernet device in a 'parent' file (siw, ropcie
    and hardware have none); its node_desc is "rxe" unless changed."""
    if not device:
        return False
    d = os.path.join(root, device)
    if os.path.exists(os.path.join(d, "parent")):
        return True
    try:
        return read_text(os.path.join(d, "node_desc")) == "rxe"
    except OSError:
        return False


def rlat_note(results):
    """The note to print under rlat runs whose local side ran on rxe,
    or None."""
    for run in results:
        if run.get("test") != "rlat":
            continue
        if any(not side.get("host") and is_rxe(side.get("device"))
               for side in run["sides"].values()):
            return RLAT_RXE_NOTE
    return None


# --------------------------------------------------------------------------
# JSON

def finite(obj):
    """obj with every NaN or infinity replaced by None: JSON has no such
    numbers, and the output must stay valid JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def print_json(obj):
    json.dump(finite(obj), sys.stdout, indent=2, allow_nan=False)
    print()

# --------------------------------------------------------------------------
# several QPs (--qps): sysfs per_qp

def read_per_qp(sess):
    """per_qp of a session as [{qp, <counter>: int...}], one per
    connection of its last run; None if the module has no such file."""
    text = sess.read_result("per_qp")
    if text is None:
        return None
    lines = text.splitlines()
    if not lines:
        return []
    header = lines[0].split()
    return [dict(zip(header, (int(x) for x in line.split())))
            for line in lines[1:]]


def shown_sides(runs, both, key):
    """(run, side, result) of each side the table shows that has key in
    its result: the client's; with both, or without a client, the
    server's too."""
    for run in runs:
        sides = run["sides"]
        for side in ("client", "server"):
            res = sides.get(side)
            if res is None or key not in res:
                continue
            if side == "server" and "client" in sides and not both:
                continue
            yield run, side, res


def print_per_qp(runs, both):
    """After the table: each connection's counters, for sides that ran
    more than one (the sides the table shows)."""
    for run, side, res in shown_sides(runs, both, "per_qp"):
        print()
        print(f"per QP, {run['size']} bytes, {side} {res['name']}:")
        for row in res["per_qp"]:
            counts = ", ".join(f"{k} {v}" for k, v in row.items()
                               if k != "qp" and v)
            print(f" qp {row['qp']:<2d} {counts or 'nothing'}")


# --------------------------------------------------------------------------
# latency histogram (--histogram)

HIST_BAR = 40           # characters of the longest bar


def read_histogram(sess):
    """latency/histogram of a session as [{low_ns, high_ns, count}]
    ([] before a run, after a reset, without samples); None if the
    module has no such file."""
    text = sess.read_result("latency/histogram")
    if text is None:
        return None
    out = []
    for line in text.splitlines():
        low, high, count = (int(x) for x in line.split())
        out.append({"low_ns": low, "high_ns": high, "count": count})
    return out


def histogram_lines(title, hist):
    """A histogram as text: a title, then one line per bucket (bounds in
    usec, inclusive) with a bar scaled to the largest count."""
    if hist is None:
        return [f"{title}: none (this module has no latency/histogram)"]
    if not hist:
        return [f"{title}: empty (no latency samples)"]
    top = max(b["count"] for b in hist)
    lines = [f"{title}: {sum(b['count'] for b in hist)} samples",
             f"  {'low[usec]':>14} {'high[usec]':>14} {'count':>10}"]
    for b in hist:
        bar = "#" * max(1, round(HIST_BAR * b["count"] / top))
        lines.append(f"  {b['low_ns'] / 1000:>14.3f} "
                     f"{b['high_ns'] / 1000:>14.3f} {b['count']:>10d} {bar}")
    return lines


def print_histograms(runs, both):
    """After the table: the histogram of each side the table shows (the
    client's; with --both, or without a client, the server's too)."""
    for run, side, res in shown_sides(runs, both, "histogram"):
        print()
        for line in histogram_lines(
                f"latency histogram, {run['size']} bytes, {side} "
                f"{res['name']}", res["histogram"]):
            print(line)
