# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The ropcie link between two hosts over their PCI link (ivshmem).

ropcie.ko binds the ivshmem-doorbell device (PCI 1af4:1110) on each host,
claims one of its two ports and brings the link up with the ropcie on the
other host (Documentation/ropcie.rst, "PCI link"). The state shows in
sysfs, in the device's ropcie_link/ directory. These tests check, on both
hosts at once:

- the link comes up, each side on its own port, with the same slot size,
  the one the window's size gives, and a doorbell rung each way;
- ropcie removed on the other host takes the link down here within a
  heartbeat ("the peer left"), and loading it again brings it back up;
- a power cut of the other host takes the link down within
  link_timeout_ms and a heartbeat ("the peer's heartbeat stopped"), and
  the host booted again takes its port back and the link comes up;
- garbage in the other host's window (the debugfs scribbler: a header
  field, a ring index; the injector: a descriptor or a CM message of our
  own bytes) takes its side down with the reason it calls for, and the
  link comes back by itself;

and, with ropcie0 on each host over the link (vm-pair --provider
ropcie, lib.krping.PROVIDER "ropcie"), for the connections over it:

- ropcie removed there ends a live ping here within a beat (-ECONNRESET),
  and once it is back a new pair runs to the end;
- hostile descriptors and CM messages that name no connection, injected
  while a ping runs, are dropped and counted (or answered, when well
  formed) and the ping runs to its count; one that breaks the protocol
  in one of two pings' connections ends that ping on both hosts and
  only it: the other runs to its count and the link stays up;
- a bw of 1 MiB WRITEs with ropcie's profile on both hosts counts one
  copy into a ring per fragment on the initiator and one served
  request per fragment on the target.

Needs a remote host with the device (scripts/testbed/vm-pair); the power
cut needs the bed's control (lib/bed.py). Otherwise the tests skip with
the reason.
"""

import errno
import os
import re
import socket
import struct
import subprocess
import time

import pytest

from lib import abi, bed, env, krping, perftest, ropcie, uverbs_peer
from lib.pci_link import Side, pci_name, sides
from lib.remote import SshRemote
from lib.ropcie import PROFILE, parse_profile
from lib.uverbs_peer import (WC_SUCCESS, WC_LOC_PROT_ERR, WC_WR_FLUSH_ERR,
                             WC_SEND, WC_RDMA_WRITE)

pytestmark = pytest.mark.two_host

BEAT_S = 0.25                   # ROPCIE_LINK_BEAT_MS
TABLE = 4096                    # ivshmem.c's port table page
SLOTS, DESC = 32, 64            # wire.h: entries per ring, descriptor size
# Scheduling slack under TCG, where a guest's vCPU may not run for a while.
SLACK_S = 3.0 * bed.SCALE
UP_TIMEOUT_S = 30.0 * bed.SCALE

ATTRS = ("state", "port", "peer_port", "slot_size", "ups", "downs",
         "doorbells", "protocol_errors", "down_reason")

# Connections over the link: ropcie0 on each host (vm-pair --provider
# ropcie puts it on the link NIC that holds LOCAL_ADDR / REMOTE_ADDR).
ROPCIE = krping.PROVIDER == "ropcie"
needs_connections = pytest.mark.skipif(
    not ROPCIE, reason="connections over the link need ropcie0 on both "
    "hosts (KRPING_PROVIDER=ropcie, vm-pair --provider ropcie)")


def expected_slot_size(bar2):
    """wire.c's slot size for the halves ivshmem.c makes of BAR2."""
    half = (bar2 - TABLE) // 2 // 4096 * 4096
    fixed = 4096 + 2 * SLOTS * DESC
    slot = (half - fixed) // (2 * SLOTS) // 4096 * 4096
    return min(slot, 1 << 20)


class Host(Side):
    """One host's end of the ropcie link."""

    def link(self):
        """The link's attributes, or {} when no link exists (yet). One
        command there (the tests poll this, and under TCG each process
        a shell starts costs tens of milliseconds), none here."""
        d = f"{self.dir}/ropcie_link"
        if self.remote:
            out = self.sh(f"cd {d} 2>/dev/null && grep -H '' "
                          f"{' '.join(ATTRS)}; true")
            vals = dict(line.split(":", 1) for line in out.splitlines()
                        if ":" in line)
        else:
            try:
                vals = {a: krping.read_text(f"{d}/{a}") for a in ATTRS}
            except OSError:
                return {}
        if not vals:
            return {}
        for k in ATTRS:
            if k in ("state", "down_reason"):
                vals.setdefault(k, "")
            elif k in vals:
                vals[k] = int(vals[k])
        return vals

    def wait_state(self, want, timeout):
        """Seconds until the link is in state want; fails after timeout."""
        start = time.monotonic()
        while True:
            link = self.link()
            if link.get("state") == want:
                return time.monotonic() - start, link
            if time.monotonic() - start > timeout:
                pytest.fail(f"{self.name}: link not {want} after "
                            f"{timeout:.0f} s: {link or 'no ropcie_link'}")
            time.sleep(0.05)


def restore_ropcie(side):
    """insmod ropcie on a side after its rmmod, and with --provider
    ropcie its ropcie0 on the link NIC again (rmmod took it away)."""
    side.sh('insmod "$ROPCIE_KO"')
    if not ROPCIE:
        return
    addr = os.environ["REMOTE_ADDR" if side.remote else "LOCAL_ADDR"]
    side.sh(f"n=$(ip -o addr show to {addr} | awk '{{print $2}}'); "
            "rdma link add ropcie0 type ropcie netdev $n && "
            "for i in $(seq 100); do rdma link show ropcie0/1 | "
            "grep -q ACTIVE && break; sleep 0.1; done")


@pytest.fixture(scope="module")
def hosts():
    ropcie.require_loaded()
    return sides(Host)


def link_timeout_s():
    with open("/sys/module/ropcie/parameters/link_timeout_ms") as f:
        return int(f.read()) / 1000.0


def down_and_up(hosts, b0, bound, what):
    """Wait up to bound seconds for the other host's link to go down
    after b0 (its link then), then for both to be up again. Return: the
    other host's link once up."""
    here, there = hosts
    deadline = time.monotonic() + bound
    while there.link()["downs"] == b0["downs"]:
        assert time.monotonic() < deadline, \
            f"there: {what}, the link stayed up: {there.link()}"
        time.sleep(0.05)
    here.wait_state("up", UP_TIMEOUT_S)
    return there.wait_state("up", UP_TIMEOUT_S)[1]


def test_link_comes_up_on_both_hosts(hosts):
    here, there = hosts
    _, a = here.wait_state("up", UP_TIMEOUT_S)
    _, b = there.wait_state("up", UP_TIMEOUT_S)
    assert {a["port"], b["port"]} == {0, 1}, (a, b)
    assert a["peer_port"] == b["port"] and b["peer_port"] == a["port"]
    bar2 = int(here.sh(f"stat -c %s {here.dir}/resource2"))
    assert a["slot_size"] == b["slot_size"] == expected_slot_size(bar2)
    # Each side rings the other when it comes up.
    assert a["doorbells"] >= 1 and b["doorbells"] >= 1, (a, b)
    assert a["protocol_errors"] == b["protocol_errors"] == 0


def test_link_files_match_their_abi_entries(hosts, scribbler):
    """This host's ropcie_link/ files in sysfs and link-<dev>/ files in
    debugfs are exactly those Documentation/ABI names."""
    here, _ = hosts
    dev = pci_name(here)
    for root, prefix in (
            (f"/sys/bus/pci/devices/{dev}/ropcie_link",
             "/sys/bus/pci/devices/<dev>/ropcie_link/"),
            (f"/sys/kernel/debug/ropcie/link-{dev}",
             "/sys/kernel/debug/ropcie/link-<dev>/")):
        have = abi.tree(root)
        want = abi.entries_under(prefix, dev=dev)
        assert have - want == set(), f"undocumented in {abi.ABI}"
        assert want - have == set(), f"documented in {abi.ABI}, not there"


def test_peer_module_removed_and_back(hosts):
    """rmmod ropcie there: down here within a beat, "the peer left";
    insmod again: up on both sides."""
    here, there = hosts
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    before = here.link()
    there.sh("rmmod ropcie")
    try:
        secs, link = here.wait_state("down", BEAT_S + SLACK_S)
        assert link["down_reason"] == "the peer left"
        assert link["downs"] == before["downs"] + 1
    finally:
        restore_ropcie(there)
    here.wait_state("up", UP_TIMEOUT_S)
    _, b = there.wait_state("up", UP_TIMEOUT_S)
    assert here.link()["ups"] == before["ups"] + 1
    assert b["ups"] == 1, "a fresh module counts from 0"
    print(f"# down {secs:.2f} s after the peer's rmmod")


def test_peer_power_cut_and_back(hosts):
    """The other host loses power: down here within link_timeout_ms and
    a beat; booted again, it takes its port back and the link comes up."""
    here, there = hosts
    if not bed.available():
        pytest.skip("needs the bed's control (KRPING_BED_CTL, vm-pair)")
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    before = here.link()
    bound = link_timeout_s() + BEAT_S
    bed.power_off_remote()
    secs, link = here.wait_state("down", bound + SLACK_S)
    assert link["down_reason"] == "the peer's heartbeat stopped"
    assert link["downs"] == before["downs"] + 1
    bed.boot_remote()
    # Its old port's owner is silent: taken over after link_timeout_ms.
    up, _ = here.wait_state("up", UP_TIMEOUT_S + bound)
    there.wait_state("up", UP_TIMEOUT_S)
    assert here.link()["ups"] == before["ups"] + 1
    print(f"# down {secs:.2f} s after the power cut (bound {bound:.2f} s);"
          f" up {up:.1f} s after the boot")


