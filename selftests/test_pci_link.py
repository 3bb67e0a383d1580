# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The PCI link between the two hosts, without any driver of ours.

RoPCIe across two hosts (Documentation/ropcie.rst) runs over a PCI
device whose memory both hosts share: in the test bed QEMU's
ivshmem-doorbell (PCI 1af4:1110), one in each guest, fed by the pair's
scripts/testbed/ivshmem-server (scripts/testbed/vm-pair). These tests
check what the link promises, through sysfs alone: both hosts see the
device with the same BAR2 size, bytes written into BAR2 on one host are
read back on the other, both ways, and each host has its own peer ID
(IVPosition, BAR0 offset 8).

ropcie.ko binds the device when it loads, and a bound device's BARs
cannot be mapped through sysfs (CONFIG_IO_STRICT_DEVMEM): the tests
unbind it on both hosts first and bind it again at the end, when the
ropcie link comes back up (test_ropcie_link.py checks that link).

Needs a remote host (lib/env.py) and the device on both; on a lab's
own hosts without one the tests skip with the reason.
"""

import os
import secrets

import pytest

from lib.pci_link import Side, pci_name, sides

pytestmark = pytest.mark.two_host

DRIVER = "/sys/bus/pci/drivers/ropcie_ivshmem"
IVPOSITION = 8          # BAR0 register: this host's peer ID
CHUNK = 4096

# The helper both hosts run: python3 -c HELPER DIR OP [ARGS]. OP is
# "size" (BAR2's), "id" (IVPosition), "read OFF LEN" (hex) or "write OFF
# HEX". The device is enabled first: BAR access needs memory decoding.
HELPER = r"""
import mmap, os, struct, sys
d, op = sys.argv[1], sys.argv[2]
with open(d + "/enable") as f:
    enabled = f.read().strip() != "0"
if not enabled:
    with open(d + "/enable", "w") as f:
        f.write("1")
def bar(n, write=False):
    fd = os.open(f"{d}/resource{n}", os.O_RDWR if write else os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if write else 0)
        # The file's size (BAR0 has 256 bytes): Python refuses to map
        # more, and the kernel maps the page it is in.
        return mmap.mmap(fd, size, mmap.MAP_SHARED, prot), size
    finally:
        os.close(fd)
if op == "size":
    print(os.stat(d + "/resource2").st_size)
elif op == "id":
    m, _ = bar(0)
    print(struct.unpack("<I", m[8:12])[0])
elif op == "read":
    off, n = int(sys.argv[3]), int(sys.argv[4])
    m, _ = bar(2)
    print(m[off:off + n].hex())
elif op == "write":
    off, data = int(sys.argv[3]), bytes.fromhex(sys.argv[4])
    m, _ = bar(2, write=True)
    m[off:off + len(data)] = data
    m.flush()
"""


class LinkSide(Side):
    """A side that can unbind and bind the driver and map the BARs."""

    def bound(self):
        return self.sh(f"readlink {self.dir}/driver; true").strip() \
            .endswith("/ropcie_ivshmem")

    def bind(self, op):
        self.sh(f"echo {pci_name(self)} > {DRIVER}/{op}")

    def helper(self, *args):
        quoted = " ".join(f"'{a}'" for a in (self.dir,) + args)
        script = HELPER.replace("'", "'\"'\"'")
        return self.sh(f"python3 -c '{script}' {quoted}").strip()


@pytest.fixture(scope="module")
def link():
    here, there = sides(LinkSide)
    unbound = [s for s in (here, there) if s.bound()]
    for side in unbound:
        side.bind("unbind")
    yield here, there
    for side in unbound:
        side.bind("bind")


def test_both_hosts_see_one_region(link):
    here, there = link
    size = int(here.helper("size"))
    assert size == int(there.helper("size")), "BAR2 sizes differ"
    assert size >= CHUNK and size & (size - 1) == 0, f"BAR2 of {size} bytes"


def test_each_host_has_its_own_peer_id(link):
    here, there = link
    ids = int(here.helper("id")), int(there.helper("id"))
    assert ids[0] != ids[1], f"both hosts have peer ID {ids[0]}"
    assert all(0 <= i <= 0xFFFF for i in ids), ids


@pytest.mark.parametrize("writer", ["here", "there"])
def test_bytes_cross_the_link(link, writer):
    """Random bytes at a random page of BAR2, written on one host, are
    what the other host reads there: the memory is one, not a copy."""
    here, there = link
    src, dst = (here, there) if writer == "here" else (there, here)
    size = int(here.helper("size"))
    off = secrets.randbelow(size // CHUNK) * CHUNK
    data = os.urandom(CHUNK).hex()
    before = dst.helper("read", str(off), str(CHUNK))
    assert before != data
    src.helper("write", str(off), data)
    assert dst.helper("read", str(off), str(CHUNK)) == data
