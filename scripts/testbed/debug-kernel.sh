#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/testbed/debug-kernel.sh [--flavour kasan|kcsan] [--release]
# Build (once) one of the test bed's debug kernels from Debian's
# linux-source-6.12: x86_64_defconfig + kvm_guest.config +
# scripts/testbed/debug.config (KUnit, rxe, siw, NTB, NVMe-oF over RDMA,
# 9p root built in, the common checkers) + the flavour's fragment debug-<flavour>.config,
# with the fixes in scripts/testbed/patches/*.patch applied to the source:
#   kasan (default)  KASAN, UBSAN, lockdep, kmemleak, debug objects, fault
#                    injection; release 6.12.<n>-kdebug (make check)
#   kcsan            KCSAN; release 6.12.<n>-kcsan (make check-kcsan)
# KCSAN cannot share a kernel with KASAN, hence two. Each is cached in
#   $KRPING_CACHE/debug-kernel/<flavour>-<key>/   key = source version +
#                                        fragments + patches + this script
# and made visible where the rest of the test bed looks for kernels:
#   /boot/vmlinuz-<release>, /lib/modules/<release> (with build -> the
#   kbuild dir), /usr/src/linux-headers-<release>
# The source tree (shared) and each flavour's kbuild dir keep their paths
# across keys, so a changed config or patch rebuilds only what it touches
# (make decides). build.sh, initramfs.sh and vm-run take the kernels as
# `--kver debug` and `--kver kcsan`.
# Prints the release (e.g. 6.12.117-kdebug) on stdout; --release prints it
# only if the cached kernel is complete, and fails otherwise (no build).
# The build log is $KRPING_CACHE/debug-kernel/<key>/build.log; each step
# prints its time on stderr.
set -euo pipefail
# shellcheck source=scripts/testbed/lib.sh
. "$(dirname "$0")/lib.sh"

args=("$@") only_release=0 flavour=kasan
while (($#)); do
	case $1 in
	--release) only_release=1 ;;
	--flavour) flavour=${2:-}; shift ;;
	*) tb_die "usage: $0 [--flavour kasan|kcsan] [--release]" ;;
	esac
	shift
done
[[ $flavour == kasan || $flavour == kcsan ]] || tb_die "--flavour must be kasan or kcsan"

tarball=${KRPING_LINUX_SOURCE:-/usr/src/linux-source-6.12.tar.xz}
fragments=("$TB_DIR/debug.config" "$TB_DIR/debug-$flavour.config")
jobs=${KRPING_DEBUG_JOBS:-$(($(nproc) + 1))}

version=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || stat -c %s-%Y "$tarball")
patches=("$TB_DIR"/patches/*.patch)
[[ -e ${patches[0]} ]] || patches=()
patch_key=$(cat /dev/null "${patches[@]}" | sha256sum | cut -c1-12)
key=$( { echo "$version"; cat "${fragments[@]}"; echo "$patch_key"; sed -n '/^# --- build/,$p' "$0"; } |
	sha256sum | cut -c1-12)
vtag=$(printf '%s' "$version" | tr -c 'A-Za-z0-9.+-' '_')
base=$KRPING_CACHE/debug-kernel
top=$base/$flavour-$key
build=$base/build-$flavour-$vtag
stamp=$top/.complete

# The guests follow /lib/modules/<release> in the host's root, but have
# a /tmp of their own: a kernel under /tmp boots without its modules.
# The links name the real paths (a cache dir may link to another's).
real_top=$(readlink -m "$top") real_build=$(readlink -m "$build")
case $real_top/ in
/tmp/*) tb_die "the debug kernel would be in $real_top: the guests have a /tmp of their own and would not find its modules; set KRPING_CACHE outside /tmp" ;;
esac

# publish RELEASE: the links that make the kernel look installed.
publish() {
	local rel=$1
	ln -sfn "$real_top/modules/lib/modules/$rel" "/lib/modules/$rel"
	ln -sfn "$real_build" "/usr/src/linux-headers-$rel"
	ln -sfn "$real_top/bzImage" "/boot/vmlinuz-$rel"
}

if [[ -f $stamp ]]; then
	rel=$(<"$stamp")
	publish "$rel"
	echo "$rel"
	exit 0
fi
((only_release)) && tb_die "debug kernel $key not built (run $0)"

# --- build ----------------------------------------------------------------
[[ -r $tarball ]] || tb_die "$tarball missing (scripts/testbed/deps.sh installs linux-source-6.12)"
mkdir -p "$base"
exec {lock}>"$base/.lock-$flavour"
flock "$lock"
[[ -f $stamp ]] && exec "$0" "${args[@]}"	# built by the run we waited for

t0=$(tb_now)
# A tree of its own (kunit.sh hooks drivers/krping into its copy), with
# our patches, shared by the flavours (a second flavour waits for the
# first's extraction). A different patch set means a fresh extraction: tar keeps
# the files' times, so make still rebuilds only the patched files.
src=$base/src-$vtag
exec {src_lock}>"$base/.lock-src"
flock "$src_lock"
if [[ ! -f $src/.extracted || $(cat "$src/.patches" 2>/dev/null) != "$patch_key" ]]; then
	rm -rf "$src"
	mkdir -p "$src"
	tb_log "extracting $tarball"
	tar -C "$src" --strip-components=1 -xf "$tarball"
	for p in "${patches[@]}"; do
		patch -d "$src" -p1 --no-backup-if-mismatch -s <"$p" || tb_die "patch $p does not apply"
		tb_log "applied ${p##*/}"
	done
	echo "$patch_key" >"$src/.patches"
	touch "$src/.extracted"
	tb_log "extracted in $(tb_elapsed "$t0") s"