# Fields of the link protocol's header (struct ropcie_wire_hdr in wire.h)
# that this host writes into the other host's window: (name, offset,
# bytes written there, the other host's down_reason, protocol error).
# The other host must take its side down for what it cannot trust, and
# the link must come back up without anyone's help.
SCRIBBLES = [
    ("magic", 0, "efbeadde", "the peer left", False),
    ("version", 4, "ffff", "the peer's header is not ours", True),
    ("nslots", 6, "0100", "the peer's header is not ours", True),
    ("slot_size", 8, "01100000", "the peer's header is not ours", True),
    ("epoch", 16, "0123456789abcdef", "the peer restarted", False),
    ("epoch-zero", 16, "00" * 8, "the peer left", False),
]


def scribble_path(host):
    return f"/sys/kernel/debug/ropcie/link-{pci_name(host)}/scribble"


@pytest.fixture
def scribbler(hosts):
    here, _ = hosts
    if not os.path.ismount("/sys/kernel/debug"):
        subprocess.run(["mount", "-t", "debugfs", "none",
                        "/sys/kernel/debug"], check=True)
    here.wait_state("up", UP_TIMEOUT_S)
    path = scribble_path(here)
    assert os.path.exists(path), "no scribbler in debugfs"

    def scribble(offset, hexbytes):
        with open(path, "w") as f:
            f.write(f"{offset} {hexbytes}\n")
    return scribble


@pytest.mark.parametrize("name,offset,data,reason,proto", SCRIBBLES,
                         ids=[s[0] for s in SCRIBBLES])
def test_scribbled_header_recovers(hosts, scribbler, name, offset, data,
                                   reason, proto):
    """Garbage in one header field of the other host's window: that host
    takes its side down with the reason the field calls for, and the
    link comes back up on both sides."""
    here, there = hosts
    there.wait_state("up", UP_TIMEOUT_S)
    a0, b0 = here.link(), there.link()
    scribbler(offset, data)
    b = down_and_up(hosts, b0, 2 * BEAT_S + SLACK_S, f"{name} scribbled")
    assert b["down_reason"] == reason
    assert b["protocol_errors"] == b0["protocol_errors"] + int(proto)
    assert b["ups"] >= b0["ups"] + 1
    # This side followed: the other one came back with a new epoch.
    assert here.link()["downs"] >= a0["downs"] + 1


def test_scribbled_heartbeat_is_harmless(hosts, scribbler):
    """A heartbeat that jumps is still a heartbeat: nothing goes down."""
    here, there = hosts
    there.wait_state("up", UP_TIMEOUT_S)
    b0 = there.link()
    scribbler(32, "ff" * 8)
    time.sleep(4 * BEAT_S)
    b = there.link()
    assert b["state"] == "up" and b["downs"] == b0["downs"], b


@pytest.mark.parametrize("line,err", [
    ("0", "EINVAL"), ("x 00", "EINVAL"), ("0 0", "EINVAL"),
    ("0 zz", "EINVAL"), ("0 ", "EINVAL"),
    (f"{1 << 40} 00", "ERANGE"), ("-1 00", "EINVAL"),
], ids=["no-data", "bad-offset", "odd-hex", "not-hex", "empty-hex",
        "past-window", "negative"])
def test_scribbler_refuses_bad_input(hosts, scribbler, line, err):
    """The scribbler itself checks what it is given, and writes nothing
    then: the link stays up."""
    here, there = hosts
    b0 = there.link()
    with pytest.raises(OSError) as e:
        with open(scribble_path(here), "w") as f:
            f.write(line + "\n")
    assert e.value.errno == getattr(errno, err)
    b = there.link()
    assert b["state"] == "up" and b["downs"] == b0["downs"]


# Index fields of the header this host writes in the other host's
# window (struct ropcie_wire_hdr: prod[2] at 40, cons[2] at 48), set far
# beyond the ring on an idle link, for each ring. The other host drains
# at least every beat, so a producer index is found at once; a consumer
# index only when that host produces (a request, or a response to one
# of ours), so the test runs a ping with its client there.
INDEX_SCRIBBLES = [
    ("prod", 40, "the peer's producer index is out of its ring"),
    ("prod-rsp", 44, "the peer's producer index is out of its ring"),
    ("cons", 48, "the peer's consumer index is out of its ring"),
    ("cons-rsp", 52, "the peer's consumer index is out of its ring"),
]


def doorbell(host):
    """Ring the other host's doorbell, as a producer does after it wrote
    (debugfs link-<device>/doorbell)."""
    with open(f"/sys/kernel/debug/ropcie/link-{pci_name(host)}/doorbell",
              "w") as f:
        f.write("1\n")


@pytest.mark.parametrize("rung", [False, True], ids=["quiet", "rung"])
@pytest.mark.parametrize("name,offset,reason", INDEX_SCRIBBLES,
                         ids=[s[0] for s in INDEX_SCRIBBLES])
def test_scribbled_ring_index_recovers(hosts, scribbler, pool, name, offset,
                                       reason, rung):
    """A ring index far out of its ring, left for the other host's next
    beat (quiet) or followed by a doorbell (rung: its doorbell's bottom
    half looks at the rings at once): that host takes the link down for
    a protocol error, with the reason for a producer or a consumer
    index, and the link comes back."""
    here, there = hosts
    there.wait_state("up", UP_TIMEOUT_S)
    b0 = there.link()
    scribbler(offset, "0000ff7f")
    if rung:
        doorbell(here)
    if name.startswith("cons"):
        if not ROPCIE:
            pytest.skip("the other host produces only for a connection: "
                        "needs ropcie0 on both hosts (--provider ropcie)")
        srv, cli = pool.pair(count=1, size=64, remote_side="client")
        srv.start()
        srv.expect_state("listening")
        cli.start()
        cli.wait_end()
        srv.stop()
    b = down_and_up(hosts, b0, 2 * BEAT_S + SLACK_S,
                    f"{name} index scribbled")
    assert b["down_reason"] == reason, b
    # One fault, one count, however many consumers and producers saw it.
    assert b["protocol_errors"] == b0["protocol_errors"] + 1, b


# Where the descriptors of each ring lie in a window (wire.c's
# geometry: the header's page, then 32 request and 32 response
# descriptors of 64 bytes), and the producer index fields of the header
# (struct ropcie_wire_hdr: prod[2] at 40).
DESC_OFF = {"req": 4096, "rsp": 4096 + 32 * 64}
PROD_OFF = {"req": 40, "rsp": 44}
JUMP = 5
CLIENTS = 4
RECV_POSTED_T, ACK_T = 5, 16      # wire.h: enum ropcie_wire_type


def behind_jump(ring, behind):
    """The JUMP descriptors (hex) the producer index is moved over:
    zeroed (no correct peer writes them: dropped and counted) or well
    formed, naming no connection (consumed, nothing to do)."""
    if behind == "zeroed":
        return "00" * 64 * JUMP
    if ring == "req":
        one = desc(RECV_POSTED_T, 0, 0, NOBODY, NOBODY_PEER)
    else:
        one = desc(ACK_T, 0, 0, NOBODY, NOBODY_PEER, 7)
    return one * JUMP


@needs_connections
@pytest.mark.parametrize("rung", [False, True], ids=["quiet", "rung"])
@pytest.mark.parametrize("behind", ["zeroed", "well-formed"])
@pytest.mark.parametrize("ring", ["req", "rsp"])
def test_producer_index_jumps_within_the_ring(hosts, scribbler, pool, ring,
                                              behind, rung):
    """In a fresh generation (indices at 0, the link idle), this host's
    producer index of one ring of the other host's window moved JUMP
    ahead, over descriptors no correct peer writes (zeroed) or well
    formed ones naming no connection, quiet or rung. The other host
    consumes exactly those, counting the zeroed ones as dropped, and its
    link stays up. When this host then produces for a ping, the other
    host's consumer index (JUMP, which it wrote back) is ahead of what
    this host produced (0): this host takes the link down for a protocol
    error before it produces, the link comes back, and a validated ping
    runs to its count."""
    here, there = hosts
    b0 = fresh_generation(hosts, scribbler)
    t0, h0 = transport(there), here.link()
    scribbler(DESC_OFF[ring], behind_jump(ring, behind))
    scribbler(PROD_OFF[ring], struct.pack("<I", JUMP).hex())
    if rung:
        doorbell(here)
    krping.wait_for(lambda: transport(there)["rx"] >= t0["rx"] + JUMP,
                    timeout=2 * BEAT_S + SLACK_S,
                    what=f"the {JUMP} descriptors consumed there")
    time.sleep(2 * BEAT_S)
    dropped = JUMP if behind == "zeroed" else 0
    link_stayed_up(there, b0, t0, dropped=dropped, faults=0)
    assert transport(there)["rx"] == t0["rx"] + JUMP
    srv, cli = pool.pair(count=20, size=64, validate=1)
    srv.start()
    srv.expect_state("listening")
    cli.start()
    bound = 2 * BEAT_S + SLACK_S + 10.0 * bed.SCALE
    # Its connect fails (request ring), or the connection it made
    # (response ring: the first answer this host gives there).
    assert cli.wait_end(bound) == "failed", cli.describe()
    srv.stop()
    h = here.link()
    assert h["downs"] == h0["downs"] + 1, h
    assert h["down_reason"] == \
        "the peer's consumer index is out of its ring", h
    # One fault, one count, however many producers found it.
    assert h["protocol_errors"] == h0["protocol_errors"] + 1, h
    here.wait_state("up", UP_TIMEOUT_S)
    krping.wait_for(lambda: there.link()["downs"] > b0["downs"],
                    timeout=2 * BEAT_S + SLACK_S,
                    what="the other host seeing this one restart")
    there.wait_state("up", UP_TIMEOUT_S)
    srv2, cli2 = pool.pair(count=20, size=4096, validate=1)
    assert krping.run_pair(srv2, cli2) == ("done", "done"), \
        f"{srv2.describe()} | {cli2.describe()}"


