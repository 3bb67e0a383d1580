#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Flatten a KUnit KTAP log into one TAP line per test case.

usage: kunit_flatten.py KUNIT_TOOL_DIR KERNEL_LOG

KUNIT_TOOL_DIR is tools/testing/kunit of the kernel tree (its parser is
used, so nesting is read exactly as kunit.py reads it). Every leaf of the
suite > case > parameter tree becomes "ok N - suite.case[.param]"; a case
or suite that failed without a failing leaf below it (a crash, missing
results) becomes its own "not ok" line. Exit status 1 if any line is
"not ok" or nothing was found.
"""

import io
import sys

sys.path.insert(0, sys.argv[1])
import kunit_parser  # noqa: E402
import kunit_printer  # noqa: E402
from kunit_parser import TestStatus  # noqa: E402

GOOD = (TestStatus.SUCCESS, TestStatus.SKIPPED)


def walk(test, prefix, results):
    name = (test.name or "?").replace("#", "_")
    path = f"{prefix}.{name}" if prefix else name
    if not test.subtests:
        results.append((path, test.status))
        return
    bad_before = sum(1 for r in results if r[1] not in GOOD)
    for sub in test.subtests:
        walk(sub, path, results)
    bad_after = sum(1 for r in results if r[1] not in GOOD)
    if bad_after == bad_before and test.status not in GOOD:
        results.append((path, test.status))


def main():
    kunit_printer.stdout._output = io.StringIO()  # keep the parser quiet
    with open(sys.argv[2], errors="replace") as f:
        root = kunit_parser.parse_run_tests(f.readlines())

    results = []
    for suite in root.subtests:
        walk(suite, "", results)
    if not results or root.status == TestStatus.FAILURE_TO_PARSE_TESTS:
        results.append(("kunit.parse", TestStatus.FAILURE_TO_PARSE_TESTS))

    print("TAP version 13")
    print(f"1..{len(results)}")
    bad = 0
    for i, (name, status) in enumerate(results, 1):
        if status == TestStatus.SUCCESS:
            print(f"ok {i} - {name}")
        elif status == TestStatus.SKIPPED:
            print(f"ok {i} - {name} # SKIP")
        else:
            bad += 1
            print(f"not ok {i} - {name} # {status.name}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
