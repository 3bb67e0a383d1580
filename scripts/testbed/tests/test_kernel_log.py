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


# rxe's own race (patch 0007), as the newest kernel reported it.
RXE_RACE = [
    "------------[ cut here ]------------",
    "WARNING: drivers/infiniband/sw/rxe/rxe_task.c:249 at "
    "rxe_sched_task+0x9b/0xa0 [rdma_rxe], CPU#1: kworker/u8:0/12",
    "Modules linked in: rdma_rxe ip6_udp_tunnel udp_tunnel rdma_krping(OE)",
    "RIP: 0010:rxe_sched_task+0x97/0xa0 [rdma_rxe]",
    "Call Trace:",
    " <TASK>",
    " rxe_xmit_packet+0x16b/0x320 [rdma_rxe]",
    " rxe_requester+0x8db/0x12f0 [rdma_rxe]",
    " </TASK>",
    "---[ end trace 0000000000000000 ]---",
]


def test_rxes_own_race_is_no_bug_of_ours():
    """Both warnings of the race, one after the other, as dmesg has them
    too (time stamps): nothing."""
    twice = RXE_RACE + [RXE_RACE[1].replace(":249 ", ":38 ")] + RXE_RACE[2:]
    assert krping.kernel_bug_lines(twice) == []
    assert krping.kernel_bug_lines(["[  12.5] " + l for l in twice]) == []


def test_a_bug_after_rxes_race_still_counts():
    """What follows the race's trace is judged again; a splat that
    begins before its end (a new cut) is too; another warning of rxe's
    is a bug."""
    after = RXE_RACE + [KERNEL_GPF]
    assert krping.kernel_bug_lines(after) == [KERNEL_GPF]
    cut = RXE_RACE[:5] + ["------------[ cut here ]------------",
                          KERNEL_GPF]
    assert krping.kernel_bug_lines(cut) == [KERNEL_GPF]
    other = "WARNING: drivers/infiniband/sw/rxe/rxe_qp.c:1 at rxe_qp_x+0x1"
    assert krping.kernel_bug_lines([other]) == [other]


def test_a_report_inside_rxes_race_still_counts():
    """Another CPU's report printed inside the race's trace (an oops has
    no cut line) is a bug, and so is what follows a trace that never
    ends; 6.12's format of the warning is not the newest kernel's and
    stays a bug."""
    oops = "BUG: unable to handle page fault for address: 0000000000000008"
    inside = RXE_RACE[:5] + [oops, "Call Trace:"] + RXE_RACE[5:]
    assert krping.kernel_bug_lines(inside) == [oops, "Call Trace:"]
    cut_short = RXE_RACE[:6] + [" frame+0x1/0x2"] * 80 + [KERNEL_GPF]
    assert krping.kernel_bug_lines(cut_short) == [KERNEL_GPF]
    old = ("WARNING: CPU: 1 PID: 12 at drivers/infiniband/sw/rxe/"
           "rxe_task.c:249 rxe_sched_task+0x9b/0xa0 [rdma_rxe]")
    assert krping.kernel_bug_lines([old]) == [old]