CONS_OFF = {"req": 48, "rsp": 52}
BEHIND_ZERO = "f0ffffff"           # 16 slots behind a producer at 0


@needs_connections
@pytest.mark.parametrize("rung", [False, True], ids=["quiet", "rung"])
@pytest.mark.parametrize("ring", ["req", "rsp"])
def test_consumer_index_behind_within_the_ring(hosts, scribbler, pool, ring,
                                               rung):
    """In a fresh generation, this host's consumer index of one of the
    other host's rings set 16 slots behind that host's producer (at 0),
    quiet or rung: the ring looks half full to it, which is within the
    ring. A validated ping then runs to its count (this host's consumer
    writes its real index as it consumes), with no fault and the link
    up throughout."""
    here, there = hosts
    b0 = fresh_generation(hosts, scribbler)
    t0 = transport(there)
    scribbler(CONS_OFF[ring], BEHIND_ZERO)
    if rung:
        doorbell(here)
    srv, cli = pool.pair(count=PING_COUNT // 10, size=4096, validate=1)
    assert krping.run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    link_stayed_up(there, b0, t0, dropped=0, faults=0)


def inject_path(host):
    return f"/sys/kernel/debug/ropcie/link-{pci_name(host)}/inject"


def desc(dtype, flags=0, length=0, dst=0, src=0, msn=0, msg_len=0,
         offset=0):
    """A descriptor (struct ropcie_wire_desc) as hex, fields as given."""
    raw = struct.pack("<BBHIIIIIIIQQQQ", dtype, flags, 0, length, dst, src,
                      msn, 0, 0, 0, 0, msg_len, offset, 0)
    assert len(raw) == 64
    return raw.hex()


SEND, CM = 1, 6                 # wire.h: request ring types
FIRST, LAST = 1, 2
NOBODY, NOBODY_PEER = 0xfffff0, 0xfffff1   # connection ids nobody has
# (name, ring, descriptor, payload, dropped: a descriptor that no correct
# peer writes and that names no connection, counted as dropped; else
# one that names no connection, answered as for a closed one)
PING_COUNT = 1000
INJECTIONS = [
    ("type", "req", desc(0xff), None, True),
    ("fragment", "req", desc(SEND, FIRST, 8192, NOBODY, NOBODY_PEER, 0,
                             4096), None, True),
    ("cm-garbage", "req", desc(CM, FIRST | LAST, 320, msg_len=320),
     "ff" * 320, True),
    ("cm-short", "req", desc(CM, FIRST | LAST, 16, msg_len=16), "00" * 16,
     True),
    ("rsp-type", "rsp", desc(SEND, FIRST | LAST, 4, NOBODY, NOBODY_PEER, 0,
                             4), "01020304", True),
    ("no-connection", "req", desc(SEND, FIRST | LAST, 4, NOBODY,
                                  NOBODY_PEER, 7, 4), "01020304", False),
]


def inject(host, ring, hexdesc, payload=None):
    """The injector's line: a descriptor (and its payload) in this
    host's ring of the other host's window."""
    line = f"{ring} {hexdesc}" + (f" {payload}" if payload else "")
    with open(inject_path(host), "w") as f:
        f.write(line + "\n")


def ends_with_its_count(srv, cli, what, count=PING_COUNT):
    """srv and cli, a ping of count iterations, were still running
    when what happened; both then run to the end, every byte validated,
    with exactly count iterations each."""
    assert cli.stat("iterations") < count, \
        f"ended before {what}: {cli.describe()}"
    assert (srv.wait_end(), cli.wait_end()) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    for s in (srv, cli):
        assert s.stat("iterations") == count, s.describe()


def link_stayed_up(there, b0, t0, dropped, faults):
    """The other host's link never went down since b0, t0, and its
    transport counted dropped descriptors and faults ending a
    connection."""
    b, t = there.link(), transport(there)
    assert b["downs"] == b0["downs"] and b["state"] == "up", b
    assert b["protocol_errors"] == b0["protocol_errors"], b
    assert t["rx_dropped"] == t0["rx_dropped"] + dropped, t
    assert t["conn_faults"] == t0["conn_faults"] + faults, t


@needs_connections
@pytest.mark.parametrize("name,ring,hexdesc,payload,dropped", INJECTIONS,
                         ids=[i[0] for i in INJECTIONS])
def test_injected_descriptor_under_a_live_ping(hosts, scribbler, pool, name,
                                               ring, hexdesc, payload,
                                               dropped):
    """A hostile descriptor that names no connection, in the other
    host's ring while a ping runs over the link: the other host drops it
    and counts it when no correct peer writes it (a malformed descriptor
    or CM message), answers it as for a closed connection otherwise; the
    link stays up and the ping runs to its count, every byte validated."""
    here, there = hosts
    there.wait_state("up", UP_TIMEOUT_S)
    b0, t0 = there.link(), transport(there)
    splats = len(kernel_splats(there))
    srv, cli = pool.pair(count=PING_COUNT, size=4096, validate=1)
    krping.start_running(srv, cli)
    inject(here, ring, hexdesc, payload)
    if dropped:
        krping.wait_for(lambda: transport(there)["rx_dropped"] >
                        t0["rx_dropped"], what="the descriptor dropped there")
    else:
        # The requests after it in the ring are consumed after it.
        n = cli.stat("iterations")
        krping.wait_for(lambda: cli.stat("iterations") > n + 2,
                        what="the ping going on")
    ends_with_its_count(srv, cli, "the descriptor was consumed")
    link_stayed_up(there, b0, t0, dropped=int(dropped), faults=0)
    assert not kernel_splats(there)[splats:]


def connections(host):
    """The link's connections on this host: [(id, the other host's id,
    QP number)]."""
    path = f"/sys/kernel/debug/ropcie/link-{pci_name(host)}/connections"
    with open(path) as f:
        return [tuple(int(w) for w in line.split()) for line in f]


# (name, ring, descriptor of the connection dst, src): a fault that no
# correct peer makes, in one connection's messages.
CONN_FAULTS = [
    ("order", "req", lambda dst, src: desc(SEND, LAST, 4, dst, src,
                                           0xdead, 8, 4), "01020304"),
    ("malformed-request", "req", lambda dst, src: desc(0xff, 0, 0, dst, src),
     None),
    ("malformed-response", "rsp", lambda dst, src: desc(SEND, FIRST | LAST,
                                                        0, dst, src), None),
]


@needs_connections
@pytest.mark.parametrize("name,ring,make,payload", CONN_FAULTS,
                         ids=[f[0] for f in CONN_FAULTS])
def test_fault_in_one_connection_ends_only_it(hosts, scribbler, pool, name,
                                              ring, make, payload):
    """Two pings over the link; a descriptor that breaks the protocol in
    the first one's connection (a fragment out of its message's order, a
    malformed request, a malformed response). The other host ends that
    connection only: both sides of the first ping fail, the second runs
    to its count with every byte validated on both hosts, and the link
    never goes down."""
    here, there = hosts
    there.wait_state("up", UP_TIMEOUT_S)
    b0, t0 = there.link(), transport(there)
    splats = len(kernel_splats(there))
    assert not connections(here), connections(here)
    srv_a, cli_a = pool.pair(count=0, size=4096, validate=1)
    krping.start_running(srv_a, cli_a)
    [(mine, theirs, _)] = connections(here)
    srv_b, cli_b = pool.pair(count=PING_COUNT, size=4096, validate=1)
    krping.start_running(srv_b, cli_b)
    assert len(connections(here)) == 2, connections(here)
    inject(here, ring, make(theirs, mine), payload)
    bound = 2 * BEAT_S + SLACK_S + 10.0 * bed.SCALE
    ends = [s.wait_end(bound) for s in (cli_a, srv_a)]
    assert ends == ["failed", "failed"], \
        f"{cli_a.describe()} | {srv_a.describe()}"
    # Its QP failed there (IB_EVENT_QP_FATAL) and closed here.
    assert (srv_a.error, cli_a.error) == (-errno.ECONNRESET,) * 2, \
        f"{srv_a.describe()} | {cli_a.describe()}"
    ends_with_its_count(srv_b, cli_b, "the first ping had ended")
    link_stayed_up(there, b0, t0, dropped=0, faults=1)
    assert not kernel_splats(there)[splats:]


READ = 4                        # wire.h: ROPCIE_WIRE_READ
READ_SIZE = 1 << 20
READS_FIRST = 50
OVERLAP_TRIES = 20


@needs_connections
@pytest.mark.parametrize("length", [READ_SIZE, 0], ids=["1MiB", "empty"])
def test_second_read_of_a_connection_ends_it(hosts, scribbler, pool, length):
    """A requester of the link protocol asks for one READ at a time on a
    connection, so the other host queues at most one per connection for
    its read kthread (link_read.c). Here, an endless stream of 1 MiB
    READs (krping rlat, the READs answered there; its first READS_FIRST
    READs end no connection) and a validated ping; a READ (of 1 MiB, or
    an empty one) injected in the stream's connection while one of its
    READs is queued there ends that connection alone: the stream fails
    with -ECONNRESET on both hosts, the ping runs to its count, the link
    stays up. An injection that finds no READ queued is answered as a
    READ of no memory (its answer names no request here and is dropped),
    so the test injects again until one overlaps (each READ of the
    stream is queued most of the time)."""
    here, there = hosts
    there.wait_state("up", UP_TIMEOUT_S)
    b0, t0 = there.link(), transport(there)
    splats = len(kernel_splats(there))
    assert not connections(here), connections(here)
    srv_a, cli_a = pool.pair(count=0, size=READ_SIZE, test="rlat")
    krping.start_running(srv_a, cli_a)
    [(mine, theirs, _)] = connections(here)
    krping.wait_for(lambda: cli_a.stat("iterations") >= READS_FIRST,
                    timeout=30.0 * bed.SCALE,
                    what=f"{READS_FIRST} READs of the stream")
    assert transport(there)["conn_faults"] == t0["conn_faults"], \
        transport(there)
    srv_b, cli_b = pool.pair(count=3 * PING_COUNT, size=4096, validate=1)
    krping.start_running(srv_b, cli_b)
    for tries in range(1, OVERLAP_TRIES + 1):
        inject(here, "req", desc(READ, FIRST | LAST, 0, theirs, mine,
                                 0xdead, length))
        deadline = time.monotonic() + 0.5 * bed.SCALE
        while time.monotonic() < deadline and \
                transport(there)["conn_faults"] == t0["conn_faults"]:
            time.sleep(0.05)
        if transport(there)["conn_faults"] > t0["conn_faults"]:
            break
    else:
        pytest.fail(f"{OVERLAP_TRIES} READs injected, none ended the "
                    f"connection: {transport(there)}")
    bound = 2 * BEAT_S + SLACK_S + 10.0 * bed.SCALE
    ends = [s.wait_end(bound) for s in (cli_a, srv_a)]
    assert ends == ["failed", "failed"], \
        f"{cli_a.describe()} | {srv_a.describe()}"
    assert (srv_a.error, cli_a.error) == (-errno.ECONNRESET,) * 2, \
        f"{srv_a.describe()} | {cli_a.describe()}"
    ends_with_its_count(srv_b, cli_b, "the READ stream had ended",
                        3 * PING_COUNT)
    link_stayed_up(there, b0, t0, dropped=0, faults=1)
    assert not kernel_splats(there)[splats:]
    print(f"# the READ injected {tries} time(s)")


FAULTS = "/sys/kernel/debug/ropcie/ropcie0"
RESPOND_OFF = {"times": 0, "interval": 1, "space": 0, "probability": 100,
               "opcode": "any", "status": "rem_access_err", "qpn": -1}
REFUSED_AT = 20


def set_fail_respond(side, **knobs):
    """ropcie0's fail_respond/ knobs on side: times last to arm, first
    to disarm (the filters never meet a fault still armed)."""
    arming = knobs.get("times", 0) != 0
    order = sorted(knobs, key=lambda k: (k == "times") == arming)
    side.sh("mountpoint -q /sys/kernel/debug || "
            "mount -t debugfs none /sys/kernel/debug; " +
            "; ".join(f"echo {knobs[k]} > {FAULTS}/fail_respond/{k}"
                      for k in order))


@needs_connections
def test_target_refusal_crosses_the_link(hosts, pool):
    """fail_respond armed on the other host only, which owns the memory
    an rlat client here READs: its REFUSED_AT-th READ is refused there, and
    the refusal reaches the client as the target's answer over the link.
    The client ends with EACCES and names the READ (rem_access_err) after
    exactly REFUSED_AT - 1 READs, with no fault armed here; the server
    there sees the connection end; the fault there is consumed; the link
    stays up with no fault of its own counted, and the next pair runs."""
    here, there = hosts
    there.wait_state("up", UP_TIMEOUT_S)
    b0, t0 = there.link(), transport(there)
    here_faults = ropcie.fault_dir()
    assert ropcie.fault_settings(here_faults) == ropcie.FAULTS_OFF
    set_fail_respond(there, **dict(RESPOND_OFF, opcode="rdma_read",
                                   interval=REFUSED_AT, times=1))
    try:
        srv, cli = pool.pair(count=10 * REFUSED_AT, size=4096, test="rlat")
        srv.start()
        srv.expect_state("listening")
        cli.start()
        assert cli.wait_end() == "failed", cli.describe()
        assert (-cli.error, cli.failed_wc) == \
            (errno.EACCES, ("rdma_read", "rem_access_err")), cli.describe()
        n = REFUSED_AT - 1
        assert {k: cli.stat(k) for k in ("iterations", "read_msgs",
                                         "read_bytes")} == \
            {"iterations": n, "read_msgs": n, "read_bytes": n * 4096}, \
            cli.describe()
        assert srv.wait_end() == "failed", srv.describe()
        assert (-srv.error, srv.failed_wc) == (errno.ECONNRESET, ("", "")), \
            srv.describe()
        assert there.sh(f"cat {FAULTS}/fail_respond/times").strip() == "0"
    finally:
        set_fail_respond(there, **RESPOND_OFF)
    link_stayed_up(there, b0, t0, dropped=0, faults=0)
    srv, cli = pool.pair(count=3, size=4096, validate=1)
    assert krping.run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"


STREAM = 7                      # wire.h: ROPCIE_WIRE_STREAM


def stream_path(host):
    return f"/sys/kernel/debug/ropcie/link-{pci_name(host)}/stream"


def stream(host, nbytes):
    """Stream nbytes over the link; return what the stream file says of
    it afterwards: {"bytes": B, "ns": N}."""
    with open(stream_path(host), "w") as f:
        f.write(f"{nbytes}\n")
    with open(stream_path(host)) as f:
        words = f.read().split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2])}


