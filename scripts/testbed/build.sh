#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/testbed/build.sh [--tap FILE] SERIES|RELEASE...
# Build rdma_krping.ko with W=1 for each kernel (e.g. 6.12 6.1, or newest:
# unstable's newest kernel as newest-kernel.sh prepared it) in
#   $KRPING_CACHE/build/<release>/
# and publish it as $KRPING_CACHE/ko/<release>/rdma_krping.ko (the default
# module of vm-run; removed when the build fails, so no test runs a stale
# module), and the ropcie provider next to it as ropcie.ko (and its
# negative test module ropcie_test.ko). A build that succeeds without
# one of the modules it asked for fails, and publishes none. For a kernel with CONFIG_KUNIT=y
# (the debug kernel) the KUnit suites are built as modules too and
# published in $KRPING_CACHE/ko/<release>/kunit/. Builds from a fresh copy of the project sources (out-of-tree kbuild writes its
# objects next to the sources, so each kernel needs its own copy; a clean
# copy every time also means warnings are never hidden by a stale object).
# Objects come through ccache (in $KRPING_CACHE/ccache, where it is
# installed): a source that did not change is not compiled again, and a
# hit replays the compiler's warnings, so W=1 still sees every one.
# A kernel passes only if make succeeds and prints no "warning:" (compiler
# or modpost). Writes one TAP test per kernel to FILE (or stdout); exits 1
# if any kernel failed. Build logs: $KRPING_CACHE/build/<release>.log
set -euo pipefail
# shellcheck source=scripts/testbed/lib.sh
. "$(dirname "$0")/lib.sh"

tap=/dev/stdout
if [[ ${1:-} == --tap ]]; then tap=$2; shift 2; fi
(($#)) || { echo "usage: $0 [--tap FILE] SERIES|RELEASE..." >&2; exit 2; }

# Kbuild prints this itself when the host gcc's version string differs from
# the one the distro kernel was built with; it is not a code warning.
NOT_A_WARNING='warning: the compiler differs from the one used to build the kernel'

# copy_sources DEST: everything the kbuild may need, none of the test bed,
# docs, VCS or build artifacts of an in-place `make`.
copy_sources() {
	tar -C "$REPO_DIR" -cf - \
		--exclude=./.git --exclude=./.ci --exclude=./scripts \
		--exclude=./selftests --exclude=./Documentation --exclude=./results \
		--exclude='*.o' --exclude='*.ko' --exclude='*.mod' --exclude='*.mod.c' \
		--exclude='.*.cmd' --exclude='*.a' --exclude=Module.symvers \
		--exclude=modules.order --exclude='.tmp*' --exclude='*.tap' . |
		tar -C "$1" -xf -
}

# Debian's ccache puts a link per installed gcc (gcc-12,
# x86_64-linux-gnu-gcc-12, ...) in /usr/lib/ccache: whichever compiler a
# kernel's kbuild names, it is found there first.
if [[ -x /usr/lib/ccache/gcc ]]; then
	export PATH=/usr/lib/ccache:$PATH CCACHE_DIR=$KRPING_CACHE/ccache
	export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-2G}
fi

n=0 failed=0 out=
for want in "$@"; do
	n=$((n + 1))
	start=$(tb_now)
	if ! kver=$(tb_kver "$want"); then
		out+="not ok $n build $want W=1 # no kernel $want installed"$'\n'
		failed=1
		continue
	fi
	kdir=$(tb_kdir "$kver")
	dir=$KRPING_CACHE/build/$kver
	log=$KRPING_CACHE/build/$kver.log
	pub=$KRPING_CACHE/ko/$kver/rdma_krping.ko
	mkdir -p "$KRPING_CACHE/build" "${pub%/*}"
	# Several checkouts may share the cache: one build per kernel at a time.
	exec {lock}>"$dir.lock"
	flock "$lock"
	rm -rf "$dir"
	mkdir -p "$dir"
	copy_sources "$dir"
	rc=0
	kunit=() kunit_ko=()
	if grep -q '^CONFIG_KUNIT=y' "$kdir/.config" 2>/dev/null; then
		kunit=(CONFIG_KRPING_OPTIONS_KUNIT_TEST=m CONFIG_KRPING_LATENCY_KUNIT_TEST=m
			CONFIG_KRPING_BENCH_KUNIT_TEST=m
			CONFIG_ROPCIE_RING_KUNIT_TEST=m CONFIG_ROPCIE_WIRE_KUNIT_TEST=m)
		kunit_ko=(kunit/krping_options_kunit.ko kunit/krping_latency_kunit.ko
			kunit/krping_bench_kunit.ko
			kunit/ropcie_ring_kunit.ko kunit/ropcie_wire_kunit.ko)
	fi
	make -C "$kdir" M="$dir" CONFIG_RDMA_KRPING=m \
		CONFIG_ROPCIE=m CONFIG_ROPCIE_TEST=m "${kunit[@]}" \
		W=1 -j"$(nproc)" modules >"$log" 2>&1 || rc=$?
	warnings=$(grep -i 'warning:' "$log" | grep -vF "$NOT_A_WARNING" || true)
	secs=$(tb_elapsed "$start")
	# Every module asked for must come out: a make that succeeds
	# without one (a Kbuild line lost) would leave the tests that need
	# it without it.
	missing=()
	for m in rdma_krping.ko ropcie.ko ropcie_test.ko ${kunit_ko[@]+"${kunit_ko[@]}"}; do
		[[ -f $dir/$m ]] || missing+=("$m")
	done
	if ((rc == 0)) && [[ -z $warnings ]] && ((${#missing[@]} == 0)); then
		# Atomic for a VM that is about to copy it.
		cp "$dir/rdma_krping.ko" "$pub.tmp.$$"
		mv -f "$pub.tmp.$$" "$pub"
		# The ropcie provider and its test module (vm-run loads
		# ropcie.ko; the selftests load the other).
		for m in ropcie ropcie_test; do
			cp "$dir/$m.ko" "${pub%/*}/$m.ko.tmp.$$"
			mv -f "${pub%/*}/$m.ko.tmp.$$" "${pub%/*}/$m.ko"
		done
		rm -rf "${pub%/*}/kunit"
		if ((${#kunit[@]})); then
			mkdir -p "${pub%/*}/kunit"
			cp "$dir"/kunit/*.ko "${pub%/*}/kunit/"
		fi
		out+="ok $n build $kver W=1"$'\n'
		tb_log "$kver: ok in ${secs}s -> $pub"
	else
		failed=1
		rm -rf "$pub" "${pub%/*}/ropcie.ko" "${pub%/*}/ropcie_test.ko" "${pub%/*}/kunit"
		out+="not ok $n build $kver W=1"$'\n'
		why="make exit $rc"
		[[ -n $warnings ]] && why+=", $(grep -c . <<<"$warnings") warning(s)"
		((${#missing[@]} == 0)) || why+=", not built: ${missing[*]}"
		out+="# $why; log: $log"$'\n'
		# The lines that matter, as TAP diagnostics and on stderr.
		diag=$(grep -E -i 'error|warning:|[*]{3}' "$log" | grep -vF "$NOT_A_WARNING" | head -n 40 || true)
		[[ -n $diag ]] || diag=$(tail -n 20 "$log")
		out+=$(sed 's/^/#   /' <<<"$diag")$'\n'
		tb_log "$kver: FAILED in ${secs}s ($why)"
		sed 's/^/  /' <<<"$diag" >&2
	fi
	exec {lock}>&-
done
printf 'TAP version 13\n1..%d\n%s' "$n" "$out" >"$tap"
exit "$failed"
