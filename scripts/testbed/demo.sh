#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# shellcheck disable=SC2317 # functions run from check() and the EXIT trap
#
# Usage (in the test VM, see `make run`): scripts/testbed/demo.sh
# Demonstrate krping: a server session and a client session over Soft-RoCE
# (rxe0 on 10.9.0.1), count=10 with validation, driven through configfs;
# wait for both to finish by polling sysfs "state", then print the state,
# error, device and every stats/ counter of both. Exit 0 if both ended
# "done".
#
# Environment: DEMO_ADDR (10.9.0.1), DEMO_PORT (9999), DEMO_COUNT (10),
#              DEMO_TIMEOUT seconds per wait (60).
set -euo pipefail

CFG=/sys/kernel/config/krping
RES=/sys/kernel/krping
ADDR=${DEMO_ADDR:-10.9.0.1}
PORT=${DEMO_PORT:-9999}
COUNT=${DEMO_COUNT:-10}
TIMEOUT=${DEMO_TIMEOUT:-60}
SRV=demo_server
CLI=demo_client

[[ -d $CFG ]] || { echo "demo: $CFG missing: is rdma_krping loaded?" >&2; exit 1; }
REPO=$(cd "$(dirname "$0")/../.." && pwd)

cleanup() {
	for s in "$CLI" "$SRV"; do
		[[ -d $CFG/$s ]] && rmdir "$CFG/$s"
	done
	return 0
}
trap cleanup EXIT

# run CMD...: show what we do, as a person would type it.
run() { echo "+ $*"; "$@"; }
set_attr() { echo "+ echo $3 > $CFG/$1/$2"; echo "$3" >"$CFG/$1/$2"; }

# wait_for SESSION STATE: poll sysfs; a final state other than STATE ends it.
wait_for() {
	local st deadline=$((SECONDS + TIMEOUT))
	while ((SECONDS < deadline)); do
		st=$(<"$RES/$1/state")
		[[ $st == "$2" ]] && { echo "  $1: $st"; return 0; }
		case "$st" in done | failed | stopped)
			echo "  $1: $st (waited for $2), error $(<"$RES/$1/error")"
			return 1 ;;
		esac
		sleep 0.2
	done
	echo "  $1: still $(<"$RES/$1/state") after ${TIMEOUT}s (waited for $2)"
	return 1
}

show() {
	local f
	echo "== $1"
	for f in state error device; do
		printf '  %-12s %s\n' "$f" "$(<"$RES/$1/$f")"
	done
	for f in "$RES/$1"/stats/*; do
		printf '  stats/%-12s %s\n' "${f##*/}" "$(<"$f")"
	done
}

echo "== the single-host topology (rxe0 on va 10.9.0.1, rxe1 on vb 10.9.0.2):"
run /usr/bin/python3 "$REPO/selftests/lib/single_host.py" up
echo "== kernel $(uname -r), RDMA links:"
rdma link show | sed 's/^/  /'

run mkdir "$CFG/$SRV"
set_attr "$SRV" role server
set_attr "$SRV" addr "$ADDR"
set_attr "$SRV" port "$PORT"
set_attr "$SRV" start 1
rc=0
wait_for "$SRV" listening || rc=1

if ((rc == 0)); then
	run mkdir "$CFG/$CLI"
	set_attr "$CLI" role client
	set_attr "$CLI" addr "$ADDR"
	set_attr "$CLI" port "$PORT"
	set_attr "$CLI" count "$COUNT"
	set_attr "$CLI" validate 1
	set_attr "$CLI" start 1
	wait_for "$CLI" "done" || rc=1
fi
wait_for "$SRV" "done" || rc=1

for s in "$SRV" "$CLI"; do
	[[ -d $RES/$s ]] && show "$s"
done
echo "== kernel log (krping):"
dmesg | grep -i krping | grep -v 'tb_' | tail -n 20 | sed 's/^/  /' || true
((rc == 0)) && echo "demo: both sessions done" || echo "demo: FAILED"
exit "$rc"
