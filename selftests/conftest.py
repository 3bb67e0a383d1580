# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""
pytest glue for the krping selftests.

- The TAP plugin (lib/tap.py, --tap): kselftest TAP 13 instead of
  pytest's terminal output.
- Fixtures: `pool` (sessions removed after the test, even a failed one),
  an autouse kernel-log watch that fails a test during which, or before
  which since the previous test's check, the kernel logged a
  BUG/WARNING/Oops/... and shows the kernel log of failed tests,
  and an environment check that skips everything with a reason when the
  module is not loaded or we are not root.
- The topology (lib/env.py): one host, or this host and a remote peer
  (REMOTE_TYPE in selftests/krping.config or the environment). Every
  test says where it can run, by marker:
    either     on one host or across two: its pairs follow the topology
               (pool.pair() puts one side on the remote host); across
               two hosts it runs once with each side remote (the
               remote_side parameter);
    two_host   needs the remote host; skipped with the reason on one;
               failed when a remote host is configured but cannot take
               part (unreachable, or krping not loaded there);
    (none)     single-host only: it looks at both sides in this kernel
               (kthreads, dynamic debug lines, rdma resources of both
               sides, module unload); skipped with the reason when a
               remote host is configured.
- On one host, a session fixture builds the topology when it is missing
  (lib/single_host.py: two RDMA devices on a veth pair) and removes what
  it built at the end.
- A per-test watchdog (KRPING_TEST_WATCHDOG seconds, default 300, 900 on
  the debug kernel where KRPING_SLOW=1): every
  wait in the tests is bounded already; this catches the unexpected.