@pytest.mark.parametrize("slots,tail", [(3, 8), (97, 0)],
                         ids=["short-tail", "ring-thrice"])
def test_raw_stream_lands_in_order(hosts, scribbler, slots, tail):
    """The raw stream (make bench-pair's ceiling of the link): this host
    copies slots of bytes into the other host's request ring, the other
    copies them out. It counts exactly the bytes sent as received in
    order, each fragment with the offset stamped into it (a short last
    fragment; a stream three times the ring's length), none refused, and
    the link stays up."""
    here, there = hosts
    there.wait_state("up", UP_TIMEOUT_S)
    b0, t0 = there.link(), transport(there)
    nbytes = slots * here.link()["slot_size"] + tail
    got = stream(here, nbytes)
    assert got["bytes"] == nbytes and got["ns"] > 0, got
    t = transport(there)
    assert t["stream_rx"] == t0["stream_rx"] + nbytes, t
    assert t["stream_bad"] == t0["stream_bad"], t
    link_stayed_up(there, b0, t0, dropped=0, faults=0)


@pytest.mark.parametrize("line,err", [
    ("0", errno.EINVAL), ("12", errno.EINVAL), ("-8", errno.EINVAL),
    ("lots", errno.EINVAL), (str((1 << 30) + 8), errno.ERANGE)],
    ids=["zero", "unaligned", "negative", "word", "over-1-GiB"])
def test_raw_stream_refuses_bad_sizes(hosts, scribbler, line, err):
    """A size of 0, not a multiple of 8, negative, not a number or above
    1 GiB: refused with its errno before anything is produced."""
    here, there = hosts
    t0 = transport(there)
    with pytest.raises(OSError) as e:
        with open(stream_path(here), "w") as f:
            f.write(line + "\n")
    assert e.value.errno == err, e.value
    assert transport(there)["stream_rx"] == t0["stream_rx"]


# (name, descriptor, payload, stream_bad, rx_dropped) of STREAM
# fragments a hostile peer writes: one with a wrong stamp or out of
# order is refused and counted, one naming a connection is malformed.
HOSTILE_STREAMS = [
    ("stamp", desc(STREAM, FIRST | LAST, 8, msg_len=8), "01" + "00" * 7,
     1, 0),
    ("order", desc(STREAM, LAST, 8, msg_len=16, offset=8),
     (8).to_bytes(8, "little").hex(), 1, 0),
    ("connection", desc(STREAM, FIRST | LAST, 8, NOBODY, NOBODY_PEER,
                        msg_len=8), "00" * 8, 0, 1),
]


@pytest.mark.parametrize("name,hexdesc,payload,bad,dropped", HOSTILE_STREAMS,
                         ids=[h[0] for h in HOSTILE_STREAMS])
def test_hostile_stream_descriptor_is_counted(hosts, scribbler, name, hexdesc,
                                            payload, bad, dropped):
    """A STREAM fragment no correct peer writes: the other host refuses
    it (stream_bad) or drops it as malformed (rx_dropped), receives none
    of its bytes, and the link stays up; a real stream after it lands
    whole."""
    here, there = hosts
    there.wait_state("up", UP_TIMEOUT_S)
    b0, t0 = there.link(), transport(there)
    inject(here, "req", hexdesc, payload)
    krping.wait_for(lambda: transport(there)["rx"] > t0["rx"],
                    what="the fragment consumed there")
    t = transport(there)
    assert t["stream_bad"] == t0["stream_bad"] + bad, t
    assert t["stream_rx"] == t0["stream_rx"], t
    link_stayed_up(there, b0, t0, dropped=dropped, faults=0)
    nbytes = 2 * here.link()["slot_size"]
    assert stream(here, nbytes)["bytes"] == nbytes
    assert transport(there)["stream_rx"] == t0["stream_rx"] + nbytes


