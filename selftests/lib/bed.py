# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""
Bed control for the two-guest test bed (scripts/testbed/vm-pair).

A test in guest A ("local") asks the host for what a lab cannot do gently:
cut the power of guest B ("remote"), boot it again, take a data link down.
The host serves a directory on A's writable output share,
$KRPING_BED_CTL: a request is a file req.<id> holding one line, the answer
rep.<id> holding "ok" or "error: <why>"; both sides write a temporary and
rename it, so neither reads half a file.

    import bed
    if not bed.available():
        pytest.skip("needs vm-pair")
    bed.set_link("remote", False)     # B's data NIC loses its carrier
    bed.set_link("remote", True)
    bed.power_off_remote()            # B's QEMU is killed: a power cut
    bed.boot_remote()                 # B boots again; ssh works on return

ssh to B goes over a management link that these requests leave alone;
REMOTE_ARGS (root@10.8.0.2) is the target, with a control master in A's
/root/.ssh/config. Commands there go through lib/remote.py.

Only the standard library: no pytest needed.
"""

import os
import subprocess
import time
import uuid

from lib import remote as remote_host

CTL_ENV = "KRPING_BED_CTL"
SLOW = "1" in (os.environ.get("KRPING_SLOW", "0"),
               os.environ.get("KRPING_REMOTE_SLOW", "0"))
SCALE = 3.0 if SLOW else 1.0
# The host answers a boot once B's sshd listens, after B's vm-run's own
# boot retries if needed: up to a few boot timeouts of 300 s (600 s on
# the debug kernel).
BOOT_TIMEOUT = 1200.0 * (2.0 if SLOW else 1.0)
SSH_TIMEOUT = 120.0 * SCALE


class BedError(RuntimeError):
    """A request the host refused or did not answer in time."""


def ctl_dir():
    """The bed control directory, or "" outside vm-pair."""
    return os.environ.get(CTL_ENV, "")


def available():
    """True when KRPING_BED_CTL names an existing directory (vm-pair's A)."""
    d = ctl_dir()
    return bool(d) and os.path.isdir(d)


def remote():
    """The ssh target of guest B (REMOTE_ARGS, e.g. root@10.8.0.2)."""
    return os.environ.get("REMOTE_ARGS", "root@10.8.0.2")


def request(line, timeout=60.0):
    """Send one request line to the host and wait for its answer.

    Returns None on "ok". Raises BedError with the host's error text, or
    when no answer came within timeout seconds (the request is then
    withdrawn if the host had not taken it yet).
    """
    if not available():
        raise BedError("no bed control: %s is not set or not a directory"
                       % CTL_ENV)
    d = ctl_dir()
    rid = "%d-%s" % (os.getpid(), uuid.uuid4().hex[:12])
    req = os.path.join(d, "req." + rid)
    rep = os.path.join(d, "rep." + rid)
    tmp = os.path.join(d, ".req.%s.tmp" % rid)
    with open(tmp, "w") as f:
        f.write(line.strip() + "\n")
    os.rename(tmp, req)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(rep) as f:
                text = f.read().strip()
            os.unlink(rep)
            break
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            try:
                os.unlink(req)
            except FileNotFoundError:
                pass
            raise BedError("no answer from the host to %r within %.0f s"
                           % (line, timeout))
        time.sleep(0.1)
    if text == "ok":
        return None
    if text.startswith("error:"):
        text = text[len("error:"):].strip()
    raise BedError("%s: %s" % (line, text))


def ssh_argv(*cmd):
    """argv of an ssh to guest B running cmd (one string or words)."""
    return ["ssh", remote()] + list(cmd)


def drop_ssh_master():
    """End the local ssh control master to B, if there is one.

    After a power cut its connection is dead (ssh would notice only after
    its keepalives), and a B booted again is a new sshd: the next ssh
    must make a new connection. The remote shells of lib/remote.py
    that ran over it go too.
    """
    remote_host.close_all()
    subprocess.run(["ssh", "-O", "exit", remote()], stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=30, check=False)


def wait_ssh(timeout=SSH_TIMEOUT):
    """Wait until `ssh REMOTE true` works; BedError after timeout s."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        left = deadline - time.monotonic()
        try:
            r = subprocess.run(ssh_argv("true"), stdin=subprocess.DEVNULL,
                               capture_output=True, text=True,
                               timeout=max(left, 5.0))
            if r.returncode == 0:
                return
            last = r.stderr.strip()
        except subprocess.TimeoutExpired:
            last = "ssh timed out"
        if time.monotonic() > deadline:
            raise BedError("no ssh to %s within %.0f s: %s"
                           % (remote(), timeout, last))
        time.sleep(1.0)


def power_off_remote(timeout=120.0):
    """Cut the power of guest B (SIGKILL of its QEMU), as a lab's PDU would.

    B's kernel gets no chance to say goodbye: its connections just go
    silent.
    """
    request("poweroff remote", timeout)
    drop_ssh_master()


def boot_remote(timeout=BOOT_TIMEOUT, ssh=True):
    """Boot guest B again (same kernel, addresses and keys).

    The host answers once B's sshd listens; with ssh, also wait until an
    ssh from here gets through. B's modules are loaded and its RDMA device
    is on its data NIC again, as after the first boot.
    """
    request("boot remote", timeout)
    drop_ssh_master()
    if ssh:
        wait_ssh()


def set_link(which, up, timeout=60.0):
    """Set the data link of "local" (A), "remote" (B) or "both" up or down.

    QEMU's set_link on that guest's data NIC: the guest sees its carrier
    go (or come back), and no frame passes that NIC meanwhile. The
    management link (ssh) stays up.
    """
    if which not in ("local", "remote", "both"):
        raise ValueError("which must be local, remote or both: %r" % which)
    request("link %s %s" % (which, "up" if up else "down"), timeout)
