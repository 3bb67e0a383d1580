# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Unmodified kernel ULPs over ropcie: what a user runs on an RDMA device
that is not krping.

NVMe over Fabrics: the kernel's target (nvmet-rdma) exports a file on
/tmp through configfs, listening on ropcie0's address; the kernel's host
(nvme-rdma) connects through /dev/nvme-fabrics, as `nvme connect -t
rdma` does; data written to the namespace is read back over the fabric
after the caches are dropped and compared, and checked in the target's
file too; then the host disconnects and the target is taken down. A
write to the namespace moves its data by RDMA READ from the target (the
rdma_rw API's registered READ sinks and READ_WITH_INV on iWARP), a read
by RDMA WRITE.

NFS over RDMA: nfsd with an RDMA listener exports a tmpfs directory
(NFSv4.1 only, no rpcbind); the kernel's NFS client mounts it with
proto=rdma; an 8 MiB file is written, the caches dropped, and the file
read back over the mount and compared, and checked in the export too.
The client's large WRITEs go as read chunks that the server pulls with
RDMA READ.

Each step is bounded; after the test no NVMe controller, nvmet object or
RDMA resource of the ULPs is left, and their modules are unloaded.
Skipped, with the reason printed, when ropcie or the kernel's NVMe-oF
modules or Debian's nfs-kernel-server are missing (the debug kernel is
built without them); a missing ropcie fails instead where the test bed
loaded it (lib/ropcie.py: REQUIRED).
"""

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from lib import krping, ropcie
from lib.ropcie import ADDR, ensure_setup, sh, teardown_setup

NVMET = Path("/sys/kernel/config/nvmet")
NQN = "nqn.2026-11.org.krping:ropcie"
HOSTNQN = "nqn.2026-11.org.krping:host"
NVME_PORT = "4420"
DATA_BYTES = 4 << 20
BACKING_BYTES = 16 << 20
NVME_MODULES = ("nvme_rdma", "nvmet_rdma", "nvme_fabrics", "nvmet")


@pytest.fixture(scope="module")
def ropcie_link():
    ropcie.require_loaded()
    ensure_setup()
    yield
    teardown_setup()


def modprobe(*mods):
    for mod in mods:
        cp = sh("modprobe", mod, check=False)
        if cp.returncode:
            reason = f"no {mod} in this kernel: {cp.stderr.strip()}"
            print(f"SKIP: {reason}")
            pytest.skip(reason)


def write(path, value):
    with open(path, "w") as f:
        f.write(f"{value}\n")


class NvmetTarget:
    """One subsystem with one file-backed namespace on one RDMA port."""

    def __init__(self, backing):
        self.subsys = NVMET / "subsystems" / NQN
        self.ns = self.subsys / "namespaces" / "1"
        self.port = NVMET / "ports" / "1"
        self.link = self.port / "subsystems" / NQN
        self.subsys.mkdir()
        write(self.subsys / "attr_allow_any_host", 1)
        self.ns.mkdir()
        write(self.ns / "device_path", backing)
        write(self.ns / "buffered_io", 1)
        write(self.ns / "enable", 1)
        self.port.mkdir()
        for attr, value in (("addr_trtype", "rdma"), ("addr_adrfam", "ipv4"),
                            ("addr_traddr", ADDR),
                            ("addr_trsvcid", NVME_PORT)):
            write(self.port / attr, value)
        self.link.symlink_to(self.subsys)

    def remove(self):
        if self.link.is_symlink():
            self.link.unlink()
        if self.port.exists():
            self.port.rmdir()
        if self.ns.exists():
            write(self.ns / "enable", 0)
            self.ns.rmdir()
        if self.subsys.exists():
            self.subsys.rmdir()


def nvme_connect(addr=ADDR, io_queues=2, extra=""):
    """Connect to the target at @addr as `nvme connect -t rdma` does;
    the controller's name."""
    # Our own host NQN needs its own host ID: the kernel's default one
    # belongs to its default NQN.
    opts = (f"transport=rdma,traddr={addr},trsvcid={NVME_PORT},nqn={NQN},"
            f"hostnqn={HOSTNQN},hostid={uuid.uuid4()},"
            f"nr_io_queues={io_queues},ctrl_loss_tmo=5{extra}")
    fd = os.open("/dev/nvme-fabrics", os.O_RDWR)
    try:
        os.write(fd, opts.encode())
        answer = os.read(fd, 4096).decode()
    finally:
        os.close(fd)
    fields = dict(kv.split("=", 1) for kv in answer.strip().split(","))
    return f"nvme{fields['instance']}"


