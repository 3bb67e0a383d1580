# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""peer_timeout_ms on one host: the keepalive probe of a quiet run.

A connected run that hears nothing from its peer for peer_timeout_ms / 2
sends a zero-length RDMA READ, which the peer's device answers by
itself; a run that hears nothing for peer_timeout_ms fails with
ETIMEDOUT (Documentation/krping.rst, "A peer that vanishes"). Here the
peer is alive and only quiet, so the probes must be answered and the run
must go on well past peer_timeout_ms:

- the server of a bw run hears nothing while the client writes (WRITEs
  are one-sided), so it probes;
- in an fr run neither side hears the other until the end marker (the
  client only registers and invalidates locally), so both probe;
- with peer_timeout_ms=0 nobody probes.

On the test bed's device over RoCE (rxe). Not on iWARP (siw, ropcie):
there is no keepalive there for now (Documentation/krping.rst).

Whether a peer that really vanishes is noticed needs a second kernel:
test_two_hosts.py powers the peer guest off.
"""

import time

import pytest

from lib import krping

# Long enough for a probe's round trip on the debug kernel under a bw
# run's load (measured well under a second), short enough to see a few.
PEER_TIMEOUT_MS = 8000 if krping.SLOW else 3000
# How long the quiet sides must stay up: two whole timeouts.
QUIET_FOR = 2 * PEER_TIMEOUT_MS / 1000


def probes(log, sess):
    """The session's "probing" debug lines since log was opened."""
    return [l for l in log.read() if f"{sess.name}: " in l and
            "probing" in l]


@pytest.fixture(params=["bed", "ropcie"])
def device_addr(request):
    """The server address: the test bed's device, or ropcie0's."""
    if request.param == "bed":
        if krping.IWARP:
            pytest.skip("no keepalive on iWARP: siw failed the zero-length "
                        "READ of a bw server with a local length error "
                        "(Documentation/krping.rst)")
        yield krping.SERVER_ADDR
        return
    pytest.skip("no keepalive on iWARP, and ropcie is an iWARP device: "
                "siw failed the zero-length READ of a bw server with a local "
                "length error (Documentation/krping.rst)")


def quiet_run(pool, test, peer_timeout_ms, addr):
    """Start an endless run of test and keep it going for QUIET_FOR
    seconds; return (server, client). Both must still be running then,
    with no error."""
    srv, cli = pool.pair(count=0, size=65536, test=test, addr=addr,
                         peer_timeout_ms=peer_timeout_ms)
    srv.start()
    srv.expect_state("listening")
    cli.start()
    for s in (cli, srv):
        s.expect_state("running")
    # bw and fr count their iterations at the end: wait for work instead.
    krping.wait_for(lambda: any(cli.stats()[k] for k in
                                ("iterations", "write_msgs", "send_msgs")),
                    what=f"{cli.name}'s first completed work")
    deadline = time.monotonic() + QUIET_FOR
    while time.monotonic() < deadline:
        for s in (srv, cli):
            assert s.state == "running" and s.error == 0, s.describe()
        time.sleep(0.2)
    return srv, cli


def stop_pair(srv, cli):
    cli.stop()
    srv.stop()
    for s in (cli, srv):
        s.wait_end()


@pytest.mark.parametrize("test,quiet", [("bw", ("server",)),
                                        ("fr", ("server", "client"))])
def test_quiet_peer_is_probed_not_dropped(pool, dyndbg, device_addr, test,
                                          quiet):
    if not dyndbg:
        pytest.skip("dynamic debug is not available: the probes cannot "
                    "be seen")
    log = krping.Kmsg()
    srv, cli = quiet_run(pool, test, PEER_TIMEOUT_MS, device_addr)
    seen = log.read()
    stop_pair(srv, cli)
    for role, s in (("server", srv), ("client", cli)):
        lines = [l for l in seen if f"{s.name}: " in l and "probing" in l]
        if role in quiet:
            # Silent for QUIET_FOR = 2 timeouts: probes at 1/2, then
            # every half timeout after each answer.
            assert len(lines) >= 2, f"{role} {s.name} sent {len(lines)} " \
                f"probes in {QUIET_FOR:g}s of silence"
        gone = [l for l in seen if f"{s.name}: " in l and "no sign of life" in l]
        assert gone == [], gone


def test_zero_timeout_never_probes(pool, dyndbg):
    if not dyndbg:
        pytest.skip("dynamic debug is not available: the probes cannot "
                    "be seen")
    log = krping.Kmsg()
    srv, cli = quiet_run(pool, "bw", 0, krping.SERVER_ADDR)
    # (on iWARP nobody ever probes: a weaker check, still true)
    seen = probes(log, srv) + probes(log, cli)
    stop_pair(srv, cli)
    assert seen == []
