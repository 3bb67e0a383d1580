# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""rdma-core's own test suite (Debian's python3-pyverbs ships it in
/usr/share/doc/rdma-core/tests, several files gzipped) on ropcie0, run
as rdma-core runs it (--dev ropcie0) through rdma_core_suite.py, which
reports every test's outcome.

On ropcie no test fails or errs, and every skip gives one of the reasons
below: the suite's traffic tests address their peer by GID (IB and RoCE
only: an iWARP device's GID is its MAC, which the suite takes for an
unset one), and the rest ask for what ropcie does not offer or for
another vendor's device. Over siw (the debug-siw stage) the suite runs
on siw0 too, and every test that passes there passes on ropcie, but for
a draw of create flags (RANDOM_DRAW_SKIP).
"""

import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from lib import krping, ropcie
from lib.ropcie import ensure_setup, teardown_setup

SUITE = "/usr/share/doc/rdma-core/tests"
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "rdma_core_suite.py")
# A QP made with ibv_create_qp_ex() from attributes drawn at random
# (utils.random_qp_init_attr_ex()): a draw of create flags, which neither
# ropcie nor siw takes, skips the test. The draws of two devices part
# whatever the seed, as the first bound drawn is the device's max_qp_wr
# (siw's 102400, ropcie's 4096). A plain RC QP refused is no such skip.
RANDOM_DRAW_SKIP = r"Create RC QP (with|without) extended attrs is not supported"
# rdma-core 44's suite skips these on ropcie (and on siw, which skips the
# same ones and "RC QP without extended attrs" too); a skip for another
# reason fails the test.
EXPECTED_SKIPS = (
    # Traffic tests: their QPs meet by GID, which an iWARP device lacks.
    r"No supported port is up, can't run traffic",
    r"All gid indices populated, cannot check bad flow",
    # Verbs ropcie does not offer (RC is its only QP type; no AH, DM,
    # extended CQs, real-time clock).
    r"Create (UD|UC|Raw Packet) QP (with|without) (extended )?attrs "
    r"is not supported",
    RANDOM_DRAW_SKIP,
    r"Create AH is not supported",
    r"Device memory is not supported",
    r"Create Extended CQ is not supported",
    r"Query device real time is not supported",
    # Other vendors' devices and hardware the guest has not.
    r"Can not run the test over non (MLX5|EFA) device",
    r"Could not open mlx5 context \(This is not an MLX5 device\)",
    r"Allocating dmabuf is not supported by /dev/dri/renderD\d+",
    r"cuda-python .* must be installed to run CUDA tests",
    r"PCI device must be passed by the user",
)
# A suite that stopped early or found no test proves nothing.
MIN_RAN = 200
MIN_PASSED = 20


@pytest.fixture(scope="module")
def suite():
    """A copy of the suite with its gzipped files unpacked."""
    ropcie.require_loaded()
    if not os.path.isfile(os.path.join(SUITE, "run_tests.py")):
        ropcie.missing(f"{SUITE} not installed (package python3-pyverbs)")
    top = tempfile.mkdtemp(prefix="rdma-core-tests-")
    tests = os.path.join(top, "tests")
    shutil.copytree(SUITE, tests)
    for name in os.listdir(tests):
        if name.endswith(".gz"):
            path = os.path.join(tests, name)
            with gzip.open(path, "rb") as src, open(path[:-3], "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.unlink(path)
    ensure_setup()
    yield tests
    teardown_setup()
    shutil.rmtree(top)


# The suite's random draws (rdma_core_suite.py): KRPING_SEED replays a run.
SEED = os.environ.get("KRPING_SEED") or str(random.randrange(1 << 32))


def run_suite(tests, dev):
    """{test id: (outcome, reason)} of the suite on dev."""
    cp = subprocess.run([sys.executable, RUNNER, tests, dev, SEED],
                        capture_output=True, text=True, cwd=tests,
                        timeout=krping.TIMEOUT * 10)
    assert cp.returncode == 0, \
        f"rdma_core_suite.py exited {cp.returncode}: {cp.stderr[-2000:]}"
    out = json.loads(cp.stdout.strip().splitlines()[-1])
    results = {k: tuple(v) for k, v in out["results"].items()}
    assert out["ran"] >= MIN_RAN and len(results) >= out["ran"], \
        f"the suite ran {out['ran']} tests on {dev}"
    return results


def summary(results):
    counts = {}
    for outcome, _ in results.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def test_rdma_core_suite_on_ropcie(suite, topology, capsys):
    """No failure, no error, only expected skips on ropcie0; where siw
    is the test bed's provider (make check's debug-siw), what passes on
    siw0 passes on ropcie0 too."""
    ensure_setup()
    results = run_suite(suite, ropcie.ROPCIE_DEV)
    with capsys.disabled():
        print(f"# rdma-core's suite on {ropcie.ROPCIE_DEV}: "
              f"{summary(results)} (KRPING_SEED={SEED})")
    bad = {k: v for k, v in results.items() if v[0] not in ("ok", "skip")}
    assert not bad, f"failed or erred on ropcie0: {bad}"
    unexpected = {k: v[1] for k, v in results.items() if v[0] == "skip" and
                  not any(re.fullmatch(p, v[1]) for p in EXPECTED_SKIPS)}
    assert not unexpected, f"skipped for a reason not expected: {unexpected}"
    passed = sum(v[0] == "ok" for v in results.values())
    assert passed >= MIN_PASSED, f"only {passed} passed: {summary(results)}"
    if krping.PROVIDER == "siw":
        compare_with_siw(suite, results, capsys)


def compare_with_siw(suite, ours, capsys):
    siw = krping.local_rdma_device(krping.SERVER_ADDR)
    assert siw, f"no RDMA device holds {krping.SERVER_ADDR}"
    base = run_suite(suite, siw)
    drawn = {k for k, v in ours.items() if v[0] == "skip" and
             re.fullmatch(RANDOM_DRAW_SKIP, v[1])}
    lost = {k: ours.get(k) for k, v in base.items()
            if v[0] == "ok" and k not in drawn and
            ours.get(k, ("missing",))[0] != "ok"}
    with capsys.disabled():
        print(f"# rdma-core's suite on {siw}: {summary(base)}")
        for k in sorted(drawn & {k for k, v in base.items() if v[0] == "ok"}):
            print(f"# {k}: passed on {siw}, drew create flags on "
                  f"{ropcie.ROPCIE_DEV}")
    assert not lost, f"pass on {siw}, not on ropcie0: {lost}"
