# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""perftest (ib_send_bw and its kin) as a peer we did not write: one
server and its client, here or on a remote host, and what they print.

How the two sides meet: on RoCE and InfiniBand over perftest's own TCP
exchange on the given addresses, each side's QP then brought up with the
RoCE v2 GID of its address (its index found in sysfs). Not with -R:
perftest 4.5's rdma_cm mode makes two connections on one port and
nothing orders the client's second connect after the server's second
listen, so now and then the client is rejected (no listener, reason 8)
and crashes in its retry (linux-rdma/perftest issue 93; seen on this bed
with ib_write_bw served by 6.1 and ib_send_lat by 6.12; perftest fixed
the retry after 4.5-0.17, Debian's, in its commit 3d9d8d0). An iWARP QP
can only be connected through rdma_cm, so there it is -R, and a pair
whose client lost that race (refused()), or over siw whose side lost
the one of perftest's closing handshake (lost_closing()), runs again
(said in the output) up to RACE_TRIES times. The listener waited for is the first one (perftest's
exchange of QP data, with -R over rdma_cm too): the server closes it
once its client is there and listens again for the test's own
connection only after that exchange, which no one outside can watch for.
"""

import subprocess

from lib import krping

# Attempts of an iWARP pair that lost one of perftest's races.
RACE_TRIES = 3
# perftest has no timeout of its own: a side whose peer never comes
# would wait for ever.
TIMEOUT = int(krping.TIMEOUT * 2)

# What siw names its devices' node (SIW_NODE_DESC_COMMON).
SIW_NODE_DESC = "Software iWARP stack"

# What perftest prints when rdma_connect() itself fails with
# ECONNREFUSED (its error_handler(): the message, then strerror(errno)).
CONNECT_REFUSED = ("Failed to connect through RDMA CM.\n"
                   "ERRNO: Connection refused.")


def iterations(text):
    """The #iterations column of perftest's result line, or None."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if "#bytes" in line and "#iterations" in line:
            fields = lines[i + 1].split()
            if len(fields) > 1 and fields[1].isdigit():
                return int(fields[1])
    return None


class Host:
    """Where one perftest side runs: here (remote None) or over ssh
    there, on the RDMA device of the interface that holds addr."""

    def __init__(self, addr, remote=None):
        self.addr = addr
        self.remote = remote
        self._rdma_cm = None

    @property
    def rdma_cm(self):
        """Do this side's QPs meet through rdma_cm (-R)? An iWARP
        device's must: its node type is 4 (RNIC), as for siw and
        ropcie."""
        if self._rdma_cm is None:
            node = self.run(f"cat /sys/class/infiniband/{self.device()}"
                            "/node_type")
            self._rdma_cm = node.split(":")[0].strip() == "4"
        return self._rdma_cm

    def run(self, cmd):
        if self.remote:
            return self.remote.cmd(cmd).stdout
        return krping.run(["sh", "-c", cmd]).stdout

    def popen(self, cmd):
        """cmd in the background, ended by `timeout` whatever happens."""
        cmd = f"timeout {TIMEOUT} {cmd}"
        if self.remote:
            return self.remote.popen(cmd)
        # A session of its own: the `started` fixture kills the group.
        return subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

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

    @property
    def siw(self):
        """Is this side's device siw (its node description)?"""
        desc = self.run(f"cat /sys/class/infiniband/{self.device()}"
                        "/node_desc")
        return desc.strip() == SIW_NODE_DESC

    def args(self):
        """How this side's QP meets its peer (see the module's doc)."""
        if self.rdma_cm:
            return "-R"
        gid = self.gid_index()
        return "" if gid is None else f"-x {gid}"

    def listening(self, port):
        if self.rdma_cm:
            text = self.run("rdma -j resource show cm_id")
            return port in (krping.parse_cm_listeners(text) or set())
        return bool(self.run(f"ss -Hltn 'sport = :{port}'").strip())


def refused(client_out):
    """Was an -R client refused at its second connect, having lost the
    race with its server's second listen (the module's doc)? On RoCE by
    a REJ (reason 8, no listener: RDMA_CM_EVENT_REJECTED; so on ropcie);
    over siw by the server's TCP: siw_connect() opens the TCP connection
    within rdma_connect() (kernel_bindconnect(), blocking), so
    rdma_connect() itself fails with ECONNREFUSED and no event comes
    (CONNECT_REFUSED, then "Failed to handle RDMA CM event. ERRNO:
    Connection refused"). perftest 4.5-0.17 then dies in its retry
    (exit 255 through ssh, a segmentation fault here)."""
    return "RDMA_CM_EVENT_REJECTED" in client_out or \
        CONNECT_REFUSED in client_out


def lost_closing(out, client_out, iters):
    """Did a side fail perftest's closing handshake with every iteration
    done? siw has no receiver-not-ready retry, so a SEND that reaches the
    server before it posted the receive for it ends the connection (siw:
    "Bad wc status 2", then "Failed to close connection between server
    and client"). Seen on two 6.12 guests with siw, for ib_read_lat both
    ways, while another pair of guests shared the host's two cores."""
    return ("Failed to close connection" in out and
            iterations(client_out) == iters)


def tap_note(capsys):
    """A say() for run_checked() that writes a TAP comment line, shown
    whether or not the test fails."""
    def say(line):
        with capsys.disabled():
            print(f"# {line}")
    return say


def run_pair(prog, srv_host, cli_host, args, started, what):
    """One perftest server and its client, with args on both (-p first:
    the port is chosen here, and a server left alone is found by it);
    started collects the processes so that the
    caller's fixture kills what is left. (client rc, client output,
    server rc, server output)."""
    port = krping.next_port()
    args = f"-p {port} {args}"

    srv = srv_host.popen(f"{prog} -d {srv_host.device()} {srv_host.args()} "
                         f"{args}")
    started.append(srv)

    def listening():
        if srv.poll() is not None:
            rc, out = krping.finish(srv, TIMEOUT + 10)
            raise AssertionError(f"{prog} server ({what}) exited {rc} "
                                 f"before listening: {out[-600:]}")
        return srv_host.listening(port)
    krping.wait_for(listening, timeout=krping.SHORT_TIMEOUT, interval=0.2,
                    what=f"{prog} listening on port {port} ({what})")

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


def run_checked(prog, srv_host, cli_host, size, iters, started, what,
                say):
    """run_pair() with -s size -n iters -F, again (up to RACE_TRIES) when
    an rdma_cm pair lost one of perftest's own races, each retry told to
    say(line); asserts that both sides ended with 0 and the client
    reported iters iterations. Returns the client's output."""
    args = f"-s {size} -n {iters} -F"
    # Only siw loses the closing handshake's race: ropcie retries a SEND
    # that finds no receive (receiver not ready) as RoCE does, so there
    # that failure is a bug.
    siw = srv_host.siw or cli_host.siw
    for attempt in range(1, RACE_TRIES + 1):
        crc, cout, src, sout = run_pair(prog, srv_host, cli_host, args,
                                        started, what)
        client_lost = crc and (refused(cout) or (
            siw and lost_closing(cout, cout, iters)))
        server_lost = not crc and src and siw and \
            lost_closing(sout, cout, iters)
        if not (cli_host.rdma_cm and (client_lost or server_lost)):
            break
        # perftest's race, not the link's: again, and say so.
        who, out = ("client", cout) if client_lost else ("server", sout)
        say(f"{prog} ({what}): attempt {attempt}: the {who} lost a race "
            f"with its peer: {out.strip().splitlines()[-1][:120]}")
    assert crc == 0, f"{prog} client ({what}) exited {crc}: {cout[-800:]}"
    assert src == 0, f"{prog} server ({what}) exited {src}: {sout[-800:]}"
    assert iterations(cout) == iters, f"{prog} client ({what}): {cout[-800:]}"
    return cout
