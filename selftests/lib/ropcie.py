# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The ropcie topology of the selftests: ropcie0 on a dummy netdev rp0
with 10.77.0.1/24, so that rdma_cm picks ropcie0 by source address
(127.0.0.1 would not do: rdma_cm binds loopback addresses to the first
active RDMA device)."""

import json
import os
import subprocess

import pytest

from lib import krping

ROPCIE_DEV = "ropcie0"
PROFILE = "/sys/kernel/debug/ropcie/profile"
PARAMS = "/sys/module/ropcie/parameters"
NETDEV = "rp0"
ADDR = "10.77.0.1"

# The test bed says so when it loaded ropcie.ko (scripts/testbed/guest-run
# exports KRPING_ROPCIE_REQUIRED=1 with ROPCIE_KO and ROPCIE_TEST_KO):
# there a ropcie, or a module file of it, that is missing is a broken
# build or bed. Elsewhere (a user's own machine) the test skips.
REQUIRED = os.environ.get("KRPING_ROPCIE_REQUIRED") == "1"


def missing(reason):
    """End the test for a ropcie that is not there: a failure where the
    test bed loaded ropcie, a skip with the reason elsewhere."""
    if REQUIRED:
        pytest.fail(f"{reason}; the test bed loaded ropcie "
                    "(KRPING_ROPCIE_REQUIRED=1)", pytrace=False)
    print(f"SKIP: {reason}")
    pytest.skip(reason)


def require_loaded(why="ropcie not loaded (build ropcie.ko; vm-run loads "
                   "it with ROPCIE_KO)"):
    if not krping.module_loaded("ropcie"):
        missing(why)


@pytest.fixture(scope="module")
def ropcie_env():
    """ropcie0 on rp0 for a test module, removed after it (import it
    into the module with ropcie_ready)."""
    require_loaded()
    ensure_setup()
    yield
    teardown_setup()


@pytest.fixture
def ropcie_ready(ropcie_env):
    """ropcie0 there for each test: one that removed the device or the
    module leaves it to the next."""
    require_loaded("ropcie was unloaded by an earlier test")
    ensure_setup()


def module_file(env):
    """The module file the environment variable env names (ROPCIE_KO,
    ROPCIE_TEST_KO: build.sh builds both, vm-run passes both)."""
    ko = os.environ.get(env, "")
    if not ko or not os.path.exists(ko):
        missing(f"{env} not set or not a file ({ko!r}): build.sh builds "
                "ropcie.ko and ropcie_test.ko, vm-run passes them")
    return ko


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


def user_resources(kind, pid, dev=ROPCIE_DEV):
    """The restrack entries of kind (qp, mr, cq, pd) on dev that belong
    to the process pid (rdma resource show)."""
    cp = subprocess.run(["rdma", "-j", "resource", "show", kind],
                        capture_output=True, text=True,
                        timeout=krping.SHORT_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    return [r for r in json.loads(cp.stdout or "[]")
            if r.get("ifname", r.get("dev")) == dev and r.get("pid") == pid]


def holds_resources(pid, dev=ROPCIE_DEV):
    """Does the process pid hold a QP, MR, CQ or PD of dev?"""
    return any(user_resources(k, pid, dev) for k in ("qp", "mr", "cq", "pd"))


def parse_profile(text):
    """The table of debugfs ropcie/profile (Documentation/ropcie.rst, Where
    the time goes) as ({stage: {column: int}}, {"worker": n, "inline": n}),
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


# The rows of debugfs ropcie/profile, in its order.
STAGES = ("post", "queue", "exec", "complete", "landed", "turnaround",
          "lx_send", "lx_wait", "lx_wake", "lx_bell", "lx_serve",
          "lx_copy", "lx_room", "lx_limit", "lx_idle")


def set_params(**params):
    """Write ropcie's module parameters."""
    for name, value in params.items():
        with open(f"{PARAMS}/{name}", "w") as f:
            f.write(f"{value}\n")


def read_params(*names):
    return {n: krping.read_text(f"{PARAMS}/{n}").strip() for n in names}


def read_profile():
    """{stage: {column: int}} and the executed counts of debugfs
    ropcie/profile, every stage of STAGES in it."""
    with open(PROFILE) as f:
        stages, executed = parse_profile(f.read())
    assert tuple(stages) == STAGES, stages
    return stages, executed


def profile_on():
    """Turn the profile on and clear it, debugfs mounted: the options it
    changed, as they were, for set_params() afterwards (conftest.py's
    fixture profiling)."""
    if not os.path.ismount("/sys/kernel/debug"):
        sh("mount", "-t", "debugfs", "none", "/sys/kernel/debug")
    saved = read_params("inline_max", "profile")
    set_params(profile=1)
    with open(PROFILE, "w") as f:
        f.write("0\n")
    return saved


# --- fault injection (ropcie/fault.c, debugfs ropcie/<device>/) ----------

