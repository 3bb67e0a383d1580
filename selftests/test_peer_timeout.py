# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""peer_timeout_ms on one host: the keepalive probe of a quiet run.

A connected run that hears nothing from its peer for peer_timeout_ms / 2
sends a zero-length RDMA READ, which the peer's device answers by
itself; a run that hears nothing for peer_timeout_ms fails with
ETIMEDOUT (Documentation/krping.rst, "A peer that vanishes"). Here the
peer is alive and only quiet, so the run must go on well past
peer_timeout_ms, on every device:

- the server of a bw run hears nothing while the client writes (WRITEs
  are one-sided);
- in an fr run neither side hears the other until the end marker (the
  client only registers and invalidates locally).

On RoCE (rxe) those quiet sides probe and their probes are answered; with
peer_timeout_ms=0 nobody probes. On iWARP (siw, and ropcie, which is
one too) there is no keepalive for now: peer_timeout_ms is accepted and
ignored, so nobody probes and nobody is dropped (siw failed the
zero-length READ of a bw server with a local length error, which broke
a healthy connection). Each quiet run goes over the test bed's device
and over ropcie0.

Whether a peer that really vanishes is noticed needs a second kernel:
test_two_hosts.py powers the peer guest off.
"""

import time

import pytest

from lib import krping, ropcie

# Long enough for a probe's round trip on the debug kernel under a bw
# run's load (measured well under a second), short enough to see a few.
PEER_TIMEOUT_MS = 8000 if krping.SLOW else 3000
# On iWARP nothing runs on the timeout: a short one, which a watched run
# would not survive (siw's failed probe), keeps the check cheap.
IWARP_TIMEOUT_MS = 1000
# How long the quiet sides must stay up: two whole timeouts.
QUIET_TIMEOUTS = 2


def probes(lines, sess):
    """The session's "probing" debug lines among lines."""
    return [l for l in lines if f"{sess.name}: " in l and "probing" in l]


@pytest.fixture(scope="module")
def ropcie0():
    """ropcie0 on rp0 (lib/ropcie.py) for the module's ropcie cases."""
    ropcie.require_loaded()
    ropcie.ensure_setup()
    yield ropcie.ADDR
    ropcie.teardown_setup()


@pytest.fixture(params=["bed", "ropcie"])
def device(request):
    """(server address, device name or None for the bed's, iWARP?): the
    test bed's device, or ropcie0 (iWARP)."""
    if request.param == "bed":
        return krping.SERVER_ADDR, None, krping.IWARP
    return request.getfixturevalue("ropcie0"), ropcie.ROPCIE_DEV, True


def quiet_run(pool, test, peer_timeout_ms, addr, device=None,
              quiet_for=None):
    """Start an endless run of test and keep it going for quiet_for
    seconds (QUIET_TIMEOUTS times peer_timeout_ms by default); return
    (server, client). Both must still be running then, with no error,
    on device when it is given."""
    srv, cli = pool.pair(count=0, size=65536, test=test, addr=addr,
                         peer_timeout_ms=peer_timeout_ms)
    srv.start()
    srv.expect_state("listening")
    cli.start()
    for s in (cli, srv):
        s.expect_state("running")
    if device is not None:
        assert srv.device == cli.device == device, \
            f"{srv.describe()} | {cli.describe()}"
    # bw and fr count their iterations at the end: wait for work instead.
    krping.wait_for(lambda: any(cli.stats()[k] for k in
                                ("iterations", "write_msgs", "send_msgs")),
                    what=f"{cli.name}'s first completed work")
    if quiet_for is None:
        quiet_for = QUIET_TIMEOUTS * peer_timeout_ms / 1000
    deadline = time.monotonic() + quiet_for
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


# The fr case has both sides quiet, so the client probes too; the bw case
# takes the server's probe through every kernel, the fr case only 6.12.
@pytest.mark.parametrize("test,quiet", [
    ("bw", ("server",)),
    pytest.param("fr", ("server", "client"), marks=pytest.mark.stock_only),
])
def test_quiet_peer_is_not_dropped(pool, dyndbg, device, test, quiet):
    """RoCE: the quiet sides probe at least twice in two timeouts of
    silence and stay up. iWARP: nobody probes, and nobody is dropped
    after two timeouts (peer_timeout_ms ignored)."""
    if not dyndbg:
        pytest.skip("dynamic debug is not available: the probes cannot "
                    "be seen")
    addr, dev, iwarp = device
    timeout_ms = IWARP_TIMEOUT_MS if iwarp else PEER_TIMEOUT_MS
    log = krping.Kmsg()
    srv, cli = quiet_run(pool, test, timeout_ms, addr, dev)
    seen = log.read()
    stop_pair(srv, cli)
    for role, s in (("server", srv), ("client", cli)):
        lines = probes(seen, s)
        if iwarp:
            assert lines == [], f"{role} {s.name} probed on iWARP: {lines}"
        elif role in quiet:
            # Silent for two timeouts: probes at 1/2, then every half
            # timeout after each answer.
            assert len(lines) >= 2, f"{role} {s.name} sent {len(lines)} " \
                f"probes in {QUIET_TIMEOUTS} timeouts of silence"
        gone = [l for l in seen if f"{s.name}: " in l and "no sign of life" in l]
        assert gone == [], gone


# On iWARP nobody probes whatever the timeout (the test above checks
# that), so there this test could not fail: not generated (conftest.py,
# marker not_iwarp). Not probing is krping's own decision, the same on
# every kernel; the test above takes the probing paths through the
# debug kernel.
@pytest.mark.not_iwarp
@pytest.mark.stock_only
def test_zero_timeout_never_probes(pool, dyndbg):
    """RoCE: the same quiet bw run with peer_timeout_ms=0 sends no probe,
    where a timeout makes its server probe (the test above)."""
    if not dyndbg:
        pytest.skip("dynamic debug is not available: the probes cannot "
                    "be seen")
    log = krping.Kmsg()
    # Quiet for as long as the test above is with a timeout.
    srv, cli = quiet_run(pool, "bw", 0, krping.SERVER_ADDR,
                         quiet_for=QUIET_TIMEOUTS * PEER_TIMEOUT_MS / 1000)
    seen = log.read()
    stop_pair(srv, cli)
    assert probes(seen, srv) + probes(seen, cli) == []
