# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Tests of selftests/run_tests.sh and its TAP plugin (selftests/lib/tap.py),
on the host (check.sh's bed stage)

Exit status 4 is kselftest's skip, and pytest's usage error too. A run
that selects no test, or that pytest refused, must say so and fail; only
a run whose every selected test skipped is a skip. run_tests.sh runs here
in a mount namespace of its own whose /sys/kernel is a tmpfs with an
empty /sys/kernel/config/krping, so that its "module loaded?" check
passes on a host that cannot load the module; the tests it is given are
the bed's own or none.
"""

import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SELFTESTS = os.path.join(REPO, "selftests")
PYTHON = "/usr/bin/python3"

SCRATCH_TESTS = """
import pytest

def test_runs():
    pass

def test_skips():
    pytest.skip("not here")
"""


def tap_run(tmp_path, *args):
    """pytest with the TAP plugin over a scratch test file."""
    (tmp_path / "test_scratch.py").write_text(SCRATCH_TESTS)
    cp = subprocess.run([PYTHON, "-m", "pytest", "-p", "lib.tap", "-p",
                         "no:cacheprovider", "--tap", *args],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120,
                        env={**os.environ, "PYTHONPATH": SELFTESTS})
    return cp.returncode, cp.stdout.splitlines()


def test_a_selection_that_matches_nothing_fails(tmp_path):
    rc, out = tap_run(tmp_path, "-k", "no_such_test")
    assert not any(x.startswith("1..0") for x in out), out
    assert "Bail out! no test selected (2 deselected, none left to run)" in out
    assert rc == 1


def test_the_selection_is_printed_after_the_plan(tmp_path):
    rc, out = tap_run(tmp_path, "-k", "runs")
    assert out[1:3] == ["1..1", "# selected 1 of 2 collected (1 deselected)"], out
    assert rc == 0


def test_every_selected_test_skipped_is_a_skip(tmp_path):
    rc, out = tap_run(tmp_path, "-k", "skips")
    assert "ok 1 - test_scratch.py::test_skips # SKIP not here" in out, out
    assert rc == 4


def test_a_usage_error_is_a_bail_out(tmp_path):
    rc, out = tap_run(tmp_path, "no_such_file.py")
    assert not any(x.startswith("1..") for x in out), out
    assert "Bail out! pytest usage error (its message is on stderr)" in out
    assert rc == 4             # pytest's; run_tests.sh makes it 2


@pytest.fixture
def run_tests():
    """run_tests.sh ARGS in a mount namespace where the module looks
    loaded: (exit status, stdout lines)."""
    def run(*args):
        script = ('mount -t tmpfs none /sys/kernel && '
                  'mkdir -p /sys/kernel/config/krping && exec "$@"')
        cp = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh",
                             os.path.join(SELFTESTS, "run_tests.sh"), *args],
                            capture_output=True, text=True, timeout=300)
        return cp.returncode, cp.stdout.splitlines()
    if os.geteuid() != 0:
        pytest.fail("the bed's tests run as root (unshare -m, mount)")
    return run


def test_run_tests_turns_a_usage_error_into_2(run_tests):
    rc, out = run_tests("no_such_file.py")
    assert "Bail out! pytest usage error (its message is on stderr)" in out, out
    assert rc == 2


def test_run_tests_turns_a_bad_k_expression_into_2(run_tests):
    """pytest reads -k after the plugin printed its plan: the usage
    error's Bail out!, not the missing plan, tells it from a skip."""
    rc, out = run_tests("test_options.py", "-k", "one and (")
    assert "Bail out! pytest usage error (its message is on stderr)" in out, out
    assert rc == 2


def test_run_tests_turns_a_bad_option_into_2(run_tests):
    rc, out = run_tests("--no-such-option")
    assert not any(x.startswith("1..") for x in out), out
    assert rc == 2


def test_run_tests_fails_a_selection_of_nothing(run_tests):
    rc, out = run_tests("test_options.py", "-k", "no_such_test_anywhere")
    assert any(x.startswith("Bail out! no test selected") for x in out), out
    assert rc == 1
