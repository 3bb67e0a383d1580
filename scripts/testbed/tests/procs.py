# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The host's processes as /proc shows them, for the bed's own tests."""

import os


def _stat(pid):
    """The fields of /proc/PID/stat after the command's name, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # pid (comm) state ppid ...: comm may hold spaces and ")"
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def pid_alive(pid):
    """Running, not a zombie waiting for its parent."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def descendants(root):
    """The pids of every process below root."""
    parent = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat(entry.name)
            if fields is not None:
                parent[int(entry.name)] = int(fields[1])
    found, todo = set(), [root]
    while todo:
        p = todo.pop()
        for c, pp in parent.items():
            if pp == p and c not in found:
                found.add(c)
                todo.append(c)
    return found
