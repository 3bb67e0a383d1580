# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""What an rping (rdma-core's librdmacm example) exit status means.

rping of Debian 12 (rdmacm-utils 44.0) has a race at exit: its main
thread destroys the rdma_cm event channel while its CM thread still
reads it, and when the CM thread wakes first it prints
"rdma_get_cm_event: Bad file descriptor" and exits the process with -1
(255), whatever the ping did. Later rdma-core stops the CM thread
through an eventfd and joins it before it destroys the channel. A run
that validated every ping and then lost that race printed nothing but
the DISCONNECT line before it; a failed ping prints why ("data
mismatch!", "rping client failed", a failed completion) and is never
taken for the race.
"""

RACE_LINE = "rdma_get_cm_event: Bad file descriptor"
# Lines of a run that completed (the peer's disconnect, then the race).
QUIET_LINES = {"client DISCONNECT EVENT...", "server DISCONNECT EVENT...",
               RACE_LINE}


def lost_exit_race(rc, output):
    """Did rping fail only by its exit race (rc 255, nothing else said)?"""
    lines = [ln.strip() for ln in (output or "").splitlines() if ln.strip()]
    return (rc == 255 and bool(lines) and lines[-1] == RACE_LINE and
            set(lines) <= QUIET_LINES)


def exit_ok(rc, output):
    """rping's run passed: exit 0, or its exit race after a clean run."""
    return rc == 0 or lost_exit_race(rc, output)
