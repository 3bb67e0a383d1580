# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""perftest, unmodified, on ropcie0: both sides in user space on one
host, their QPs connected through rdma_cm (-R: ropcie is an iWARP
device), every byte through ropcie's loopback. Each of the five tools
the RoPCIe thesis measured with must end with exit 0 on both sides and
the client's exact iteration count (lib/perftest.py, which also says
which of perftest's own races a run is repeated for). Figures are not
checked: make bench measures.

Needs ropcie.ko loaded and perftest installed.
"""

import os

import pytest

from lib import krping, ropcie
from lib.perftest import Host, run_checked, tap_note
from lib.ropcie import ADDR, ensure_setup, teardown_setup

PROGRAMS = ("ib_send_lat", "ib_send_bw", "ib_write_lat", "ib_write_bw",
            "ib_read_lat")
# Beyond 6.12, READs stand for the five (stock_only, conftest.py): the
# rest post the same work requests through the same paths, and user
# SENDs and WRITEs run on every kernel in test_ropcie_uverbs.py's rping
# tests (the five took 100 s of the debug kernel's time).
REPRESENTATIVES = ("ib_read_lat",)
SIZE = 4096
ITERS = 200


@pytest.fixture(scope="module", autouse=True)
def ropcie_env():
    ropcie.require_loaded()
    missing = [p for p in PROGRAMS if not os.access(f"/usr/bin/{p}", os.X_OK)]
    if missing:
        ropcie.missing(f"{' '.join(missing)} not installed (package perftest)")
    ensure_setup()
    yield
    teardown_setup()


@pytest.mark.parametrize("prog", [
    p if p in REPRESENTATIVES else pytest.param(p, marks=krping.STOCK_ONLY)
    for p in PROGRAMS])
def test_perftest_on_ropcie(started, prog, capsys):
    ensure_setup()
    host = Host(ADDR)
    assert host.device() == ropcie.ROPCIE_DEV and host.rdma_cm
    run_checked(prog, host, host, SIZE, ITERS, started, "ropcie0 loopback",
                say=tap_note(capsys))
