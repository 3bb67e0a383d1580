# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Tests of scripts/testbed/kunit-tap, on the host (check.sh's bed stage)

kunit-tap turns the kernel logs that guest-kunit kept in a guest into
TAP, with the kernel tree's own KTAP parser. What it must never do is
report a module as passed when the guest did not run it, could not load
it or could not unload it.
"""

import glob
import os
import subprocess

import pytest

KUNIT_TAP = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "kunit-tap")
# The parser ships with the kernel tree: the debug kernel's headers
# (scripts/testbed/debug-kernel.sh) are where check.sh takes it from.
TOOL_DIRS = sorted(glob.glob(
    "/usr/src/linux-headers-*-kdebug/source/tools/testing/kunit"))

# What a KUnit module prints while it loads: one suite, two cases.
PASSING_LOG = """\
[   10.000000] KTAP version 1
[   10.000001] 1..1
[   10.000002]     KTAP version 1
[   10.000003]     # Subtest: demo
[   10.000004]     # module: demo_kunit
[   10.000005]     1..2
[   10.000006]     ok 1 demo_first
[   10.000007]     ok 2 demo_second
[   10.000008] # demo: pass:2 fail:0 skip:0 total:2
[   10.000009] # Totals: pass:2 fail:0 skip:0 total:2
[   10.000010] ok 1 demo
"""
FAILING_LOG = (PASSING_LOG.replace("    ok 2 demo_second", "    not ok 2 demo_second")
               .replace("] ok 1 demo", "] not ok 1 demo"))


@pytest.fixture
def tool_dir():
    if not TOOL_DIRS:
        pytest.skip("no kernel tree with tools/testing/kunit: the debug "
                    "kernel's headers are not installed (stage debug-kernel)")
    return TOOL_DIRS[-1]


def kunit_tap(tmp_path, tool_dir, modules, files):
    """Run kunit-tap over MODULES (names of empty .ko files) and FILES
    ({name: text} in the log dir); return (exit status, result lines)."""
    ko_dir, log_dir = tmp_path / "ko", tmp_path / "logs"
    ko_dir.mkdir()
    log_dir.mkdir()
    for name in modules:
        (ko_dir / f"{name}.ko").write_bytes(b"")
    for name, text in files.items():
        (log_dir / name).write_text(text)
    cp = subprocess.run([KUNIT_TAP, str(ko_dir), str(log_dir), tool_dir],
                        capture_output=True, text=True, timeout=60)
    lines = [x for x in cp.stdout.splitlines() if "ok " in x]
    return cp.returncode, lines


def test_a_module_that_passed(tmp_path, tool_dir):
    rc, lines = kunit_tap(tmp_path, tool_dir, ["demo_kunit"],
                          {"demo_kunit.log": PASSING_LOG})
    assert lines == ["ok 1 - demo.demo_first", "ok 2 - demo.demo_second"]
    assert rc == 0


def test_a_failed_case(tmp_path, tool_dir):
    rc, lines = kunit_tap(tmp_path, tool_dir, ["demo_kunit"],
                          {"demo_kunit.log": FAILING_LOG})
    assert lines[0] == "ok 1 - demo.demo_first"
    assert lines[1].startswith("not ok 2 - demo.demo_second")
    assert rc == 1


def test_a_module_insmod_refused(tmp_path, tool_dir):
    rc, lines = kunit_tap(tmp_path, tool_dir, ["demo_kunit"], {
        "demo_kunit.insmod": "insmod: ERROR: could not insert module\n"})
    assert lines == ["not ok 1 - demo_kunit.load # insmod: insmod: "
                     "ERROR: could not insert module"]
    assert rc == 1


def test_a_module_that_did_not_unload(tmp_path, tool_dir):
    rc, lines = kunit_tap(tmp_path, tool_dir, ["demo_kunit"], {
        "demo_kunit.log": PASSING_LOG,
        "demo_kunit.rmmod": "rmmod: ERROR: Module demo_kunit is in use\n"})
    assert lines[:2] == ["ok 1 - demo.demo_first", "ok 2 - demo.demo_second"]
    assert lines[2] == ("not ok 1 - demo_kunit.unload # rmmod: rmmod: "
                        "ERROR: Module demo_kunit is in use")
    assert rc == 1


def test_a_module_the_guest_never_reached(tmp_path, tool_dir):
    """The guest died after the first module: the second is no pass."""
    rc, lines = kunit_tap(tmp_path, tool_dir, ["a_kunit", "b_kunit"],
                          {"a_kunit.log": PASSING_LOG})
    assert lines[:2] == ["ok 1 - demo.demo_first", "ok 2 - demo.demo_second"]
    assert lines[2].startswith("not ok 1 - b_kunit.load # no kernel log")
    assert rc == 1


def test_an_empty_module_dir(tmp_path, tool_dir):
    rc, lines = kunit_tap(tmp_path, tool_dir, [], {})
    assert lines[0].startswith("not ok 1 - kunit.modules # none in ")
    assert rc == 1
