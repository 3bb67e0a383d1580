# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Allocation-failure injection for the selftests.

The debug kernel's failslab (Documentation/fault-injection/) with its
stack-trace filter: only an allocation made with a chosen range of code
on its stack (one module's text) may fail, whichever task makes it, so
the session threads, rdma_cm's callbacks and ropcie's workers are walked
as well as the task that writes configfs.

The kernel picks the failing call by a counter it never resets and does
not show (fault_attr.count: the call fails when count % interval == 0,
and only filtered calls count while the attr is armed). The Injector
keeps that count itself, in a file of the guest's /tmp (one per boot):
to fail the n-th filtered call from now it sets interval = count + n.
"""

from pathlib import Path

DEBUGFS = Path("/sys/kernel/debug")
# x86_64's module area with KASLR (Documentation/arch/x86/x86_64/mm.rst):
# every module's code, for walks of a module's own init (its address is
# not known before it is loaded).
MODULE_AREA = (0xffffffffc0000000, 0xffffffffff000000)
PAGE = 4096
ULONG_MAX = (1 << 64) - 1


def unavailable(attr="failslab"):
    """None when the kernel can inject allocation failures with the
    stack-trace filter, else why not."""
    d = DEBUGFS / attr
    if not d.is_dir():
        return f"no {d} (CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS)"
    if not (d / "require-start").exists():
        return f"no {d}/require-start (CONFIG_FAULT_INJECTION_STACKTRACE_FILTER)"
    return None


def module_text(name):
    """(start, end) of module name's code, from /proc/kallsyms: its text
    symbols, the end rounded up to a page (each module's text is pages
    of its own)."""
    addrs = []
    tag = f"[{name}]"
    with open("/proc/kallsyms") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[3] == tag and parts[1] in "tT":
                addrs.append(int(parts[0], 16))
    if not addrs or not min(addrs):
        raise RuntimeError(f"no text symbols of {name} in /proc/kallsyms "
                           "(kptr_restrict?)")
    return min(addrs), (max(addrs) + PAGE) & ~(PAGE - 1)


class CountUnknown(Exception):
    pass


class Injector:
    """failslab (or another fault attr) armed to fail one call at a time."""

    def __init__(self, attr="failslab"):
        self.dir = DEBUGFS / attr
        self.state = Path(f"/tmp/krping-{attr}.count")
        text = self.state.read_text().strip() if self.state.exists() else "0"
        if not text.isdigit():
            raise CountUnknown(f"{attr}: an earlier walk stopped half-way "
                               "and left the kernel's count unknown")
        self.count = int(text)
        self.injected = 0       # failures injected through this object

    def lose_count(self):
        """A walk stopped with a call armed: later walks cannot know."""
        self.state.write_text("unknown\n")

    def _set(self, name, value):
        (self.dir / name).write_text(f"{value}\n")

    def _get(self, name):
        return int((self.dir / name).read_text())

    def setup(self, code_range, depth):
        """Filter on code_range = (start, end) within the innermost depth
        frames of an allocation's stack; nothing armed yet."""
        self._set("probability", 0)
        self._set("task-filter", "N")
        self._set("space", 0)
        self._set("verbose", 1)         # one line per injected failure
        self._set("verbose_ratelimit_burst", 100000)
        self._set("ignore-gfp-wait", "N")   # GFP_KERNEL fails too
        self._set("stacktrace-depth", depth)
        self._set("reject-start", 0)
        self._set("reject-end", 0)
        self._set("require-start", code_range[0])
        self._set("require-end", code_range[1])

    def arm(self, n):
        """Fail the n-th filtered call from now on (n >= 1), once."""
        self._set("probability", 0)     # the count stands still
        self.interval = self.count + n
        self._set("interval", self.interval)
        self._set("times", 1)
        self._set("probability", 100)

    def fired(self):
        """Disarm; True when the armed call failed."""
        self._set("probability", 0)
        hit = self._get("times") == 0
        if hit:
            self.injected += 1
            if self.interval > 1:       # interval 1 does not count
                self.count = self.interval
            self.state.write_text(f"{self.count}\n")
        return hit

    def resync(self, filler, limit):
        """After a run that ended before the armed call: the count is
        somewhere below the armed interval. Run filler() until that call
        fails, which puts the count back at a known value. Returns the
        filler's outcomes."""
        outcomes = []
        self._set("probability", 100)
        for _ in range(limit):
            outcomes.append(filler())
            if self.fired():
                return outcomes
            self._set("probability", 100)
        self._set("probability", 0)
        raise RuntimeError(f"{self.dir.name}: the count did not come back "
                           f"in {limit} filler runs")

    def teardown(self):
        self._set("probability", 0)
        self._set("require-start", 0)
        self._set("require-end", ULONG_MAX)
        self._set("verbose", 2)
        self._set("times", 1)
        self._set("interval", 1)


# Frames of an allocation's stack the filter looks at: the allocator's
# own (three or four), then the caller. Six reach our code when it
# allocates and when a kernel function it calls does (rdma_create_id,
# ib_alloc_pd, iw_cm's work entries), not what a driver does deep below
# (siw's queues, a TCP segment of a SEND posted inline): those fail back
# into the same error paths of ours, hundreds of times over, and are
# their own subsystem's to walk.
DEPTH = 6


def walk(inj, code_range, scenario, limit, depth=DEPTH):
    """Fail each filtered allocation of scenario() in turn: the first
    run fails the first one, the next run the second, ... until a run
    makes no more. scenario() returns its outcome (a short string) and
    raises only when the kernel misbehaved. Returns (points walked,
    {outcome: runs})."""
    inj.setup(code_range, depth)
    outcomes = {}
    settled = False
    try:
        for n in range(1, limit + 1):
            settled = False
            inj.arm(n)
            out = scenario()
            if not inj.fired():
                for o in inj.resync(scenario, limit):
                    outcomes[o] = outcomes.get(o, 0) + 1
                settled = True
                return n - 1, outcomes
            settled = True
            outcomes[out] = outcomes.get(out, 0) + 1
        raise RuntimeError(f"more than {limit} allocation points")
    finally:
        # a scenario that raised: known still if its armed call failed
        if not settled and not inj.fired():
            inj.lose_count()
        inj.teardown()