"""

import faulthandler
import os
import signal
import sys

import pytest

from lib import env, krping, ropcie, single_host

# --tap: kselftest TAP instead of pytest's terminal output (lib/tap.py).
pytest_plugins = ["lib.tap"]

WATCHDOG = int(os.environ.get(
    "KRPING_TEST_WATCHDOG",
    "900" if os.environ.get("KRPING_SLOW", "0") == "1" else "300"))


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "destructive: unloads/reloads the module (runs last)")
    config.addinivalue_line(
        "markers", "either: runs on one host or across two (see "
        "lib/env.py); across two, once with each side remote")
    config.addinivalue_line(
        "markers", "two_host: needs a remote host (REMOTE_TYPE)")
    config.addinivalue_line(
        "markers", "not_iwarp: a claim about RoCE (and InfiniBand) that "
        "could not fail on iWARP; not generated (deselected) there")
    config.addinivalue_line(
        "markers", "stock_only: its kernel path is the same on every kernel "
        "and covered on the debug kernel by a representative, KUnit or "
        "another test; only make check's 6.12 stage runs it")


def pytest_generate_tests(metafunc):
    """Across two hosts, an `either` test runs with the server remote
    and with the client remote."""
    if "remote_side" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("either") is None:
        return
    try:
        two_host = env.topology().two_host
    except env.ConfigError:
        return                  # reported by the topology fixture
    if two_host:
        metafunc.parametrize("remote_side", ["server", "client"],
                             ids=lambda s: f"remote-{s}")


def pytest_collection_modifyitems(session, config, items):
    # Over iWARP a not_iwarp test could not fail: deselected, and counted
    # as such, rather than skipped every time.
    if krping.IWARP:
        dropped = [i for i in items if i.get_closest_marker("not_iwarp")]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if i not in dropped]
    # Tests that unload the module run after everything else.
    items.sort(key=lambda item: item.get_closest_marker("destructive") is not None)


# --------------------------------------------------------------------------
# Watchdog

class TestWatchdog(Exception):
    pass


def _alarm(signum, frame):
    raise TestWatchdog(f"test still running after {WATCHDOG}s (watchdog)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, WATCHDOG)
    # If even the signal cannot get through (a task stuck in the kernel),
    # dump every thread's stack and end the run rather than hang forever.
    faulthandler.dump_traceback_later(WATCHDOG + 120, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# --------------------------------------------------------------------------
# Fixtures

def environment_problem():
    """Why the suite cannot run here, or None."""
    if os.geteuid() != 0:
        return "must run as root"
    if not krping.CONFIGFS.is_dir():
        return (f"{krping.CONFIGFS} missing: configfs not mounted or "
                f"{krping.MODULE} not loaded")
    if not krping.SYSFS.is_dir():
        return f"{krping.SYSFS} missing: {krping.MODULE} not loaded"
    return None


@pytest.fixture(autouse=True)
def krping_env():
    reason = environment_problem()
    if reason:
        pytest.skip(reason)


_remote_problem = {}


def remote_problem(remote):
    """Why the remote host cannot take part, or None (checked once)."""
    if "why" not in _remote_problem:
        why = None
        try:
            cp = remote.cmd(f"test -d {krping.CONFIGFS} && "
                            f"test -d {krping.SYSFS}", check=False)
            if cp.returncode:
                why = (f"{krping.CONFIGFS} or {krping.SYSFS} missing on "
                       f"the remote host: configfs not mounted or "
                       f"{krping.MODULE} not loaded there")
        except Exception as e:          # ssh could not reach it
            why = f"remote host unreachable: {e}"
        _remote_problem["why"] = why
    return _remote_problem["why"]


@pytest.fixture(autouse=True)
def topology(request, single_host_topology):
    """Skip, with the reason, a test that cannot run in the configured
    topology; fail every test when the configured remote host is
    unreachable or has no krping; yields the Topology."""
    try:
        topo = env.topology()
    except env.ConfigError as e:
        pytest.fail(f"selftests configuration: {e}", pytrace=False)
    where = ("either" if request.node.get_closest_marker("either") else
             "two_host" if request.node.get_closest_marker("two_host") else
             "single_host")
    if topo.two_host and where == "single_host":
        pytest.skip("single-host test (both sides in this kernel); a "
                    "remote host is configured")
    if not topo.two_host and where == "two_host":
        pytest.skip("needs a remote host: set REMOTE_TYPE, REMOTE_ARGS, "
                    "LOCAL_ADDR and REMOTE_ADDR (selftests/krping.config)")
    if topo.two_host:
        # A remote host the configuration names must take part: one that
        # cannot is a broken test bed or lab, not a test that cannot run.
        from lib import remote
        why = remote_problem(remote.connect(topo))
        if why:
            pytest.fail(f"{why} (REMOTE_TYPE={topo.remote_type} "
                        f"REMOTE_ARGS={topo.remote_args})", pytrace=False)
    single_host_problem(request, topo)
    yield topo


_single_host = {}


@pytest.fixture(autouse=True, scope="session")
def single_host_topology():
    """On one host, build the veth pair and its two RDMA devices when they
    are not there (lib/single_host.py), and remove them at the end.
    Across two hosts the lab (or vm-pair) has set up the link."""
    made = []
    try:
        two_host = env.topology().two_host
    except env.ConfigError:
        two_host = True         # reported by the topology fixture
    if not two_host and environment_problem() is None:
        try:
            made = single_host.ensure(krping.PROVIDER)
        except single_host.SetupError as e:
            _single_host["why"] = e
    yield
    problems = single_host.remove(made)
    if problems:
        print("# removing the single-host topology: " + "; ".join(problems),
              file=sys.stderr)


def single_host_problem(request, topo):
    """Skip (a kernel without the provider) or fail (anything else, or
    anything at all with KRPING_TOPOLOGY_REQUIRED set, as the test bed
    does) a test when the single-host topology could not be built."""
    e = _single_host.get("why")
    if e is None or topo.two_host:
        return
    if e.unsupported and not os.environ.get("KRPING_TOPOLOGY_REQUIRED"):
        pytest.skip(f"no single-host topology: {e}")
    pytest.fail(f"building the single-host topology: {e}", pytrace=False)


@pytest.fixture
def remote_side():
    """Which side pool.pair() puts on the remote host (two hosts only);
    `either` tests get both, see pytest_generate_tests()."""
    return "server"


@pytest.fixture(autouse=True, scope="session")
def kernel_log_session():
    """One reader of the kernel log for the whole session, opened at its
    end of the log: each test's check (kernel_log) goes on where the one
    before stopped, so nothing the kernel logs between two tests (in a
    module fixture's teardown, a late work item) falls between them.
    After the last test's check, the test bed's scan of the whole log
    (vm-run --dmesg-tap) is what sees it."""
    kmsg = krping.Kmsg()
    yield kmsg
    kmsg.close()


@pytest.fixture(autouse=True)
def kernel_log(request, kernel_log_session):
    """Fail the test if the kernel logged a bug while it ran, or since the
    previous test's check (before this test began); keep both logs for
    the failure report."""
    kmsg = kernel_log_session
    before = kmsg.read()
    if before:
        request.node.add_report_section("setup", "kernel log",
                                        "\n".join(before))
    yield kmsg
    lines = kmsg.read()
    if lines:
        request.node.add_report_section("teardown", "kernel log",
                                        "\n".join(lines))
    # Classified as one log (a stack dump may span the two); a line is
    # judged the same whichever lines come after it.
    early = krping.kernel_bug_lines(before)
    during = krping.kernel_bug_lines(before + lines)[len(early):]
    why = []
    if early:
        why.append("kernel logged a bug before the test began (between "
                   "tests: after the previous test's kernel log check):\n" +
                   "\n".join(early))
    if during:
        why.append("kernel logged a bug during the test:\n" +
                   "\n".join(during))
    if why:
        pytest.fail("\n".join(why), pytrace=False)


@pytest.fixture
def pool(remote_side):
    """SessionPool whose sessions are removed after the test; its pairs
    put remote_side on the remote host when there is one."""
    p = krping.SessionPool(remote_side=remote_side)
    yield p
    problems = p.cleanup()
    if problems:
        pytest.fail("cleanup failed: " + "; ".join(problems), pytrace=False)


@pytest.fixture
def profiling():
    """ropcie's profile on and cleared (lib/ropcie.py); the options it
    changed back afterwards."""
    saved = ropcie.profile_on()
    yield
    ropcie.set_params(**saved)


@pytest.fixture
def dyndbg():
    """Enable the module's debug messages if dynamic debug is there, and
    turn them off again after. Yields whether they are on."""
    on = False
    try:
        krping.write_text(krping.DYNDBG, f"module {krping.MODULE} +p")
        on = True
    except OSError:
        pass
    yield on
    if on:
        krping.write_errno(krping.DYNDBG, f"module {krping.MODULE} -p")


@pytest.fixture
def started():
    """The processes a test started in the background (perftest's sides,
    lib/perftest.py), killed if still there after it: with their session
    where they lead one (a local side's shell, timeout and perftest), else
    alone (the ssh of a remote side, whose own timeout ends it there)."""
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            krping.kill_session(p)
            p.wait()
