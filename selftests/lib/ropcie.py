# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The ropcie topology of the selftests: ropcie0 on a dummy netdev rp0
with 10.77.0.1/24, so that rdma_cm picks ropcie0 by source address
(127.0.0.1 would not do: rdma_cm binds loopback addresses to the first
active RDMA device)."""

import os
import subprocess

from lib import krping

ROPCIE_DEV = "ropcie0"
PROFILE = "/sys/kernel/debug/ropcie/profile"
NETDEV = "rp0"
ADDR = "10.77.0.1"


def sh(*cmd, check=True):
    cp = subprocess.run(list(cmd), capture_output=True, text=True,
                        timeout=krping.SHORT_TIMEOUT)
    if check and cp.returncode:
        raise krping.KrpingError(f"{' '.join(cmd)}: exit {cp.returncode}: "
                                 f"{cp.stdout.strip()} {cp.stderr.strip()}")
    return cp


def link_exists(name=ROPCIE_DEV):
    return os.path.exists(f"/sys/class/infiniband/{name}")


def port_active(name=ROPCIE_DEV):
    try:
        with open(f"/sys/class/infiniband/{name}/ports/1/state") as f:
            return "ACTIVE" in f.read()
    except OSError:
        return False


def ensure_setup():
    """rp0 up with ADDR, ropcie0 on it and ACTIVE (idempotent)."""
    if not os.path.exists(f"/sys/class/net/{NETDEV}"):
        sh("modprobe", "dummy", "numdummies=0")
        sh("ip", "link", "add", NETDEV, "type", "dummy")
        sh("ip", "addr", "add", f"{ADDR}/24", "dev", NETDEV)
        sh("ip", "link", "set", NETDEV, "up")
    if not link_exists():
        sh("rdma", "link", "add", ROPCIE_DEV, "type", "ropcie",
           "netdev", NETDEV)
    krping.wait_for(port_active, timeout=10, what=f"{ROPCIE_DEV} ACTIVE")


def teardown_setup():
    if link_exists():
        sh("rdma", "link", "delete", ROPCIE_DEV, check=False)
    if os.path.exists(f"/sys/class/net/{NETDEV}"):
        sh("ip", "link", "del", NETDEV, check=False)


def parse_profile(text):
    """The table of debugfs ropcie/profile (Documentation/ropcie.rst,
    Performance) as ({stage: {column: int}}, {"worker": n, "inline": n}),
    the second from its closing "executed by worker N, inline N" line.
    Raises AssertionError on a table of another shape."""
    lines = text.splitlines()
    assert lines and lines[0].split()[0] == "stage", text
    cols = lines[0].split()[1:]
    stages = {}
    for line in lines[1:-1]:
        f = line.split()
        assert len(f) == len(cols) + 1, (line, text)
        stages[f[0]] = dict(zip(cols, map(int, f[1:])))
    last = lines[-1].replace(",", "").split()
    assert last[:3] == ["executed", "by", "worker"] and \
        last[4] == "inline", text
    return stages, {"worker": int(last[3]), "inline": int(last[5])}
