#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/testbed/check.sh [STAGE...]
# Run the test stages (default: all of make check, overlapping where the
# stage graph below allows) and then the summary:
#   deps       scripts/testbed/deps.sh
#   build      rdma_krping.ko for 6.12 and 6.1, W=1, warnings fail
#                -> build.tap (one test per kernel); siw for 6.12 from
#                Debian's linux-source (build-siw.sh) -> build-siw.tap
#   bed        the test bed's own tools tested on the host: ivshmem-server
#              (scripts/testbed/tests; real QEMU, stopped), and a nested
#              make check-smoke ended by signals (after build: it boots
#              the 6.12 modules)  -> bed.tap; the CLI's package's unit
#              tests (tools/tests)  -> bed-krping-tool.tap
#   selftests  selftests/run_tests.sh in a 6.12 VM  -> selftests-6.12.tap,
#                                                 selftests-6.12-dmesg.tap
#   selftests-6.1  the same in a 6.1 VM        -> selftests-6.1.tap,
#                                                 selftests-6.1-dmesg.tap
#   smoke      (only when named) selftests/smoke_ping.sh in a 6.1 VM
#                                              -> smoke-6.1.tap (+ -dmesg)
#   newest     unstable's newest kernel (newest-kernel.sh: found with apt,
#              unpacked in $KRPING_CACHE/newest, its kbuild tools rebuilt
#              with the host's gcc; cached), the modules and siw built for
#              it (W=1, warnings fail), then selftests/run_tests.sh in a VM
#              of it, as the selftests stage; with KRPING_NEWEST_SIW=1 also
#              the pings, benchmarks and rping over siw -> newest-kernel.tap,
#              newest-build.tap, newest-siw.tap, newest-selftests.tap,
#              newest-selftests-siw.tap (+ the dmesg TAPs)
#   two-host   the suite across two guests (vm-pair: rxe on a virtio-net
#              link, ssh on a second one), Debian's 6.12 (A) and 6.1 (B),
#              one vCPU each: ping with validation (64 B to 1 MiB, READ
#              with invalidate) and every benchmark, each kernel in each
#              role; a power cut, link loss, reordering,
#              a silence, a blip; the CLI's --remote; rping and perftest
#              both ways          -> two-host.tap, two-host-dmesg.tap,
#                                    two-host-remote-dmesg.tap
#   two-host-rxe  (only when named) RoCE across two 6.12 guests (rxe,
#              two vCPUs each): ping at 1 MiB and 4 MiB, READ with
#              invalidate, rping both ways, a power cut under rlat, 5 %
#              loss under rlat  -> two-host-rxe.tap (+ the dmesg TAPs)
#   two-host-siw  iWARP across two 6.12 guests (siw, two vCPUs each):
#              ping at every size and memory mode, every benchmark, rping
#              and perftest both ways -> two-host-siw.tap (+ the dmesg TAPs)
#   two-host-all  (only when named: make check-two-host-all) every test
#              marked either or two_host across two 6.12 guests, 2 vCPUs
#              each                -> two-host-all.tap (+ the dmesg TAPs)
#   two-host-ropcie-debug  (only when named) the PCI link's hostile-input
#              tests, a 6.12 guest against a debug-kernel guest
#                                  -> two-host-ropcie-debug.tap (+ dmesg TAPs)
#   debug-kernel  the debug kernel (debug-kernel.sh: KASAN, lockdep,
#              kmemleak, ...; cached) and the modules built for it, W=1
#                                              -> debug-kernel.tap,
#                                                 debug-kernel-build.tap
#   debug-kunit   (only when named) the KUnit modules alone in a
#              debug-kernel VM (debug-siw loads them too)
#                                              -> debug-kunit.tap (+ -dmesg)
#   debug-rxe  selftests/run_tests.sh on the debug kernel over rxe, but
#              the tests marked stock_only, the sessions' allocation-
#              failure walks and the device-reaching files debug-siw
#              runs (DEBUG_SIW_ONLY), then kmemleak scans and module
#              unload                         -> debug-rxe.tap (+ -dmesg)
#   debug-siw  the KUnit modules, loaded one by one, then the
#              device-reaching files over siw (iWARP), in one VM: each
#              such file runs on the debug kernel over one of the two
#              providers (DEBUG_SIW_ONLY here, the rest in debug-rxe),
#              with the sessions' allocation-failure walks
#              (test_alloc_faults.py), not ropcie's or the module loads'
#              (debug-rxe ran them)
#                               -> debug-siw.tap, debug-siw-kunit.tap
#   kunit      (only when named) scripts/kunit.sh --tap (UML) -> kunit.tap
#   package    package-test.sh (after the one-host stages): the
#              .deb of make deb installed on the host with dpkg, DKMS's
#              modules for each kernel of the build matrix, modprobe
#              rdma_krping from /lib/modules/<kver>/updates and a ping with
#              the packaged /usr/sbin/krping in a 6.12 guest, then dpkg
#              --purge and nothing left   -> package.tap, package-dmesg.tap
#   kcsan      (only when named: make check-kcsan) the KCSAN flavour of
#              the debug kernel (cached), the modules for it, and the
#              files of debug-siw over rxe with test_ropcie.py; then
#              the KCSAN reports sorted (kcsan-reports): one that
#              involves our modules fails  -> kcsan-kernel.tap,
#              kcsan-build.tap, kcsan-selftests.tap, kcsan.tap
# Every stage runs even when one it needs failed; each prints its time,
# and its output lines carry a "[stage] " prefix.
# Results go to $KRPING_RESULTS (default <repo>/results): the TAP files,
# <stage>.rc/.time/.log, check.time (wall clock), and the VM output dirs
# vm-<stage>-<kver>/.
# The last line printed is "N passed, N failed, N skipped" (tap-summary);
# the exit status is 1 when anything failed, a stage exited non-zero
# (a crash, a guest whose setup failed, 4: everything skipped) or a
# stage's pytest runs selected fewer tests than
# scripts/testbed/selected-minimums says.
#
# Environment: KRPING_CACHE, KRPING_RESULTS,
#   KRPING_VM_TIMEOUT (default: selftests/settings timeout= + 300 s),
#   KRPING_KUNIT_TIMEOUT (default 2400 s),
#   KRPING_SELFTESTS_KVER (default 6.12), KRPING_SMOKE_KVER (default 6.1),
#   KRPING_NEWEST_SIW (1: newest also runs over siw),
#   KRPING_BUILD_KVERS (default "6.12 6.1"),
#   KRPING_DEBUG_VM_TIMEOUT (default 2400 s per debug-kernel VM),
#   KRPING_CHECK_JOBS (stages at once, default 2),
#   KRPING_CHECK_LOCK_WAIT (how long to wait for another check on this
#   machine to end, default 2700 s: checks never overlap).
set -euo pipefail
# shellcheck source=scripts/testbed/lib.sh
. "$(dirname "$0")/lib.sh"

