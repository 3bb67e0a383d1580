# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Tests of scripts/testbed/build.sh, on the host (check.sh's bed stage)

build.sh publishes rdma_krping.ko, ropcie.ko and ropcie_test.ko for the
guests. A make that succeeds without one of them (a Kbuild line lost)
must fail the build and leave no stale copy behind, or the tests that
need the missing module would run an old one or none. The tree here is
a copy of the bed's scripts beside a Kbuild of small real modules.
"""

import os
import shutil
import subprocess

import modules

SCRIPTS = ("build.sh", "lib.sh", "kver")


def fake_repo(tmp_path, names):
    """A repo whose Kbuild builds NAMES (no-op modules), with build.sh."""
    repo = tmp_path / "repo"
    tb = repo / "scripts" / "testbed"
    tb.mkdir(parents=True)
    for s in SCRIPTS:
        shutil.copy2(os.path.join(modules.TB, s), tb / s)
    modules.write_sources(repo, {n: "" for n in names})
    return repo


def build_sh(repo, cache, kver):
    tap = cache / "build.tap"
    cp = subprocess.run([str(repo / "scripts/testbed/build.sh"), "--tap", str(tap), kver],
                        capture_output=True, text=True, timeout=600,
                        env={**os.environ, "KRPING_CACHE": str(cache)})
    return cp, tap.read_text() if tap.exists() else ""


def test_a_build_without_ropcie_fails_and_publishes_nothing(tmp_path):
    kver = modules.release()
    cache = tmp_path / "cache"
    pub = cache / "ko" / kver
    pub.mkdir(parents=True)
    (pub / "ropcie.ko").write_bytes(b"stale")
    (pub / "rdma_krping.ko").write_bytes(b"stale")
    repo = fake_repo(tmp_path, ["rdma_krping"])
    cp, tap = build_sh(repo, cache, kver)
    assert f"not ok 1 build {kver} W=1" in tap, (tap, cp.stderr)
    assert "not built: ropcie.ko ropcie_test.ko" in tap, tap
    assert not (pub / "ropcie.ko").exists()
    assert not (pub / "rdma_krping.ko").exists()
    assert cp.returncode == 1


def test_a_build_of_every_module_publishes_them(tmp_path):
    kver = modules.release()
    cache = tmp_path / "cache"
    repo = fake_repo(tmp_path, ["rdma_krping", "ropcie", "ropcie_test"])
    cp, tap = build_sh(repo, cache, kver)
    assert f"ok 1 build {kver} W=1" in tap.splitlines(), (tap, cp.stderr)
    for m in ("rdma_krping", "ropcie", "ropcie_test"):
        assert (cache / "ko" / kver / f"{m}.ko").stat().st_size > 0, m
    assert cp.returncode == 0


def ccache_hits(cache):
    """Compilations ccache answered from its cache in CACHE's ccache."""
    cp = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True,
                        timeout=60, env={**os.environ, "CCACHE_DIR": str(cache / "ccache")})
    assert cp.returncode == 0, cp.stderr
    stats = dict(line.split("\t", 1) for line in cp.stdout.splitlines() if "\t" in line)
    return int(stats["direct_cache_hit"]) + int(stats["preprocessed_cache_hit"])


def test_a_warning_fails_the_build_again_when_its_object_is_cached(tmp_path):
    """The second build of the same sources comes from ccache, and the
    W=1 warning of the first is replayed and fails it as well."""
    kver = modules.release()
    cache = tmp_path / "cache"
    repo = fake_repo(tmp_path, ["rdma_krping", "ropcie", "ropcie_test"])
    (repo / "ropcie.c").write_text(modules.MODULE_C.format(
        name="ropcie", body="int unused_by_anyone;"))
    for attempt in (1, 2):
        cp, tap = build_sh(repo, cache, kver)
        assert f"not ok 1 build {kver} W=1" in tap, (attempt, tap, cp.stderr)
        assert "1 warning(s)" in tap and "unused_by_anyone" in tap, (attempt, tap)
        assert cp.returncode == 1
        assert not (cache / "ko" / kver / "ropcie.ko").exists()
        if attempt == 1:
            assert ccache_hits(cache) == 0
    assert ccache_hits(cache) >= 3, "the second build was not served by ccache"
