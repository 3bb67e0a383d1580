#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/bench/run.sh [--pair] [BENCH.PY ARGS...]
#                                         (make bench, make bench-pair)
# Build rdma_krping.ko for 6.12, boot one 6.12 test VM (scripts/testbed/
# vm-run: rxe0 on 10.9.0.1) and run scripts/bench/bench.py in it: krping
# (tools/krping pair) and perftest (ib_write_lat, ib_read_lat, ib_write_bw,
# ib_send_lat) on rxe0 with the same sizes and iteration counts, then
# krping over ropcie0 (ropcie.ko, which vm-run loads; bench.py puts it on
# a dummy rp0 with 10.77.0.1) against krping over rxe0 and the guest's
# memcpy bandwidth. Prints one table (size, test, krping, perftest, ratio;
# then size, test, ropcie, rxe, ratio) and writes it to
# $KRPING_RESULTS/bench.txt and bench.json (default results/). Arguments
# go to bench.py, e.g. --reps 2, --scale 0.5, --sizes 64,4096. Last,
# scripts/bench/plot.py draws bench-latency.svg and bench-bandwidth.svg
# beside bench.json (python3-matplotlib, on this host); a plot that cannot
# be drawn is reported but does not fail the bench.
#
# --pair (make bench-pair): two 6.12 guests instead (scripts/testbed/
# vm-pair --provider ropcie: ropcie0 over their PCI link, 10.9.2.x) and
# bench.py --remote in the first: krping over the link against krping
# over rxe0 on their data link (10.9.1.x, which bench.py adds on both),
# each server on the second guest, and the kernel's memcpy bandwidth.
# Output in $KRPING_RESULTS/bench-pair.txt and bench-pair.json.
#
# Then, in the same guests, scripts/bench/uverbs.py: perftest's
# ib_send_lat and ib_send_bw over ropcie0 against the same over rxe0 and
# against krping over ropcie0 (the RoPCIe thesis's table), written to
# $KRPING_RESULTS/NAME-uverbs.txt and NAME-uverbs.json.
# KRPING_BENCH_TABLES picks the tables: krping,uverbs (default), krping
# (bench.py alone) or uverbs; KRPING_UVERBS_ARGS go to uverbs.py (e.g.
# "--sizes 64 --reps 1"). The guests run scripts/bench/guest.sh.
#
# KRPING_BENCH_TABLES=faults (one guest only, not in the default):
# scripts/bench/faults.py, what ropcie's fault injection costs its data
# path while no fault is armed, written to $KRPING_RESULTS/NAME-faults.txt
# and NAME-faults.json; KRPING_FAULTS_ARGS go to faults.py.
#
# KRPING_BENCH_TABLES=ab (one guest only, not in the default):
# scripts/bench/ab.py, whether a change of rdma_krping.ko changed its
# figures: the module built from git revision KRPING_AB_BEFORE (required;
# built into $KRPING_CACHE/ab/<commit>/) against this tree's, loaded in
# turn, written to $KRPING_RESULTS/NAME-ab.txt and NAME-ab.json;
# KRPING_AB_ARGS go to ab.py (e.g. "--reps 30 --tests wlat,bw").
#
# Timing is not a test: make check does not run this. Under QEMU TCG the
# absolute figures mean little; compare the ratios.
#
# Environment: KRPING_RESULTS, KRPING_CACHE, KRPING_BENCH_KVER (6.12),
#   KRPING_BENCH_TIMEOUT (VM timeout, default 2400 s), KRPING_BENCH_SMP
#   (vCPUs of each guest: 2 for make bench, 1 for make bench-pair and
#   for the fault or ab table alone).
set -euo pipefail
# shellcheck source=scripts/testbed/lib.sh
. "$(dirname "$0")/../testbed/lib.sh"

RESULTS=${KRPING_RESULTS:-$REPO_DIR/results}
KVER=${KRPING_BENCH_KVER:-6.12}
name=bench
if [[ ${1:-} == --pair ]]; then
	name=bench-pair
	shift
fi
# One vCPU per guest of the pair: two guests of two vCPUs are four busy
# threads on a two-core host, and then a woken kthread waits milliseconds
# for a core (Documentation/ropcie.rst, Across the PCI link).
smp_default=2
[[ $name == bench-pair ]] && smp_default=1
mkdir -p "$RESULTS"
rm -rf "$RESULTS/vm-$name" "$RESULTS/$name.json" "$RESULTS/$name.txt" \
	"$RESULTS/$name-uverbs.json" "$RESULTS/$name-uverbs.txt" \
	"$RESULTS/$name-faults.json" "$RESULTS/$name-faults.txt" \
	"$RESULTS/$name-ab.json" "$RESULTS/$name-ab.txt"

