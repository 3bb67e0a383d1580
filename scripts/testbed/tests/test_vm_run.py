# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Tests of scripts/testbed/vm-run, on the host (check.sh's bed stage)

vm-run boots a guest again when it died at boot (TCG's stale int3 now
and then), but a guest that dies while the project's modules load has
found a bug of ours: that is never retried, and the run fails. The
module here is a small real one whose init panics; the guest is
Debian's 6.12 under TCG, as in every stage.
"""

import os
import subprocess

import modules

VM_RUN = os.path.join(modules.TB, "vm-run")


def test_a_death_while_our_module_loads_is_not_booted_again(tmp_path):
    kver = modules.release()
    src = tmp_path / "src"
    modules.write_sources(src, {"bed_panics": 'panic("krping bed: a module that dies at load");'})
    cp = modules.build(src, kver)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    out = tmp_path / "vm"
    cp = subprocess.run([VM_RUN, "--kver", kver, "--no-rdma", "--no-ropcie",
                         "--ko", str(src / "bed_panics.ko"), "--boot-tries", "3",
                         "--out", str(out), "--timeout", "400", "-q", "--", "true"],
                        capture_output=True, text=True, timeout=900)
    assert not (out / "boot-retries").exists(), (out / "boot-retries").read_text()
    console = (out / "console.log").read_text(errors="replace")
    assert "a module that dies at load" in console, cp.stderr[-3000:]
    assert (out / "loading").exists()
    assert "not booted again" in cp.stderr, cp.stderr[-3000:]
    assert cp.returncode == 125


def test_a_missing_ropcie_ko_is_an_error_before_the_boot(tmp_path):
    """build.sh publishes ropcie.ko with rdma_krping.ko: a cache with only
    the second is broken, not a run without ropcie's tests."""
    kver = modules.release()
    cache = tmp_path / "cache"
    (cache / "ko" / kver).mkdir(parents=True)
    (cache / "ko" / kver / "rdma_krping.ko").write_bytes(b"not booted")
    cp = subprocess.run([VM_RUN, "--kver", kver, "--out", str(tmp_path / "vm"),
                         "--timeout", "300", "--", "true"],
                        capture_output=True, text=True, timeout=600,
                        env={**os.environ, "KRPING_CACHE": str(cache)})
    assert f"{cache}/ko/{kver}/ropcie.ko not found" in cp.stderr, cp.stderr[-2000:]
    assert not (tmp_path / "vm" / "console.log").exists()
    assert cp.returncode == 1
