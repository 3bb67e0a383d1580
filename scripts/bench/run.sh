#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/bench/run.sh [BENCH.PY ARGS...]      (make bench)
# Build rdma_krping.ko for 6.12, boot one 6.12 test VM (scripts/testbed/
# vm-run: rxe0 on 10.9.0.1) and run scripts/bench/bench.py in it: krping
# (tools/krping pair) and perftest (ib_write_lat, ib_read_lat, ib_write_bw,
# ib_send_lat) on rxe0 with the same sizes and iteration counts, then
# krping over ropcie0 (ropcie.ko, which vm-run loads; bench.py puts it on
# a dummy rp0 with 10.77.0.1) against krping over rxe0 and the guest's
# memcpy bandwidth. Prints one table (size, test, krping, perftest, ratio;
# then size, test, ropcie, rxe, ratio) and writes it to
# $KRPING_RESULTS/bench.txt and bench.json (default results/). Arguments
# go to bench.py, e.g. --reps 2, --scale 0.5, --sizes 64,4096.
#
# Timing is not a test: make check does not run this. Under QEMU TCG the
# absolute figures mean little; compare the ratios.
#
# Environment: KRPING_RESULTS, KRPING_CACHE, KRPING_BENCH_KVER (6.12),
#   KRPING_BENCH_TIMEOUT (VM timeout, default 1200 s).
set -euo pipefail
# shellcheck source=scripts/testbed/lib.sh
. "$(dirname "$0")/../testbed/lib.sh"

RESULTS=${KRPING_RESULTS:-$REPO_DIR/results}
KVER=${KRPING_BENCH_KVER:-6.12}
mkdir -p "$RESULTS"
rm -rf "$RESULTS/vm-bench" "$RESULTS/bench.json" "$RESULTS/bench.txt"

start=$(tb_now)
"$TB_DIR/build.sh" --tap /dev/null "$KVER" >&2
# tsc=reliable: without it the guest soon distrusts TCG's TSC and reads
# the HPET, an emulated MMIO access of microseconds, on every
# ktime_get_ns() of krping's samples (perftest reads the TSC itself).
# Trusting the TSC from boot moves a static-key flip to where QEMU's TCG
# now and then runs a stale int3 ("Oops: int3" at boot, seen once in 11
# boots); vm-run boots a guest that dies before the benchmark starts again.
# make check leaves the clocksource alone.
rc=0
"$TB_DIR/vm-run" --kver "$KVER" --out "$RESULTS/vm-bench" \
	--append tsc=reliable \
	--timeout "${KRPING_BENCH_TIMEOUT:-1200}" -- \
	sh -c '/usr/bin/python3 selftests/lib/single_host.py up &&
		exec /usr/bin/python3 scripts/bench/bench.py "$@"' sh "$@" || rc=$?
for f in bench.json bench.txt; do
	[[ -f $RESULTS/vm-bench/$f ]] && cp "$RESULTS/vm-bench/$f" "$RESULTS/$f"
done
if [[ -f $RESULTS/bench.json ]]; then
	tb_log "table: $RESULTS/bench.txt, JSON: $RESULTS/bench.json"
else
	tb_log "no results (exit $rc); VM output in $RESULTS/vm-bench"
	((rc)) || rc=1
fi
tb_log "make bench took $(tb_elapsed "$start") s"
exit "$rc"