TABLES=${KRPING_BENCH_TABLES:-krping,uverbs}
want() { [[ ,$TABLES, == *,$1,* ]]; }
# The fault table alone on one vCPU: on two, its runs fall in two modes
# (wlat 64 B about 3.4 and 5 usec) and the medians' ratio in the gap.
[[ $TABLES == faults || $TABLES == ab ]] && smp_default=1
SMP=${KRPING_BENCH_SMP:-$smp_default}
for t in ${TABLES//,/ }; do
	[[ $t == krping || $t == uverbs || $t == faults || $t == ab ]] ||
		tb_die "KRPING_BENCH_TABLES=$TABLES: krping, uverbs, faults, ab, comma-separated"
done
[[ $name == bench ]] || ! want faults ||
	tb_die "KRPING_BENCH_TABLES=faults: one guest (make bench) only"
[[ $name == bench ]] || ! want ab ||
	tb_die "KRPING_BENCH_TABLES=ab: one guest (make bench) only"
ab_args=${KRPING_AB_ARGS:-}

start=$(tb_now)
"$TB_DIR/build.sh" --tap /dev/null "$KVER" >&2
if want ab; then
	# The before module: KRPING_AB_BEFORE's tree, built once per commit.
	[[ -n ${KRPING_AB_BEFORE:-} ]] ||
		tb_die "KRPING_BENCH_TABLES=ab: set KRPING_AB_BEFORE to a git revision"
	rev=$(git -C "$REPO_DIR" rev-parse --verify "$KRPING_AB_BEFORE^{commit}") ||
		tb_die "KRPING_AB_BEFORE=$KRPING_AB_BEFORE: no such commit"
	kver=$(tb_kver "$KVER")
	abdir=$KRPING_CACHE/ab/$rev-$kver
	if [[ ! -f $abdir/rdma_krping.ko ]]; then
		rm -rf "$abdir"
		mkdir -p "$abdir"
		git -C "$REPO_DIR" archive "$rev" | tar -x -C "$abdir"
		make -C "$(tb_kdir "$kver")" M="$abdir" CONFIG_RDMA_KRPING=m \
			-j"$(nproc)" modules >"$abdir.log" 2>&1 ||
			tb_die "building $KRPING_AB_BEFORE failed: $abdir.log"
	fi
	ab_args="--before-ko $abdir/rdma_krping.ko $ab_args"
fi
guest=(scripts/bench/guest.sh one "$TABLES" "${KRPING_UVERBS_ARGS:-}"
	"${KRPING_FAULTS_ARGS:-}" "$ab_args")
# vm-run boots every guest with tsc=reliable: left to the watchdog, the
# guest may read the HPET, an emulated MMIO access of microseconds, on
# every ktime_get_ns() of krping's samples (perftest reads the TSC itself).
rc=0
if [[ $name == bench ]]; then
	"$TB_DIR/vm-run" --kver "$KVER" --smp "$SMP" --out "$RESULTS/vm-$name" \
		--timeout "${KRPING_BENCH_TIMEOUT:-2400}" -- \
		"${guest[@]}" "$@" || rc=$?
	out=$RESULTS/vm-$name
else
	guest[1]=pair
	"$TB_DIR/vm-pair" --provider ropcie --kver "$KVER" --remote-kver "$KVER" \
		--smp "$SMP" --remote-smp "$SMP" \
		--out "$RESULTS/vm-$name" \
		--timeout "${KRPING_BENCH_TIMEOUT:-2400}" -- \
		"${guest[@]}" "$@" || rc=$?
	out=$RESULTS/vm-$name/local
fi
# bench.* -> NAME.*, uverbs.* -> NAME-uverbs.*, faults.* -> NAME-faults.*,
# ab.* -> NAME-ab.*
for f in bench.json bench.txt uverbs.json uverbs.txt faults.json faults.txt \
	ab.json ab.txt; do
	case $f in
	bench.*) to=$name.${f#*.} ;;
	*) to=$name-$f ;;
	esac
	[[ -f $out/$f ]] && cp "$out/$f" "$RESULTS/$to"
done
if want krping && [[ -f $RESULTS/$name.json ]]; then
	tb_log "table: $RESULTS/$name.txt, JSON: $RESULTS/$name.json"
	"$REPO_DIR/scripts/bench/plot.py" "$RESULTS/$name.json" >&2 ||
		tb_log "no plots: scripts/bench/plot.py failed"
elif want krping; then
	tb_log "no results (exit $rc); VM output in $RESULTS/vm-$name"
	((rc)) || rc=1
fi
if want uverbs && [[ -f $RESULTS/$name-uverbs.txt ]]; then
	tb_log "perftest table: $RESULTS/$name-uverbs.txt"
elif want uverbs; then
	tb_log "no perftest table (exit $rc); VM output in $RESULTS/vm-$name"
	((rc)) || rc=1
fi
if want faults && [[ -f $RESULTS/$name-faults.txt ]]; then
	tb_log "fault injection's cost: $RESULTS/$name-faults.txt"
elif want faults; then
	tb_log "no fault cost table (exit $rc); VM output in $RESULTS/vm-$name"
	((rc)) || rc=1
fi
if want ab && [[ -f $RESULTS/$name-ab.txt ]]; then
	tb_log "before and after $KRPING_AB_BEFORE: $RESULTS/$name-ab.txt"
elif want ab; then
	tb_log "no before/after table (exit $rc); VM output in $RESULTS/vm-$name"
	((rc)) || rc=1
fi
tb_log "make $name took $(tb_elapsed "$start") s"
exit "$rc"