# 0xfffffff0 for a ring index in the header this host writes in the
# other host's window (struct ropcie_wire_hdr: prod[2] at 40, cons[2] at
# 48): out of the ring once the other host has consumed or produced more
# than 16 in the link's generation (wlat makes hundreds each way). A
# scribble that lands after the link restarted may be in the ring of the
# new generation or take it down once more: the test restarts the link
# itself before its last ping.
LIVE_INDICES = [("prod", 40), ("prod-rsp", 44), ("cons", 48),
                ("cons-rsp", 52)]
OUT_OF_RING = "f0ffffff"
SCRIBBLE_S = 2.0


@needs_connections
@pytest.mark.parametrize("name,offset", LIVE_INDICES,
                         ids=[i[0] for i in LIVE_INDICES])
def test_ring_index_out_of_ring_under_served_writes(hosts, scribbler, pool,
                                                    ropcie_params, name,
                                                    offset):
    """This host keeps writing an out-of-range index for one ring while
    short WRITEs come both ways (wlat of 64 B, no polling: each WRITE
    comes with a doorbell, and the other host's doorbell serves it and
    answers in the response ring), racing its own producer and consumer
    that rewrite the index. The other host takes the link down for a
    protocol error, the run ends on both hosts, and once the scribbling
    stops (and a restart clears what a late scribble left) a ping
    passes. Served in the doorbell's hard interrupt under the link's
    doorbell lock, an answer's room check that found the response ring's
    consumer index out of range failed the link, which took that lock
    again: the host locked up with interrupts off (a 6.1 guest of one
    vCPU stopped answering for good)."""
    here, there = hosts
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    ropcie_params(irq_serve_max=4096, rx_poll_us=0)
    b0, t0 = there.link(), transport(there)
    splats = len(kernel_splats(there))
    srv, cli = pool.pair(count=0, size=64, test="wlat")
    krping.start_running(srv, cli)
    end = time.monotonic() + SCRIBBLE_S
    while time.monotonic() < end:
        scribbler(offset, OUT_OF_RING)
        time.sleep(0.001)
    bound = 2 * BEAT_S + SLACK_S + 10.0 * bed.SCALE
    ends = [s.wait_end(bound) for s in (cli, srv)]
    print(f"# ends {ends}: {cli.describe()} | {srv.describe()}")
    assert ends[0] == "failed", cli.describe()
    assert cli.error == -errno.ECONNRESET, cli.describe()
    assert ends[1] in ("done", "failed"), srv.describe()
    _, b = there.wait_state("up", UP_TIMEOUT_S)
    here.wait_state("up", UP_TIMEOUT_S)
    assert b["protocol_errors"] >= b0["protocol_errors"] + 1, b
    assert b["downs"] >= b0["downs"] + 1, b
    # Its doorbell's bottom half served WRITEs meanwhile.
    assert transport(there)["rx_in_irq"] > t0["rx_in_irq"]
    fresh_generation(hosts, scribbler)
    srv2, cli2 = pool.pair(count=20, size=64, validate=1)
    assert krping.run_pair(srv2, cli2) == ("done", "done"), \
        f"{srv2.describe()} | {cli2.describe()}"
    assert not kernel_splats(there)[splats:]


def kernel_splats(side):
    """The lines of side's kernel log that report a bug, as the autouse
    kernel_log fixture judges this host's log during each test; the
    other host's is read here (and by vm-pair once it stops)."""
    return krping.kernel_bug_lines(side.sh("dmesg").splitlines())


@needs_connections
def test_many_producers_find_one_fault(hosts, scribbler, pool):
    """In a fresh generation, this host's producer index of the other
    host's request ring moved JUMP ahead, over well-formed descriptors:
    the other host consumes them and writes back a consumer index ahead
    of what this host produced. Then CLIENTS clients start at once, each
    producing its connect request here: every producer finds the same
    fault before the beat takes the link down, and the link counts one
    protocol error and goes down once. A client whose connect comes only
    after the link is back (its kthread ran late) runs to its end."""
    here, there = hosts
    b0 = fresh_generation(hosts, scribbler)
    t0, h0 = transport(there), here.link()
    scribbler(DESC_OFF["req"], behind_jump("req", "well-formed"))
    scribbler(PROD_OFF["req"], struct.pack("<I", JUMP).hex())
    krping.wait_for(lambda: transport(there)["rx"] >= t0["rx"] + JUMP,
                    timeout=2 * BEAT_S + SLACK_S,
                    what=f"the {JUMP} descriptors consumed there")
    pairs = [pool.pair(count=20, size=64) for _ in range(CLIENTS)]
    krping.start_pairs(pairs)
    bound = 2 * BEAT_S + SLACK_S + 10.0 * bed.SCALE
    ends = [cli.wait_end(bound) for _, cli in pairs]
    for srv, _ in pairs:
        srv.stop()
    clients = [c for _, c in pairs]
    assert set(ends) <= {"failed", "done"}, [c.describe() for c in clients]
    failed = [c for c, end in zip(clients, ends) if end == "failed"]
    assert -errno.EPROTO in [c.error for c in failed], \
        [c.describe() for c in clients]
    for c, end in zip(clients, ends):
        if end == "done":
            assert c.stats() == krping.ping_stats("client", 20, 64), \
                c.describe()
    h = here.link()
    assert h["down_reason"] == \
        "the peer's consumer index is out of its ring", h
    assert h["downs"] == h0["downs"] + 1, h
    assert h["protocol_errors"] == h0["protocol_errors"] + 1, h
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    krping.wait_for(lambda: there.link()["downs"] > b0["downs"],
                    timeout=2 * BEAT_S + SLACK_S,
                    what="the other host seeing this one restart")


def fresh_generation(hosts, scribbler):
    """A new epoch scribbled in the other host's window: it restarts the
    link, and both hosts start a new generation, whose ring indices
    count from 0. Return: the other host's link then."""
    here, there = hosts
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    g0 = transport(there)["generation"]
    scribbler(16, "0123456789abcdef")
    deadline = time.monotonic() + 2 * BEAT_S + SLACK_S
    while transport(there)["generation"] == g0:
        assert time.monotonic() < deadline, \
            f"there: a new epoch, the link stayed up: {there.link()}"
        time.sleep(0.05)
    here.wait_state("up", UP_TIMEOUT_S)
    return there.wait_state("up", UP_TIMEOUT_S)[1]


# The request ring's consumer index in the header this host writes in
# the other host's window (cons[0] at 48), 32 slots behind a producer at
# 0: in a fresh generation in which the other host has produced nothing,
# its request ring looks full, and its next request waits for room until
# it gives up (4 x link_timeout_ms) and takes the link down.
CONS_REQ, FULL_AT_ZERO = 48, "e0ffffff"
CONNECT_TIMEOUT_MS = 500


@needs_connections
def test_connect_answered_while_its_request_waits_for_room(
        hosts, scribbler, pool, ropcie_params):
    """The other host connects to a server here while its request ring
    looks full: its connection request times out (connect_timeout_ms)
    while the connect still waits to send it. The client fails with
    -ETIMEDOUT, the connect returns once the other host gives up waiting
    (the link goes down: the peer consumes no more), the link comes
    back, the server here is untouched and a new pair runs. The timeout
    freed the request while the connect still used it: KASAN on the
    debug kernel reports it in the other host's log (two-host-ropcie-
    debug); Debian's kernel does not see it."""
    here, there = hosts
    splats = len(kernel_splats(there))
    ropcie_params(connect_timeout_ms=CONNECT_TIMEOUT_MS)
    b0 = fresh_generation(hosts, scribbler)
    scribbler(CONS_REQ, FULL_AT_ZERO)
    srv, cli = pool.pair(count=1, size=64, remote_side="client")
    srv.start()
    srv.expect_state("listening")
    t0 = time.monotonic()
    cli.start()
    bound = CONNECT_TIMEOUT_MS / 1000 + 4 * link_timeout_s() + BEAT_S + \
        SLACK_S + 10.0 * bed.SCALE
    assert cli.wait_end(bound) == "failed", cli.describe()
    took = time.monotonic() - t0
    assert cli.error == -errno.ETIMEDOUT, cli.describe()
    _, b = there.wait_state("up", UP_TIMEOUT_S)
    here.wait_state("up", UP_TIMEOUT_S)
    assert b["downs"] == b0["downs"] + 1, b
    assert b["down_reason"] == "the peer consumes no more", b
    assert srv.state == "listening", srv.describe()
    srv.stop()
    assert srv.state == "stopped", srv.describe()
    srv2, cli2 = pool.pair(count=5, size=4096, validate=1,
                           remote_side="client")
    assert krping.run_pair(srv2, cli2) == ("done", "done"), \
        f"{srv2.describe()} | {cli2.describe()}"
    assert not kernel_splats(there)[splats:]
    print(f"# the client failed {took:.2f} s after its start")


CM_REQ, WIRE_INET = 1, 4       # wire.h: enum ropcie_wire_cm_op, family


def cm_req(creq, conn, dst, dst_port, src="10.9.9.9", src_port=40000):
    """A connection request (struct ropcie_wire_cm, IPv4) as hex."""
    raw = struct.pack("<BBBBIIIII", CM_REQ, WIRE_INET, 0, 0, creq, conn, 0,
                      1, 1)
    raw += struct.pack(">HH", src_port, dst_port) + bytes(4)
    raw += socket.inet_aton(src) + bytes(12)
    raw += socket.inet_aton(dst) + bytes(12) + bytes(256)
    assert len(raw) == 320
    return raw.hex()