# The stages make check runs, in the order a free lane takes the next
# ready one (see NEEDS below); kunit (UML) runs only when asked for, since
# debug-siw runs the same suites on an SMP kernel with the checkers, and
# so does debug-kunit (a guest of its own cost about 200 s more: boot,
# setup and kmemleak's scans). package installs into the host's
# /lib/modules, so it waits for every one-host stage (its NEEDS: they
# load modules by hand), and for every stage that builds or boots a
# debug kernel (package-test.sh hides those from DKMS while it runs); it
# runs last, beside two-host-ropcie. The order
# is the best of every order of the stages after bed in a replay of the
# scheduler with a warm run's stage times, each varied by 15 %: newest
# and two-host early, so that two-host-ropcie (the longest pair stage,
# which follows two-host) runs beside the last one-host stage rather than
# after it.
# The full one-host suite runs on each kernel of the matrix: selftests
# (Debian 12's 6.12), selftests-6.1 (Debian 12's 6.1) and newest
# (unstable's newest kernel, found at run time).
ALL=(deps build debug-kernel bed debug-rxe debug-siw newest two-host
	selftests selftests-6.1 two-host-ropcie two-host-siw package)
KNOWN=("${ALL[@]}" smoke kunit debug-kunit kcsan two-host-rxe two-host-all
	two-host-ropcie-debug)
RESULTS=${KRPING_RESULTS:-$REPO_DIR/results}
SELFTESTS_KVER=${KRPING_SELFTESTS_KVER:-6.12}
SMOKE_KVER=${KRPING_SMOKE_KVER:-6.1}
read -r -a BUILD_KVERS <<<"${KRPING_BUILD_KVERS:-6.12 6.1}"

