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

Over ropcie, faults then break the I/O queue's connection mid-write, from
either host (CROSS_LINK_FAULTS): a failed command SEND, a refusal of the
target's RDMA READ that crosses the link as the host's answer, QP_FATAL
on the target's QP, the host's port down and up. The host reconnects,
with fio's verification intact.

Skipped, with the reason printed, without a remote host or without the
kernel's NVMe-oF modules on either host.
"""

import hashlib
import os
import time
from pathlib import Path

import pytest

from lib import env, krping, ropcie
from lib.remote import SshRemote
from lib.ropcie import sh
from test_ulp import (CM_IDS, DATA_BYTES, FIO, NQN, NVME_PORT,
                      assert_recovered, drop_caches, end_recovery,
                      fio_result, fio_verify, modprobe, new_namespace,
                      nvme_connect, nvme_disconnect, nvme_writes,
                      port_down_until_a_reconnect_failed, ulp_qpns)

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


def remote_target(there, addr):
    """nvmet-rdma set up there on addr (skips without it); the backing
    file's path."""
    cp = there.cmd("modprobe nvmet && modprobe nvmet_rdma", check=False)
    if cp.returncode:
        reason = f"no nvmet-rdma on the remote host: {cp.stderr.strip()}"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    backing = f"/tmp/krping-nvmet-remote-{os.getpid()}.img"
    there.cmd(target_script(addr, backing))
    return backing


def test_nvmeof_across_hosts(remote):
    """nvme-rdma here to nvmet-rdma there: connect, write 4 MiB, read it
    back over the fabric and compare, compare the target's file,
    disconnect; nothing left behind on either host."""
    there, addr = remote
    backing = remote_target(there, addr)
    modprobe("nvme_rdma")
    payload = os.urandom(DATA_BYTES)
    ctrl = None
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


# A fault of the I/O queue's connection mid-write, at its 21st command
# or answer, or at once for an event: this host's command SEND fails
# (fail_wc), this host refuses the target's RDMA READ of its buffers
# (fail_respond), the target's QP gets QP_FATAL there, or this host's
# port goes down until a reconnect attempt failed through it, then up.
CROSS_LINK_FAULTS = ("host_send_retry_exc_err", "host_refuses_a_target_read",
                     "target_qp_fatal", "port_down_up")
DEBUGFS_THERE = ("mountpoint -q /sys/kernel/debug || mount -t debugfs none "
                 "/sys/kernel/debug; cd /sys/kernel/debug/ropcie/ropcie0")


@pytest.mark.parametrize("fault", CROSS_LINK_FAULTS)
def test_nvmeof_across_hosts_recovers_from_a_fault(remote, fault):
    """nvme-rdma here to nvmet-rdma there over ropcie's PCI link, fio
    writing and verifying 8 MiB on one I/O queue, and a fault of the
    queue's connection (CROSS_LINK_FAULTS) armed on one host only. The
    refusal of a target READ is this host's answer: it crosses the link
    and fails the target's READ there. The target's QP_FATAL ends the
    queue from there. After the port, this host's reconnects through the
    cut port time out. nvme-rdma here reconnects (in one attempt, or two
    or three after the port), the QP that broke is gone, and fio's
    verification finds every block intact."""
    if not ropcie.link_exists():
        pytest.skip("needs ropcie0 on the link (vm-pair --provider ropcie)")
    if not os.access(FIO, os.X_OK):
        ropcie.missing(f"{FIO} not installed (package fio)")
    there, addr = remote
    faults = ropcie.fault_dir()
    ropcie.faults_off(faults)
    backing = remote_target(there, addr)
    modprobe("nvme_rdma")
    ctrl = fio = kmsg = target_qp = None
    try:
        devs = set(Path("/dev").glob("nvme*n1"))
        ctrl = nvme_connect(addr, io_queues=1,
                            extra=",reconnect_delay=1,ctrl_loss_tmo=60")
        dev = new_namespace(devs)
        qpns = ulp_qpns("nvme_rdma")
        assert len(qpns) >= 2, f"QPs {qpns}"
        victim = qpns[-1]       # the I/O queue: the admin queue's is first
        kmsg = krping.Kmsg()
        if fault == "host_send_retry_exc_err":
            ropcie.arm_fail_wc(faults, opcode="send", status="retry_exc_err",
                               qpn=victim, space=20)
        elif fault == "host_refuses_a_target_read":
            ropcie.arm_fail_respond(faults, opcode="rdma_read",
                                    status="rem_access_err", qpn=victim,
                                    space=20)
        fio = fio_verify(dev)
        if fault in ("target_qp_fatal", "port_down_up"):
            krping.wait_for(lambda: nvme_writes() >= 20,
                            timeout=krping.SHORT_TIMEOUT,
                            what="20 writes on the namespace")
        if fault == "target_qp_fatal":
            target_qp = ulp_qpns("nvmet_rdma", there.cmd(CM_IDS).stdout)[-1]
            there.cmd(f"{DEBUGFS_THERE} && echo 'qp_fatal {target_qp}' "
                      "> event")
        elif fault == "port_down_up":
            port_down_until_a_reconnect_failed(faults, kmsg)
        job = fio_result(fio, krping.TIMEOUT)
        fio = None
        for how in ("fail_wc", "fail_respond"):
            assert ropcie.read(faults / how / "times") == "0", \
                f"{how} never struck"
        port_cut = fault == "port_down_up"
        assert_recovered(kmsg, range(2, 4) if port_cut else range(1, 2),
                         "nvme_rdma", victim, job, ctrl, port_cut)
        if target_qp is not None:
            assert target_qp not in ulp_qpns(
                "nvmet_rdma", there.cmd(CM_IDS).stdout), \
                f"the target's QP {target_qp} is still there"
        armed = there.cmd(f"{DEBUGFS_THERE} && cat fail_*/times"
                          ).stdout.split()
        assert armed and set(armed) == {"0"}, f"faults armed there: {armed}"
    finally:
        end_recovery(faults, kmsg, fio)
        if ctrl:
            nvme_disconnect(ctrl)
        there.cmd(target_teardown(backing), check=False)
        sh("rmmod", "nvme_rdma", "nvme_fabrics", check=False)
    assert not list(Path("/sys/class/nvme").glob("nvme*"))
