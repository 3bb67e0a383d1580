# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""perftest across two hosts, in both directions: the link the two-host
tests run on carries a peer we did not write (rdma-core's user space and
each host's own provider) with every iteration accounted for.

These runs are the baseline the krping results across the same link are
read against: when perftest fails here too, the fault is in the bed or
the provider, not in krping. Its figures are not checked (TCG's clock
makes them noise, make bench measures), its iteration counts are. How
the two sides meet, and the races of perftest's rdma_cm mode that a run
is repeated for: lib/perftest.py.

Needs a remote host (lib/env.py) with perftest installed.
"""

import pytest

from lib import env
from lib.perftest import Host, run_checked, tap_note
from lib.remote import SshRemote

pytestmark = pytest.mark.two_host

SIZE = 4096
ITERS = 200
# The five the RoPCIe thesis measured with; make check's pair stages each
# pick some (scripts/testbed/check.sh).
PROGRAMS = ("ib_send_lat", "ib_send_bw", "ib_write_lat", "ib_write_bw",
            "ib_read_lat")


@pytest.mark.parametrize("server", ["there", "here"])
@pytest.mark.parametrize("prog", PROGRAMS)
def test_perftest_across_hosts(started, prog, server, capsys):
    topo = env.topology()
    remote = SshRemote(topo.remote_args)
    if remote.cmd(f"command -v {prog}", check=False).returncode:
        pytest.skip(f"{prog} is not on the remote host (package perftest)")
    here, there = Host(topo.local_addr), Host(topo.remote_addr, remote)
    srv_host, cli_host = (there, here) if server == "there" else (here, there)
    run_checked(prog, srv_host, cli_host, SIZE, ITERS, started,
                f"server {server}", say=tap_note(capsys))
