# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""
The single-host topology, built when it is not there.

Both sides of a pair run in this kernel, on two RDMA devices joined by a
veth pair, as the kernel's tools/testing/selftests/rdma scripts set up
rxe or siw:

    <provider>0 on veth va 10.9.0.1/24  <->  <provider>1 on vb 10.9.0.2/24

The provider is KRPING_PROVIDER (rxe, the default, or siw). Any kernel
CI that boots a kernel with rdma_krping loaded can run the suite: the
session fixture in conftest.py calls ensure() and, at the end, removes
what it built (nothing when the topology was already there). Scripts use
the same code from the shell:

    /usr/bin/python3 selftests/lib/single_host.py up     # print what it did
    /usr/bin/python3 selftests/lib/single_host.py down   # remove it again

Only the standard library and iproute2 (ip, rdma) are needed.
"""

import json
import os
import subprocess
import sys
import time

ADDRS = ("10.9.0.1", "10.9.0.2")
NETDEVS = ("va", "vb")
PREFIX = 24
# The RDMA modules rdma_cm users need, then the provider's own.
MODULES = ("ib_core", "ib_uverbs", "rdma_cm", "rdma_ucm")
PROVIDER_MODULE = {"rxe": "rdma_rxe", "siw": "siw"}
# A port goes ACTIVE once the veth has carrier: well under a second even
# under TCG; bounded so that a broken provider ends in an error.
ACTIVE_TIMEOUT = 30.0


class SetupError(RuntimeError):
    """The topology could not be built; .unsupported is True when this
    kernel lacks what it needs (a module), which callers report as a
    skip rather than a failure."""

    def __init__(self, msg, unsupported=False):
        super().__init__(msg)
        self.unsupported = unsupported


def devices(provider):
    """The RDMA device names, server side first."""
    return (f"{provider}0", f"{provider}1")


def _run(*cmd, check=True):
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if check and cp.returncode:
        raise SetupError(f"{' '.join(cmd)}: exit {cp.returncode}: "
                         f"{(cp.stderr or cp.stdout).strip()}")
    return cp


def _json(*cmd):
    cp = _run(*cmd, check=False)
    if cp.returncode:
        return []
    try:
        return json.loads(cp.stdout or "[]")
    except ValueError:
        return []


def _links():
    """{rdma device: (netdev, state)} from `rdma -j link show`."""
    out = {}
    for link in _json("rdma", "-j", "link", "show"):
        dev = link.get("ifname", "")
        out[dev] = (link.get("netdev", ""), link.get("state", ""))
    return out


def _has_addr(netdev, addr):
    for entry in _json("ip", "-j", "addr", "show", "dev", netdev):
        for a in entry.get("addr_info", []):
            if a.get("local") == addr:
                return True
    return False


def present(provider):
    """True when both devices are ACTIVE on va and vb with the addresses."""
    links = _links()
    for dev, netdev, addr in zip(devices(provider), NETDEVS, ADDRS):
        if links.get(dev) != (netdev, "ACTIVE") or not _has_addr(netdev, addr):
            return False
    return True


def _netdev_exists(netdev):
    return _run("ip", "link", "show", "dev", netdev, check=False).returncode == 0


def build(provider):
    """Build the topology; returns the list of what was created, for
    remove(). Parts already there are kept (and not removed later).
    Raises SetupError, leaving nothing of its own behind."""
    if provider not in PROVIDER_MODULE:
        raise SetupError(f"KRPING_PROVIDER={provider!r}: rxe or siw")
    for mod in MODULES + (PROVIDER_MODULE[provider],):
        # Loaded already: perhaps from outside /lib/modules (the test bed
        # builds siw for kernels that lack it), where modprobe finds none.
        if os.path.isdir(f"/sys/module/{mod}"):
            continue
        cp = _run("modprobe", mod, check=False)
        if cp.returncode:
            raise SetupError(f"modprobe {mod}: {cp.stderr.strip()}",
                             unsupported=True)
    made = []
    try:
        if not _netdev_exists(NETDEVS[0]):
            _run("ip", "link", "add", NETDEVS[0], "type", "veth",
                 "peer", "name", NETDEVS[1])
            made.append(("veth", NETDEVS[0]))
        for netdev, addr in zip(NETDEVS, ADDRS):
            if not _has_addr(netdev, addr):
                _run("ip", "addr", "add", f"{addr}/{PREFIX}", "dev", netdev)
            _run("ip", "link", "set", netdev, "up")
        links = _links()
        for dev, netdev in zip(devices(provider), NETDEVS):
            if dev not in links:
                _run("rdma", "link", "add", dev, "type", provider,
                     "netdev", netdev)
                made.append(("rdma", dev))
        deadline = time.monotonic() + ACTIVE_TIMEOUT
        while not present(provider):
            if time.monotonic() > deadline:
                raise SetupError(f"{' and '.join(devices(provider))} not "
                                 f"ACTIVE on {' and '.join(NETDEVS)} after "
                                 f"{ACTIVE_TIMEOUT:.0f} s: {_links()}")
            time.sleep(0.1)
    except BaseException:
        remove(made)
        raise
    return made


def remove(made):
    """Undo build(): the RDMA links first, then the veth pair (its peer
    goes with it). Returns the problems met, as text."""
    problems = []
    for kind, name in reversed(made):
        cmd = (("rdma", "link", "delete", name) if kind == "rdma" else
               ("ip", "link", "del", name))
        cp = _run(*cmd, check=False)
        if cp.returncode:
            problems.append(f"{' '.join(cmd)}: {cp.stderr.strip()}")
    return problems


def ensure(provider):
    """Build the topology unless it is there; returns what build() made
    (empty when nothing was needed)."""
    if present(provider):
        return []
    return build(provider)


def main(argv):
    provider = os.environ.get("KRPING_PROVIDER", "rxe")
    if len(argv) != 2 or argv[1] not in ("up", "down"):
        print(f"usage: {argv[0]} up|down   (KRPING_PROVIDER={provider})",
              file=sys.stderr)
        return 2
    try:
        if argv[1] == "up":
            made = ensure(provider)
            print("built: " + (", ".join(n for _, n in made) or "nothing") +
                  f" ({' '.join(devices(provider))} on "
                  f"{' '.join(NETDEVS)} {' '.join(ADDRS)})")
            return 0
        made = [("rdma", d) for d in devices(provider) if d in _links()]
        if _netdev_exists(NETDEVS[0]):
            made.insert(0, ("veth", NETDEVS[0]))
        problems = remove(made)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    except SetupError as e:
        print(f"{argv[0]}: {e}", file=sys.stderr)
        return 4 if e.unsupported else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