def inject_req(host, creq, conn, dst, dst_port):
    """This host's request ring in the other host's window gets a
    connection request of ours, as the injector writes it."""
    line = (f"req {desc(CM, FIRST | LAST, 320, msg_len=320)} "
            f"{cm_req(creq, conn, dst, dst_port)}")
    with open(inject_path(host), "w") as f:
        f.write(line + "\n")


ANSWERS_MAX = 64                # link_control.c: ROPCIE_LX_ANSWERS_MAX
FLOOD = 100


@needs_connections
def test_answers_to_a_peer_that_does_not_consume_are_bounded(
        hosts, scribbler, pool):
    """This host sends connection requests for a port where nothing
    listens while its own request ring, where the other host's REJECTs
    go, looks full: the other host queues at most ANSWERS_MAX of them and
    counts the rest as dropped, instead of holding ~512 bytes for each
    for as long as this host lets it wait. It gives up waiting after
    4 x link_timeout_ms (the link goes down: the peer consumes no more),
    the link comes back with the queue empty, and a new pair runs."""
    here, there = hosts
    b0 = fresh_generation(hosts, scribbler)
    t0 = transport(there)
    scribbler(CONS_REQ, FULL_AT_ZERO)
    dst = os.environ["REMOTE_ADDR"]
    start = time.monotonic()
    for i in range(FLOOD):
        inject_req(here, i + 1, i + 1, dst, krping.next_port())
    # Each request is consumed there, and refused into the queue.
    krping.wait_for(lambda: transport(there)["rx"] >= t0["rx"] + FLOOD,
                    what="the requests consumed there")
    t = transport(there)
    took = time.monotonic() - start
    assert took < 4 * link_timeout_s(), \
        f"too slow to see the queue before the link gives up ({took:.1f} s)"
    # The control work holds one (waiting for room) or has not taken
    # it yet, the queue holds the rest up to its bound, and the others
    # were dropped.
    queued = t["answers_queued"]
    dropped = t["answers_dropped"] - t0["answers_dropped"]
    assert ANSWERS_MAX - 1 <= queued <= ANSWERS_MAX, t
    assert queued + dropped in (FLOOD - 1, FLOOD), t
    b = down_and_up(hosts, b0, start + 4 * link_timeout_s() + BEAT_S +
                    SLACK_S - time.monotonic(), "no room for its REJECTs")
    assert b["downs"] == b0["downs"] + 1, b
    assert b["down_reason"] == "the peer consumes no more", b
    assert transport(there)["answers_queued"] == 0
    srv, cli = pool.pair(count=5, size=4096, validate=1)
    assert krping.run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"


@needs_connections
@pytest.mark.parametrize("listen", ["127.0.0.1", "0.0.0.0"])
def test_request_for_loopback_is_refused_at_once(hosts, scribbler, pool,
                                                 ropcie_params, listen):
    """This host asks for a connection to 127.0.0.1 on the other host,
    where a server listens on that port at 127.0.0.1 (a service only its
    own host may reach) or at any address. The other host refuses it at
    once (its REJECT comes back within a beat or so, not at its
    connect_timeout_ms, here a minute), and its server never hears of
    it. ropcie hands the request to the listener's iw_cm id; rdma_cm
    finds no RDMA port for 127.0.0.1 there (cma_iw_acquire_dev()) and
    iw_cm rejects it, so no ULP over rdma_cm can be reached this way."""
    here, there = hosts
    ropcie_params(connect_timeout_ms=60000)
    port = krping.next_port()
    srv = pool.session("s", remote=True, role="server", addr=listen,
                       port=port, count=1, size=64)
    srv.start()
    srv.expect_state("listening")
    a0, b0 = transport(here), transport(there)
    inject_req(here, 1, 1, "127.0.0.1", port)
    krping.wait_for(lambda: transport(here)["rx"] > a0["rx"],
                    timeout=2 * BEAT_S + SLACK_S,
                    what="the other host's REJECT")
    time.sleep(2 * BEAT_S)
    a, b = transport(here), transport(there)
    # One descriptor each way: the request, its REJECT.
    assert b["rx"] == b0["rx"] + 1, b
    assert a["rx"] == a0["rx"] + 1, a
    assert srv.state == "listening", srv.describe()
    assert there.link()["state"] == "up"
    srv.stop()
    assert srv.state == "stopped", srv.describe()


IVSHMEM_DRV = "/sys/bus/pci/drivers/ropcie_ivshmem"


def unbind_link_device(side):
    side.sh(f"echo {pci_name(side)} > {IVSHMEM_DRV}/unbind")


def bind_link_device(side):
    dev = pci_name(side)
    side.sh(f"[ -e {IVSHMEM_DRV}/{dev} ] || echo {dev} > {IVSHMEM_DRV}/bind")


# How the other host goes away under a live ping, and comes back: ropcie
# removed, or its link device (the driver unbound, as a hot unplug or a
# reset through the driver looks to ropcie).
PEER_GOES = {
    "rmmod": (lambda side: side.sh("rmmod ropcie"), restore_ropcie),
    "unbind": (unbind_link_device, bind_link_device),
}


@needs_connections
@pytest.mark.parametrize("how", PEER_GOES)
def test_live_ping_ends_when_the_peer_goes(hosts, pool, how):
    """ropcie removed there, or its link device unbound, while a ping runs
    over the link: the ping here fails within a beat or so (-ECONNRESET:
    the peer left) and the session there fails with it; once ropcie or
    the device is back, the link comes up and a new pair runs to the
    end."""
    here, there = hosts
    go, come_back = PEER_GOES[how]
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    srv, cli = pool.pair(count=0, size=65536, validate=1)
    krping.start_running(srv, cli)
    t0 = time.monotonic()
    go(there)
    try:
        end = cli.wait_end(BEAT_S + SLACK_S + 10.0 * bed.SCALE)
        took = time.monotonic() - t0
        assert end == "failed", cli.describe()
        assert cli.error == -errno.ECONNRESET, cli.describe()
        assert srv.wait_end() == "failed", srv.describe()
        assert not there.link(), f"there: ropcie_link/ left after {how}"
    finally:
        come_back(there)
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    srv2, cli2 = pool.pair(count=5, size=65536, validate=1)
    assert krping.run_pair(srv2, cli2) == ("done", "done"), \
        f"{srv2.describe()} | {cli2.describe()}"
    print(f"# the ping here failed {took:.2f} s after the peer's {how}")


# Reads the link's transport file once, says so, then reads it over and
# over until it is gone, and says how many reads returned a line (sysfs
# runs show() again for each read at offset 0).
TRANSPORT_READER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
n = int(os.pread(fd, 4096, 0).startswith(b"generation "))
print("open", flush=True)
try:
    while os.pread(fd, 4096, 0).startswith(b"generation "):
        n += 1
except OSError as e:
    print("errno", e.errno)
print("reads", n)
"""
UNBINDS = 8


def test_transport_read_while_the_link_device_goes(hosts):
    """A reader of ropcie_link/transport on the other host, reading as
    fast as it can while that host's link device is unbound (and bound
    again), eight times: each read returns the line or fails with
    ENODEV once the file is gone, the kernel log stays clean and the
    link comes back each time. The transport was freed before the file
    went, so a read in between walked freed memory or a NULL pointer
    (the debug kernel's KASAN caught the NULL dereference at the first
    unbind)."""
    here, there = hosts
    splats = len(kernel_splats(there))
    dev = pci_name(there)
    path = f"/sys/bus/pci/devices/{dev}/ropcie_link/transport"
    for i in range(UNBINDS):
        here.wait_state("up", UP_TIMEOUT_S)
        there.wait_state("up", UP_TIMEOUT_S)
        out = there.sh(
            f"/usr/bin/python3 -c '{TRANSPORT_READER}' {path} > /tmp/rd.$$ &"
            f" r=$!; for j in $(seq 600); do grep -q open /tmp/rd.$$ && "
            "break; sleep 0.05; done; "
            f"echo {dev} > {IVSHMEM_DRV}/unbind; wait $r; cat /tmp/rd.$$; "
            "rm -f /tmp/rd.$$")
        bind_link_device(there)
        words = out.split()
        assert words[:1] == ["open"] and "reads" in words, out
        reads = int(words[words.index("reads") + 1])
        assert reads > 0, out
        if "errno" in words:
            assert int(words[words.index("errno") + 1]) == errno.ENODEV, out
        assert not kernel_splats(there)[splats:]
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)


# The remote access cases of ropcie_test.ko in its order (rt_names in
# ropcie/ropcie_test.c): test_ropcie.py's first ten, here with the
# target's memory on one host and the initiator on the other.
ACCESS_CASES = ("valid_write_and_read", "bad_rkey_write",
                "stale_key_byte_read", "wrong_pd_write",
                "out_of_bounds_write", "out_of_bounds_read",
                "write_without_remote_write", "read_without_remote_read",
                "write_behind_failed_write", "reset_behind_posted_writes")


def case_results(text):
    """{case: (ok, why)} of ropcie_test's results, in their order."""
    cases = {}
    for line in filter(None, text.splitlines()):
        ok = line.startswith("ok ")
        rest = line[3:] if ok else line.removeprefix("not ok ")
        name, _, why = rest.partition(":")
        cases[name.strip()] = (ok, why.strip())
    return cases


