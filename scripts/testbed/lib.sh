# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# shellcheck shell=bash
#
# Shared helpers for the test bed scripts; source it, do not run it.
#
# Environment:
#   KRPING_CACHE   cache for build dirs, initramfs, VM runs
#                  (default /var/cache/krping; kept outside the repo so a
#                  fresh clone reuses it)

TB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034 # used by the scripts that source this
REPO_DIR=$(cd "$TB_DIR/../.." && pwd)
KRPING_CACHE=${KRPING_CACHE:-/var/cache/krping}
export KRPING_CACHE

# Debian keeps depmod/modprobe in /usr/sbin, which a non-login PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac

tb_log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
tb_die() { tb_log "error: $*"; exit 1; }

# tb_kver SERIES|RELEASE: print the newest installed kernel release of a
# series (e.g. 6.12 -> 6.12.117+deb12-amd64) that has modules, headers and
# a bootable image. The series "debug" and "kcsan" are the test bed's own
# debug kernels (6.12.<n>-kdebug and 6.12.<n>-kcsan, see debug-kernel.sh),
# never picked for "6.12"; "newest" is unstable's newest kernel as
# newest-kernel.sh last prepared it in its tree (see tb_kroot). A full
# release name is checked and echoed back.
# Versions move with every Debian point release, so never hard-code them.
tb_kver() {
	local want=$1 dir rel best=
	if [[ $want == newest ]]; then
		rel=$(cat "$KRPING_CACHE/newest/current" 2>/dev/null || true)
		if [[ -z $rel || -z $(tb_kroot "$rel") ]]; then
			tb_log "no newest kernel prepared (run scripts/testbed/newest-kernel.sh)"
			return 1
		fi
		printf '%s\n' "$rel"
		return 0
	fi
	if [[ ! -d /lib/modules/$want && -n $(tb_kroot "$want") ]]; then
		printf '%s\n' "$want"
		return 0
	fi
	for dir in /lib/modules/*/; do
		rel=$(basename "$dir")
		case "$want:$rel" in
		debug:*-kdebug | kcsan:*-kcsan) ;;	# scripts/testbed/debug-kernel.sh
		*-kdebug:* | *-kcsan:*) [[ $rel == "$want" ]] || continue ;;
		*:*-kdebug | *:*-kcsan) continue ;;	# only when asked for
		"$want:$want" | "$want:$want".* | "$want:$want"-*) ;;
		*) continue ;;
		esac
		[[ -d /usr/src/linux-headers-$rel && -f /boot/vmlinuz-$rel ]] || continue
		best+="$rel"$'\n'
	done
	best=$(printf '%s' "$best" | sort -V | tail -n 1)
	[[ -n $best ]] || {
		tb_log "no installed kernel $want with headers and /boot/vmlinuz (run scripts/testbed/deps.sh)"
		return 1
	}
	printf '%s\n' "$best"
}

# tb_kroot RELEASE: the root of the files of a kernel that is not
# installed on the host but unpacked in a tree of its own (unstable's
# newest, newest-kernel.sh: <root>/usr/lib/modules/<release> with its
# vmlinuz, <root>/usr/src/linux-headers-<release>); nothing for a kernel
# installed in /lib/modules, /boot and /usr/src.
tb_kroot() {
	local tree=$KRPING_CACHE/newest/$1
	[[ -n $1 && $1 != */* && -f $tree/.complete && -d $tree/root/usr/lib/modules/$1 ]] || return 0
	printf '%s\n' "$tree/root"
}
# tb_kdir RELEASE: its kbuild dir. tb_kmoddir RELEASE: its modules.
# tb_kimage RELEASE: its bootable image.
tb_kdir() { printf '%s/usr/src/linux-headers-%s\n' "$(tb_kroot "$1")" "$1"; }
tb_kmoddir() {
	local root
	root=$(tb_kroot "$1")
	if [[ -n $root ]]; then
		printf '%s/usr/lib/modules/%s\n' "$root" "$1"
	else
		printf '/lib/modules/%s\n' "$1"
	fi
}
tb_kimage() {
	local root
	root=$(tb_kroot "$1")
	if [[ -n $root ]]; then
		printf '%s/usr/lib/modules/%s/vmlinuz\n' "$root" "$1"
	else
		printf '/boot/vmlinuz-%s\n' "$1"
	fi
}

# tb_now: seconds since the epoch with a fraction, for stage timings.
tb_now() { date +%s.%N; }
tb_elapsed() { awk -v a="$1" -v b="$(tb_now)" 'BEGIN { printf "%.1f", b - a }'; }

# tb_python_bytecode: compile the selftests' python here, on the host,
# into their __pycache__ (pytest's assertion-rewritten test modules too,
# by collecting them). A guest sees the tree read-only and would
# otherwise compile all of it at every python start: pytest's collection
# took 23 to 25 s in a 6.12 guest without the bytecode, 9 to 11 s with it.
# Best effort: without it the guests only start more slowly.
tb_python_bytecode() {
	(cd "$REPO_DIR/selftests" &&
		env -u PYTHONDONTWRITEBYTECODE /usr/bin/python3 -m pytest -q -c pytest.ini \
			--rootdir . --collect-only >/dev/null 2>&1) || true
}

# tb_is_debug RELEASE: is it one of the test bed's debug kernels?
tb_is_debug() { [[ $1 == *-kdebug || $1 == *-kcsan ]]; }
