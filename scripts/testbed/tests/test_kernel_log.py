# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Tests of the selftests' kernel log classifier (selftests/lib/krping.py
kernel_bug_lines()), on the host (check.sh's bed stage): every test in a
guest fails when it calls a line a kernel bug, and passes a real one by
when it does not."""

from lib import krping

USER_GPF = ("traps: ib_send_lat[401] general protection fault "
            "ip:7f3b8678d472 sp:7ffe5eddef90 error:0 in "
            "librdmacm.so.1.3.44.0[a472,7f3b86787000+15000]")
KERNEL_GPF = ("Oops: general protection fault, probably for non-canonical "
              "address 0xdffffc0000000003: 0000 [#1] PREEMPT SMP KASAN")


def test_a_user_process_killed_by_the_kernel_is_no_kernel_bug():
    """As /dev/kmsg gives the line, and as dmesg does (time stamp)."""
    assert krping.kernel_bug_lines([USER_GPF]) == []
    assert krping.kernel_bug_lines(["[   26.789729] " + USER_GPF]) == []


def test_a_kernel_fault_is_a_bug():
    lines = [KERNEL_GPF, "Call Trace:"]
    assert krping.kernel_bug_lines(lines) == lines
    # "traps:" inside a kernel message names no user process.
    assert krping.kernel_bug_lines(["BUG: traps: x"]) == ["BUG: traps: x"]
    assert krping.kernel_bug_lines(["WARNING: CPU: 0 PID: 7 at x"]) == \
        ["WARNING: CPU: 0 PID: 7 at x"]