stages=("$@")
((${#stages[@]})) || stages=("${ALL[@]}")
for s in "${stages[@]}"; do
	[[ " ${KNOWN[*]} " == *" $s "* ]] || tb_die "unknown stage $s (stages: ${KNOWN[*]})"
done

# One check at a time on a machine: the stages assume the cores are
# theirs (KRPING_CHECK_JOBS at once), and a second check beside them
# halves what each guest gets, which the guests' timers and the tests'
# bounds were not measured for. A second check waits for the first, at
# most KRPING_CHECK_LOCK_WAIT seconds (default 2700), then fails. The
# lock is on an open file that every stage and guest inherits, so it
# lasts as long as any of them runs.
mkdir -p "$KRPING_CACHE"
lock_wait=${KRPING_CHECK_LOCK_WAIT:-2700}
[[ $lock_wait =~ ^[0-9]+$ ]] || tb_die "KRPING_CHECK_LOCK_WAIT must be a number of seconds"
exec {check_lock}>>"$KRPING_CACHE/check.lock"
if ! flock -n "$check_lock"; then
	tb_log "another check runs on this machine ($(cat "$KRPING_CACHE/check.owner" 2>/dev/null || echo unknown)); waiting up to ${lock_wait}s"
	flock -w "$lock_wait" "$check_lock" ||
		tb_die "another check still holds $KRPING_CACHE/check.lock after ${lock_wait}s"
fi
echo "pid $$, $REPO_DIR, since $(date -u '+%F %T UTC')" >"$KRPING_CACHE/check.owner"

if (($# == 0)); then
	rm -rf "$RESULTS"
else
	for s in "${stages[@]}"; do rm -rf "$RESULTS/$s".* "$RESULTS/$s"-* "$RESULTS/vm-$s-"*; done
fi
mkdir -p "$RESULTS"

# skip_tap FILE NAME REASON: a stage that cannot run is a skip, not a pass.
skip_tap() {
	printf 'TAP version 13\n1..1\nok 1 %s # SKIP %s\n' "$2" "$3" >"$1"
	tb_log "SKIP $2: $3"
}

stage_deps() { "$TB_DIR/deps.sh"; }

# siw for the kernels whose iWARP stage needs it (Debian's images have
# none): built from that kernel's source, beside the modules.
SIW_KVERS=(6.12)
stage_build() {
	local rc=0
	"$TB_DIR/build.sh" --tap "$RESULTS/build.tap" "${BUILD_KVERS[@]}" || rc=1
	"$TB_DIR/build-siw.sh" --tap "$RESULTS/build-siw.tap" "${SIW_KVERS[@]}" || rc=1
	return "$rc"
}

stage_kunit() {
	if [[ ! -f $REPO_DIR/scripts/kunit.sh ]]; then
		skip_tap "$RESULTS/kunit.tap" kunit "scripts/kunit.sh not present"
		return 0
	fi
	# A hung UML must not eat CI's 90 minutes.
	timeout -k 30 "${KRPING_KUNIT_TIMEOUT:-2400}" \
		bash "$REPO_DIR/scripts/kunit.sh" --tap "$RESULTS/kunit.tap"
}

# vm_timeout SCRIPT: $KRPING_VM_TIMEOUT, else the kselftest "timeout=" of
# the script's settings file plus time to boot, else 900 s.
vm_timeout() {
	local t settings
	settings=$REPO_DIR/$(dirname "$1")/settings
	if [[ -n ${KRPING_VM_TIMEOUT:-} ]]; then
		echo "$KRPING_VM_TIMEOUT"
	elif t=$(sed -n 's/^timeout=\([0-9][0-9]*\)$/\1/p' "$settings" 2>/dev/null) && [[ -n $t ]]; then
		echo $((t + 300))
	else
		echo 900
	fi
}

# vm_stage STAGE SERIES [--env NAME=VALUE]... SCRIPT [ARG...]: run SCRIPT
# (kselftest TAP on stdout) in a VM, with the environment given.
vm_stage() {
	local stage=$1 series=$2 script kver envs=()
	shift 2
	while [[ $1 == --env ]]; do
		envs+=("$1" "$2")
		shift 2
	done
	script=$1
	shift
	if ! kver=$(tb_kver "$series"); then
		skip_tap "$RESULTS/$stage-$series.tap" "$stage-$series" "kernel $series not installed"
		return 1
	fi
	if [[ ! -f $REPO_DIR/$script ]]; then
		skip_tap "$RESULTS/$stage-$series.tap" "$stage-$series" "$script not present"
		return 0
	fi
	if [[ ! -f $KRPING_CACHE/ko/$kver/rdma_krping.ko ]]; then
		# The build stage has already counted this as a failure.
		skip_tap "$RESULTS/$stage-$series.tap" "$stage-$series" "rdma_krping.ko for $kver not built"
		return 0
	fi
	"$TB_DIR/vm-run" --kver "$kver" --out "$RESULTS/vm-$stage-$series" "${envs[@]}" \
		--timeout "$(vm_timeout "$script")" --dmesg-tap "$RESULTS/$stage-$series-dmesg.tap" -- "$script" "$@" |
		tee "$RESULTS/$stage-$series.tap"
}

# One host: the tests that need a remote one are deselected (the pair
# stages run them), not reported as skips.
# The bed's own tools, then the unit tests of the CLI's package
# (tools/tests, bed-krping-tool.tap), on the host; pytest through the
# selftests' TAP plugin (selftests/lib/tap.py), without a cache in the
# tree. The second runs whatever the first's outcome; either failing
# fails the stage.
stage_bed() {
	local rc=0
	(cd "$TB_DIR/tests" && PYTHONPATH=$REPO_DIR/selftests /usr/bin/python3 -m pytest \
		-p lib.tap -p no:cacheprovider --tap .) | tee "$RESULTS/bed.tap" || rc=$?
	(cd "$REPO_DIR/tools/tests" && PYTHONPATH=$REPO_DIR/selftests /usr/bin/python3 -m pytest \
		-p lib.tap -p no:cacheprovider --tap .) | tee "$RESULTS/bed-krping-tool.tap" || rc=$?
	return "$rc"
}

ONE_HOST=(-m "not two_host")
stage_selftests() { vm_stage selftests "$SELFTESTS_KVER" selftests/run_tests.sh "${ONE_HOST[@]}"; }
# The other kernels leave out, as the debug kernel does, the tests whose
# kernel path is the same on every kernel (stock_only, conftest.py: the
# option parser's value tables, the CLI's own logic, the sizes and modes
# beyond a representative each); 6.12 runs them.
# test_random_ops.py takes 600 steps there instead of 2000: the configfs
# paths it walks are each kernel's, the mix of operations our own.
OTHER_KERNEL=(-m "not stock_only and not two_host")
OTHER_KERNEL_ENV=(--env KRPING_RANDOM_STEPS=600)
# Debian 12's other kernel (its files selftests-6.1*).
stage_selftests-6.1() {
	vm_stage selftests 6.1 "${OTHER_KERNEL_ENV[@]}" selftests/run_tests.sh "${OTHER_KERNEL[@]}"
}

# pair_stage STAGE LOCAL-SERIES REMOTE-SERIES VM-PAIR-ARGS... -- TESTS...:
# the selftests marked either or two_host, across two guests.
pair_stage() {
	local stage=$1 a=$2 b=$3 akver bkver k pair_args=()
	shift 3
	while (($#)) && [[ $1 != -- ]]; do pair_args+=("$1"); shift; done
	shift
	for k in "$a" "$b"; do
		if ! k=$(tb_kver "$k") || [[ ! -f $KRPING_CACHE/ko/$k/rdma_krping.ko ]]; then
			# The build stage has already counted this as a failure.
			skip_tap "$RESULTS/$stage.tap" "$stage" "no kernel $k with rdma_krping.ko built"
			return 0
		fi
	done
	akver=$(tb_kver "$a") bkver=$(tb_kver "$b")
	"$TB_DIR/vm-pair" --kver "$akver" --remote-kver "$bkver" "${pair_args[@]}" \
		--out "$RESULTS/vm-$stage" --timeout "$(vm_timeout selftests/run_tests.sh)" \
		--dmesg-tap "$RESULTS/$stage-dmesg.tap" \
		--remote-dmesg-tap "$RESULTS/$stage-remote-dmesg.tap" -- \
		selftests/run_tests.sh -m "either or two_host" "$@" | tee "$RESULTS/$stage.tap"
}
# Across two hosts: two kernels (6.12 here, 6.1 there)
# and one vCPU each, as a user's small VMs. The either tests run with the
# remote side as server and as client, so each kernel serves and
# connects: ping at 64 B and 64 KiB each way and 1 MiB (1024 RoCE
# packets a message) with the server there, both memory modes, with
# validation, READ with invalidate, every
# benchmark with exact counters, wlat against rlat; then one power
# cut per role, loss, reordering, a short and a long silence, a carrier
# blip, the CLI's --remote (JSON and the remote side's --histogram; Ctrl-C;
# a wait that starts no program there; re-runs that end at once, seen
# by both remote sessions),
# rping there against krping here both ways and
# ib_write_bw both ways. (The PCI link between the two kernels is
# two-host-ropcie's.) The rest of the two-host tests (the same faults
# for every test type and both roles) is two-host-all; RoCE between two
# 6.12 guests with two vCPUs each is two-host-rxe.
TWO_HOST_K="(test_ping and not lkey and not variants and not validate and not server_inv"
TWO_HOST_K+=" and not concurrent and (64-reg or 65536-dma or remote-server-1048576-dma))"
TWO_HOST_K+=" or (test_ping_read_inv and 65536)"
TWO_HOST_K+=" or (test_bench_completes and reg and not ping)"
TWO_HOST_K+=" or (starve and (remote-server-0 or remote-client-1))"
TWO_HOST_K+=" or mid_run[ping-remote-server] or mid_run[bw-remote-client]"
TWO_HOST_K+=" or loss1-ping or reorder-bw or survived[ping] or silence_for_good"
TWO_HOST_K+=" or fails_cleanly[blip-there] or fails_cleanly[for_good-there]"
TWO_HOST_K+=" or interrupt_removes_both_sides[remote-client]"
TWO_HOST_K+=" or remote_histogram[remote-client] or remote_wait_starts_no_program"
TWO_HOST_K+=" or rerun_that_ends_at_once"
TWO_HOST_K+=" or unreachable or (test_rping_remote and 65535-reg)"
TWO_HOST_K+=" or ib_write_bw or test_bench_timed"
TWO_HOST_K+=" or (test_qps_exact and (remote-server-bw or remote-client-rlat))"
TWO_HOST_K+=" or test_qps_max[remote-client]"
stage_two-host() {
	pair_stage two-host 6.12 6.1 --provider rxe --smp 1 --remote-smp 1 -- \
		test_ping.py test_bench.py test_two_hosts.py test_link_faults.py \
		test_cli_remote.py test_rping_remote.py test_perftest_remote.py \
		test_qps.py -k "$TWO_HOST_K"
}
# RoPCIe across two hosts: ropcie0 on each of a 6.12 and a 6.1 guest (one
# vCPU each), its bytes over the PCI link (ivshmem) between them, vm-pair
# --provider ropcie. Ping at 1 B, 64 KiB, 1 MiB and 4 MiB (both memory
# modes among them) across the two, with validation, every benchmark with exact
# counters, two pairs at once, each kernel in each role; a power cut under
# a ping; and the PCI link and ropcie's link over it: up, the peer's
# rmmod (idle and under a live ping), garbage in the header (one field
# for each verdict the other host can reach: a peer that left, a header
# not ours, a restart; two-host-ropcie-debug scribbles every field), the
# ring indices, and each descriptor and CM message class the other host
# checks, and a bw with the profile on both hosts (test_pci_link.py,
# test_ropcie_link.py); NVMe-oF, the target
# there and the host here (test_ulp_remote.py); user space: rdma-core's
# rping on one host against krping on the other, both ways, at 64 KiB
# (test_rping_remote.py); perftest's five tools, unmodified, each once
# (test_perftest_remote.py: 6.1 serves send_lat and write_lat, 6.12
# serves write_bw and read_lat; send_bw, with 6.1 serving, is
# test_ropcie_link.py's test_sends_the_credit_covers_fly_together).
# A producer index that jumps within its ring: four of its eight cases,
# every pair of ring, what lies behind and doorbell among them; a
# consumer index behind, or out of its ring under served WRITEs: two of
# four, each ring and each index or doorbell once; a second READ of a
# connection: the empty one; a fault in one connection: the malformed
# request and response (a response of a type the ring does not carry is
# the latter's kind); an injected descriptor: three of four.
# two-host-ropcie-debug runs them all.
TWO_HOST_ROPCIE_K="(test_ping and not lkey and not variants and not inv and not validate"
TWO_HOST_ROPCIE_K+=" and (1-reg or 65536-dma or 1048576-reg or (max_size and dma)))"
TWO_HOST_ROPCIE_K+=" or (test_bench_completes and reg) or concurrent"
TWO_HOST_ROPCIE_K+=" or mid_run[ping-remote-server]"
TWO_HOST_ROPCIE_K+=" or test_pci_link or (test_ropcie_link and not power_cut and not fragment"
TWO_HOST_ROPCIE_K+=" and not cm-short and not recovers[version] and not recovers[nslots]"
TWO_HOST_ROPCIE_K+=" and not epoch-zero and not ring[req-zeroed-rung] and not ring[req-well-formed-quiet]"
TWO_HOST_ROPCIE_K+=" and not ring[rsp-zeroed-quiet] and not ring[rsp-well-formed-rung]"
TWO_HOST_ROPCIE_K+=" and not it[1MiB] and not only_it[order] and not ping[rsp-type]"
TWO_HOST_ROPCIE_K+=" and not writes[prod-rsp] and not writes[cons]"
TWO_HOST_ROPCIE_K+=" and not ring[rsp-quiet] and not ring[req-rung]) or nvmeof"
TWO_HOST_ROPCIE_K+=" or (test_qps_exact and (remote-client-bw or remote-server-slat))"
TWO_HOST_ROPCIE_K+=" or (test_rping_remote and 65535-reg)"
TWO_HOST_ROPCIE_K+=" or ib_send_lat-there or ib_write_lat-there"
TWO_HOST_ROPCIE_K+=" or ib_write_bw-here or ib_read_lat-here"
stage_two-host-ropcie() {
	pair_stage two-host-ropcie 6.12 6.1 --provider ropcie --smp 1 --remote-smp 1 -- \
		test_ping.py test_bench.py test_two_hosts.py test_pci_link.py \
		test_ropcie_link.py test_ulp_remote.py test_qps.py test_rping_remote.py \
		test_perftest_remote.py -k "$TWO_HOST_ROPCIE_K"
}
# RoCE between two 6.12 guests with two vCPUs each (the cross-kernel
# stage above has one), not part of make check since 2026-11-27 (its
# pings at 1 MiB and READ with invalidate went to the cross-kernel
# stage, whose rxe is the same; budget): test_ping at 1 MiB and 4 MiB
# (many packets per message), READ with invalidate, with validation;
# rping both ways (each side in each role); the other sizes, every
# benchmark's counters and perftest (ib_write_bw) are the cross-kernel
# stage's;
# then a power cut under rlat (the cross-kernel stage cuts ping and bw;
# a READ's requester waits for its response, not for an ACK) and 5 %
# loss under rlat, whose lost READ responses rxe must ask for again. No carrier loss here: on 6.12 it
# takes rxe into its failing error path (see testing.rst "The crash
# that kept it out of make check"); the cross-kernel stage takes 6.1's.
TWO_HOST_RXE_K="(test_ping and not lkey and not variants and not validate and not server_inv"
TWO_HOST_RXE_K+=" and not concurrent and (1048576-dma or (max_size and reg) or read_inv))"
TWO_HOST_RXE_K+=" or (test_rping_remote and 65535-reg)"
TWO_HOST_RXE_K+=" or mid_run[rlat-remote-client] or loss5-rlat"
stage_two-host-rxe() {
	pair_stage two-host-rxe 6.12 6.12 --provider rxe -- \
		test_ping.py test_bench.py test_rping_remote.py test_perftest_remote.py \
		test_two_hosts.py test_link_faults.py -k "$TWO_HOST_RXE_K"
}
# iWARP across two hosts: siw between two 6.12 guests with two vCPUs
# each (the rxe stage has one). The two kernels are the same, so each
# case runs once, the remote host serving half of them: test_ping at 1 B,
# 64 KiB and 1 MiB (both memory modes among them) with and without
# validation, READ with invalidate, the largest size siw refuses, every
# benchmark with exact counters (ping, rlat, bw and slat with the server
# there, wlat, fr and sbw with the client there), rping both ways
# (krping as the client and as the server), ib_write_bw and
# ib_read_lat (perftest's server here for one, there for the other).
# (The option
# variants are krping's own logic: the single host runs them over siw.) Of
# the faults only a slow link, under which the server's last go-ahead
# rides with its FIN (siw patch 0008); a lost peer is rxe's stage: on
# iWARP it is TCP's to notice (minutes of retransmission).
TWO_HOST_SIW_K="(test_ping and not lkey and not concurrent and not variants and not server_inv"
TWO_HOST_SIW_K+=" and ((remote-server and (1-reg or 1048576-dma or read_inv[remote-server-64]"
TWO_HOST_SIW_K+=" or max_size[remote-server-reg] or without_validate))"
TWO_HOST_SIW_K+=" or (remote-client and (65536-reg or read_inv[remote-client-65536]"
TWO_HOST_SIW_K+=" or max_size[remote-client-dma]))))"
TWO_HOST_SIW_K+=" or (test_bench_completes and reg and"
TWO_HOST_SIW_K+=" (remote-server-ping or remote-server-rlat or remote-server-bw"
TWO_HOST_SIW_K+=" or remote-server-slat or remote-client-wlat or remote-client-fr"
TWO_HOST_SIW_K+=" or remote-client-sbw))"
TWO_HOST_SIW_K+=" or (test_rping_remote and 65535-reg)"
TWO_HOST_SIW_K+=" or ib_write_bw-there or ib_read_lat-here"
TWO_HOST_SIW_K+=" or (test_qps_exact and (remote-server-sbw or remote-client-wlat))"
TWO_HOST_SIW_K+=" or test_last_message_with_the_fin"
stage_two-host-siw() {
	pair_stage two-host-siw 6.12 6.12 --provider siw -- \
		test_ping.py test_bench.py test_rping_remote.py test_perftest_remote.py \
		test_qps.py test_link_faults.py -k "$TWO_HOST_SIW_K"
}
# Every test marked either or two_host, across two 6.12 guests.
stage_two-host-all() { pair_stage two-host-all 6.12 6.12 --provider rxe --; }
# The PCI link's hostile-input tests with the debug kernel (KASAN, lockdep,
# kmemleak) as their victim: Debian's 6.12 here scribbles into the link
# header, runs the ring indices away and injects malformed descriptors and
# CM messages, with and without live connections, and removes ropcie under
# a live ping; the remote access cases run both ways; two pings. The debug
# guest's log and its kmemleak scan are checked after its stop. Not part
# of make check: 22 minutes (a dev run of the same selection, then of 32
# tests, without the access cases, with another pair beside it part of
# the time).
TWO_HOST_ROPCIE_DEBUG_K="(test_ping and not lkey and not variants and not inv"
TWO_HOST_ROPCIE_DEBUG_K+=" and not validate and not concurrent and (1-reg or 65536-dma))"
TWO_HOST_ROPCIE_DEBUG_K+=" or test_pci_link or (test_ropcie_link and not power_cut)"
stage_two-host-ropcie-debug() {
	local rel
	rel=$(nice -n 10 "$TB_DIR/debug-kernel.sh") || return 1
	"$TB_DIR/build.sh" --tap "$RESULTS/two-host-ropcie-debug-build.tap" 6.12 "$rel" ||
		return 1
	pair_stage two-host-ropcie-debug 6.12 "$rel" --provider ropcie --smp 1 --remote-smp 2 -- \
		test_ping.py test_pci_link.py test_ropcie_link.py -k "$TWO_HOST_ROPCIE_DEBUG_K"
}
stage_smoke() { vm_stage smoke "$SMOKE_KVER" selftests/smoke_ping.sh; }
# Unstable's newest kernel, found at run time: prepared (cached), the
# modules built for it, the selftests stage's suite on it; with
# KRPING_NEWEST_SIW=1 also siw built for it and the files that reach the
# device through krping's data path over siw.
stage_newest() {
	local rel start rc=0
	start=$(tb_now)
	if ! rel=$(nice -n 10 "$TB_DIR/newest-kernel.sh"); then
		printf 'TAP version 13\n1..1\nnot ok 1 newest kernel of unstable\n' >"$RESULTS/newest-kernel.tap"
		return 1
	fi
	printf 'TAP version 13\n1..1\nok 1 newest kernel of unstable: %s, ready in %s s\n' \
		"$rel" "$(tb_elapsed "$start")" >"$RESULTS/newest-kernel.tap"
	"$TB_DIR/build.sh" --tap "$RESULTS/newest-build.tap" "$rel" || return 1
	"$TB_DIR/vm-run" --kver "$rel" --out "$RESULTS/vm-newest" "${OTHER_KERNEL_ENV[@]}" \
		--timeout "$(vm_timeout selftests/run_tests.sh)" \
		--dmesg-tap "$RESULTS/newest-selftests-dmesg.tap" -- \
		selftests/run_tests.sh "${OTHER_KERNEL[@]}" |
		tee "$RESULTS/newest-selftests.tap" || rc=1
	# Over siw (its image has none: build-siw.sh's) only when asked for
	# (KRPING_NEWEST_SIW=1): make check's budget has no room for it yet.
	[[ ${KRPING_NEWEST_SIW:-0} == 1 ]] || return "$rc"
	"$TB_DIR/build-siw.sh" --tap "$RESULTS/newest-siw.tap" "$rel" || return 1
	"$TB_DIR/vm-run" --kver "$rel" --provider siw --out "$RESULTS/vm-newest-siw" \
		--timeout "$(vm_timeout selftests/run_tests.sh)" \
		--dmesg-tap "$RESULTS/newest-selftests-siw-dmesg.tap" -- \
		selftests/run_tests.sh "${ONE_HOST[@]}" test_ping.py test_bench.py test_rping.py |
		tee "$RESULTS/newest-selftests-siw.tap" || rc=1
	return "$rc"
}
# The Debian package from make deb to dpkg --purge, on this host and in a
# 6.12 guest (package-test.sh). It installs into the host's /usr and
# /lib/modules for its few minutes, and purges whatever happens.
stage_package() {
	"$TB_DIR/package-test.sh" --tap "$RESULTS/package.tap" --out "$RESULTS/vm-package"
}

stage_debug-kernel() {
	local rel start
	start=$(tb_now)
	# Niced: the VM stages beside it are timing-sensitive, the build not.
	if ! rel=$(nice -n 10 "$TB_DIR/debug-kernel.sh"); then
		printf 'TAP version 13\n1..1\nnot ok 1 debug kernel build\n' >"$RESULTS/debug-kernel.tap"
		return 1
	fi
	printf 'TAP version 13\n1..1\nok 1 debug kernel %s ready in %s s\n' \
		"$rel" "$(tb_elapsed "$start")" >"$RESULTS/debug-kernel.tap"
	"$TB_DIR/build.sh" --tap "$RESULTS/debug-kernel-build.tap" "$rel"
}

# debug_vm STAGE VM-RUN-ARGS... -- COMMAND: COMMAND in a debug-kernel VM.
debug_vm() {
	local stage=$1 rel
	shift
	if ! rel=$("$TB_DIR/debug-kernel.sh" --release 2>/dev/null) ||
		[[ ! -f $KRPING_CACHE/ko/$rel/rdma_krping.ko ]]; then
		# The debug-kernel stage has already counted this as a failure.
		skip_tap "$RESULTS/$stage.tap" "$stage" "no debug kernel or modules (see stage debug-kernel)"
		return 0
	fi
	"$TB_DIR/vm-run" --kver "$rel" --out "$RESULTS/vm-$stage" \
		--timeout "${KRPING_DEBUG_VM_TIMEOUT:-2400}" \
		--dmesg-tap "$RESULTS/$stage-dmesg.tap" "$@" | tee "$RESULTS/$stage.tap"
}

# The KUnit modules in a debug-kernel guest: guest-kunit loads them there
# one by one and keeps each one's kernel log in the guest's output dir,
# kunit_tap makes TAP of the logs on the host afterwards.
# guest_kunit_argv STAGE: guest-kunit's command line in KUNIT_ARGV (its
# logs in the guest's KRPING_OUT), the debug kernel's release in
# KUNIT_REL (none if it is not built); clears the logs of an earlier run.
guest_kunit_argv() {
	KUNIT_REL=$("$TB_DIR/debug-kernel.sh" --release 2>/dev/null) || KUNIT_REL=none
	rm -rf "$RESULTS/vm-$1/kunit"
	KUNIT_ARGV=("$TB_DIR/guest-kunit" "$KRPING_CACHE/ko/$KUNIT_REL/kunit")
}
# kunit_tap STAGE: the TAP of its guest's logs on stdout (exit status 1 on
# a failure); nothing when debug_vm skipped the stage.
kunit_tap() {
	[[ -f $KRPING_CACHE/ko/$KUNIT_REL/rdma_krping.ko ]] || return 0
	"$TB_DIR/kunit-tap" "$KRPING_CACHE/ko/$KUNIT_REL/kunit" "$RESULTS/vm-$1/kunit" \
		"/usr/src/linux-headers-$KUNIT_REL/source/tools/testing/kunit"
}
stage_debug-kunit() {
	local rc=0
	guest_kunit_argv debug-kunit
	# shellcheck disable=SC2016 # expanded by the guest's sh
	debug_vm debug-kunit --no-rdma --no-krping --no-ropcie -- \
		sh -c '"$0" "$1" "$KRPING_OUT/kunit"' "${KUNIT_ARGV[@]}" || rc=1
	kunit_tap debug-kunit | tee "$RESULTS/debug-kunit-suites.tap" || rc=1
	return "$rc"
}
# The debug kernel runs the suite about ten times slower than Debian's
# (TCG, KASAN, lockdep, kmemleak), so its stages leave out the tests
# marked stock_only: their kernel path is the same on every kernel and
# is covered here by a representative, KUnit (debug-siw) or another
# test; the selftests stage runs them all.
DEBUG_PYTEST=(-m "not stock_only and not two_host")
# Each file that reaches an RDMA device runs on this kernel over one
# provider: krping's paths in it are the same over either, and the
# stock kernels run them all over rxe (two-host-siw over siw). Over siw
# (debug-siw) the benchmarks, rping, IPv6, the histogram and the pings,
# whose iWARP connection setup and READ rules differ most from RoCE's
# (the pings' sizes, memory modes and invalidations are krping's own
# paths, the same over rxe); faults, load and timeouts over both, so
# that lockdep learns krping's handlers in each provider's completion
# context. rdma-core's suite on ropcie0 (test_rdma_core_suite.py: its own
# device, and the suite's siw baseline) and ropcie's faults
# (test_ropcie_faults.py: its own device) in debug-siw too, which ends
# earlier. perftest on ropcie0 (test_ropcie_perftest.py) runs on the stock
# kernels only: its verbs are the same system calls as the suite's and
# test_ropcie_uverbs.py's. The rest over rxe (debug-rxe): the
# configfs-only files, test_ropcie.py and test_ropcie_uverbs.py (they
# bring their own device), the lifecycle, the CLI, the
# module loads, the ABI check and several QPs
# (a listener that hands connections to threads: RoCE's CM here).
DEBUG_SIW_ONLY=(test_bench.py test_rping.py test_ipv6.py test_histogram.py test_ping.py
	test_rdma_core_suite.py test_ropcie_faults.py test_ropcie_perftest.py)
DEBUG_SIW_SKIP=(test_ropcie.py test_ropcie_uverbs.py test_ulp.py test_abuse_writes.py test_options.py
	test_session.py test_random_ops.py test_bad_input.py test_lifecycle.py
	test_cli.py test_module.py test_qps.py test_abi.py test_features.py
	test_ropcie_perftest.py)
# The allocation-failure walk (test_alloc_faults.py) runs once: the
# sessions' walks over siw, and ropcie's and the module loads', which
# bring their own device, in debug-rxe, so that the two stages beside each
# other end at about the same time (debug-siw is followed by two-host).
ALLOC_SESSIONS=test_alloc_faults.py::test_session_allocations
# No test_ulp.py: the debug kernel has nvmet-rdma, but lockdep reports
# nvmet's own lock order there (nvmet_config_sem taken under rdma_cm's
# handler_mutex when a connect's first command comes with ESTABLISHED,
# the other way round when a port is removed), in 1 of 3 runs; and it
# has no nfsd.
stage_debug-rxe() {
	debug_vm debug-rxe --provider rxe -- selftests/run_tests.sh "${DEBUG_PYTEST[@]}" \
		--deselect "$ALLOC_SESSIONS" "${DEBUG_SIW_ONLY[@]/#/--ignore=}" --ignore=test_ulp.py
}
# The KUnit modules first: their kernel log is then short, and a suite
# that breaks the kernel shows before the selftests' noise. A quiet peer
# over ropcie0 is the same device under either provider: debug-rxe's.
stage_debug-siw() {
	local rc=0
	guest_kunit_argv debug-siw
	# shellcheck disable=SC2016 # expanded by the guest's sh
	debug_vm debug-siw --provider siw -- \
		sh -c '"$0" "$1" "$KRPING_OUT/kunit"; shift; exec selftests/run_tests.sh "$@"' \
		"${KUNIT_ARGV[@]}" "${DEBUG_PYTEST[@]}" \
		"${DEBUG_SIW_SKIP[@]/#/--ignore=}" \
		--deselect test_load.py::test_64_concurrent_pairs \
		--deselect "test_peer_timeout.py::test_quiet_peer_is_not_dropped[ropcie-bw-quiet0]" \
		--deselect "test_faults.py::test_server_fault_mid_run[link_down]" \
		--deselect "test_faults.py::test_server_fault_mid_run[link_delete]" \
		--deselect test_alloc_faults.py::test_ropcie_allocations \
		--deselect test_alloc_faults.py::test_ropcie_link_add_allocations \
		--deselect test_alloc_faults.py::test_module_load_allocations || rc=1
	kunit_tap debug-siw | tee "$RESULTS/debug-siw-kunit.tap" || rc=1
	return "$rc"
}

# KCSAN cannot share a kernel with KASAN: a flavour of its own, not in
# make check (its build alone is about 20 minutes). The device-reaching
# files, over rxe, and ropcie's. On this kernel the tests leave KCSAN's
# reports to kcsan-reports (guest-run sets KRPING_KCSAN_REPORTS=sort):
# races in rxe or the RDMA core are listed, not failed; one that involves
# our modules fails.
KCSAN_SKIP=(test_ulp.py test_abuse_writes.py test_options.py test_session.py
	test_random_ops.py test_bad_input.py test_alloc_faults.py)
stage_kcsan() {
	local rel start rc=0
	start=$(tb_now)
	if ! rel=$(nice -n 10 "$TB_DIR/debug-kernel.sh" --flavour kcsan); then
		printf 'TAP version 13\n1..1\nnot ok 1 KCSAN kernel build\n' >"$RESULTS/kcsan-kernel.tap"
		return 1
	fi
	printf 'TAP version 13\n1..1\nok 1 KCSAN kernel %s ready in %s s\n' \
		"$rel" "$(tb_elapsed "$start")" >"$RESULTS/kcsan-kernel.tap"
	"$TB_DIR/build.sh" --tap "$RESULTS/kcsan-build.tap" "$rel" || return 1
	# A watchpoint every 1000 accesses instead of 4000: the suite runs
	# once, on two vCPUs, so sample more of it. Its counters show after
	# the TAP (as comments) that KCSAN watched.
	# shellcheck disable=SC2016 # expanded by the guest's sh
	"$TB_DIR/vm-run" --kver "$rel" --out "$RESULTS/vm-kcsan" \
		--timeout "${KRPING_DEBUG_VM_TIMEOUT:-2400}" --provider rxe \
		--append kcsan.skip_watch=1000 -- \
		sh -c 'selftests/run_tests.sh "$@"; rc=$?
			sed "s/^/# kcsan /" /sys/kernel/debug/kcsan; exit $rc' sh \
		"${DEBUG_PYTEST[@]}" "${KCSAN_SKIP[@]/#/--ignore=}" |
		tee "$RESULTS/kcsan-selftests.tap" || rc=1
	/usr/bin/python3 "$TB_DIR/kcsan-reports" "$RESULTS/vm-kcsan/dmesg" |
		tee "$RESULTS/kcsan.tap" || rc=1
	return "$rc"
}

# The stages form a graph, not a line: the debug kernel's build (CPU
# bound, about 20 minutes cold) only needs deps, and a TCG guest running
# the selftests keeps about one of the two cores busy, so the two overlap.
# A stage starts once what it needs has ended (whatever its exit status:
# every stage runs, and a stage whose input is missing reports a skip),
# at most $KRPING_CHECK_JOBS at once, in the order of ALL.
# two-host also waits for the debug kernel: its two guests want both
# cores, and beside a cold build of that kernel they would lengthen the
# critical path (the build, then debug-rxe) by most of their own length.
# The pair stages run two at a time, a two-vCPU pair beside a one-vCPU
# pair: four two-vCPU guests on two cores took each stage twice its time
# alone (1005 and 898 s against 440 and 340). So two-host-ropcie follows
# two-host (the one-vCPU pairs), and two-host-siw (the only two-vCPU pair
# of make check) and then package run beside them.
declare -A NEEDS=(
	[build]=deps [kunit]=deps [debug-kernel]=deps [bed]=build
	[selftests]=build [selftests-6.1]=build [smoke]=build [newest]="build debug-kernel"
	[two-host]="build debug-kernel"
	[two-host-rxe]="build debug-kernel" [two-host-siw]="build debug-kernel"
	[two-host-ropcie]="build debug-kernel two-host"
	[two-host-all]=build [two-host-ropcie-debug]=deps
	[package]="deps selftests selftests-6.1 newest debug-kernel debug-rxe debug-kunit debug-siw
		kcsan two-host-ropcie-debug"
	[debug-kunit]=debug-kernel [debug-rxe]=debug-kernel [debug-siw]=debug-kernel
)
JOBS=${KRPING_CHECK_JOBS:-2}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || tb_die "KRPING_CHECK_JOBS must be a positive number"

# run_stage SEQ STAGE: one stage, its output to STAGE.log and, prefixed
# with its name, to stdout; its records to STAGE.rc/.time/.seq.
run_stage() {
	local seq=$1 s=$2 start rc=0 secs
	start=$(tb_now)
	echo "==> stage $s"
	# A subshell, so that a crashing stage cannot take the rest down.
	(stage_"$s") 2>&1 | tee "$RESULTS/$s.log" | sed -u "s/^/[$s] /" || rc=${PIPESTATUS[0]}
	secs=$(tb_elapsed "$start")
	echo "$rc" >"$RESULTS/$s.rc"
	echo "$secs" >"$RESULTS/$s.time"
	echo "$seq" >"$RESULTS/$s.seq"
	echo "<== stage $s: ${secs} s (exit $rc)"
}

# ready STAGE: has every stage it needs (of those asked for) ended?
ready() {
	local n
	for n in ${NEEDS[$1]:-}; do
		[[ " ${stages[*]} " == *" $n "* ]] || continue
		[[ ${state[$n]} == ended ]] || return 1
	done
}

# A check ended by a signal (a time limit's TERM, a Ctrl-C, a closed
# terminal) ends its stages first: each stage runs in a process group of
# its own (job control), which gets TERM, then KILL after STOP_GRACE
# seconds. QEMU and every program a stage starts are in it, a pair's
# ivshmem-server too (vm-pair starts it with --foreground, in the
# background of its own process group). make forwards TERM to this script. The groups come from bash's own job table, which holds
# a stage started a moment ago before the loop below has noted it; the
# kills come before any message, which a hung-up terminal can refuse.
STOP_GRACE=10
# shellcheck disable=SC2317 # run by the traps below
end_stages() {
	local sig=$1 groups left pg t
	set +e
	trap '' INT TERM HUP
	groups=$(jobs -p)
	disown -a	# no "Terminated" line per job in the log
	for pg in $groups; do kill -TERM -- "-$pg" 2>/dev/null; done
	tb_log "$sig: ending the running stages: ${pid_stage[*]:-none}"
	for ((t = 0; t < STOP_GRACE * 10; t++)); do
		left=
		for pg in $groups; do kill -0 -- "-$pg" 2>/dev/null && left+=" $pg"; done
		groups=$left
		[[ -n $groups ]] || break
		sleep 0.1
	done
	for pg in $groups; do
		kill -KILL -- "-$pg" 2>/dev/null
		tb_log "$sig: stage ${pid_stage[$pg]:-"(just started)"} still running after ${STOP_GRACE}s: killed"
	done
	exit $((128 + $(kill -l "$sig")))
}
trap 'end_stages TERM' TERM
trap 'end_stages INT' INT
trap 'end_stages HUP' HUP
set -m

check_start=$(tb_now)
declare -A state pid_stage
for s in "${stages[@]}"; do state[$s]=waiting; done
seq=0 running=0 left=${#stages[@]}
while ((left)); do
	for s in "${stages[@]}"; do
		((running < JOBS)) || break
		[[ ${state[$s]} == waiting ]] || continue
		ready "$s" || continue
		seq=$((seq + 1))
		# Without job control an async command reads /dev/null; with
		# it, the terminal, which would stop a stage that reads.
		run_stage "$seq" "$s" </dev/null &
		pid_stage[$!]=$s
		state[$s]=running
		running=$((running + 1))
	done
	done_pid=
	wait -n -p done_pid || true
	[[ -n $done_pid && -n ${pid_stage[$done_pid]:-} ]] || continue
	state[${pid_stage[$done_pid]}]=ended
	unset "pid_stage[$done_pid]"
	running=$((running - 1))
	left=$((left - 1))
done
tb_elapsed "$check_start" >"$RESULTS/check.time"

PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
# The summary fails a stage that shrank below its minimum selection
# (selected-minimums: update it with the change that removes tests).
exec "$PY" "$TB_DIR/tap-summary" --stages "${KNOWN[*]}" \
	--minimums "$TB_DIR/selected-minimums" "$RESULTS" "${stages[@]}"
