#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage (inside the guest(s) of scripts/bench/run.sh):
#   scripts/bench/guest.sh one|pair TABLES UVERBS_ARGS FAULTS_ARGS AB_ARGS
#                          [BENCH.PY ARGS...]
# Runs the tables TABLES names (comma-separated: krping for bench.py,
# uverbs for uverbs.py, faults for faults.py and ab for ab.py, these two
# in one guest only) in this
# guest: "one" on this guest alone (rxe0 and
# rxe1 first, selftests/lib/single_host.py), "pair" as the first of
# vm-pair's two guests (servers on the second: REMOTE_ARGS, its address
# on the PCI link REMOTE_ADDR, this guest's LOCAL_ADDR; data NICs
# 10.9.1.1 and 10.9.1.2). UVERBS_ARGS, FAULTS_ARGS and AB_ARGS are split
# into uverbs.py's, faults.py's and ab.py's arguments. Every table named runs; the exit
# status is the last failure's.
set -u
mode=$1 tables=$2 uverbs_args=$3 faults_args=$4 ab_args=$5
shift 5
PY=/usr/bin/python3
rc=0
case $mode in
one)
	$PY selftests/lib/single_host.py up || exit 1
	;;
pair)
	set -- --remote "$REMOTE_ARGS" --addr 10.9.1.2 \
		--ropcie-addr "$REMOTE_ADDR" "$@"
	;;
*)
	echo "guest.sh: mode one or pair, not $mode" >&2
	exit 2
	;;
esac
case ,$tables, in
*,krping,*) $PY scripts/bench/bench.py "$@" || rc=$? ;;
esac
# uverbs.py ARGS: here, or with the servers on the second guest.
uverbs() {
	if [ "$mode" = pair ]; then
		$PY scripts/bench/uverbs.py --remote "$REMOTE_ARGS" \
			--ropcie-addrs "$LOCAL_ADDR,$REMOTE_ADDR" \
			--rxe-addrs 10.9.1.1,10.9.1.2 "$@"
	else
		$PY scripts/bench/uverbs.py "$@"
	fi
}
# shellcheck disable=SC2086 # UVERBS_ARGS: split into words
case ,$tables, in
*,uverbs,*) uverbs $uverbs_args || rc=$? ;;
esac
# shellcheck disable=SC2086 # FAULTS_ARGS: split into words
case ,$tables, in
*,faults,*) $PY scripts/bench/faults.py $faults_args || rc=$? ;;
esac
# shellcheck disable=SC2086 # AB_ARGS: split into words
case ,$tables, in
*,ab,*) $PY scripts/bench/ab.py $ab_args || rc=$? ;;
esac
exit $rc
