# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Either end of the PCI link between the two hosts of a two-host bed.

The link is a QEMU ivshmem-doorbell device (PCI 1af4:1110) in each host
(scripts/testbed/vm-pair). A Side runs shell commands on its host (here
directly, there through ssh) and knows the device's sysfs directory;
sides() gives both, or skips the test with the reason.
"""

import os
import subprocess

import pytest

from lib import env
from lib.remote import SshRemote

VENDOR, DEVICE = "0x1af4", "0x1110"

# Prints the device's sysfs directory, or nothing. Builtins only: a $(cat)
# per device costs a fork and an exec each under TCG (lib/remote.py).
FIND = (f"for d in /sys/bus/pci/devices/*; do "
        f"read -r v < $d/vendor && read -r p < $d/device && "
        f"[ \"$v\" = {VENDOR} ] && [ \"$p\" = {DEVICE} ] && echo $d && break; "
        f"done; true")


class Side:
    """One host's end of the link: here (remote None) or there."""

    def __init__(self, name, remote=None):
        self.name = name
        self.remote = remote
        self.dir = self.sh(FIND).strip()

    def sh(self, cmd, check=True):
        if self.remote:
            return self.remote.cmd(cmd, check=check).stdout
        cp = subprocess.run(["sh", "-c", cmd], capture_output=True,
                            text=True, timeout=60)
        if check:
            assert cp.returncode == 0, \
                f"{cmd}: exit {cp.returncode}: {cp.stderr}"
        return cp.stdout


def sides(cls=Side):
    """(here, there) as cls, or a skip naming what is missing."""
    topo = env.topology()
    if not topo.two_host:
        pytest.skip("needs a remote host: set REMOTE_TYPE, REMOTE_ARGS, "
                    "LOCAL_ADDR and REMOTE_ADDR (selftests/krping.config)")
    here = cls("here")
    there = cls("there", SshRemote(topo.remote_args))
    for side in (here, there):
        if not side.dir:
            pytest.skip(f"no ivshmem-doorbell device (PCI 1af4:1110) "
                        f"{side.name}: the PCI link comes with "
                        "scripts/testbed/vm-pair")
    return here, there


def pci_name(side):
    """The device's PCI address, e.g. 0000:00:07.0."""
    return os.path.basename(side.dir)