FAULT_ATTRS = ("probability", "interval", "times", "space", "verbose")
FAULT_VERBS = ("create_qp", "create_cq", "alloc_mr", "reg_mr")
ATTRS_OFF = ("100", "1", "0", "0", "0")
# What a new device's knobs read: every fault off.
FAULTS_OFF = {
    **{f"fail_{kind}/{a}": v
       for kind in ("wc", "connect", "respond", "cq_overrun") + FAULT_VERBS
       for a, v in zip(FAULT_ATTRS, ATTRS_OFF)},
    "fail_wc/opcode": "any", "fail_wc/status": "retry_exc_err",
    "fail_wc/qpn": "-1", "fail_connect/port": "-1",
    "fail_connect/answer": "timeout", "cq_delay_us": "0",
    "fail_respond/opcode": "any", "fail_respond/status": "rem_access_err",
    "fail_respond/qpn": "-1",
    "fail_cq_overrun/opcode": "any", "fail_cq_overrun/qpn": "-1",
}


read = krping.read_text
write = krping.write_text
write_errno = krping.write_errno


def fault_dir(dev=ROPCIE_DEV):
    """debugfs ropcie/<dev>/ as a Path, debugfs mounted."""
    from pathlib import Path
    if not os.path.ismount("/sys/kernel/debug"):
        sh("mount", "-t", "debugfs", "none", "/sys/kernel/debug")
    d = Path("/sys/kernel/debug/ropcie") / dev
    if not d.is_dir():
        missing(f"{d} missing: ropcie.ko without fault injection")
    return d


def fault_settings(d):
    return {k: read(d / k) for k in FAULTS_OFF}


def faults_off(d):
    """Every fault of the device off, its knobs as a new device's."""
    for k, v in FAULTS_OFF.items():
        write(d / k, v)


def arm(attr_dir, times=1, interval=1, space=0, probability=100):
    """A fault directory's when-to-strike knobs, times last."""
    write(attr_dir / "probability", probability)
    write(attr_dir / "interval", interval)
    write(attr_dir / "space", space)
    write(attr_dir / "times", times)


def arm_fail_wc(d, opcode, status, qpn=-1, **when):
    """fail_wc/: completions of opcode (of QP qpn) fail with status."""
    write(d / "fail_wc" / "opcode", opcode)
    write(d / "fail_wc" / "status", status)
    write(d / "fail_wc" / "qpn", qpn)
    arm(d / "fail_wc", **when)


def arm_fail_respond(d, opcode, status, qpn=-1, **when):
    """fail_respond/: the target QP qpn of d's device refuses the WRITEs
    or READs (opcode) it is asked for, answering status."""
    write(d / "fail_respond" / "opcode", opcode)
    write(d / "fail_respond" / "status", status)
    write(d / "fail_respond" / "qpn", qpn)
    arm(d / "fail_respond", **when)


def arm_fail_cq_overrun(d, opcode, qpn=-1, **when):
    """fail_cq_overrun/: completions of opcode (of QP qpn) find their CQ
    full and are lost."""
    write(d / "fail_cq_overrun" / "opcode", opcode)
    write(d / "fail_cq_overrun" / "qpn", qpn)
    arm(d / "fail_cq_overrun", **when)


def arm_fail_connect(d, answer, port=-1, **when):
    """fail_connect/: connection requests (to port) answered with answer."""
    write(d / "fail_connect" / "answer", answer)
    write(d / "fail_connect" / "port", port)
    arm(d / "fail_connect", **when)


def kernel_resources(kind=None, dev=ROPCIE_DEV):
    """The restrack entries (qp, cq, mr, pd; all four when kind is None)
    of kernel users other than ib_core on dev."""
    found = []
    for k in (kind,) if kind else ("qp", "cq", "mr", "pd"):
        cp = sh("rdma", "-j", "resource", "show", k)
        found += [dict(r, kind=k) for r in json.loads(cp.stdout or "[]")
                  if r.get("ifname", r.get("dev")) == dev and
                  r.get("comm") not in ("[ib_core]", "ib_core") and
                  r.get("pid") is None]
    return found


def session_qpn(sess, dev=ROPCIE_DEV):
    """The QP number of a connected session's QP: its cm_id's, the one
    on dev whose local port (a server's) or remote port (a client's) is
    the session's port."""
    port = int(sess.get("port"))
    role = sess.get("role")
    end = "src" if role == "server" else "dst"
    cp = sh("rdma", "-j", "resource", "show", "cm_id")
    for e in json.loads(cp.stdout or "[]"):
        if e.get("ifname") != dev or e.get("state") == "LISTEN" or \
                "lqpn" not in e:
            continue
        addr_port = str(e.get(f"{end}-addr", "")).rsplit(":", 1)[-1]
        if str(e.get(f"{end}-port", addr_port)) == str(port):
            return int(e["lqpn"])
    raise AssertionError(f"no cm_id of {sess.name} on {dev}: {cp.stdout}")
