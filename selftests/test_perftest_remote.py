# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""perftest across two hosts, in both directions: the link the two-host
tests run on carries a peer we did not write (rdma-core's user space and
each host's own provider) with every iteration accounted for.

These runs are the baseline the krping results across the same link are
read against: when perftest fails here too, the fault is in the bed or
the provider, not in krping. Its figures are not checked (TCG's clock
makes them noise, make bench measures), its iteration counts are.

How the two sides meet: on RoCE and InfiniBand over perftest's own TCP
exchange on the configured addresses, each side's QP then brought up
with the RoCE v2 GID of its address (its index found in sysfs). Not
with -R: perftest 4.5's rdma_cm mode makes two connections on one port
and nothing orders the client's second connect after the server's
second listen, so now and then the client is rejected (no listener,
reason 8) and crashes in its retry (linux-rdma/perftest issue 93; seen
on this bed with ib_write_bw served by 6.1 and ib_send_lat by 6.12;
perftest fixed the retry after 4.5-0.17, Debian's, in its commit
3d9d8d0). An iWARP QP can only be connected through rdma_cm, so there
it is -R, and a client that lost that race, or the one of perftest's
closing handshake (see raced()), runs again (said in the output) up to
RACE_TRIES times. The listener the test waits for is the first one
(perftest's exchange of QP data, with -R over rdma_cm too): the server
closes it once its client is there and listens again for the test's
own connection only after that exchange, which no one outside can
watch for.

Needs a remote host (lib/env.py) with perftest installed.
"""

import subprocess

import pytest

from lib import env, krping
from lib.perftest import iterations
from lib.remote import SshRemote

pytestmark = pytest.mark.two_host

SIZE = 4096
ITERS = 200
PROGRAMS = ("ib_send_lat", "ib_write_bw", "ib_read_lat")
# Attempts of an iWARP pair whose client lost perftest's connect race.
RACE_TRIES = 3
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
        dev = krping.rdma_device_of(self.addr, self.run)
        assert dev, f"no RDMA device on the interface holding {self.addr}"
        return dev

    def gid_index(self):
        """The index of the RoCE v2 GID that maps self.addr, or None
        (InfiniBand, or an address family perftest picks by itself)."""
        if ":" in self.addr:
            return None
        a, b, c, d = (int(x) for x in self.addr.split("."))
        want = f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"
        port = f"/sys/class/infiniband/{self.device()}/ports/1"
        # One grep over the whole table: a shell loop forks twice per
        # entry, and rxe's table has hundreds.
        out = self.run(f"cd {port} && for f in $(grep -lx {want} gids/*); "
                       f"do echo ${{f#gids/}} $(cat gid_attrs/types/"
                       f"${{f#gids/}}); done 2>/dev/null; true")
        for line in out.splitlines():
            words = line.split(None, 1)
            if len(words) == 2 and words[1].strip() == "RoCE v2":
                return int(words[0])
        return None

    def args(self):
        """How this side's QP meets its peer (see the module's doc)."""
        if krping.IWARP:
            return "-R"
        gid = self.gid_index()
        return "" if gid is None else f"-x {gid}"

    def listening(self, port):
        if krping.IWARP:
            text = self.run("rdma -j resource show cm_id")
            return port in (krping.parse_cm_listeners(text) or set())
        return bool(self.run(f"ss -Hltn 'sport = :{port}'").strip())


@pytest.fixture
def started():
    """The perftest processes of a test, killed if still there after."""
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


# What perftest prints when rdma_connect() itself fails with
# ECONNREFUSED (its error_handler(): the message, then strerror(errno)).
CONNECT_REFUSED = ("Failed to connect through RDMA CM.\n"
                   "ERRNO: Connection refused.")


def raced(client_out):
    """Did an -R client lose a race with its own server (the module's
    doc)? Refused at its second connect: on RoCE by a REJ (reason 8, no
    listener: RDMA_CM_EVENT_REJECTED); on iWARP by the server's TCP,
    and siw_connect() opens the TCP connection within rdma_connect()
    (kernel_bindconnect(), blocking), so rdma_connect() itself fails
    with ECONNREFUSED and no event comes (CONNECT_REFUSED, then "Failed
    to handle RDMA CM event. ERRNO: Connection refused"; 4.5-0.17 then
    dies in its retry, exit 255 through ssh). Or, with every iteration
    done, failed in the closing handshake: iWARP has no
    receiver-not-ready retry, so a SEND that reaches the server before
    it posted the receive for it ends the connection (siw: "Bad wc
    status 2", then "Failed to close connection between server and
    client")."""
    return "RDMA_CM_EVENT_REJECTED" in client_out or \
        CONNECT_REFUSED in client_out or (
            "Failed to close connection" in client_out and
            iterations(client_out) == ITERS)


def server_raced(server_out, client_out):
    """The same race the other way round: the client did every iteration
    and ended well, but its last SEND reached the server before the
    server posted the receive for it, and the server failed the closing
    handshake (siw: "Bad wc status 2", "Failed to close connection").
    Seen on two 6.12 guests with siw, for ib_read_lat both ways, while
    another pair of guests shared the host's two cores."""
    return ("Failed to close connection" in server_out and
            iterations(client_out) == ITERS)


def run_pair(prog, srv_host, cli_host, server, started):
    """One perftest server and its client; (client rc, client output,
    server rc, server output)."""
    port = krping.next_port()
    args = f"-s {SIZE} -n {ITERS} -p {port} -F"

    srv = srv_host.popen(f"{prog} -d {srv_host.device()} {srv_host.args()} "
                         f"{args}")
    started.append(srv)

    def listening():
        if srv.poll() is not None:
            rc, out = krping.finish(srv, TIMEOUT + 10)
            raise AssertionError(f"{prog} server ({server}) exited {rc} "
                                 f"before listening: {out[-600:]}")
        return srv_host.listening(port)
    krping.wait_for(listening, timeout=krping.SHORT_TIMEOUT, interval=0.2,
                    what=f"{prog} listening on port {port} ({server})")

    cli = cli_host.popen(f"{prog} -d {cli_host.device()} {cli_host.args()} "
                         f"{args} {srv_host.addr}")
    started.append(cli)
    crc, cout = krping.finish(cli, TIMEOUT + 10)
    if crc:
        # A server whose client is gone waits for ever: end it now (the
        # bracket keeps the pattern from matching the shell running it).
        srv_host.run(f"pkill -f '[{prog[0]}]{prog[1:]} .*-p {port} ' ; true")
    src, sout = krping.finish(srv, TIMEOUT + 10)
    return crc, cout, src, sout


@pytest.mark.parametrize("server", ["there", "here"])
@pytest.mark.parametrize("prog", PROGRAMS)
def test_perftest_across_hosts(started, prog, server):
    topo = env.topology()
    remote = SshRemote(topo.remote_args)
    if remote.cmd(f"command -v {prog}", check=False).returncode:
        pytest.skip(f"{prog} is not on the remote host (package perftest)")
    here, there = Host(topo.local_addr), Host(topo.remote_addr, remote)
    srv_host, cli_host = (there, here) if server == "there" else (here, there)

    for attempt in range(1, RACE_TRIES + 1):
        crc, cout, src, sout = run_pair(prog, srv_host, cli_host, server,
                                        started)
        client_lost = crc and raced(cout)
        server_lost = not crc and src and server_raced(sout, cout)
        if not (krping.IWARP and (client_lost or server_lost)):
            break
        # perftest's race, not the link's: again, and say so.
        who, out = ("client", cout) if client_lost else ("server", sout)
        print(f"{prog}: attempt {attempt}: the {who} lost a race with "
              f"its peer: {out.strip().splitlines()[-1][:120]}")
    assert crc == 0, f"{prog} client exited {crc}: {cout[-800:]}"
    assert src == 0, f"{prog} server exited {src}: {sout[-800:]}"
    assert iterations(cout) == ITERS, f"{prog} client: {cout[-800:]}"
