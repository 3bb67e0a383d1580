# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Every file the modules create has its entry in Documentation/ABI, and
every entry names a file they create: a session's configfs directory,
its sysfs results after a benchmark, and the module parameters of
rdma_krping and ropcie. Entries name a session <name> and a PCI device
<dev>; the PCI link's files (ropcie_link/, debugfs link-<dev>/) exist only
where a link is: test_ropcie_link.py checks them. A parameter that only
a kernel with CONFIG_FAULT_INJECTION has (handoff_delay_ms) must exist
on the test bed's debug kernel (KRPING_SLOW), and may be missing
elsewhere.
"""

import os
import re

import pytest

from lib import krping, ropcie
from lib.abi import ABI, documented, entries_under, tree

# Parameters a kernel without CONFIG_FAULT_INJECTION does not create.
FAULT_INJECTION_ONLY = {"/sys/module/rdma_krping/parameters/handoff_delay_ms"}


# A session creates the same files on every kernel.
@pytest.mark.stock_only
def test_session_files_match_their_abi_entries(pool):
    """A session's configfs files at mkdir, and its sysfs files once a
    bw run has ended: exactly the documented ones."""
    s, c = pool.pair(count=20, size=4096, test="bw")
    s.start()
    s.expect_state("listening")
    c.start()
    assert c.wait_end() == "done", c.describe()
    assert s.wait_end() == "done", s.describe()
    for root, prefix in ((krping.CONFIGFS, "/sys/kernel/config/krping/"),
                         (krping.SYSFS, "/sys/kernel/krping/")):
        # The session's directory itself is its parent entry's matter.
        top = f"{prefix}{c.name}/"
        have = {p.replace(str(root), prefix.rstrip("/"), 1)
                for p in tree(f"{root}/{c.name}")} - {top}
        want = entries_under(f"{prefix}<name>/", name=c.name) - {top}
        assert have - want == set(), f"undocumented in {ABI}"
        assert want - have == set(), f"documented in {ABI}, not created"


def test_subsystem_files_match_their_abi_entries():
    """The files at the top of krping's configfs directory (features),
    beside the sessions: exactly the documented ones."""
    prefix = "/sys/kernel/config/krping/"
    have = {f"{prefix}{e.name}" for e in os.scandir(krping.CONFIGFS)
            if not e.is_dir()}
    want = {p for p in entries_under(prefix)
            if "/" not in p[len(prefix):] and p != prefix}
    assert have == want == {f"{prefix}features"}


@pytest.mark.parametrize("module", ["rdma_krping", "ropcie"])
def test_module_parameters_match_their_abi_entries(module):
    base = f"/sys/module/{module}/parameters"
    if module == "ropcie":
        ropcie.require_loaded()
    # A module with no parameter has no parameters/ directory.
    have = {f"{base}/{p}" for p in
            (os.listdir(base) if os.path.isdir(base) else ())}
    want = entries_under(f"{base}/")
    if not krping.SLOW:
        want -= FAULT_INJECTION_ONLY - have
    assert have - want == set(), f"undocumented in {ABI}"
    assert want - have == set(), f"documented in {ABI}, not created"


def test_ropcie_debugfs_files_are_documented():
    """Every file under debugfs ropcie/ (profile; link-<dev>/ where a
    PCI link is) has its entry."""
    ropcie.require_loaded()
    root = "/sys/kernel/debug/ropcie"
    if not os.path.isdir(root):
        krping.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"],
                   check=False)
    assert os.path.isdir(root), f"no {root}"
    have = tree(root) - {f"{root}/"}
    assert f"{root}/profile" in have
    assert [p for p in sorted(have) if not documented(p)] == [], \
        f"undocumented in {ABI}"


def test_abi_entries_are_well_formed():
    """Each file of Documentation/ABI/testing holds What:, Date:,
    KernelVersion:, Contact: and Description: for each entry group."""
    for f in sorted((ABI / "testing").iterdir()):
        text = f.read_text()
        groups = re.split(r"\n\n(?=What:)", text.strip())
        for g in groups:
            if not g.startswith("What:"):
                continue
            for field in ("Date:", "KernelVersion:", "Contact:",
                          "Description:"):
                assert re.search(rf"^{field}", g, re.M), \
                    f"{f.name}: {g.splitlines()[0]} has no {field}"
