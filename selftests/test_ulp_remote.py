# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""An unmodified kernel ULP across two hosts: NVMe over Fabrics.

The remote host's nvmet-rdma exports a RAM-backed namespace (a file on
its /tmp, a tmpfs) on its address of the topology (REMOTE_ADDR); this
host's nvme-rdma connects to it as `nvme connect -t rdma` does, writes
4 MiB, drops its caches, reads the data back over the fabric and
compares it, and the remote host's file is compared too; then the host
disconnects and the target is taken down on the remote host. Over any
provider the topology has; the test bed runs it over ropcie's PCI link
(vm-pair --provider ropcie), where a write moves its data by RDMA READ
from the target and a read by RDMA WRITE, each across the link.

Skipped, with the reason printed, without a remote host or without the
kernel's NVMe-oF modules on either host.
"""

import hashlib
import os
import time
from pathlib import Path

import pytest

from lib import env
from lib.remote import SshRemote
from lib.ropcie import sh
from test_ulp import (DATA_BYTES, NQN, NVME_PORT, drop_caches,
                      modprobe, new_namespace, nvme_connect,
                      nvme_disconnect)

pytestmark = pytest.mark.two_host

BACKING_MIB = 16
NVMET = "/sys/kernel/config/nvmet"


@pytest.fixture
def remote():
    topo = env.topology()
    if not topo.two_host:
        pytest.skip("needs a remote host: set REMOTE_TYPE, REMOTE_ARGS, "
                    "LOCAL_ADDR and REMOTE_ADDR (selftests/krping.config)")
    return SshRemote(topo.remote_args), topo.remote_addr


def target_script(addr, backing):
    """Shell lines that set the remote target up: one subsystem, one
    namespace on @backing, one RDMA port on @addr."""
    sub = f"{NVMET}/subsystems/{NQN}"
    port = f"{NVMET}/ports/1"
    return " && ".join([
        f"truncate -s {BACKING_MIB}M {backing}",
        f"mkdir {sub}", f"echo 1 > {sub}/attr_allow_any_host",
        f"mkdir {sub}/namespaces/1",
        f"echo {backing} > {sub}/namespaces/1/device_path",
        f"echo 1 > {sub}/namespaces/1/buffered_io",
        f"echo 1 > {sub}/namespaces/1/enable",
        f"mkdir {port}", f"echo rdma > {port}/addr_trtype",
        f"echo ipv4 > {port}/addr_adrfam",
        f"echo {addr} > {port}/addr_traddr",
        f"echo {NVME_PORT} > {port}/addr_trsvcid",
        f"ln -s {sub} {port}/subsystems/{NQN}",
    ])


def target_teardown(backing):
    sub = f"{NVMET}/subsystems/{NQN}"
    port = f"{NVMET}/ports/1"
    return "; ".join([
        f"rm -f {port}/subsystems/{NQN}", f"rmdir {port}",
        f"echo 0 > {sub}/namespaces/1/enable",
        f"rmdir {sub}/namespaces/1", f"rmdir {sub}", f"rm -f {backing}",
        "rmmod nvmet_rdma nvmet", "true",
    ])


def test_nvmeof_across_hosts(remote):
    """nvme-rdma here to nvmet-rdma there: connect, write 4 MiB, read it
    back over the fabric and compare, compare the target's file,
    disconnect; nothing left behind on either host."""
    there, addr = remote
    cp = there.cmd("modprobe nvmet && modprobe nvmet_rdma", check=False)
    if cp.returncode:
        reason = f"no nvmet-rdma on the remote host: {cp.stderr.strip()}"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    modprobe("nvme_rdma")
    backing = f"/tmp/krping-nvmet-remote-{os.getpid()}.img"
    payload = os.urandom(DATA_BYTES)
    ctrl = None
    there.cmd(target_script(addr, backing))
    try:
        t0 = time.monotonic()
        devs = set(Path("/dev").glob("nvme*n1"))
        ctrl = nvme_connect(addr)
        dev = new_namespace(devs)
        print(f"{ctrl} ({dev}) connected to {addr} in "
              f"{time.monotonic() - t0:.1f} s")
        with open(dev, "r+b", buffering=0) as f:
            f.write(payload)
            os.fsync(f.fileno())
        drop_caches()
        with open(dev, "rb", buffering=0) as f:
            back = f.read(DATA_BYTES)
        assert back == payload, "the namespace read back other data"
        there.cmd("sync")
        theirs = there.cmd(f"head -c {DATA_BYTES} {backing} | sha256sum"
                           ).stdout.split()[0]
        assert theirs == hashlib.sha256(payload).hexdigest(), \
            "the target's file holds other data"
    finally:
        if ctrl:
            nvme_disconnect(ctrl)
        there.cmd(target_teardown(backing), check=False)
        sh("rmmod", "nvme_rdma", "nvme_fabrics", check=False)
    assert not list(Path("/sys/class/nvme").glob("nvme*"))
    left = there.cmd(f"ls {NVMET}/subsystems {NVMET}/ports 2>/dev/null; "
                     f"ls {backing} 2>/dev/null; true").stdout.split()
    assert not left, f"left on the remote host: {left}"
