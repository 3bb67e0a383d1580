#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/testbed/initramfs.sh RELEASE
# Print the path of a busybox initramfs for kernel RELEASE, building it once:
#   $KRPING_CACHE/initramfs/<release>-<hash>.cpio.gz
# It holds busybox, /init (guest-init) and the decompressed modules needed
# to mount a 9p root (9p, 9pnet_virtio, virtio_pci and their dependencies,
# whichever of them the kernel has as modules). The hash covers the inputs,
# so editing guest-init or this script rebuilds it.
set -euo pipefail
# shellcheck source=scripts/testbed/lib.sh
. "$(dirname "$0")/lib.sh"

[[ $# -eq 1 ]] || { echo "usage: $0 RELEASE" >&2; exit 2; }
kver=$1
moddir=$(tb_kmoddir "$kver")
[[ -f $moddir/modules.dep ]] || tb_die "$moddir/modules.dep missing (install linux-image-$kver)"
BUSYBOX=/bin/busybox
file_is_static() { ! LC_ALL=C ldd "$1" >/dev/null 2>&1; }
file_is_static "$BUSYBOX" || tb_die "$BUSYBOX is not static (install busybox-static)"

ROOTS=(virtio_pci 9pnet_virtio 9p)

# modname PATH: kernel/fs/9p/9p.ko.xz -> 9p in $mod (modules.dep spells
# with '_' or '-'). No command substitution: modules.dep has thousands of
# lines, and a fork for each took 20 s of every VM run.
modname() { mod=${1##*/}; mod=${mod%%.ko*}; mod=${mod//-/_}; }

declare -A DEP PATHOF SEEN
while IFS= read -r line; do
	key=${line%%:*}
	modname "$key"
	PATHOF[$mod]=$key
	DEP[$mod]=${line#*:}
done <"$moddir/modules.dep"

ORDER=()
# visit NAME: append NAME after its dependencies. modules.dep lists the
# full transitive closure with the first-to-load last.
visit() {
	local n=$1 deps i
	[[ -z ${SEEN[$n]:-} ]] || return 0
	SEEN[$n]=1
	if [[ -z ${PATHOF[$n]:-} ]]; then
		# Not a module: fine if built in, fatal otherwise.
		grep -q "/${n}.ko" "$moddir/modules.builtin" 2>/dev/null ||
			grep -q "/${n//_/-}.ko" "$moddir/modules.builtin" 2>/dev/null ||
			tb_die "$kver has no module or builtin $n"
		return 0
	fi
	read -r -a deps <<<"${DEP[$n]}"
	for ((i = ${#deps[@]} - 1; i >= 0; i--)); do
		modname "${deps[i]}"
		visit "$mod"
	done
	ORDER+=("$n")
}
for r in "${ROOTS[@]}"; do visit "$r"; done

hash=$( {
	cat "$TB_DIR/guest-init" "$0"
	for n in "${ORDER[@]}"; do echo "$n ${PATHOF[$n]}"; stat -c %s.%Y "$moddir/${PATHOF[$n]}"; done
	stat -c %s.%Y "$BUSYBOX"
} | sha256sum | cut -c1-12)
cachedir=$KRPING_CACHE/initramfs
img=$cachedir/$kver-$hash.cpio.gz
if [[ -f $img ]]; then
	echo "$img"
	exit 0
fi

mkdir -p "$cachedir"
stage=$(mktemp -d "$cachedir/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,dev,proc,sys,newroot,tmp,lib/krping-mods}
cp "$BUSYBOX" "$stage/bin/busybox"
install -m 0755 "$TB_DIR/guest-init" "$stage/init"
for n in "${ORDER[@]}"; do
	src=$moddir/${PATHOF[$n]}
	dst=$stage/lib/krping-mods/$n.ko
	# busybox insmod cannot read compressed modules.
	case "$src" in
	*.ko.xz) xz -dc "$src" >"$dst" ;;
	*.ko.gz) gzip -dc "$src" >"$dst" ;;
	*.ko.zst) zstd -qdc "$src" >"$dst" ;;
	*.ko) cp "$src" "$dst" ;;
	*) tb_die "unknown module format: $src" ;;
	esac
	echo "$n" >>"$stage/lib/krping-mods/order"
done
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) |
	gzip -1 >"$img.tmp.$$"
mv "$img.tmp.$$" "$img"
# Older images of this kernel are dead weight now (unless another checkout
# with other scripts still uses one: keep those of the last hour).
find "$cachedir" -maxdepth 1 -name "$kver-*.cpio.gz" ! -name "${img##*/}" -mmin +60 -delete
tb_log "built $img (modules: ${ORDER[*]})"
echo "$img"
