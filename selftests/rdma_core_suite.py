#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Run rdma-core's own test suite (python3-pyverbs's tests/, unpacked)
on one RDMA device and print its outcome as one JSON object:

    rdma_core_suite.py TESTS_DIR DEVICE SEED

{"ran": N, "results": {test id: [outcome, reason]}}, outcome one of ok,
fail, error, skip, xfail, xpass; reason the skip's reason or the
failure's last line. Several tests draw their attributes at random
(utils.random_qp_init_attr_ex() among them): python's random is seeded
with SEED and the test's id before each test, so that a test's draws
on a device replay with its SEED, whatever ran before it. The suite is loaded as its own run_tests.py loads it
(the package "tests", its argument parser given --dev), in this process:
test_rdma_core_suite.py runs this in a process of its own, since the
suite's tests open the device, fork and leave state in pyverbs.
"""

import importlib.util
import json
import os
import random
import sys
import unittest


class Outcomes(unittest.TestResult):
    """Every test's outcome, by id."""

    @staticmethod
    def _last_line(err):
        exc = err[1]
        text = f"{type(exc).__name__}: {exc}".strip()
        return text.splitlines()[-1][:300] if text else ""

    def __init__(self, seed):
        super().__init__()
        self.seed = seed
        self.outcomes = {}

    def startTest(self, test):
        random.seed(f"{self.seed}-{test.id()}")
        super().startTest(test)

    def addSuccess(self, test):
        self.outcomes[test.id()] = ["ok", ""]

    def addFailure(self, test, err):
        self.outcomes[test.id()] = ["fail", self._last_line(err)]

    def addError(self, test, err):
        self.outcomes[test.id()] = ["error", self._last_line(err)]

    def addSkip(self, test, reason):
        self.outcomes[test.id()] = ["skip", reason]

    def addExpectedFailure(self, test, err):
        self.outcomes[test.id()] = ["xfail", self._last_line(err)]

    def addUnexpectedSuccess(self, test):
        self.outcomes[test.id()] = ["xpass", ""]

    def addSubTest(self, test, subtest, err):
        if err is not None:
            kind = "fail" if issubclass(err[0], test.failureException) \
                else "error"
            self.outcomes[subtest.id()] = [kind, self._last_line(err)]


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    tests_dir, dev, seed = argv[1:]
    sys.path.insert(0, tests_dir)
    from args_parser import parser
    sys.argv[1:] = ["--dev", dev]
    parser.parse_args()
    spec = importlib.util.spec_from_file_location(
        "tests", os.path.join(tests_dir, "__init__.py"),
        submodule_search_locations=[tests_dir])
    tests = importlib.util.module_from_spec(spec)
    sys.modules["tests"] = tests
    spec.loader.exec_module(tests)
    suite = unittest.TestLoader().loadTestsFromModule(tests)
    result = Outcomes(seed)
    suite.run(result)
    print(json.dumps({"ran": result.testsRun, "results": result.outcomes}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
