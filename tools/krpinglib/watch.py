# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The live watch of a running benchmark: its progress/ files followed
while the CLI waits for the run's end."""

import sys
import time

from .abi import TERMINAL
from .report import MB
from .settings import effective_test


class Watch:
    """A running benchmark's progress/, followed while the CLI waits for
    its end: with --interval SEC one line per interval (its iterations,
    rates and samples, like perftest's --run_infinitely), also recorded
    for --json (then not printed); without it, on a terminal, a bar on
    stderr for a finite run (a count or --duration). Neither otherwise."""

    BAR_EVERY = 0.25
    BAR_WIDTH = 30
    HEAD = ("   #sec  #iterations       iter/sec   BW average[MB/sec]"
            "    #samples")

    def __init__(self, args, every, bar):
        self.json = args.json
        self.every = every
        self.bar = bar
        self.duration = args.duration or 0
        # progress/ counts the iterations of every QP; count is per QP
        self.qps = getattr(args, "qps", None) or 1
        self.lines = []

    @classmethod
    def make(cls, args):
        if args.interval:
            return cls(args, args.interval, bar=False)
        if (not args.json and effective_test(args) != "ping"
                and sys.stderr.isatty()):
            return cls(args, cls.BAR_EVERY, bar=True)
        return None

    def follow(self, sess, deadline, count):
        """Wait for the end of sess's run (deadline: time.monotonic(), or
        None); return its state, None when the deadline came first."""
        self.lines = []
        last = {"elapsed_ns": 0, "iterations": 0, "bytes": 0}
        drawn = False
        while True:
            step = self.every
            if deadline is not None:
                step = max(0.0, min(step, deadline - time.monotonic()))
            st = sess.wait(TERMINAL, step)
            if st is not None or (deadline is not None and
                                  time.monotonic() >= deadline):
                break
            p = sess.progress()
            if not p or not p["elapsed_ns"]:
                continue        # an old module, or still warming up
            if self.bar:
                drawn = self.draw(p, count) or drawn
            else:
                self.interval(p, last)
                last = p
        if drawn:
            print("\r" + " " * (self.BAR_WIDTH + 40) + "\r", end="",
                  file=sys.stderr, flush=True)
        return st

    def interval(self, p, last):
        secs = (p["elapsed_ns"] - last["elapsed_ns"]) / 1e9
        if secs <= 0:
            return
        line = {"elapsed_sec": p["elapsed_ns"] / 1e9,
                "iterations": p["iterations"],
                "iterations_per_sec":
                    (p["iterations"] - last["iterations"]) / secs,
                "bw_mb_per_sec": (p["bytes"] - last["bytes"]) / MB / secs,
                "samples": p["samples"]}
        if not self.json:
            if not self.lines:
                print(self.HEAD, flush=True)
            print(f" {line['elapsed_sec']:7.3f}  {line['iterations']:11d}"
                  f"  {line['iterations_per_sec']:13.1f}"
                  f"  {line['bw_mb_per_sec']:19.2f}  {line['samples']:10d}",
                  flush=True)
        self.lines.append(line)

    def draw(self, p, count):
        if count:
            total = count * self.qps
            done, what = p["iterations"] / total, f"{p['iterations']}/{total}"
        elif self.duration:
            done = p["elapsed_ns"] / 1e9 / self.duration
            what = f"{p['elapsed_ns'] / 1e9:.1f}/{self.duration:g} s"
        else:
            return False        # endless: nothing to fill
        done = min(max(done, 0.0), 1.0)
        k = int(done * self.BAR_WIDTH)
        print(f"\r[{'#' * k}{' ' * (self.BAR_WIDTH - k)}] {done:4.0%} "
              f"{what}", end="", file=sys.stderr, flush=True)
        return True