@needs_connections
@pytest.mark.parametrize("target", ["there", "here"])
def test_access_cases_across_the_link(hosts, target):
    """Bad rkey, stale key byte, wrong PD, out of bounds both ways and
    missing rights, posted on one host against a page the other host
    registered (ropcie_test.ko, role=initiator and role=target): each
    completes with the status the verbs prescribe on the initiator, the
    target's guard pages are untouched (it checks them itself once the
    initiator has left), and the valid WRITE lands and reads back. Three
    WRITEs in one post with a bad rkey in the middle: the first lands,
    the third (which the link may have sent before the second's verdict
    came back) is flushed and does not land. Four WRITEs posted one by
    one, then ERR and at once RESET while their verdicts are on the way
    back: the QP stays in RESET past the request timeout and nothing
    completes from its emptied queue. Every post is made under a
    spinlock, and neither kernel reports a sleep there. Each kernel is
    the target once."""
    here, there = hosts
    ropcie.module_file("ROPCIE_TEST_KO")
    tgt, ini = (there, here) if target == "there" else (here, there)
    addr = os.environ["REMOTE_ADDR" if tgt.remote else "LOCAL_ADDR"]
    here.wait_state("up", UP_TIMEOUT_S)
    port = krping.next_port()
    results = "/sys/module/ropcie_test/parameters/results"
    splats = len(kernel_splats(there))
    tgt.sh(f'insmod "$ROPCIE_TEST_KO" role=target addr={addr} port={port}')
    try:
        try:
            # reset_behind_posted_writes waits out the request timeout.
            wait_ms = int(4 * link_timeout_s() * 1000) + 1000
            ini.sh(f'insmod "$ROPCIE_TEST_KO" role=initiator addr={addr} '
                   f"port={port} reset_wait_ms={wait_ms}")
            ini_text = ini.sh(f"cat {results}")
        finally:
            ini.sh("rmmod ropcie_test", check=False)
        tgt_text = tgt.sh(f"cat {results}")
    finally:
        tgt.sh("rmmod ropcie_test", check=False)
    print(f"# initiator ({ini.name}):\n{ini_text}# target ({tgt.name}):\n"
          f"{tgt_text}")
    # ropcie_test posts under a spinlock: no sleep may be reported.
    assert not kernel_splats(there)[splats:]
    for side, text in (("initiator", ini_text), ("target", tgt_text)):
        cases = case_results(text)
        assert tuple(cases) == ACCESS_CASES, f"{side}: {text}"
        bad = {n: why for n, (ok, why) in cases.items() if not ok}
        assert not bad, f"{side}: {bad}"
    # The refusals are the verbs' remote access error, not any failure.
    for name, (_, why) in case_results(ini_text).items():
        if name == "reset_behind_posted_writes":
            assert re.fullmatch(r"[0-4] of 4 completed", why), (name, why)
        elif name != "valid_write_and_read":
            assert why == "remote access error", (name, why)



def transport(side):
    """The counters of the link's transport file, by name."""
    words = side.sh(f"cat {side.dir}/ropcie_link/transport").split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2])}


PARAMS = "/sys/module/ropcie/parameters"
WLAT_COUNT = 200


@pytest.fixture
def ropcie_params(hosts):
    """Sets ropcie's module parameters on both hosts, e.g.
    ropcie_params(rx_poll_us=0); what they were is back afterwards."""
    saved = []

    def set_both(**values):
        for side in hosts:
            for k in values:
                saved.append((side, k, side.sh(f"cat {PARAMS}/{k}").strip()))
            side.sh("; ".join(f"echo {v} > {PARAMS}/{k}"
                              for k, v in values.items()))
    yield set_both
    # The first value saved of each parameter is the one before the test.
    for side, k, v in reversed(saved):
        side.sh(f"echo {v} > {PARAMS}/{k}")


def wlat_across(hosts, pool):
    """wlat of 64 B over the link, each kernel's WRITEs landing on the
    other, with exact counters, then a ping of 64 B that validates its
    bytes. Return: each host's transport counters, what they moved by."""
    before = {side.name: transport(side) for side in hosts}
    srv, cli = pool.pair(count=WLAT_COUNT, size=64, test="wlat")
    assert krping.run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    for s, role in ((srv, "server"), (cli, "client")):
        assert s.stats() == krping.bench_stats("wlat", role, WLAT_COUNT, 64), \
            s.describe()
    srv2, cli2 = pool.pair(count=20, size=64, validate=1)
    assert krping.run_pair(srv2, cli2) == ("done", "done"), \
        f"{srv2.describe()} | {cli2.describe()}"
    moved = {}
    for side in hosts:
        was, now = before[side.name], transport(side)
        moved[side.name] = {k: now[k] - was[k] for k in now if k in was}
    return moved


@needs_connections
@pytest.mark.parametrize("limit", [0, 4096])
def test_short_writes_served_in_the_interrupt(hosts, pool, ropcie_params,
                                              limit):
    """With the consumers not polling (rx_poll_us=0) a consumer sleeps
    between two of wlat's WRITEs, so nearly every WRITE comes with a
    doorbell: with irq_serve_max=0 the request consumers' kthreads serve
    every one (rx_in_irq does not move), with 4096 the doorbell's bottom
    half serves most of them. Either way the counters are exact and
    the ping's bytes validate."""
    here, there = hosts
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    ropcie_params(irq_serve_max=limit, rx_poll_us=0)
    for name, d in wlat_across(hosts, pool).items():
        rx, irq = d["rx"], d["rx_in_irq"]
        print(f"# {name}: irq_serve_max={limit}: {irq} of {rx} "
              "descriptors consumed in the doorbell's bottom half")
        assert 0 <= irq <= rx, (name, d)
        if limit:
            assert irq >= WLAT_COUNT // 2, (name, d)
        else:
            assert irq == 0, (name, d)


@needs_connections
def test_polling_consumers_keep_exchanges_exact(hosts, pool, ropcie_params):
    """With the consumers polling for 1000 us after traffic (rx_poll_us's
    maximum), most of wlat's WRITEs and ACKs reach a consumer that is
    still looking, so the producer rings no doorbell and nobody sleeps:
    the handshake between a producer and a consumer that stops looking
    (rx_sleep) is then exercised at every descriptor. The counters stay
    exact and the ping's bytes validate. How many doorbells polling
    spares depends on the host's scheduling (under load a guest's vCPU
    can be off its core for longer than the window): it is printed, and
    measured by make bench-pair's profile, not asserted here."""
    here, there = hosts
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    ropcie_params(rx_poll_us=1000)
    for name, d in wlat_across(hosts, pool).items():
        tx, rung = d["tx"], d["doorbells_rung"]
        print(f"# {name}: rx_poll_us=1000: {rung} doorbells rung for "
              f"{tx} descriptors produced")
        assert tx >= 2 * WLAT_COUNT, (name, d)


SEND_LAT_ITERS = 300


def perftest_across(hosts, started, capsys, prog, size, iters):
    """prog's server on the other host, its client here, over the link,
    every one of iters iterations counted (skipped where a host lacks
    perftest)."""
    for side in hosts:
        if side.sh(f"command -v {prog}", check=False).strip() == "":
            pytest.skip(f"no {prog} on {side.name} (package perftest)")
    for side in hosts:
        side.wait_state("up", UP_TIMEOUT_S)
    topo = env.topology()
    srv = perftest.Host(topo.remote_addr, SshRemote(topo.remote_args))
    cli = perftest.Host(topo.local_addr)
    perftest.run_checked(prog, srv, cli, size, iters, started,
                         "across the link", say=perftest.tap_note(capsys))


@needs_connections
def test_busy_user_poller_consumes_the_link(hosts, started, capsys):
    """ib_send_lat across the link: perftest polls its CQ in a loop (a
    system call each time, through ib_uverbs), and a poll that finds its
    CQ empty consumes what the peer produced itself, without a kthread
    woken by a doorbell. On each host most descriptors are consumed in
    a poll (rx_polled) and few doorbells rung (doorbells_rung), where
    otherwise each SEND and each answer rings one; every one of
    SEND_LAT_ITERS iterations is done on both sides."""
    for side in hosts:
        ncpu = int(side.sh("nproc").strip())
        if ncpu != 1:
            pytest.skip(f"{side.name} has {ncpu} CPUs: a consumer kthread "
                        "polling on another one may take most descriptors "
                        "(the test is for one, vm-pair --smp 1 "
                        "--remote-smp 1)")
    before = {side.name: transport(side) for side in hosts}
    perftest_across(hosts, started, capsys, "ib_send_lat", 64,
                    SEND_LAT_ITERS)
    for side in hosts:
        now, was = transport(side), before[side.name]
        moved = {k: now[k] - was[k]
                 for k in ("rx", "tx", "rx_polled", "doorbells_rung")}
        print(f"# {side.name}: {moved}")
        # Each iteration: a SEND and its answer each way.
        assert moved["rx"] >= 2 * SEND_LAT_ITERS, moved
        assert moved["rx_polled"] >= moved["rx"] // 2, moved
        assert moved["doorbells_rung"] <= moved["tx"] // 2, moved


SEND_BW_ITERS = 200


@needs_connections
def test_sends_the_credit_covers_fly_together(hosts, started, capsys):
    """ib_send_bw across the link, a receiver that posts its receives
    ahead (perftest posts one per iteration up to its rx-depth): from the
    answer to the first SEND on, the peer's credit covers the SENDs, so
    they are posted behind one another (sends_credited moves here by
    most of the iterations) where otherwise each waits for the verdict of
    the one before; perftest counts every iteration."""
    here = hosts[0]
    c0 = transport(here)["sends_credited"]
    perftest_across(hosts, started, capsys, "ib_send_bw", 4096,
                    SEND_BW_ITERS)
    credited = transport(here)["sends_credited"] - c0
    print(f"# {credited} of {SEND_BW_ITERS} SENDs covered by credit")
    assert SEND_BW_ITERS // 2 <= credited, credited


