# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""perftest across two hosts, in both directions: the link the two-host
tests run on carries a peer we did not write (rdma-core's user space and
each host's own provider) with every iteration accounted for.

These runs are the baseline the krping results across the same link are
read against: when perftest fails here too, the fault is in the bed or
the provider, not in krping. perftest connects through rdma_cm (-R), so
the only addresses it needs are the configured LOCAL_ADDR and
REMOTE_ADDR; its figures are not checked (TCG's clock makes them noise,
make bench measures), its iteration counts are.

Needs a remote host (lib/env.py) with perftest installed.
"""

import json
import subprocess

import pytest

from lib import env, krping
from lib.remote import SshRemote

pytestmark = pytest.mark.two_host

SIZE = 4096
ITERS = 200
PROGRAMS = ("ib_send_lat", "ib_write_bw", "ib_read_lat")
# perftest has no timeout of its own: a side whose peer never comes
# would wait for ever.
TIMEOUT = int(krping.TIMEOUT * 2)


class Host:
    """Where one perftest side runs: here (remote None) or there."""

    def __init__(self, addr, remote=None):
        self.addr = addr
        self.remote = remote

    def run(self, cmd):
        if self.remote:
            return self.remote.cmd(cmd).stdout
        return krping.run(["sh", "-c", cmd]).stdout

    def popen(self, cmd):
        """cmd in the background, ended by `timeout` whatever happens."""
        cmd = f"timeout {TIMEOUT} {cmd}"
        if self.remote:
            return self.remote.popen(cmd)
        return subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def device(self):
        """The RDMA device on the interface holding self.addr."""
        words = self.run(f"ip -o addr show to {self.addr}").split()
        assert len(words) > 1, f"no interface holds {self.addr}"
        for link in json.loads(self.run("rdma -j link show") or "[]"):
            if link.get("netdev") == words[1]:
                return link["ifname"]
        raise AssertionError(f"no RDMA device on {words[1]} ({self.addr})")

    def listening(self, port):
        text = self.run("rdma -j resource show cm_id")
        return port in (krping.parse_cm_listeners(text) or set())


@pytest.fixture
def started():
    """The perftest processes of a test, killed if still there after."""
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def iterations(text):
    """The #iterations column of perftest's result line, or None."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if "#bytes" in line and "#iterations" in line:
            fields = lines[i + 1].split()
            if len(fields) > 1 and fields[1].isdigit():
                return int(fields[1])
    return None


@pytest.mark.parametrize("server", ["there", "here"])
@pytest.mark.parametrize("prog", PROGRAMS)
def test_perftest_across_hosts(started, prog, server):
    topo = env.topology()
    remote = SshRemote(topo.remote_args)
    if remote.cmd(f"command -v {prog}", check=False).returncode:
        pytest.skip(f"{prog} is not on the remote host (package perftest)")
    here, there = Host(topo.local_addr), Host(topo.remote_addr, remote)
    srv_host, cli_host = (there, here) if server == "there" else (here, there)
    port = krping.next_port()
    args = f"-R -s {SIZE} -n {ITERS} -p {port} -F"

    srv = srv_host.popen(f"{prog} -d {srv_host.device()} {args}")
    started.append(srv)

    def listening():
        if srv.poll() is not None:
            rc, out = krping.finish(srv, TIMEOUT + 10)
            raise AssertionError(f"{prog} server ({server}) exited {rc} "
                                 f"before listening: {out[-600:]}")
        return srv_host.listening(port)
    krping.wait_for(listening, timeout=krping.SHORT_TIMEOUT, interval=0.2,
                    what=f"{prog} listening on port {port} ({server})")

    cli = cli_host.popen(f"{prog} -d {cli_host.device()} {args} "
                         f"{srv_host.addr}")
    started.append(cli)
    crc, cout = krping.finish(cli, TIMEOUT + 10)
    src, sout = krping.finish(srv, TIMEOUT + 10)
    assert crc == 0, f"{prog} client exited {crc}: {cout[-800:]}"
    assert src == 0, f"{prog} server exited {src}: {sout[-800:]}"
    assert iterations(cout) == ITERS, f"{prog} client: {cout[-800:]}"
