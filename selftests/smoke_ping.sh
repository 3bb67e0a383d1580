#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# shellcheck disable=SC2317 # functions run from check() and the EXIT trap
#
# Smoke test: one krping server and one client session over Soft-RoCE,
# count=10 with validation, driven through configfs and checked in sysfs.
# Prints kselftest TAP; exit 0 pass, 1 fail, 4 skip (module not loaded).
# The server listens on 10.9.0.1 (rxe0 on veth va), the client reaches it
# over the veth pair; lib/single_host.py builds that topology when it is
# missing and removes it after.
#
# Environment: SMOKE_ADDR (10.9.0.1), SMOKE_PORT (9999), SMOKE_COUNT (10),
#              SMOKE_TIMEOUT seconds per wait (60).
set -euo pipefail

CFG=/sys/kernel/config/krping
RES=/sys/kernel/krping
ADDR=${SMOKE_ADDR:-10.9.0.1}
PORT=${SMOKE_PORT:-9999}
COUNT=${SMOKE_COUNT:-10}
TIMEOUT=${SMOKE_TIMEOUT:-60}
SRV=smoke_srv_$$
CLI=smoke_cli_$$
KSFT_SKIP=4

echo "TAP version 13"
if [[ ! -d $CFG || ! -d $RES ]]; then
	echo "1..0 # SKIP rdma_krping is not loaded ($CFG or $RES missing)"
	exit $KSFT_SKIP
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "1..0 # SKIP must run as root"
	exit $KSFT_SKIP
fi

# The single-host topology is built when missing (and removed after),
# unless SMOKE_ADDR names a device of the caller's.
built=
if [[ -z ${SMOKE_ADDR:-} ]]; then
	out=$("${KRPING_PYTHON:-/usr/bin/python3}" "$(dirname "$0")/lib/single_host.py" up 2>&1) || {
		rc=$?
		if ((rc == KSFT_SKIP)) && [[ -z ${KRPING_TOPOLOGY_REQUIRED:-} ]]; then
			echo "1..0 # SKIP $out"
			exit $KSFT_SKIP
		fi
		printf '1..1\nnot ok 1 single-host topology built\n'
		echo "# ${out//$'\n'/$'\n'# }"
		exit 1
	}
	[[ $out == "built: nothing"* ]] || built=1
fi

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n $1"; }
fail() { n=$((n + 1)); failed=1; echo "not ok $n $1"; }
check() { # check NAME CMD...: one TAP line for a command's success
	local name=$1; shift
	if "$@"; then ok "$name"; else fail "$name"; fi
}
diag() { sed 's/^/# /'; }

cleanup() {
	local s
	for s in "$CLI" "$SRV"; do
		[[ -d $CFG/$s ]] || continue
		echo 0 >"$CFG/$s/start" 2>/dev/null || true
		rmdir "$CFG/$s" 2>/dev/null || true
	done
	[[ -z $built ]] ||
		"${KRPING_PYTHON:-/usr/bin/python3}" "$(dirname "$0")/lib/single_host.py" down >&2 || true
}
trap cleanup EXIT

# setattrs SESSION attr=value...: every write must be accepted.
setattrs() {
	local s=$1 kv; shift
	for kv in "$@"; do
		echo "${kv#*=}" >"$CFG/$s/${kv%%=*}" || { echo "write ${kv} failed" | diag; return 1; }
	done
}

# wait_state SESSION STATE...: poll sysfs until one of STATEs (or timeout).
wait_state() {
	local s=$1 st deadline=$((SECONDS + TIMEOUT)); shift
	while ((SECONDS < deadline)); do
		st=$(<"$RES/$s/state")
		for want in "$@"; do [[ $st == "$want" ]] && return 0; done
		case "$st" in failed | stopped | done)
			echo "$s: state $st (wanted $*), error $(<"$RES/$s/error")" | diag
			return 1 ;;
		esac
		sleep 0.2
	done
	echo "$s: still $(<"$RES/$s/state") after ${TIMEOUT}s (wanted $*)" | diag
	return 1
}

# expect SESSION FILE VALUE
expect() {
	local got
	got=$(<"$RES/$1/$2")
	[[ $got == "$3" ]] && return 0
	echo "$1/$2 = '$got', expected '$3'" | diag
	return 1
}

iterations_ok() { expect "$1" stats/iterations "$COUNT" && expect "$1" error 0; }

# remove SESSION...: rmdir must work and take the sysfs directory with it.
remove() {
	local s
	for s in "$@"; do
		rmdir "$CFG/$s" || return 1
		[[ ! -e $RES/$s ]] || { echo "$RES/$s still there after rmdir" | diag; return 1; }
	done
}

echo "1..11"
check "server session created" mkdir "$CFG/$SRV"
check "server configured" setattrs "$SRV" role=server addr="$ADDR" port="$PORT"
check "server started" setattrs "$SRV" start=1
check "server listening" wait_state "$SRV" listening
check "client session created" mkdir "$CFG/$CLI"
check "client configured and started" setattrs "$CLI" role=client addr="$ADDR" \
	port="$PORT" count="$COUNT" validate=1 start=1
check "client done" wait_state "$CLI" "done"
check "server done" wait_state "$SRV" "done"
check "client: $COUNT iterations, error 0" iterations_ok "$CLI"
check "server: $COUNT iterations, error 0" iterations_ok "$SRV"
if ((failed)); then
	for s in "$SRV" "$CLI"; do
		[[ -d $RES/$s ]] || continue
		echo "$s: state $(<"$RES/$s/state") error $(<"$RES/$s/error") device $(<"$RES/$s/device")" | diag
	done
	dmesg | tail -n 30 | diag
fi
check "sessions removed" remove "$CLI" "$SRV"
exit "$failed"
