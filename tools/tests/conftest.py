# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Host-side unit tests of tools/krpinglib, the krping command's package
(check.sh's bed stage runs them; no module, root or VM needed).

The package is imported from the tree (tools/, this directory's parent),
whatever PYTHONPATH says. The fixtures make results as the sessions'
results() returns them, without a kernel.
"""

import os
import sys

import pytest

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TOOLS)

from krpinglib.abi import STATS  # noqa: E402


def side(name="c1", role="client", test="wlat", size=64, count=1000,
         state="done", error=0, device="rxe0", host=None, qps=1,
         latency=None, bandwidth=None, iterations=1000, progress=None,
         failed_wr="", wc_status=""):
    """One side's results, as Session.results() returns them."""
    stats = dict.fromkeys(STATS, 0)
    stats["iterations"] = iterations
    return {"name": name, "host": host, "role": role, "test": test,
            "size": size, "count": count, "mem_mode": "reg",
            "options": f"{role},addr=10.0.0.1", "qps": qps,
            "state": state, "error": error, "device": device,
            "failed_wr": failed_wr, "wc_status": wc_status, "stats": stats, "latency": latency, "bandwidth": bandwidth,
            "progress": progress}


# Latency of 1000 samples: 2.237 us smallest .. 9.659 us stdev.
LATENCY = {"samples": 1000, "min_ns": 2237, "max_ns": 3474,
           "mean_ns": 4711, "p50_ns": 5948, "p99_ns": 7185,
           "p999_ns": 8422, "stdev_ns": 9659}
# 327680000 bytes in 1.23456789 s: 253.125 MB/s (MB = 2^20).
BANDWIDTH = {"bytes": 327680000, "duration_ns": 1234567890,
             "mbytes_per_sec": 265, "msgs_per_sec": 4049}


@pytest.fixture
def lat_side():
    return side(latency=dict(LATENCY))


@pytest.fixture
def bw_side():
    return side(test="bw", size=65536, count=5000, qps=2,
                bandwidth=dict(BANDWIDTH))
