# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Wire compatibility with rping across two hosts: rping (rdma-core's
user space, the remote host's kernel and rxe) on one side, krping on
the other, in both directions.

Needs a remote host (lib/env.py) with rping (rdmacm-utils) installed.
"""

import pytest

from lib import env, krping, rping
from lib.krping import ping_stats
from lib.remote import SshRemote

pytestmark = pytest.mark.two_host

COUNT = 10
SIZES = [64, 65535]             # rping takes 23..65535


@pytest.fixture
def remote_rping():
    """The remote host, once it is known to have rping."""
    remote = SshRemote(env.topology().remote_args)
    if remote.cmd("command -v rping", check=False).returncode:
        pytest.skip("rping is not installed on the remote host "
                    "(package rdmacm-utils)")
    started = []
    yield remote, started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


def rping_there(remote, started, args, timeout):
    """Start rping on the remote host; it ends by itself after timeout s
    even if this side goes away."""
    p = remote.popen(f"timeout {int(timeout)} rping {args}")
    started.append(p)
    return p


def wait_remote_listener(remote, port, proc):
    def ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"remote rping exited {proc.returncode} "
                                 f"before listening: {out} {err}")
        text = remote.cmd("rdma -j resource show cm_id", check=False).stdout
        return port in (krping.parse_cm_listeners(text) or set())
    krping.wait_for(ready, timeout=krping.SHORT_TIMEOUT, interval=0.2,
                    what=f"rping listening on port {port} there")


@pytest.mark.parametrize("mem_mode", ["reg", "dma"])
@pytest.mark.parametrize("size", SIZES)
def test_krping_client_here_rping_server_there(remote_rping, pool,
                                               size, mem_mode):
    remote, started = remote_rping
    topo = env.topology()
    port = krping.next_port()
    srv = rping_there(remote, started,
                      f"-s -a {topo.remote_addr} -p {port} -C {COUNT} -V "
                      f"-S {size}", krping.TIMEOUT)
    wait_remote_listener(remote, port, srv)
    cli = pool.session("c", role="client", addr=topo.remote_addr,
                       port=port, count=COUNT, size=size, validate=1,
                       mem_mode=mem_mode)
    cli.start()
    end = cli.wait_end()
    rc, out = krping.finish(srv, krping.TIMEOUT)
    assert end == "done", f"{cli.describe()} | rping there: {rc} {out}"
    assert cli.stats() == ping_stats("client", COUNT, size), cli.describe()
    assert rping.exit_ok(rc, out), f"rping there exited {rc}: {out}"


@pytest.mark.parametrize("mem_mode", ["reg", "dma"])
@pytest.mark.parametrize("size", SIZES)
def test_rping_client_there_krping_server_here(remote_rping, pool,
                                               size, mem_mode):
    remote, started = remote_rping
    topo = env.topology()
    port = krping.next_port()
    srv = pool.session("s", role="server", addr=topo.local_addr, port=port,
                       count=COUNT, size=size, mem_mode=mem_mode)
    srv.start()
    srv.expect_state("listening")
    cli = rping_there(remote, started,
                      f"-c -a {topo.local_addr} -p {port} -C {COUNT} -V "
                      f"-S {size}", krping.TIMEOUT)
    rc, out = krping.finish(cli, krping.TIMEOUT + 10)
    end = srv.wait_end()
    assert rping.exit_ok(rc, out), \
        f"rping there exited {rc}: {out} | {srv.describe()}"
    assert end == "done", f"{srv.describe()} | rping there: {out}"
    assert srv.stats() == ping_stats("server", COUNT, size), srv.describe()
