# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""What the rdma_krping module exposes: its tests, its states and the
names of its result files (Documentation/ABI/testing/sysfs-kernel-krping).
"""

TESTS = ("ping", "wlat", "rlat", "bw", "fr", "slat", "sbw")
LAT_TESTS = ("ping", "wlat", "rlat", "slat")
TERMINAL = ("done", "failed", "stopped")
STATS = ("send_bytes", "send_msgs", "recv_bytes", "recv_msgs",
         "write_bytes", "write_msgs", "read_bytes", "read_msgs",
         "iterations")
LATENCY = ("samples", "min_ns", "max_ns", "mean_ns", "p50_ns", "p99_ns",
           "p999_ns", "stdev_ns")
BANDWIDTH = ("bytes", "duration_ns", "mbytes_per_sec", "msgs_per_sec")
PROGRESS = ("iterations", "bytes", "samples", "elapsed_ns")
# The first failed work request of a run and its status ("" for none).
FAILED_WC = ("failed_wr", "wc_status")
# Every value of the "state" file.
STATES = ("idle", "resolving", "listening", "connecting", "running",
          "done", "failed", "stopped")

MAX_SIZE = 4194304              # the module's largest "size"
