# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Tests of scripts/testbed/tap-summary, on the host (check.sh's bed stage)

The summary's last line is what CI and every reader trust, so each test
feeds it a crafted results directory, as check.sh leaves one, and checks
that a stage which ran nothing, crashed, skipped everything or shrank its
selection makes it fail.
"""

import os
import subprocess

SUMMARY = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tap-summary")

PASSING_TAP = """TAP version 13
1..3
# selected 3 of 5 collected (2 deselected)
ok 1 - test_a.py::test_one
ok 2 - test_a.py::test_two
ok 3 - test_a.py::test_three
"""
CLEAN_LOG_TAP = "TAP version 13\n1..1\nok 1 kernel log clean (6.1.0-57-amd64)\n"


def results(tmp_path, stages, taps, extra=None):
    """A results dir: stages {name: (exit status, seq)}, taps {name: text}."""
    rdir = tmp_path / "results"
    rdir.mkdir()
    for name, (rc, seq) in stages.items():
        (rdir / f"{name}.rc").write_text(f"{rc}\n")
        (rdir / f"{name}.time").write_text("10.0\n")
        (rdir / f"{name}.seq").write_text(f"{seq}\n")
    for name, text in taps.items():
        (rdir / f"{name}.tap").write_text(text)
    for name, text in (extra or {}).items():
        path = rdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return rdir


def summary(*args):
    """(exit status, output lines) of tap-summary ARGS."""
    cp = subprocess.run(["/usr/bin/python3", SUMMARY, *map(str, args)],
                        capture_output=True, text=True, timeout=60)
    return cp.returncode, cp.stdout.splitlines()


def test_a_stage_whose_guest_setup_failed_fails(tmp_path):
    """selftests-6.1 exited 125 (insmod failed in the guest): it has no
    results but a clean kernel log, and a later stage passed."""
    rdir = results(tmp_path, {"build": (0, 1), "selftests-6.1": (125, 2),
                              "selftests": (0, 3)},
                   {"build": "TAP version 13\n1..1\nok 1 build 6.1 W=1\n",
                    "selftests-6.1-dmesg": CLEAN_LOG_TAP,
                    "selftests-6.12": "TAP version 13\n1..1\nok 1 - t.py::t\n"})
    rc, out = summary(rdir)
    assert out[-1] == "3 passed, 1 failed, 0 skipped", out
    assert any("stage selftests-6.1 exited 125" in x for x in out), out
    assert rc == 1


def test_every_stage_counts_with_the_wall_clock_written(tmp_path):
    """The failed stage is not the last one, and check.time exists."""
    rdir = results(tmp_path, {"two-host": (125, 1), "package": (0, 2)},
                   {"two-host-dmesg": CLEAN_LOG_TAP,
                    "package": "TAP version 13\n1..1\nok 1 purge\n"},
                   {"check.time": "100.0\n"})
    rc, out = summary(rdir)
    assert out[-1] == "2 passed, 1 failed, 0 skipped", out
    assert rc == 1


def test_a_stage_that_skipped_everything_fails(tmp_path):
    """Exit 4 (kselftest's skip) from a stage of make check: nothing ran."""
    rdir = results(tmp_path, {"selftests": (4, 1)},
                   {"selftests-6.12": "TAP version 13\n1..0 # SKIP no tests collected\n",
                    "selftests-6.12-dmesg": CLEAN_LOG_TAP})
    rc, out = summary(rdir)
    assert out[-1] == "1 passed, 1 failed, 1 skipped", out
    assert any("stage selftests exited 4" in x for x in out), out
    assert rc == 1


def test_a_failed_test_is_not_counted_twice(tmp_path):
    rdir = results(tmp_path, {"selftests": (1, 1)},
                   {"selftests-6.12": "TAP version 13\n1..1\nnot ok 1 - t.py::t\n"})
    rc, out = summary(rdir)
    assert out[-1] == "0 passed, 1 failed, 0 skipped", out
    assert rc == 1


def test_a_bail_out_fails(tmp_path):
    rdir = results(tmp_path, {"selftests": (1, 1)},
                   {"selftests-6.12": "TAP version 13\nBail out! no test selected "
                                      "(12 deselected, none left to run)\n"})
    rc, out = summary(rdir)
    assert out[-1] == "0 passed, 1 failed, 0 skipped", out
    assert rc == 1


def test_the_selection_is_shown_and_held_to_its_minimum(tmp_path):
    rdir = results(tmp_path, {"selftests": (0, 1)},
                   {"selftests-6.12": PASSING_TAP})
    minimums = tmp_path / "minimums"
    minimums.write_text("# stage, least tests\nselftests 3\n")
    rc, out = summary("--minimums", minimums, rdir)
    assert any("selftests-6.12" in x and "selected 3 of 5 (2 deselected)" in x
               for x in out), out
    assert out[-1] == "3 passed, 0 failed, 0 skipped", out
    assert rc == 0

    minimums.write_text("selftests 4\n")
    rc, out = summary("--minimums", minimums, rdir)
    assert out[-1] == "3 passed, 1 failed, 0 skipped", out
    assert any("stage selftests: selected 3 tests, fewer than its minimum 4" in x
               for x in out), out
    assert rc == 1


def test_a_stage_without_a_selection_fails_its_minimum(tmp_path):
    """A stage whose guest never ran pytest prints no selection line."""
    rdir = results(tmp_path, {"debug-rxe": (0, 1)},
                   {"debug-rxe-dmesg": CLEAN_LOG_TAP})
    minimums = tmp_path / "minimums"
    minimums.write_text("debug-rxe 248\n")
    rc, out = summary("--minimums", minimums, rdir)
    assert any("stage debug-rxe: selected 0 tests" in x for x in out), out
    assert rc == 1


def test_one_stage_of_several_is_held_to_its_minimum_only(tmp_path):
    """make check-selftests: check.sh removed selftests-6.1's records
    (its name starts with selftests-), and debug-rxe did not run; with
    the stages check.sh knows, neither is held to its minimum, and
    selftests-6.12.tap is the selftests stage's."""
    rdir = results(tmp_path, {"selftests": (0, 1)},
                   {"selftests-6.12": PASSING_TAP})
    minimums = tmp_path / "minimums"
    minimums.write_text("selftests 3\nselftests-6.1 300\ndebug-rxe 248\n")
    rc, out = summary("--stages", "selftests selftests-6.1 debug-rxe",
                      "--minimums", minimums, rdir, "selftests")
    assert out[-1] == "3 passed, 0 failed, 0 skipped", out
    assert rc == 0


def test_a_minimum_for_no_stage_of_check_fails(tmp_path):
    """A minimum for a stage check.sh does not know (a typo, a stage
    renamed) would hold nothing: it fails."""
    rdir = results(tmp_path, {"selftests": (0, 1)},
                   {"selftests-6.12": PASSING_TAP})
    minimums = tmp_path / "minimums"
    minimums.write_text("selftests 3\ntwo-host-siv 21\n")
    rc, out = summary("--stages", "selftests two-host-siw",
                      "--minimums", minimums, rdir)
    assert out[-1] == "3 passed, 1 failed, 0 skipped", out
    assert any("two-host-siv" in x and "no stage of make check" in x
               for x in out), out
    assert rc == 1


def test_boot_retries_of_pair_guests_are_counted(tmp_path):
    """A pair stage keeps its guests one level down (vm-two-host/remote)."""
    rdir = results(tmp_path, {"two-host": (0, 1)},
                   {"two-host": "TAP version 13\n1..1\nok 1 - t.py::t\n"},
                   {"vm-two-host/remote/boot-retries": "boot 1: died (Oops: int3)\n",
                    "vm-two-host/local/boot-retries": "boot 1: hung\nboot 2: hung\n"})
    rc, out = summary(rdir)
    assert "Guests booted again: 3 (each died before the project's modules loaded)" in out, out
    assert sum("RETRY vm-two-host/" in x for x in out) == 3, out
    assert rc == 0


def test_no_results_at_all_fails(tmp_path):
    rdir = results(tmp_path, {}, {})
    rc, out = summary(rdir)
    assert out[-1] == "0 passed, 1 failed, 0 skipped", out
    assert rc == 1