fi
flock -u "$src_lock"

rm -rf "$top"
mkdir -p "$top" "$build"
log=$top/build.log
t1=$(tb_now)
# Kconfig spells "no" as a comment; the fragments say =n for readability.
cat "${fragments[@]}" | sed -E 's/^(CONFIG_[A-Za-z0-9_]+)=n$/# \1 is not set/' >"$top/debug.config"
{
	make -C "$src" O="$build" x86_64_defconfig kvm_guest.config
	"$src/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" "$top/debug.config"
	make -C "$src" O="$build" olddefconfig
} >"$log" 2>&1 || { tail -n 30 "$log" >&2; tb_die "configuring failed (log $log)"; }
# Fail early if a checker did not survive the dependency resolution.
checkers=(KCSAN)
[[ $flavour == kasan ]] && checkers=(KASAN UBSAN UBSAN_BOUNDS PROVE_LOCKING DEBUG_KMEMLEAK DEBUG_OBJECTS
	FAILSLAB FAIL_PAGE_ALLOC FAULT_INJECTION_DEBUG_FS FAULT_INJECTION_STACKTRACE_FILTER)
for opt in "${checkers[@]}" DEBUG_ATOMIC_SLEEP \
	DETECT_HUNG_TASK SOFTLOCKUP_DETECTOR KUNIT CONFIGFS_FS 9P_FS NET_9P_VIRTIO \
	UNWINDER_FRAME_POINTER HZ_250; do
	grep -q "^CONFIG_$opt=y" "$build/.config" || tb_die "CONFIG_$opt=y did not stick (see $build/.config)"
done
for opt in INFINIBAND RDMA_RXE RDMA_SIW NTB VETH NVME_RDMA NVME_TARGET_RDMA; do
	grep -q "^CONFIG_$opt=[ym]" "$build/.config" || tb_die "CONFIG_$opt did not stick (see $build/.config)"
done
tb_log "configured in $(tb_elapsed "$t1") s; building with -j$jobs (log $log)"

t2=$(tb_now)
make -C "$src" O="$build" -j"$jobs" bzImage modules >>"$log" 2>&1 ||
	{ grep -E 'error|Error' "$log" | head -n 30 >&2; tb_die "build failed (log $log)"; }
tb_log "built in $(tb_elapsed "$t2") s"

rel=$(make -s -C "$src" O="$build" kernelrelease 2>/dev/null | tail -n 1)
make -C "$src" O="$build" INSTALL_MOD_PATH="$top/modules" INSTALL_MOD_STRIP=1 \
	DEPMOD=/bin/true modules_install >>"$log" 2>&1 || tb_die "modules_install failed (log $log)"
rm -f "$top/modules/lib/modules/$rel/build" "$top/modules/lib/modules/$rel/source"
ln -s "$build" "$top/modules/lib/modules/$rel/build"
depmod -b "$top/modules" "$rel"
cp "$build/arch/x86/boot/bzImage" "$top/bzImage"
# Only the flavour's newest kernel stays (its kbuild dir is shared).
for old in "$base/$flavour"-*/; do
	[[ ${old%/} == "$top" ]] && continue
	[[ -f $old/.complete || -f $old/build.log ]] && rm -rf "$old"
done
echo "$rel" >"$stamp"
publish "$rel"
tb_log "debug kernel $rel ready in $(tb_elapsed "$t0") s"
echo "$rel"
