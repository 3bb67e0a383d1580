# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A tiny pytest plugin: with --tap, kselftest TAP 13 instead of pytest's
terminal output ("TAP version 13", "1..N", "ok N - name",
"not ok N - name", "ok N - name # SKIP reason"; diagnostics as "# ...").
The exit status is 0 when nothing failed, 1 when something failed and 4
(kselftest's skip) when every selected test was skipped. A run that
selects no test (every one deselected by -k/-m, or none found) is no
skip but a failure: "Bail out!" and status 1. pytest's own usage error
exits 4 too: a bad option before any TAP, a missing file or a bad -k
expression with "Bail out! pytest usage error" from this plugin;
run_tests.sh turns that 4 into 2.
After the plan, "# selected S of C collected (D deselected)" says how
much of the suite the selection kept (the test bed's summary checks it).

The selftests load it from their conftest; the test bed's own host tests
(scripts/testbed/tests) with -p lib.tap and selftests/ on PYTHONPATH.
With KRPING_OUT set, every test's time goes to durations.tsv there.
"""

import os
import sys

import pytest


def pytest_addoption(parser):
    parser.addoption("--tap", action="store_true", default=False,
                     help="print kselftest TAP instead of pytest's output")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if config.getoption("tap"):
        # Replace pytest's terminal output (its options stay defined,
        # unlike with -p no:terminal, which assertion rewriting needs).
        tr = config.pluginmanager.getplugin("terminalreporter")
        if tr is not None:
            config.pluginmanager.unregister(tr)
        config.pluginmanager.register(TapPlugin(config), "krping-tap")


def _tap_name(nodeid):
    name = nodeid.replace("\n", "\\n").replace("\r", "\\r")
    # '#' starts a directive in TAP
    return name.replace("#", "\\#")


def _diag(text, limit=200):
    lines = str(text).splitlines()
    if len(lines) > limit:
        lines = [f"... ({len(lines) - limit} lines cut)"] + lines[-limit:]
    return [("# " + l).rstrip() for l in lines]


class TapPlugin:
    def __init__(self, config):
        self.capman = config.pluginmanager.getplugin("capturemanager")
        self.num = 0
        self.counts = {"pass": 0, "fail": 0, "skip": 0}
        self.collect_errors = []
        self.reports = {}
        self.durations = []
        self.deselected = 0
        self.planned = False

    def _out(self, *lines):
        if self.capman is not None:
            with self.capman.global_and_fixture_disabled():
                self._write(lines)
        else:
            self._write(lines)

    @staticmethod
    def _write(lines):
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def pytest_sessionstart(self, session):
        self._out("TAP version 13")

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors.append(report)

    def pytest_deselected(self, items):
        self.deselected += len(items)

    def pytest_collection_finish(self, session):
        total = len(session.items) + len(self.collect_errors)
        if total == 0:
            # Nothing to run is no skip: a selection that matches nothing
            # or a file that holds no test is the caller's mistake.
            return
        self.planned = True
        self._out(f"1..{total}",
                  f"# selected {len(session.items)} of "
                  f"{len(session.items) + self.deselected} collected "
                  f"({self.deselected} deselected)")
        for rep in self.collect_errors:
            self.num += 1
            self.counts["fail"] += 1
            self._out(*_diag(rep.longreprtext),
                      f"not ok {self.num} - {_tap_name(rep.nodeid or 'collection')}"
                      " # collection error")

    def pytest_runtest_logreport(self, report):
        self.reports.setdefault(report.nodeid, []).append(report)

    def pytest_runtest_logfinish(self, nodeid, location):
        reports = self.reports.pop(nodeid, [])
        self.durations.append((sum(r.duration for r in reports), nodeid))
        self.num += 1
        name = _tap_name(nodeid)
        failed = [r for r in reports if r.failed]
        skipped = [r for r in reports if r.skipped]
        if failed:
            self.counts["fail"] += 1
            lines = []
            for r in failed:
                lines += _diag(f"{r.when} failed:")
                lines += _diag(r.longreprtext)
            shown = set()
            for r in reports:
                for title, content in r.sections:
                    if content.strip() and (title, content) not in shown:
                        shown.add((title, content))
                        lines += _diag(f"--- {title} ---")
                        lines += _diag(content, limit=40)
            self._out(*lines, f"not ok {self.num} - {name}")
        elif skipped:
            self.counts["skip"] += 1
            self._out(f"ok {self.num} - {name} # SKIP {self._skip_reason(skipped[0])}")
        else:
            self.counts["pass"] += 1
            self._out(f"ok {self.num} - {name}")

    @staticmethod
    def _skip_reason(report):
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            reason = str(longrepr[2])
        else:
            reason = str(longrepr)
        if reason.startswith("Skipped: "):
            reason = reason[len("Skipped: "):]
        return " ".join(reason.split()).replace("#", "\\#") or "no reason given"

    def pytest_keyboard_interrupt(self, excinfo):
        self._out("Bail out! interrupted")

    def pytest_internalerror(self, excrepr, excinfo):
        self._out(*_diag(excrepr), "Bail out! internal error")

    def _write_durations(self):
        """Every test's time, slowest first, to $KRPING_OUT/durations.tsv
        (the VM's output dir): where a stage's time goes, for its budget."""
        out = os.environ.get("KRPING_OUT")
        if not out:
            return
        try:
            with open(os.path.join(out, "durations.tsv"), "w") as f:
                for d, n in sorted(self.durations, reverse=True):
                    f.write(f"{d:.2f}\t{n}\n")
        except OSError as e:
            self._out(f"# durations.tsv not written: {e}")

    def pytest_sessionfinish(self, session, exitstatus):
        c = self.counts
        slow = sorted(self.durations, reverse=True)[:5]
        if slow:
            self._out("# slowest: " + ", ".join(
                f"{_tap_name(n)} {d:.1f}s" for d, n in slow))
            self._out(f"# total test time {sum(d for d, _ in self.durations):.0f}s")
            self._write_durations()
        self._out(f"# Totals: pass:{c['pass']} fail:{c['fail']} xfail:0 "
                  f"xpass:0 skip:{c['skip']} error:0")
        if exitstatus == pytest.ExitCode.USAGE_ERROR:
            # pytest exits 4 whatever a hook says; no plan marks it.
            self._out("Bail out! pytest usage error (its message is on stderr)")
        elif not self.planned and exitstatus in (0, 5):
            self._out(f"Bail out! no test selected ({self.deselected} "
                      "deselected, none left to run)")
            session.exitstatus = 1
        elif c["fail"]:
            session.exitstatus = 1
        elif exitstatus in (0, 5):
            session.exitstatus = 4 if c["skip"] == sum(c.values()) else 0