def nvme_disconnect(ctrl):
    path = Path("/sys/class/nvme") / ctrl
    if path.exists():
        write(path / "delete_controller", 1)
    krping.wait_for(lambda: not path.exists(), timeout=krping.SHORT_TIMEOUT,
                    what=f"{ctrl} removed")


def new_namespace(before):
    """/dev path of the namespace that appeared since @before (with
    native multipath, the controller's own path device is hidden and
    the block device is the subsystem's head, so look in /dev)."""
    found = []

    def ready():
        found[:] = sorted(set(Path("/dev").glob("nvme*n1")) - before)
        return bool(found)

    krping.wait_for(ready, timeout=krping.SHORT_TIMEOUT,
                    what="the namespace's block device")
    return found[0]


def nvme_teardown(ctrl, target, backing):
    """Disconnect the host, take the target down, unload the modules."""
    if ctrl:
        nvme_disconnect(ctrl)
    if target:
        target.remove()
    backing.unlink(missing_ok=True)
    for mod in NVME_MODULES:
        sh("rmmod", mod, check=False)


def nvme_check_gone(before):
    """No controller, no NVMe-oF module, the RDMA resources as before."""
    assert not list(Path("/sys/class/nvme").glob("nvme*"))
    assert not any(krping.module_loaded(m) for m in NVME_MODULES[:2])
    krping.wait_for(lambda: krping.rdma_resource_counts() == before,
                    timeout=krping.SHORT_TIMEOUT,
                    what=f"RDMA resources back to {before}")


def drop_caches():
    os.sync()
    write("/proc/sys/vm/drop_caches", 3)


def test_nvmeof_over_ropcie(ropcie_link):
    """nvme-rdma to nvmet-rdma over ropcie0: connect, write 4 MiB, read
    it back from the fabric and from the target's file, disconnect;
    nothing left behind."""
    modprobe("nvmet", "nvmet_rdma", "nvme_rdma")
    before = krping.rdma_resource_counts()
    backing = Path(f"/tmp/krping-nvmet-{os.getpid()}.img")
    with open(backing, "wb") as f:
        f.truncate(BACKING_BYTES)
    payload = os.urandom(DATA_BYTES)
    target = ctrl = None
    try:
        target = NvmetTarget(backing)
        t0 = time.monotonic()
        devs = set(Path("/dev").glob("nvme*n1"))
        ctrl = nvme_connect()
        dev = new_namespace(devs)
        print(f"{ctrl} ({dev}) connected in {time.monotonic() - t0:.1f} s")
        with open(dev, "r+b", buffering=0) as f:
            f.write(payload)
            os.fsync(f.fileno())
        drop_caches()
        with open(dev, "rb", buffering=0) as f:
            back = f.read(DATA_BYTES)
        assert back == payload, "the namespace read back other data"
        with open(backing, "rb") as f:
            assert f.read(DATA_BYTES) == payload, \
                "the target's file holds other data"
    finally:
        nvme_teardown(ctrl, target, backing)
    nvme_check_gone(before)


FIO = "/usr/bin/fio"
FIO_BYTES = 8 << 20


# What ulp_qpns() reads: on this host, or on another one (its output).
CM_IDS = "rdma -j resource show cm_id"


def ulp_qpns(comm, cm_ids=None):
    """The numbers of the connected QPs on ropcie0 of the kernel module
    comm (nvme_rdma, nvmet_rdma), in creation order: their cm_ids name
    the module (the QPs name rdma_cm, which created them). cm_ids: the
    output of CM_IDS on another host; else this host's."""
    out = cm_ids if cm_ids is not None else sh(*CM_IDS.split()).stdout
    return sorted(int(e["lqpn"]) for e in json.loads(out or "[]")
                  if e.get("ifname") == ropcie.ROPCIE_DEV and "lqpn" in e
                  and e.get("comm", "").strip("[]") == comm)


