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

import pytest

from lib import krping, ropcie
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
    """A SEND fault armed mid-run with qpn set to the server's QP fails a
    SEND of the server's: the server names it, the client's SENDs pass
    (it ends as the peer of a failure)."""
    srv, cli = ping_pair(pool, count=1 << 30)
    srv.start()
    srv.expect_state("listening")
    ropcie.arm_fail_wc(faults, opcode="send", status="rem_op_err",
                       times=0)
    cli.start()
    cli.expect_state("running")
    srv.expect_state("running")
    qpn = ropcie.session_qpn(srv)
    ropcie.arm_fail_wc(faults, opcode="send", status="rem_op_err", qpn=qpn)
    assert srv.wait_end() == "failed"
    assert_failed(srv, E.EIO, ("send", "rem_op_err"))
    assert cli.wait_end() == "failed"
    assert_peer_ended(cli)


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


def test_port_goes_down_and_up(pool, faults):
    """port_err: the port is DOWN and both sides end with -ENETDOWN;
    port_active: ACTIVE again and a pair runs."""
    srv, cli = running_pair(pool)
    ropcie.write(faults / "event", "port_err")
    assert not ropcie.port_active()
    for s in (srv, cli):
        assert s.wait_end() == "failed"
        assert_failed(s, E.ENETDOWN)
    ropcie.write(faults / "event", "port_active")
    assert ropcie.port_active()
    clean_pair(pool)


def test_device_fatal_ends_every_connection(pool, faults):
    srv, cli = running_pair(pool)
    ropcie.write(faults / "event", "device_fatal")
    for s in (srv, cli):
        assert s.wait_end() == "failed"
        assert_failed(s, E.EIO)
    clean_pair(pool)


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
])
def test_bad_input_is_refused(faults, path, value, err):
    assert ropcie.write_errno(faults / path, value) == err
    assert ropcie.port_active()


def test_faults_are_off_by_default(faults):
    """A new device's knobs read as the kernel's fault attributes'
    defaults, every fault off."""
    ropcie.arm_fail_wc(faults, opcode="recv", status="general_err")
    teardown_setup()
    ensure_setup()
    assert ropcie.fault_settings(ropcie.fault_dir()) == ropcie.FAULTS_OFF
