# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The pass/fail limits on a run's figures (--max-median ... --min-rate):
their options, the usage they allow, and their checks against a run."""

import argparse
import math

from .abi import LAT_TESTS
from .errors import CliError
from .settings import option_role


class Threshold:
    """One pass/fail limit on a figure of figures()."""

    def __init__(self, dest, option, figure, kind, unit, label, upper,
                 digits, text):
        self.dest = dest            # argparse dest
        self.metavar = {"usec": "USEC", "MB/sec": "MBPS"}.get(unit, "MPPS")
        self.option = option        # the command-line option
        self.figure = figure        # key in figures()
        self.kind = kind            # the figures' kind it needs
        self.unit = unit
        self.label = label          # the figure's name in messages
        self.upper = upper          # True: --max-*, the figure must not
                                    # exceed it; False: --min-*
        self.digits = digits        # decimals of the table's column
        self.text = text            # --help


THRESHOLDS = (
    Threshold("max_median", "--max-median", "t_typical_usec", "latency",
              "usec", "median", True, 2,
              "fail (exit 3) if the median (t_typical) exceeds USEC"),
    Threshold("max_p99", "--max-p99", "p99_usec", "latency", "usec",
              "p99", True, 2,
              "fail (exit 3) if the 99th percentile exceeds USEC"),
    Threshold("max_p999", "--max-p999", "p999_usec", "latency", "usec",
              "p99.9", True, 2,
              "fail (exit 3) if the 99.9th percentile exceeds USEC"),
    Threshold("max_avg", "--max-avg", "t_avg_usec", "latency", "usec",
              "average", True, 2,
              "fail (exit 3) if the average (t_avg) exceeds USEC"),
    Threshold("min_bw", "--min-bw", "bw_average_mb_per_sec", "bandwidth",
              "MB/sec", "BW average", False, 2,
              "fail (exit 3) if the BW average is below MBPS (MB = 2^20 "
              "bytes, as in the table)"),
    Threshold("min_rate", "--min-rate", "msg_rate_mpps", "bandwidth",
              "Mpps", "message rate", False, 6,
              "fail (exit 3) if the message rate is below MPPS (millions "
              "of messages per second)"),
)
THRESHOLD_TESTS = {"latency": LAT_TESTS, "bandwidth": ("bw", "sbw")}


def limit_arg(text):
    """A threshold: a finite number above 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a number above 0: "
                                         f"{text!r}")
    return v


def given_thresholds(args):
    return [(t, getattr(args, t.dest)) for t in THRESHOLDS
            if getattr(args, t.dest, None) is not None]


def server_measures(test, args):
    """The figures' kind a server side reports, or None."""
    if test in ("ping", "wlat", "slat"):
        return "latency"
    duplex = args.duplex
    if duplex is None:
        duplex = any(item in ("duplex", "duplex=1")
                     for item in (args.options or "").split(","))
    if test == "bw" and duplex:
        return "bandwidth"
    return None


def check_threshold_usage(args, test):
    """A threshold the test cannot meet is a usage error, found before
    anything runs."""
    for t, _ in given_thresholds(args):
        tests = THRESHOLD_TESTS[t.kind]
        if test not in tests:
            raise CliError(f"{t.option} applies to {', '.join(tests[:-1])}"
                           f" and {tests[-1]}, not to test {test!r}")
        if (not args.pair and option_role(args) == "server"
                and server_measures(test, args) != t.kind):
            raise CliError(f"{t.option}: the server of {test!r} reports no "
                           f"{t.kind} figures; give the threshold to the "
                           f"client")


def checked_sides(run, both):
    """The sides whose figures the thresholds apply to: those the table
    shows. (side, required): a required side without the figure misses."""
    sides = run["sides"]
    if "client" not in sides:
        return [(s, True) for s in sides]
    out = [("client", True)]
    if both and "server" in sides and sides["server"].get("figures"):
        out.append(("server", False))
    return out


def show_value(value, limit, digits):
    """value as in the table, with more decimals where that would show
    the limit itself."""
    for d in range(digits, 10):
        text = f"{value:.{d}f}"
        if float(text) != limit:
            break
    return text


def check_thresholds(run, args):
    """Check the given thresholds against a run that ended well; returns
    (checks for the JSON, one message per missed threshold)."""
    checks, missed = [], []
    for side, required in checked_sides(run, args.both):
        fig = run["sides"][side].get("figures") or {}
        for t, limit in given_thresholds(args):
            value = fig.get(t.figure) if fig.get("kind") == t.kind else None
            if value is None and not required:
                continue
            if value is None:
                met = False
                missed.append(f"threshold missed: no {t.label} figure from "
                              f"the {side} ({t.option} {limit:g}, "
                              f"{run['size']} B)")
            else:
                met = value <= limit if t.upper else value >= limit
                if not met:
                    shown = show_value(value, limit, t.digits)
                    missed.append(f"threshold missed: {t.label} {shown} "
                                  f"{t.unit} {'>' if t.upper else '<'} "
                                  f"{t.option} {limit:g} ({side}, "
                                  f"{run['size']} B)")
            checks.append({"option": t.option, "figure": t.figure,
                           "side": side, "limit": limit, "value": value,
                           "met": met})
    return checks, missed