def nvme_writes():
    """Writes completed on the NVMe block devices: the namespace's path
    devices count them (6.1 counts none on the multipath head)."""
    return sum(int((d / "stat").read_text().split()[4])
               for d in Path("/sys/block").glob("nvme*"))


def fio_verify(dev):
    """fio writes FIO_BYTES to dev with direct I/O, each 64 KiB block
    with its crc32c, then reads them back and checks every one."""
    return subprocess.Popen(
        [FIO, "--name=verify", f"--filename={dev}", "--rw=write",
         "--bs=64k", f"--size={FIO_BYTES}", "--direct=1",
         "--ioengine=psync", "--verify=crc32c", "--verify_fatal=1",
         "--do_verify=1", "--output-format=json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def end_recovery(faults, kmsg, fio):
    """Every fault off, the kernel log closed, a fio still running ended."""
    ropcie.faults_off(faults)
    if kmsg:
        kmsg.close()
    if fio:
        fio.kill()
        fio.wait()


def assert_recovered(kmsg, attempts, side, victim, job, ctrl,
                     port_cut=False):
    """After a fault broke the I/O queue's QP victim (of module side):
    nvme-rdma reconnected once, after a number of attempts in attempts
    (a range), and no command timed out unless the port was cut (a
    command whose answer was still to come then gets none: 6.1's
    recovery waits for the keep-alive its nvme_keep_alive_work() sent
    and waits for, which times out after 5 s); the QP is gone, fio moved
    every byte both ways, and the controller is live."""
    def reconnected():
        kmsg.read()
        return any("Successfully reconnected" in ln for ln in kmsg.seen)
    # fio may have ended before the fault broke the queue (the port's
    # cut comes a second after port_err): the reconnect follows.
    krping.wait_for(reconnected, timeout=krping.SHORT_TIMEOUT,
                    what="nvme-rdma's reconnect")
    lines = kmsg.seen
    # The fault's error started the recovery, not a command's timeout
    # (nvme_rdma_timeout()), which a fault that left the QP alone ends in.
    timeouts = [ln for ln in lines if "QID" in ln and
                ln.rstrip().endswith("timeout")]
    assert port_cut or not timeouts, timeouts
    reconnected = [ln for ln in lines if "Successfully reconnected" in ln]
    assert len(reconnected) == 1, reconnected
    took = re.search(r"\((\d+) attempts\)", reconnected[0])
    assert took and int(took[1]) in attempts, \
        f"{reconnected[0]}: not {attempts} attempts"
    assert victim not in ulp_qpns(side), \
        f"{side}'s QP {victim} is still there: no reconnect"
    assert job["write"]["io_bytes"] == FIO_BYTES, job["write"]
    assert job["read"]["io_bytes"] == FIO_BYTES, job["read"]
    state = (Path("/sys/class/nvme") / ctrl / "state").read_text()
    assert state.strip() == "live", state


def fio_result(proc, timeout):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"fio exited {proc.returncode}: {err}"
    job = json.loads(out[out.index("{"):])["jobs"][0]
    assert job["error"] == 0, job
    return job


# Each fault breaks the I/O queue's connection at its 21st command or
# answer (space=20: a known point inside fio's write phase), or at once
# for an event; nvme-rdma's error recovery must reconnect, after as many
# refused attempts as the fault's last field asks (fail_connect), and
# every block fio wrote must read back as written. (side, how, opcode,
# status, refusals): the fault strikes a QP of side (its I/O queue's),
# through fail_wc, fail_respond (side's QP refuses what is asked of it),
# fail_cq_overrun, an event, or the port, which goes DOWN mid-write and
# comes back after the host's first reconnect attempt failed.
NVME_FAULTS = {
    # The host's I/O queue: its 21st command SEND fails, as when the
    # target stops acknowledging.
    "host_send_retry_exc_err": ("nvme_rdma", "fail_wc", "send",
                                "retry_exc_err", 0),
    # The target's I/O queue: its 21st response SEND fails with a remote
    # access error.
    "target_send_rem_access_err": ("nvmet_rdma", "fail_wc", "send",
                                   "rem_access_err", 0),
    # The host's I/O queue refuses the target's 21st RDMA READ of a
    # write's data, as a host that let go of the buffer: the target's
    # READ fails with the host's answer.
    "host_refuses_a_target_read": ("nvme_rdma", "fail_respond",
                                   "rdma_read", "rem_access_err", 0),
    # The host's I/O queue loses the completion of its 21st receive (a
    # response) to a CQ overrun: that command never completes, the QP
    # goes to error.
    "host_recv_lost_to_cq_overrun": ("nvme_rdma", "fail_cq_overrun",
                                     "recv", None, 0),
    # The target's I/O queue gets QP_FATAL mid-write.
    "target_qp_fatal": ("nvmet_rdma", "event", None, "qp_fatal", 0),
    # The same, and the target refuses the host's first two attempts to
    # reconnect (its admin queue's connect).
    "target_qp_fatal_reconnect_refused": ("nvmet_rdma", "event", None,
                                          "qp_fatal", 2),
    # The port goes DOWN mid-write (event port_err): what the host sends
    # once the port is cut a second later (fio's next command, or a
    # keep-alive when fio is done) finds no answer (RETRY_EXC_ERR), and
    # its reconnects time out until the port is ACTIVE again.
    "port_down_up": ("nvme_rdma", "port", None, None, 0),
}
# How long a connection request through the cut port waits for its
# answer (ropcie's connect_timeout_ms): a reconnect attempt then fails.
PORT_DOWN_CONNECT_MS = 1000


def port_down_until_a_reconnect_failed(faults, kmsg):
    """The port DOWN, with connect_timeout_ms at PORT_DOWN_CONNECT_MS,
    until nvme-rdma reports a failed reconnect attempt; then ACTIVE, the
    timeout as it was for the reconnect that follows."""
    saved = ropcie.read_params("connect_timeout_ms")
    ropcie.set_params(connect_timeout_ms=PORT_DOWN_CONNECT_MS)
    ropcie.write(faults / "event", "port_err")
    try:
        krping.wait_for(lambda: any("Failed reconnect attempt" in ln
                                    for ln in kmsg.read()),
                        timeout=krping.SHORT_TIMEOUT,
                        what="a failed reconnect attempt")
    finally:
        ropcie.write(faults / "event", "port_active")
        ropcie.set_params(**saved)


# ropcie's path to a fault is the same on every kernel; nvme-rdma's
# recovery starts from a failed completion, an event or a dead port:
# beyond 6.12 (stock_only) the first fault of each way in stands for the
# others.
@pytest.mark.parametrize("fault", krping.representatives(
    list(NVME_FAULTS), key=lambda f: NVME_FAULTS[f][1]))
def test_nvmeof_recovers_from_a_fault(ropcie_link, fault):
    """nvme-rdma to nvmet-rdma over ropcie0 with fio writing and
    verifying 8 MiB: a fault of ropcie's (fail_wc, fail_respond,
    fail_cq_overrun, an event, or the port down and up) breaks one I/O
    queue's connection mid-write; the host reconnects (its I/O queue is
    a new QP), fio's verification finds every block intact, and nothing
    is left behind. nvme-rdma reports the attempts its reconnect took:
    one more than the connection requests refused, or two or three after
    the port (one attempt failed through it, the next may have begun)."""
    if not os.access(FIO, os.X_OK):
        ropcie.missing(f"{FIO} not installed (package fio)")
    modprobe("nvmet", "nvmet_rdma", "nvme_rdma")
    side, how, opcode, status, refusals = NVME_FAULTS[fault]
    faults = ropcie.fault_dir()
    ropcie.faults_off(faults)
    before = krping.rdma_resource_counts()
    backing = Path(f"/tmp/krping-nvmet-{os.getpid()}.img")
    with open(backing, "wb") as f:
        f.truncate(BACKING_BYTES)
    target = ctrl = fio = kmsg = None
    try:
        target = NvmetTarget(backing)
        devs = set(Path("/dev").glob("nvme*n1"))
        # One I/O queue: fio's commands take it from whichever CPU.
        ctrl = nvme_connect(io_queues=1,
                            extra=",reconnect_delay=1,ctrl_loss_tmo=60")
        dev = new_namespace(devs)
        qpns = ulp_qpns(side)
        assert len(qpns) >= 2, \
            f"{side}: QPs {qpns} of {ropcie.kernel_resources('qp')}"
        victim = qpns[-1]       # the I/O queue: the admin queue's is first
        kmsg = krping.Kmsg()        # closed in finally
        if refusals:
            ropcie.arm_fail_connect(faults, "refused", port=int(NVME_PORT),
                                    times=refusals)
        if how == "fail_wc":
            ropcie.arm_fail_wc(faults, opcode=opcode, status=status,
                               qpn=victim, space=20)
        elif how == "fail_respond":
            ropcie.arm_fail_respond(faults, opcode=opcode, status=status,
                                    qpn=victim, space=20)
        elif how == "fail_cq_overrun":
            ropcie.arm_fail_cq_overrun(faults, opcode=opcode, qpn=victim,
                                       space=20)
        fio = fio_verify(dev)
        if how in ("event", "port"):
            krping.wait_for(lambda: nvme_writes() >= 20,
                            timeout=krping.SHORT_TIMEOUT,
                            what="20 writes on the namespace")
        if how == "event":
            ropcie.write(faults / "event", f"{status} {victim}")
        elif how == "port":
            port_down_until_a_reconnect_failed(faults, kmsg)
        job = fio_result(fio, krping.TIMEOUT)
        fio = None
        if how not in ("event", "port"):
            assert ropcie.read(faults / how / "times") == "0", \
                "the fault never struck"
        assert ropcie.read(faults / "fail_connect" / "times") == "0"
        # One attempt failed through the DOWN port, and another may have
        # begun before it came back.
        attempts = range(2, 4) if how == "port" else \
            range(refusals + 1, refusals + 2)
        assert_recovered(kmsg, attempts, side, victim, job, ctrl,
                         port_cut=how == "port")
    finally:
        end_recovery(faults, kmsg, fio)
        nvme_teardown(ctrl, target, backing)
    nvme_check_gone(before)


NFS_TOOLS = ("rpc.nfsd", "rpc.mountd", "exportfs", "mount.nfs4")
NFS_PORT = "20049"
NFS_BYTES = 8 << 20


def need_tools(tools, package):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        reason = f"{', '.join(missing)} missing (Debian package {package})"
        print(f"SKIP: {reason}")
        pytest.skip(reason)


class NfsServer:
    """nfsd exporting a tmpfs directory over RDMA only, NFSv4.1, with
    its state on tmpfs (the guest's root is read-only)."""

    def __init__(self, export):
        self.mounts = []
        self.mountd = None
        self.export = export
        for path, fstype in (("/var/lib/nfs", "tmpfs"),
                             ("/proc/fs/nfsd", "nfsd")):
            sh("mount", "-t", fstype, fstype, path)
            self.mounts.append(path)
        os.makedirs("/var/lib/nfs/v4recovery", exist_ok=True)
        for name in ("etab", "rmtab"):
            open(f"/var/lib/nfs/{name}", "w").close()
        # The grace period after a start refuses OPENs: keep it short.
        write("/proc/fs/nfsd/nfsv4gracetime", 10)
        write("/proc/fs/nfsd/nfsv4leasetime", 10)
        sh("exportfs", "-o", "rw,no_root_squash,insecure,fsid=0,sync",
           f"*:{export}")
        self.mountd = subprocess.Popen(
            ["rpc.mountd", "-F", "-N", "2", "-N", "3"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        sh("rpc.nfsd", "-N", "3", "-V", "4.1", "-H", ADDR, "4")
        write("/proc/fs/nfsd/portlist", f"rdma {NFS_PORT}")

    def stop(self):
        sh("rpc.nfsd", "0", check=False)
        sh("exportfs", "-ua", check=False)
        if self.mountd:
            self.mountd.terminate()
            try:
                self.mountd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.mountd.kill()
                self.mountd.wait()
        for path in reversed(self.mounts):
            sh("umount", path, check=False)


def nfs_client_qpn():
    """The QP number of the NFS client's connection on ropcie0: the
    cm_id whose remote port is the server's (rpcrdma holds both ends)."""
    out = sh("rdma", "-j", "resource", "show", "cm_id").stdout
    for e in json.loads(out or "[]"):
        dst = str(e.get("dst-addr", "")).rsplit(":", 1)[-1]
        if e.get("ifname") == ropcie.ROPCIE_DEV and "lqpn" in e and \
                str(e.get("dst-port", dst)) == NFS_PORT:
            return int(e["lqpn"])
    raise AssertionError(f"no NFS client connection on ropcie0: {out}")


def nfs_copy(fault=False):
    """An NFSv4.1 mount with proto=rdma over ropcie0: write NFS_BYTES,
    drop the caches, read them back over the mount and from the export,
    and unmount; nothing left behind. With fault, the client's fourth
    SEND after the mount fails with retry_exc_err (ropcie's fail_wc):
    its connection breaks mid-copy, and the client must reconnect (a
    new QP) with no byte lost."""
    need_tools(NFS_TOOLS, "nfs-kernel-server")
    modprobe("nfsd", "rpcrdma", "nfsv4")
    faults = ropcie.fault_dir() if fault else None
    before = krping.rdma_resource_counts()
    export = Path(f"/tmp/krping-nfs-export-{os.getpid()}")
    mnt = Path(f"/tmp/krping-nfs-mnt-{os.getpid()}")
    export.mkdir()
    mnt.mkdir()
    payload = os.urandom(NFS_BYTES)
    server = None
    mounted = False
    try:
        server = NfsServer(export)
        t0 = time.monotonic()
        sh("mount", "-t", "nfs4", "-o",
           f"proto=rdma,port={NFS_PORT},vers=4.1,soft,timeo=100,retrans=2",
           f"{ADDR}:/", str(mnt))
        mounted = True
        print(f"mounted in {time.monotonic() - t0:.1f} s")
        if fault:
            victim = nfs_client_qpn()
            ropcie.faults_off(faults)
            ropcie.arm_fail_wc(faults, opcode="send", status="retry_exc_err",
                               qpn=victim, space=3)
        with open(mnt / "data", "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        drop_caches()
        with open(mnt / "data", "rb") as f:
            assert f.read() == payload, "the mount read back other data"
        with open(export / "data", "rb") as f:
            assert f.read() == payload, "the export holds other data"
        if fault:
            assert ropcie.read(faults / "fail_wc" / "times") == "0", \
                "the fault never struck"
            assert nfs_client_qpn() != victim, "the client never reconnected"
    finally:
        if faults:
            ropcie.faults_off(faults)
        if mounted:
            sh("umount", str(mnt), check=False)
        if server:
            server.stop()
        shutil.rmtree(export, ignore_errors=True)
        mnt.rmdir()
        for mod in ("nfsv4", "nfs", "rpcrdma", "nfsd"):
            sh("rmmod", mod, check=False)
    assert not os.path.ismount(mnt)
    krping.wait_for(lambda: krping.rdma_resource_counts() == before,
                    timeout=krping.SHORT_TIMEOUT,
                    what=f"RDMA resources back to {before}")


def test_nfs_over_rdma_over_ropcie(ropcie_link):
    """Write 8 MiB over an NFS mount on ropcie0 and read it back."""
    nfs_copy()


# Beyond 6.12 the NVMe-oF recovery stands for it (stock_only).
@pytest.mark.stock_only
def test_nfs_over_rdma_recovers_from_a_fault(ropcie_link):
    """The client's connection fails mid-copy; the copy compares equal."""
    nfs_copy(fault=True)
