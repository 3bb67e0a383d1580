# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""ropcie as a fault-injecting device (ropcie/fault.c, debugfs
ropcie/ropcie0/): each fault ends a krping pair the way the same failure
of a real device would, and krping reports it.

For each fault the test asserts the session's end state, its errno, the
work request that failed and its status (failed_wr, wc_status), the
exact counters up to the fault, that the fault was consumed (times back
to 0), and that the device serves a clean pair afterwards. The pair runs
on ropcie0 on one host (lib/ropcie.py), so both sides' completions pass
through the same device: the opcode filter picks the side (the server
of a ping is the only one that READs and WRITEs; its k-th SEND is the
device's 2k-th).
"""

import errno
import importlib.util
import time

import pytest

from lib import krping, ropcie, uverbs_peer
from lib.krping import run_pair, ping_stats, ADV_BYTES
from lib.ropcie import ropcie_env, ropcie_ready  # noqa: F401
from lib.ropcie import ADDR, ensure_setup, teardown_setup

E = errno
SIZE = 4096
COUNT = 5

# krping/post.c: krping_wc_errno(), the errno of a failed completion.
STATUS_ERRNO = {
    "retry_exc_err": E.ETIMEDOUT,
    "rnr_retry_exc_err": E.ETIMEDOUT,
    "rem_access_err": E.EACCES,
    "loc_prot_err": E.EACCES,
    "loc_len_err": E.EMSGSIZE,
    "rem_inv_req_err": E.EREMOTEIO,
    "rem_op_err": E.EIO,
    "general_err": E.EIO,
}
# The peer of the side that failed sees its connection end.
PEER_ERRNOS = {E.ECONNRESET}


@pytest.fixture(autouse=True)
def faults(ropcie_ready):
    """ropcie0's fault directory, every fault off before and after."""
    d = ropcie.fault_dir()
    ropcie.faults_off(d)
    yield d
    ropcie.faults_off(d)
    if not ropcie.port_active():
        ropcie.write(d / "event", "port_active")


def ping_pair(pool, count=COUNT, **kw):
    return pool.pair(count=count, size=SIZE, addr=ADDR, validate=1, **kw)


def run_failing(pool, count=COUNT):
    srv, cli = ping_pair(pool, count)
    states = run_pair(srv, cli)
    return srv, cli, states


def clean_pair(pool):
    """A pair on the device after a fault runs to its end."""
    srv, cli = ping_pair(pool, 3)
    assert run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    assert srv.failed_wc == ("", "") and cli.failed_wc == ("", "")


def plus(a, **more):
    return {k: v + more.get(k, 0) for k, v in a.items()}


def assert_failed(sess, err, failed_wc=("", "")):
    assert sess.state == "failed", sess.describe()
    assert -sess.error == err, \
        f"{sess.describe()}: errno {krping.errname(-sess.error)}, " \
        f"expected {krping.errname(err)}"
    assert sess.failed_wc == failed_wc, sess.describe()


def assert_peer_ended(sess):
    assert sess.state == "failed", sess.describe()
    assert -sess.error in PEER_ERRNOS, sess.describe()
    assert sess.failed_wc == ("", ""), sess.describe()


# One status per errno beyond 6.12 (stock_only): ropcie's path is the
# same for each, krping's errno is not.
@pytest.mark.parametrize("status", krping.representatives(
    sorted(STATUS_ERRNO), key=STATUS_ERRNO.get))
def test_failed_read_ends_the_run_with_its_status(pool, faults, status):
    """The third READ fails with status: the server ends failed with
    that status's errno and names the READ; two iterations were done and
    the third's first receive; the client sees the connection end."""
    ropcie.arm_fail_wc(faults, opcode="rdma_read", status=status,
                       interval=3)
    srv, cli, _ = run_failing(pool)
    assert_failed(srv, STATUS_ERRNO[status], ("rdma_read", status))
    assert srv.stats() == plus(ping_stats("server", 2, SIZE),
                               recv_msgs=1, recv_bytes=ADV_BYTES)
    assert_peer_ended(cli)
    assert cli.stats() == plus(ping_stats("client", 2, SIZE),
                               send_msgs=1, send_bytes=ADV_BYTES)
    assert ropcie.read(faults / "fail_wc" / "times") == "0"
    clean_pair(pool)


def test_interval_counts_from_when_times_is_written(pool, faults):
    """interval=3 armed for a run of one READ (which it lets pass), then
    armed again: the second run's third READ fails, not its second."""
    ropcie.arm_fail_wc(faults, opcode="rdma_read", status="retry_exc_err",
                       interval=3)
    srv, cli = ping_pair(pool, 1)
    assert run_pair(srv, cli) == ("done", "done"), srv.describe()
    ropcie.arm_fail_wc(faults, opcode="rdma_read", status="retry_exc_err",
                       interval=3)
    srv, cli, _ = run_failing(pool)
    assert_failed(srv, E.ETIMEDOUT, ("rdma_read", "retry_exc_err"))
    assert srv.stat("read_msgs") == 2, srv.describe()


def test_failed_write_names_the_write(pool, faults):
    """The second WRITE fails: one whole iteration, then the second's
    two receives, its READ and its first SEND."""
    ropcie.arm_fail_wc(faults, opcode="rdma_write", status="rem_access_err",
                       interval=2)
    srv, cli, _ = run_failing(pool)
    assert_failed(srv, E.EACCES, ("rdma_write", "rem_access_err"))
    assert srv.stats() == plus(ping_stats("server", 1, SIZE),
                               recv_msgs=2, recv_bytes=2 * ADV_BYTES,
                               read_msgs=1, read_bytes=SIZE,
                               send_msgs=1, send_bytes=ADV_BYTES)
    assert_peer_ended(cli)
    clean_pair(pool)


def test_failed_recv_names_the_receive(pool, faults):
    """The device's first receive completion is the server's: it fails
    with loc_len_err before anything is counted."""
    ropcie.arm_fail_wc(faults, opcode="recv", status="loc_len_err")
    srv, cli, _ = run_failing(pool)
    assert_failed(srv, E.EMSGSIZE, ("recv", "loc_len_err"))
    assert srv.stats() == {k: 0 for k in krping.STATS}, srv.describe()
    assert cli.state == "failed", cli.describe()
    clean_pair(pool)


def test_space_lets_sends_pass_before_the_fault(pool, faults):
    """space=3: the device's fourth SEND fails, the server's second: one
    iteration's go-ahead went out, then the client's next advertisement
    came in."""
    ropcie.arm_fail_wc(faults, opcode="send", status="general_err", space=3)
    srv, cli, _ = run_failing(pool)
    assert_failed(srv, E.EIO, ("send", "general_err"))
    assert srv.stats() == plus(ping_stats("server", 0, SIZE),
                               recv_msgs=2, recv_bytes=2 * ADV_BYTES,
                               read_msgs=1, read_bytes=SIZE,
                               write_msgs=1, write_bytes=SIZE,
                               send_msgs=1, send_bytes=ADV_BYTES)
    assert_peer_ended(cli)
    assert ropcie.read(faults / "fail_wc" / "space") == "0"


def test_filters_that_match_nothing_leave_the_run_alone(pool, faults):
    """A fault armed for a QP that does not exist, or with probability
    0, changes nothing: the pair ends done with exact counters and the
    fault is still armed."""
    for knobs in (dict(qpn=0xfffff0), dict(probability=0)):
        ropcie.faults_off(faults)
        ropcie.arm_fail_wc(faults, opcode="rdma_read",
                           status="retry_exc_err", **knobs)
        srv, cli = ping_pair(pool)
        assert run_pair(srv, cli) == ("done", "done"), srv.describe()
        assert srv.stats() == ping_stats("server", COUNT, SIZE)
        assert srv.failed_wc == ("", "")
        assert ropcie.read(faults / "fail_wc" / "times") == "1"


def test_qpn_filter_fails_that_qp_only(pool, faults):
    """A READ fault armed mid-run for the client's QP, which never READs
    in a ping, lets the server's READs pass: five more iterations run and
    the fault stays armed. Armed for the server's QP, its next READ
    fails: the server names it, the client ends as the peer."""
    srv, cli = running_pair(pool)
    ropcie.arm_fail_wc(faults, opcode="rdma_read", status="rem_op_err",
                       qpn=ropcie.session_qpn(cli))
    done = srv.stat("iterations")
    krping.wait_for(lambda: srv.stat("iterations") >= done + 5,
                    what="five more iterations")
    assert (srv.state, cli.state) == ("running", "running")
    assert ropcie.read(faults / "fail_wc" / "times") == "1"
    ropcie.arm_fail_wc(faults, opcode="rdma_read", status="rem_op_err",
                       qpn=ropcie.session_qpn(srv))
    assert srv.wait_end() == "failed"
    assert_failed(srv, E.EIO, ("rdma_read", "rem_op_err"))
    assert cli.wait_end() == "failed"
    assert_peer_ended(cli)


# krping/wait.c: krping_wait_result() of a run whose work was flushed
# with no error of its own, as after a CQ overrun moved its QP to error.
OVERRUN_ERRNO = E.ECONNRESET

# fail_respond/status: what the requester's WR completes with when its
# target refuses it, and the errno a krping requester ends with.
RESPOND_ERRNO = {"rem_access_err": E.EACCES, "rem_op_err": E.EIO,
                 "rem_inv_req_err": E.EREMOTEIO}


@pytest.mark.parametrize("status", sorted(RESPOND_ERRNO))
def test_target_refuses_the_third_read(pool, faults, status):
    """fail_respond for READs (of a ping, only the client's QP is asked
    for them): the third is refused by its target with status; the
    server ends with that status's errno and names the READ, after two
    iterations and the third's first receive; the client sees the
    connection end; the fault is consumed."""
    ropcie.arm_fail_respond(faults, opcode="rdma_read", status=status,
                            interval=3)
    srv, cli, _ = run_failing(pool)
    assert_failed(srv, RESPOND_ERRNO[status], ("rdma_read", status))
    assert srv.stats() == plus(ping_stats("server", 2, SIZE),
                               recv_msgs=1, recv_bytes=ADV_BYTES)
    assert_peer_ended(cli)
    assert cli.stats() == plus(ping_stats("client", 2, SIZE),
                               send_msgs=1, send_bytes=ADV_BYTES)
    assert ropcie.read(faults / "fail_respond" / "times") == "0"
    clean_pair(pool)


def need_pyverbs():
    if importlib.util.find_spec("pyverbs") is None:
        ropcie.missing("pyverbs not installed (package python3-pyverbs)")


def test_user_write_refused_moves_no_byte(faults, tmp_path):
    """A user's SEND, then WRITE, to another user's QP on ropcie0, which
    refuses WRITEs (fail_respond): the SEND lands, the WRITE completes
    with REM_ACCESS_ERR, and the sink stays zero (its owner watches it
    for 2 s after the SEND's receive): the refusal comes before a byte
    moves."""
    need_pyverbs()
    port, go, sink_file = krping.next_port(), tmp_path / "go", \
        tmp_path / "sink.json"
    ropcie.arm_fail_respond(faults, opcode="rdma_write",
                            status="rem_access_err")
    srv = uverbs_peer.start("ordered-server", ADDR, port, go, 0, 2)
    cli = None
    try:
        assert uverbs_peer.first_line(srv) == {"listening": True}
        cli = uverbs_peer.start("send-write", ADDR, port, sink_file)
        uverbs_peer.pass_sink(srv, sink_file)
        assert uverbs_peer.first_line(cli) == {"posted": True}
        go.touch()
        res, out = uverbs_peer.result(cli), uverbs_peer.result(srv)
    finally:
        for p in (srv, cli):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    uverbs_peer.assert_write_refused(res, out)
    assert ropcie.read(faults / "fail_respond" / "times") == "0"


def test_target_fault_names_the_target_qp(pool, faults):
    """fail_respond's qpn names the QP that answers, not the one that
    asks: armed for the server's QP (a ping's READs and WRITEs target
    the client's), five more iterations run and the fault stays armed;
    armed for the client's, the server's next WRITE is refused."""
    srv, cli = running_pair(pool)
    ropcie.arm_fail_respond(faults, opcode="any", status="rem_access_err",
                            qpn=ropcie.session_qpn(srv))
    done = srv.stat("iterations")
    krping.wait_for(lambda: srv.stat("iterations") >= done + 5,
                    what="five more iterations")
    assert (srv.state, cli.state) == ("running", "running")
    assert ropcie.read(faults / "fail_respond" / "times") == "1"
    # Disarmed first: the new filters must not meet the old times.
    ropcie.write(faults / "fail_respond" / "times", 0)
    ropcie.arm_fail_respond(faults, opcode="rdma_write",
                            status="rem_access_err",
                            qpn=ropcie.session_qpn(cli))
    assert srv.wait_end() == "failed"
    assert_failed(srv, E.EACCES, ("rdma_write", "rem_access_err"))
    assert cli.wait_end() == "failed"
    assert_peer_ended(cli)
    assert ropcie.read(faults / "fail_respond" / "times") == "0"


def test_cq_overrun_loses_the_completion_and_ends_its_qp(pool, faults):
    """fail_cq_overrun for READs: the third READ's completion finds the
    server's CQ full and is lost, as to a real overrun: the server never
    counts that READ, its QP moves to error and flushes the receive it
    posted, and it ends as a run whose work was flushed (krping names no
    request for a flush); the client sees the connection end; the fault
    is consumed, and the device logged its overflow once. (krping's CQs,
    from ib_alloc_cq(), have no event handler to hear the CQ_ERR.)"""
    ropcie.arm_fail_cq_overrun(faults, opcode="rdma_read", interval=3)
    kmsg = krping.Kmsg()
    try:
        srv, cli, _ = run_failing(pool)
        logged = [ln for ln in kmsg.read() if "ropcie0: CQ overflow" in ln]
    finally:
        kmsg.close()
    assert len(logged) == 1, logged
    assert_failed(srv, OVERRUN_ERRNO)
    assert srv.stats() == plus(ping_stats("server", 2, SIZE),
                               recv_msgs=1, recv_bytes=ADV_BYTES)
    assert_peer_ended(cli)
    assert ropcie.read(faults / "fail_cq_overrun" / "times") == "0"
    clean_pair(pool)


# Registrations that fail_reg_mr fails in test_verbose_is_rate_limited.
REG_STRIKES = 100


def test_verbose_is_rate_limited(faults):
    """verbose=1 logs a failure as it strikes, rate-limited (10 lines
    every 5 s; the kernel's fault attributes can be, and ropcie's always
    are, since a fault with times -1 strikes at every call): a user's
    REG_STRIKES ibv_reg_mr calls in a row all fail with ENOMEM, and the
    log names the fault at most 10 times in each 5 s they took."""
    need_pyverbs()
    ropcie.write(faults / "fail_reg_mr" / "verbose", 1)
    ropcie.arm(faults / "fail_reg_mr", times=-1)
    kmsg = krping.Kmsg()
    try:
        t0 = time.monotonic()
        p = uverbs_peer.start("reg", ropcie.ROPCIE_DEV, 4096, REG_STRIKES)
        out = uverbs_peer.result(p)
        took = time.monotonic() - t0
        named = [ln for ln in kmsg.read()
                 if "injected fault: fail_reg_mr" in ln]
    finally:
        kmsg.close()
    assert out == {"reg": {"ENOMEM": REG_STRIKES}}, out
    bound = 10 * (int(took // 5) + 1)
    assert 1 <= len(named) <= min(bound, REG_STRIKES - 1), \
        f"{len(named)} lines in {took:.1f} s"


VERBS = {
    # fail_<verb>: the first call of it is the client's (it sets up
    # before it connects; the server after the request came).
    "create_cq": E.ENOMEM,
    "create_qp": E.ENOMEM,
    "alloc_mr": E.ENOMEM,
}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_failed_resource_verb_fails_the_setup(pool, faults, verb):
    """fail_<verb> with times=1: the client's setup fails with -ENOMEM,
    nothing of it stays behind, and the next pair runs."""
    ropcie.arm(faults / f"fail_{verb}", times=1)
    srv, cli = ping_pair(pool)
    srv.start()
    srv.expect_state("listening")
    cli.start()
    assert cli.wait_end() == "failed"
    assert_failed(cli, VERBS[verb])
    assert srv.state == "listening"
    srv.stop()
    assert srv.wait_end() == "stopped"
    assert ropcie.read(faults / f"fail_{verb}" / "times") == "0"
    krping.wait_for(lambda: not ropcie.kernel_resources(),
                    what="no krping resources on ropcie0")
    clean_pair(pool)


QP_EVENTS = {
    # krping/resources.c: krping_qp_event()
    "qp_fatal": E.ECONNRESET,
    "qp_req_err": E.EREMOTEIO,
    "qp_access_err": E.EACCES,
}


def running_pair(pool):
    """A ping pair in its third iteration or later. Its count is never
    reached: a server with count=0 would end done when its client left
    between iterations, and hide which side a fault broke."""
    srv, cli = ping_pair(pool, count=1 << 30)
    srv.start()
    srv.expect_state("listening")
    cli.start()
    cli.expect_state("running")
    srv.expect_state("running")
    krping.wait_for(lambda: srv.stat("iterations") >= 2,
                    what="two iterations")
    return srv, cli


@pytest.mark.parametrize("event", sorted(QP_EVENTS))
def test_qp_event_ends_that_qp(pool, faults, event):
    """A QP event to the server's QP: its handler hears it, the QP goes
    to error, the server ends with the event's errno, the client sees
    the connection end."""
    srv, cli = running_pair(pool)
    ropcie.write(faults / "event", f"{event} {ropcie.session_qpn(srv)}")
    assert srv.wait_end() == "failed"
    assert_failed(srv, QP_EVENTS[event])
    assert cli.wait_end() == "failed"
    assert_peer_ended(cli)
    assert krping.partial_ping_problems("server", srv.stats(), SIZE) == []
    clean_pair(pool)


def test_conn_reset_closes_the_connection_under_both_sides(pool, faults):
    """conn_reset to the server's QP: the connection closes from below,
    with no QP event; both sides hear their peer leave (ECONNRESET) and
    name no failed work request."""
    srv, cli = running_pair(pool)
    ropcie.write(faults / "event", f"conn_reset {ropcie.session_qpn(srv)}")
    for s in (srv, cli):
        assert s.wait_end() == "failed"
        assert_failed(s, E.ECONNRESET)
    clean_pair(pool)


# fail_connect/answer and what a krping client makes of it (krping/cm.c):
# rdma_cm's REJECTED for a refusal or a reset, UNREACHABLE with the
# status for a timeout, CONNECT_ERROR with it otherwise.
CONNECT_ANSWERS = {"refused": E.ECONNREFUSED, "reset": E.ECONNREFUSED,
                   "timeout": E.ETIMEDOUT, "unreachable": E.EHOSTUNREACH}
# Longer than a client's whole setup and refusal (a second under TCG,
# three on the debug kernel), so that an answer given at once ends it
# sooner.
CONNECT_TIMEOUT_MS = 3000 * (3 if krping.SLOW else 1)


# One answer per errno beyond 6.12 (stock_only).
@pytest.mark.parametrize("answer", krping.representatives(
    sorted(CONNECT_ANSWERS), key=CONNECT_ANSWERS.get))
def test_connect_fault_fails_that_request_only(pool, faults, answer):
    """fail_connect on the server's port: the client's request reaches no
    listener and gets answer (timeout: none, until connect_timeout_ms);
    the client fails with what it makes of that and moved no byte, the
    server still listens and serves the next client."""
    srv, cli, took = failed_connect(
        pool, lambda port: ropcie.arm_fail_connect(faults, answer,
                                                   port=port))
    assert_failed(cli, CONNECT_ANSWERS[answer])
    # timeout: when connect_timeout_ms answers; the others at once.
    assert (took >= CONNECT_TIMEOUT_MS / 1000) == (answer == "timeout"), took
    assert ropcie.read(faults / "fail_connect" / "times") == "0"
    serve_next_client(pool, srv)


def failed_connect(pool, arm=None):
    """A server listening on ropcie0 and a client whose connection request
    fails, with connect_timeout_ms at CONNECT_TIMEOUT_MS (arm(port) arms
    a fault first, when given): the server, the client, which moved no
    byte, and the seconds it took."""
    saved = ropcie.read_params("connect_timeout_ms")
    ropcie.set_params(connect_timeout_ms=CONNECT_TIMEOUT_MS)
    try:
        srv, cli = ping_pair(pool, 3)
        srv.start()
        srv.expect_state("listening")
        if arm:
            arm(int(srv.get("port")))
        t0 = time.monotonic()
        cli.start()
        assert cli.wait_end() == "failed"
        took = time.monotonic() - t0
    finally:
        ropcie.set_params(**saved)
    assert not any(cli.stats().values()), cli.describe()
    assert srv.state == "listening", srv.describe()
    return srv, cli, took


def serve_next_client(pool, srv):
    """The server of failed_connect() serves a client to its end."""
    cli = pool.session("c", role="client", addr=ADDR, port=srv.get("port"),
                       count=3, size=SIZE, validate=1)
    cli.start()
    assert (cli.wait_end(), srv.wait_end()) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    assert srv.stats() == ping_stats("server", 3, SIZE), srv.describe()


def test_connect_fault_for_another_port_leaves_the_pair_alone(pool, faults):
    """fail_connect armed for a port nobody connects to: a pair connects
    and runs to its end; the fault is still armed."""
    ropcie.arm_fail_connect(faults, "refused", port=1)
    srv, cli = ping_pair(pool)
    assert run_pair(srv, cli) == ("done", "done"), srv.describe()
    assert cli.stats() == ping_stats("client", COUNT, SIZE)
    assert ropcie.read(faults / "fail_connect" / "times") == "1"


# ropcie/fault.c: ROPCIE_PORT_RETRY_MS, the port is cut this long after
# port_err.
PORT_RETRY_S = 1.0


def test_port_goes_down_and_up(pool, faults):
    """port_err: the port is DOWN and both sides end with -ENETDOWN (they
    hear PORT_ERR before a request could fail); once the port is cut, a
    client that connects through it reaches nobody and fails -ETIMEDOUT
    when connect_timeout_ms ends its request, while a server still
    listens. port_active: ACTIVE again, and that server serves the next
    client."""
    srv, cli = running_pair(pool)
    ropcie.write(faults / "event", "port_err")
    cut = time.monotonic() + PORT_RETRY_S
    assert not ropcie.port_active()
    for s in (srv, cli):
        assert s.wait_end() == "failed"
        assert_failed(s, E.ENETDOWN)
    # Twice the retry time: the cut is a delayed work's, and TCG is slow.
    time.sleep(max(0.0, cut + PORT_RETRY_S - time.monotonic()))
    srv, cli, took = failed_connect(pool)
    assert_failed(cli, E.ETIMEDOUT)
    assert took >= CONNECT_TIMEOUT_MS / 1000, took
    ropcie.write(faults / "event", "port_active")
    assert ropcie.port_active()
    serve_next_client(pool, srv)


@pytest.mark.parametrize("back", ["cut", "within_the_second"])
def test_port_down_under_a_send_that_waits_for_a_receive(faults, tmp_path,
                                                         back):
    """A user's SEND waits on its QP's worker for the peer's receive (the
    peer posts none yet) when port_err takes the port down.
    cut: the port is cut a second later; the SEND completes with
    RETRY_EXC_ERR, the QP goes to error and flushes the next SEND, and
    the peer's receives, posted later, are flushed with no byte landed.
    within_the_second: port_active comes first, as a link back within
    the retry time: once the peer posts its receives the SEND lands, and
    the next (with the kernel's DMA lkey, a user's error) fails as ever."""
    need_pyverbs()
    port, go = krping.next_port(), tmp_path / "post-receives"
    srv = uverbs_peer.start("server", ADDR, port, go)
    cli = None
    try:
        assert uverbs_peer.first_line(srv) == {"listening": True}
        cli = uverbs_peer.start("client", ADDR, port)
        assert uverbs_peer.first_line(cli) == {"posted": "mr_lkey"}
        ropcie.write(faults / "event", "port_err")
        if back == "cut":
            # It fails at the cut, with no receive posted yet.
            res = uverbs_peer.result(cli)
            go.touch()
        else:
            ropcie.write(faults / "event", "port_active")
            go.touch()
            res = uverbs_peer.result(cli)
        out = uverbs_peer.result(srv)
    finally:
        for p in (srv, cli):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    if back == "cut":
        assert res["mr_lkey"]["status"] == uverbs_peer.WC_RETRY_EXC_ERR, res
        assert res["dma_lkey"]["status"] == uverbs_peer.WC_WR_FLUSH_ERR, res
        assert [out[k]["status"] for k in ("first", "second")] == \
            [uverbs_peer.WC_WR_FLUSH_ERR] * 2, out
        assert not out["data_ok"], out
    else:
        assert res["mr_lkey"]["status"] == uverbs_peer.WC_SUCCESS, res
        assert res["dma_lkey"]["status"] == uverbs_peer.WC_LOC_PROT_ERR, res
        assert [out[k]["status"] for k in ("first", "second")] == \
            [uverbs_peer.WC_SUCCESS, uverbs_peer.WC_WR_FLUSH_ERR], out
        assert out["data_ok"], out


def test_device_fatal_ends_every_connection(pool, faults):
    srv, cli = running_pair(pool)
    ropcie.write(faults / "event", "device_fatal")
    for s in (srv, cli):
        assert s.wait_end() == "failed"
        assert_failed(s, E.EIO)
    clean_pair(pool)


# What a user's context hears first of each event (ibv_get_async_event,
# by pyverbs' name). conn_reset raises none: a qp_req_err written after
# it is the first (one conn_reset does not raise even by mistake).
USER_EVENTS = {
    "qp_fatal": "IBV_EVENT_QP_FATAL",
    "qp_req_err": "IBV_EVENT_QP_REQ_ERR",
    "qp_access_err": "IBV_EVENT_QP_ACCESS_ERR",
    "conn_reset": "IBV_EVENT_QP_REQ_ERR",
    "cq_err": "IBV_EVENT_CQ_ERR",
    "device_fatal": "IBV_EVENT_DEVICE_FATAL",
}


def user_cqn(pid):
    """The number rdma resource show gives the CQ of process pid."""
    cqs = ropcie.user_resources("cq", pid)
    assert len(cqs) == 1, cqs
    return cqs[0]["cqn"]


# Beyond 6.12 (stock_only) one QP event stands for the three: ib_core
# hands each to ib_uverbs the same way.
@pytest.mark.parametrize("event", krping.representatives(
    sorted(USER_EVENTS), key=lambda ev: ev.split("_")[0]))
def test_event_reaches_a_user_context_and_leaves_its_qp_in_error(faults,
                                                                 event):
    """The event to a pyverbs program's QP (in INIT), its CQ or the
    device: ibv_query_qp then finds the QP in the error state, and
    rdma-core's libibverbs hands the program that event first (after
    conn_reset, which raises none, the qp_req_err written next)."""
    need_pyverbs()
    p = uverbs_peer.start("events", ropcie.ROPCIE_DEV)
    try:
        info = uverbs_peer.first_line(p)
        arg = {"cq_err": f" {user_cqn(info['pid'])}",
               "device_fatal": ""}.get(event, f" {info['qpn']}")
        ropcie.write(faults / "event", event + arg)
        p.stdin.write("go\n")
        p.stdin.flush()
        state = uverbs_peer.first_line(p)
        if event == "conn_reset":
            ropcie.write(faults / "event", f"qp_req_err {info['qpn']}")
        out = uverbs_peer.result(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert state == {"qp_state": "IBV_QPS_ERR"}
    assert out == {"event": USER_EVENTS[event]}


def test_cq_err_ends_the_qps_of_that_cq(pool, faults):
    """cq_err on every CQ of krping's: each QP on them goes to error and
    both sides end failed; nothing is reported as a failed request."""
    srv, cli = running_pair(pool)
    cqs = ropcie.kernel_resources("cq")
    assert cqs, "no CQ of krping on ropcie0"
    # The first error may end krping's run, whose teardown destroys the
    # other CQs before they get theirs.
    errs = [ropcie.write_errno(faults / "event", f"cq_err {cq['cqn']}")
            for cq in cqs]
    assert errs[0] == 0 and set(errs) <= {0, E.ENOENT}, errs
    for s in (srv, cli):
        assert s.wait_end() == "failed"
        assert s.failed_wc == ("", ""), s.describe()
    clean_pair(pool)


@pytest.mark.parametrize("path,value,err", [
    ("event", "bogus", E.EINVAL),
    ("event", "qp_fatal", E.EINVAL),
    ("event", "port_err 1", E.EINVAL),
    ("event", "qp_fatal x", E.EINVAL),
    ("event", "qp_fatal 16777215", E.ENOENT),
    ("event", "cq_err 999999", E.ENOENT),
    ("fail_wc/status", "success", E.EINVAL),
    ("fail_wc/opcode", "atomic", E.EINVAL),
    ("fail_wc/qpn", "-2", E.ERANGE),
    ("fail_wc/times", "-2", E.ERANGE),
    ("cq_delay_us", "10000001", E.ERANGE),
    ("cq_delay_us", "soon", E.EINVAL),
    ("fail_connect/answer", "accept", E.EINVAL),
    ("fail_connect/port", "65536", E.ERANGE),
    ("event", "conn_reset", E.EINVAL),
    ("event", "conn_reset 16777215", E.ENOENT),
    ("fail_respond/opcode", "send", E.EINVAL),
    ("fail_respond/status", "retry_exc_err", E.EINVAL),
    ("fail_respond/qpn", "16777216", E.ERANGE),
    ("fail_cq_overrun/opcode", "rdma_atomic", E.EINVAL),
    ("fail_cq_overrun/times", "2147483648", E.ERANGE),
    # A flush is what follows a failure, never the failure itself.
    ("fail_wc/status", "wr_flush_err", E.EINVAL),
    # space counts calls: a negative count would never reach 0.
    ("fail_wc/space", "-1", E.ERANGE),
    ("fail_create_cq/space", "2147483648", E.ERANGE),
])
def test_bad_input_is_refused(faults, path, value, err):
    assert ropcie.write_errno(faults / path, value) == err
    assert ropcie.port_active()


# cq_delay_us: long beside a READ's completion under TCG (a few
# milliseconds when its waiter sleeps for it, more on the debug kernel),
# short beside the bed's bounds.
DELAY_US = 100000
LAT_COUNT = 10


def rlat_pair(pool, **kw):
    srv, cli = pool.pair(count=LAT_COUNT, size=64, addr=ADDR, test="rlat",
                         **kw)
    assert run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    for s, role in ((srv, "server"), (cli, "client")):
        assert s.stats() == krping.bench_stats("rlat", role, LAT_COUNT, 64), \
            s.describe()
    lat = krping.session_latency(cli)
    assert lat["samples"] == \
        krping.bench_latency_samples("rlat", "client", LAT_COUNT), lat
    return lat


@pytest.mark.parametrize("poll", [0, 1], ids=["handler", "poll"])
def test_cq_delay_holds_back_every_completion(pool, faults, poll):
    """With cq_delay_us set, no READ of an rlat client completes sooner
    than the delay after it was posted, whether the client waits for its
    completion handler (called when the completion comes due) or polls
    (poll_cq does not see it before); the run's counters are exact. Set
    back to 0, the same run's median is far below the delay again."""
    ropcie.write(faults / "cq_delay_us", DELAY_US)
    assert ropcie.read(faults / "cq_delay_us") == str(DELAY_US)
    lat = rlat_pair(pool, poll=poll)
    assert lat["min_ns"] >= DELAY_US * 1000, lat
    ropcie.write(faults / "cq_delay_us", 0)
    lat = rlat_pair(pool, poll=poll)
    assert lat["p50_ns"] < DELAY_US * 1000 // 2, lat


@pytest.mark.parametrize("test,count", [("ping", COUNT), ("bw", 200)])
def test_cq_delay_loses_no_completion(pool, faults, test, count):
    """Every completion comes 2 ms late: a validated ping (each message
    checked, the data compared) and a bw run (a CQ with a queue depth of
    WRITEs waiting in it) end done with exact counters."""
    ropcie.write(faults / "cq_delay_us", 2000)
    if test == "ping":
        srv, cli = ping_pair(pool, count)
    else:
        srv, cli = pool.pair(count=count, size=SIZE, addr=ADDR, test=test)
    assert run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    for s, role in ((srv, "server"), (cli, "client")):
        assert s.stats() == krping.bench_stats(test, role, count, SIZE), \
            s.describe()


def test_elapsed_ends_with_the_measured_part(pool, faults):
    """progress/elapsed_ns of an ended bw client spans its measured part,
    as bandwidth/duration_ns does (to the last completion, which the
    thread then sees), not the closing exchange after it, which
    cq_delay_us makes last two delays (the server's receive of the FIN,
    then the client's of the answer) and then the server's leaving."""
    delay_us = 500000
    ropcie.write(faults / "cq_delay_us", delay_us)
    srv, cli = pool.pair(count=64, size=SIZE, addr=ADDR, test="bw")
    assert run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    elapsed = krping.session_progress(cli)["elapsed_ns"]
    measured = krping.session_bandwidth(cli)["duration_ns"]
    assert 0 <= elapsed - measured < delay_us * 1000 // 2, \
        f"elapsed {elapsed} ns, measured {measured} ns"


# A stop waits for the drain's completion, and for the flushes behind
# it, each one delay late.
HIDDEN_DELAY_US = 1000000
HIDDEN_STOP_LIMIT = 3 * HIDDEN_DELAY_US / 1e6 + (6.0 if krping.SLOW else 2.0)


def test_cq_delay_teardown_with_completions_hidden(pool, faults):
    """Completions a second late: a bw client stopped mid-run, with
    WRITEs completed but not yet seen, ends within a few delays, its QP
    destroyed with completions still hidden in its CQ; the server ends as
    the peer of a stop; nothing of either is left, and the device serves
    a clean pair afterwards."""
    before = ropcie.kernel_resources()
    ropcie.write(faults / "cq_delay_us", HIDDEN_DELAY_US)
    srv, cli = pool.pair(count=1 << 20, size=SIZE, addr=ADDR, test="bw")
    srv.start()
    srv.expect_state("listening")
    cli.start()
    cli.expect_state("running")
    krping.wait_for(lambda: cli.stat("write_msgs") > 0,
                    what="the first WRITE's completion")
    t0 = time.monotonic()
    cli.stop()
    took = time.monotonic() - t0
    assert cli.state == "stopped", cli.describe()
    assert took <= HIDDEN_STOP_LIMIT, f"the stop took {took:.1f} s"
    assert srv.wait_end(HIDDEN_STOP_LIMIT) in ("done", "failed"), \
        srv.describe()
    ropcie.write(faults / "cq_delay_us", 0)
    for s in (srv, cli):
        s.remove()
    krping.wait_for(lambda: ropcie.kernel_resources() == before,
                    what="ropcie0's kernel resources back to before")
    clean_pair(pool)


def test_faults_are_off_by_default(faults):
    """A new device's knobs read as the kernel's fault attributes'
    defaults, every fault off, whatever the device before it had set."""
    ropcie.arm_fail_wc(faults, opcode="recv", status="general_err")
    ropcie.arm_fail_connect(faults, "reset", port=4420)
    ropcie.write(faults / "cq_delay_us", 100)
    ropcie.arm_fail_respond(faults, opcode="rdma_write", status="rem_op_err",
                            qpn=7)
    ropcie.arm_fail_cq_overrun(faults, opcode="recv", qpn=9)
    assert ropcie.fault_settings(faults) != ropcie.FAULTS_OFF
    teardown_setup()
    ensure_setup()
    assert ropcie.fault_settings(ropcie.fault_dir()) == ropcie.FAULTS_OFF