def late_receiver(hosts, started, role, *args):
    """uverbs_peer.py ROLE on the other host, listening, which posts its
    receives only once the file go exists there (args after go: ROLE's
    own): (its process, its address, port, go)."""
    here, there = hosts
    here.wait_state("up", UP_TIMEOUT_S)
    there.wait_state("up", UP_TIMEOUT_S)
    topo = env.topology()
    port = krping.next_port()
    go = f"/tmp/krping-post-receives-{port}"
    there.sh(f"rm -f {go}")
    srv = uverbs_peer.start(role, topo.remote_addr, port, go, *args,
                            remote=SshRemote(topo.remote_args))
    started.append(srv)
    assert uverbs_peer.first_line(srv) == {"listening": True}
    return srv, topo.remote_addr, port, go


def post_receives_after_rnr(there, rnr0, go):
    """Once there answered a SEND "no receive" (rnr_answered past rnr0),
    let the late receiver post its receives."""
    krping.wait_for(lambda: transport(there)["rnr_answered"] > rnr0,
                    interval=0.1, what="the SEND answered: no receive")
    there.sh(f"touch {go}")


@needs_connections
def test_user_send_across_the_link_waits_for_a_late_receive(hosts, started,
                                                            profiling):
    """A user's SEND across the link to a QP with no receive posted yet:
    it leaves without waiting for its verdict (posted, as a WRITE is:
    the profile here counts one request more sent than run to its
    verdict), the peer answers that it found no receive (rnr_answered
    moves there), and the requester sends it again, and once more when
    the peer posts one: it lands whole and completes, and the next SEND
    (lkey 0, the kernel's DMA lkey) fails with LOC_PROT_ERR and flushes
    the peer's second receive, as on one host."""
    there = hosts[1]
    srv, addr, port, go = late_receiver(hosts, started, "server")
    rnr0 = transport(there)["rnr_answered"]
    cli = uverbs_peer.start("client", addr, port)
    started.append(cli)
    assert uverbs_peer.first_line(cli) == {"posted": "mr_lkey"}
    post_receives_after_rnr(there, rnr0, go)
    res, out = uverbs_peer.result(cli), uverbs_peer.result(srv)
    print(f"# client {res} | server {out}")
    assert res["mr_lkey"]["status"] == WC_SUCCESS, res
    assert res["dma_lkey"]["status"] == WC_LOC_PROT_ERR, res
    assert out["first"]["status"] == WC_SUCCESS, out
    assert out["first"]["byte_len"] == 64 and out["data_ok"], out
    assert out["second"]["status"] == WC_WR_FLUSH_ERR, out
    # Sent: the posted SEND, its second sending (which waits for the
    # verdict) and the lkey 0 SEND; the last two ran to their verdicts.
    stages, executed = ropcie.read_profile()
    assert executed["worker"] + executed["inline"] == \
        stages["exec"]["count"] + 1 == 3, (stages, executed)


@needs_connections
@pytest.mark.parametrize("ahead", [0, 2], ids=["no-receive", "two-receives"])
def test_nothing_lands_before_a_send_that_waits_for_a_receive(
        hosts, started, tmp_path, ahead):
    """A user posts AHEAD + 1 SENDs and then a WRITE across the link to a
    QP with AHEAD receives posted: the last SEND is answered RNR
    (rnr_answered moves there), and the WRITE behind it must not land
    before it. The first SEND goes without credit; its answer gives the
    credit of AHEAD receives, which covers the SENDs up to the AHEAD-th
    (sends_credited moves here by AHEAD - 1) and not the last, behind
    which nothing is posted. The sink is still zero when the last receive
    is posted, then the last SEND lands, then the WRITE; all complete, in
    order."""
    here, there = hosts
    srv, addr, port, go = late_receiver(hosts, started, "ordered-server",
                                        ahead)
    sink_file = tmp_path / "sink.json"
    c0 = transport(here)["sends_credited"]
    cli = uverbs_peer.start("send-write", addr, port, sink_file, ahead)
    started.append(cli)
    uverbs_peer.pass_sink(srv, sink_file)
    rnr0 = transport(there)["rnr_answered"]
    assert uverbs_peer.first_line(cli) == {"posted": True}
    post_receives_after_rnr(there, rnr0, go)
    res, out = uverbs_peer.result(cli), uverbs_peer.result(srv)
    print(f"# client {res} | server {out}")
    assert out == {"sink_written_before_the_receive": False,
                   "recvs": out["recvs"], "recv_ok": True,
                   "sink_ok": True, "sink_zero": False}, out
    assert [r["status"] for r in out["recvs"]] == [WC_SUCCESS] * (ahead + 1), \
        out
    assert [(w["wr_id"], w["opcode"], w["status"]) for w in res["wcs"]] == \
        [(1, WC_SEND, WC_SUCCESS)] * (ahead + 1) + \
        [(2, WC_RDMA_WRITE, WC_SUCCESS)], res
    assert transport(here)["sends_credited"] - c0 == max(ahead - 1, 0)


@needs_connections
def test_user_write_refused_there_moves_no_byte(hosts, started, tmp_path):
    """A user's SEND and then WRITE across the link to a QP of the other
    host, whose ropcie0 refuses WRITEs (fail_respond, armed there only):
    the SEND lands, the WRITE completes here with REM_ACCESS_ERR, the
    answer of the host that owns the sink, and the sink there stays zero
    (its owner waits 2 s for it after the SEND's receive): the refusal
    came before a byte moved."""
    here, there = hosts
    assert ropcie.fault_settings(ropcie.fault_dir()) == ropcie.FAULTS_OFF
    set_fail_respond(there, **dict(RESPOND_OFF, opcode="rdma_write",
                                   times=1))
    try:
        srv, addr, port, go = late_receiver(hosts, started,
                                            "ordered-server", 0, 2)
        sink_file = tmp_path / "sink.json"
        cli = uverbs_peer.start("send-write", addr, port, sink_file)
        started.append(cli)
        uverbs_peer.pass_sink(srv, sink_file)
        assert uverbs_peer.first_line(cli) == {"posted": True}
        there.sh(f"touch {go}")
        res, out = uverbs_peer.result(cli), uverbs_peer.result(srv)
        print(f"# client {res} | server {out}")
        assert there.sh(f"cat {FAULTS}/fail_respond/times").strip() == "0"
    finally:
        set_fail_respond(there, **RESPOND_OFF)
    uverbs_peer.assert_write_refused(res, out)


BW_COUNT = 20
BW_SIZE = 1 << 20


def read_profile(side):
    """{stage: {column: int}} of a host's ropcie profile."""
    return parse_profile(side.sh(f"cat {PROFILE}"))[0]


@pytest.fixture
def link_profiling(hosts, ropcie_params):
    """ropcie's profile on and cleared on both hosts, debugfs mounted; off
    again afterwards (ropcie_params restores the parameter)."""
    for side in hosts:
        side.sh("mountpoint -q /sys/kernel/debug || "
                "mount -t debugfs none /sys/kernel/debug")
    ropcie_params(profile=1)
    for side in hosts:
        side.sh(f"echo 0 > {PROFILE}")


@needs_connections
def test_bw_profile_splits_the_copies_across_the_link(hosts, pool,
                                                      link_profiling):
    """bw of 1 MiB WRITEs from here to there with the profile on: the
    initiator copies every fragment of every WRITE into the other host's
    ring (lx_copy, one sample per fragment of a slot) and the target
    serves each one (lx_serve), while the target copies none of the
    WRITEs' bytes into a ring (its lx_copy holds only its own setup
    SENDs). The stages that say where a stream waits (lx_room, lx_limit,
    lx_idle: Documentation/ropcie.rst, Where a stream waits) are printed with
    their counts; how often a stream waits depends on the host's
    scheduling, so it is not asserted."""
    here, there = hosts
    here.wait_state("up", UP_TIMEOUT_S)
    _, link = there.wait_state("up", UP_TIMEOUT_S)
    frags = BW_COUNT * -(-BW_SIZE // link["slot_size"])
    srv, cli = pool.pair(count=BW_COUNT, size=BW_SIZE, test="bw",
                         remote_side="server")
    assert krping.run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    for s, role in ((srv, "server"), (cli, "client")):
        assert s.stats() == krping.bench_stats("bw", role, BW_COUNT,
                                               BW_SIZE), s.describe()
    prof = {side.name: read_profile(side) for side in hosts}
    for name, stages in prof.items():
        print(f"# {name}: " + ", ".join(
            f"{k} {v['count']} (p50 {v['p50_ns'] / 1000:.0f} us)"
            for k, v in stages.items() if k.startswith("lx_") and v["count"]))
        for k, v in stages.items():
            assert v["count"] == 0 or \
                0 < v["min_ns"] <= v["p50_ns"] * 17 // 16 + 1 and \
                v["p50_ns"] <= v["max_ns"] * 17 // 16 + 1, (name, k, v)
    mine, theirs = prof[here.name], prof[there.name]
    # A few small SENDs of krping's own exchange ride along each way.
    assert frags <= mine["lx_copy"]["count"] <= frags + 4, (frags, mine)
    assert theirs["lx_copy"]["count"] <= 4, theirs
    assert frags <= theirs["lx_serve"]["count"] <= frags + 4, (frags, theirs)
    assert mine["lx_send"]["count"] >= BW_COUNT, mine
