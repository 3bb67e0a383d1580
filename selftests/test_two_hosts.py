# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""What only shows between two kernels: a peer that vanishes.

Needs a remote host (lib/env.py). The power cut needs the test bed's
control of the remote guest (scripts/testbed/vm-pair, lib/bed.py); on a
lab's own hosts that test skips with the reason.

The peer guest is powered off (its QEMU killed: no rmdir, no DISCONNECT,
no FIN) while a ping or a benchmark runs, with the remote host as the
server and as the client. (One cut for ten pairs at once would save nine
boots of the peer, but that load crashed the guests' kernels in rxe's
receive path, with the keepalive off as well: an open finding.) The
survivor here must end failed with -ETIMEDOUT (its keepalive,
Documentation/krping.rst "A peer that vanishes", or rxe's retries,
whichever comes first; fr's client over rxe may see -ECONNRESET, see
ERRORS) within peer_timeout_ms plus a margin for TCG, and afterwards
nothing of the runs may be left here: no session, no krping thread, the
RDMA resources and the memory back where they were. The peer is booted
again after the test.
"""

import errno
import time

import pytest

from lib import bed, krping

pytestmark = pytest.mark.two_host

# Short enough to keep the test quick, long enough for a probe's round
# trip under TCG (well under a second).
PEER_TIMEOUT_MS = 5000
# What a survivor may take beyond peer_timeout_ms: the wait's tick, the
# thread's wakeup and the sysfs reads under TCG.
MARGIN = 20.0 if krping.SLOW else 8.0
TESTS = ("ping", "wlat", "rlat", "bw", "fr")
SIZE = {"ping": 64, "wlat": 4096, "rlat": 4096, "bw": 65536, "fr": 4096}


@pytest.fixture
def power_cut():
    """The bed can cut the remote's power; the remote is booted again
    after the test if it was cut."""
    if not bed.available():
        pytest.skip("no control of the remote host's power: needs the test "
                    "bed's vm-pair (KRPING_BED_CTL)")
    cut = []
    yield cut
    if cut:
        bed.boot_remote()


# The sides whose counters grow while a benchmark runs (the others wait
# for the end marker and count nothing until then; fr's client counts
# its registrations only at the end).
ACTIVE = {"ping": ("server", "client"), "wlat": ("server", "client"),
          "rlat": ("client",), "bw": ("client",), "fr": ()}


# How a survivor may fail besides -ETIMEDOUT. fr's client: its only
# wire traffic is the keepalive's READ, with REG_MR and LOCAL_INV posted
# behind it. When rxe retransmits that READ to the dead peer (0.5 s
# later) it executes those local operations again (req_retry() rewinds
# to the oldest unacknowledged request, done or not); the second REG_MR
# finds its MR valid ("not free"), the QP fails and rxe flushes every
# request, the failed one too, so no error status reaches krping: a
# flush is -ECONNRESET. An rxe bug (6.12), to be reported upstream.
ERRORS = {("fr", "client"): (-errno.ETIMEDOUT, -errno.ECONNRESET)}
# Over ropcie's PCI link the link's watchdog is first: the peer's
# heartbeat stops, the link goes down within link_timeout_ms (3 s) and a
# beat, and every connection over it ends as if the peer disconnected.
if krping.PROVIDER == "ropcie":
    ERRORS = {(t, r): (-errno.ECONNRESET,) for t in TESTS
              for r in ("server", "client")}


def working(s):
    """Has the local session done work of its test (not just connected)?
    Read here, not over ssh: cheap enough to poll."""
    st = s.stats()
    return any(st[k] for k in ("iterations", "write_msgs", "read_msgs"))


@pytest.mark.parametrize("remote_side", ["server", "client"],
                         ids=lambda s: f"remote-{s}")
@pytest.mark.parametrize("test", TESTS)
def test_peer_powered_off_mid_run(pool, power_cut, test, remote_side, capsys):
    before_mem = krping.memory_snapshot()
    before_res = krping.rdma_resource_counts()
    srv, cli = pool.pair(count=0, size=SIZE[test], test=test,
                         validate=int(test == "ping"),
                         peer_timeout_ms=PEER_TIMEOUT_MS)
    local = cli if remote_side == "server" else srv
    srv.start()
    srv.expect_state("listening")
    cli.start()
    for s in (cli, srv):
        s.expect_state("running")
    if local.get("role") in ACTIVE[test]:
        krping.wait_for(lambda: working(local), interval=0.2,
                        what="work done here")

    bed.power_off_remote()
    power_cut.append(True)
    t0 = time.monotonic()
    pool.forget_remote()        # the remote session died with its host
    bound = PEER_TIMEOUT_MS / 1000 + MARGIN
    end = local.wait_end(bound)
    took = time.monotonic() - t0
    assert end == "failed", local.describe()
    assert local.error in ERRORS.get((test, local.get("role")),
                                     (-errno.ETIMEDOUT,)), local.describe()
    print(f"the local {local.get('role')} failed {local.error} "
          f"{took:.1f}s after the power cut")
    if test == "ping":
        problems = krping.partial_ping_problems(local.get("role"),
                                                local.stats(), SIZE["ping"])
        assert not problems, f"{local.describe()}: {problems}"

    assert pool.cleanup() == []
    krping.wait_for(lambda: not krping.krping_leftovers(), timeout=10,
                    what="no krping sessions or kthreads")
    after_res = krping.rdma_resource_counts()
    assert after_res == before_res, \
        f"RDMA resources before {before_res}, after {after_res}"
    growth = krping.assert_memory_returned(before_mem)
    with capsys.disabled():
        print(f"# memory growth {growth} kB")
