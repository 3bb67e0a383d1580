#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/testbed/build-siw.sh [--tap FILE] SERIES|RELEASE...
# siw, the kernel's own iWARP provider, for the kernels whose Debian config
# leaves it out (Debian's amd64 images set no CONFIG_RDMA_SIW), so that
# iWARP runs between two stock kernels. It is built from that kernel's own
# source, Debian's linux-source-<series> of the same package version as
# the image (for unstable's newest kernel, the source newest-kernel.sh
# unpacked beside it), against the image's headers, with the siw fixes the debug
# kernel carries (scripts/testbed/patches/*.patch that touch only
# drivers/infiniband/sw/siw/: without 0001 about one ping in thirty hangs):
# the code the image would carry with CONFIG_RDMA_SIW=m plus those fixes,
# checked by modversions against the image's ib_core when it loads.
# Published, stripped of debug info, as
#   $KRPING_CACHE/ko/<release>/siw.ko
# (vm-run and vm-pair load it for --provider siw when the kernel has no
# siw of its own). A kernel with siw of its own needs nothing. Writes one
# TAP test per kernel to FILE (or stdout); exits 1 if any kernel failed.
# Build logs: $KRPING_CACHE/siw/<release>.log
set -euo pipefail
# shellcheck source=scripts/testbed/lib.sh
. "$(dirname "$0")/lib.sh"

tap=/dev/stdout
if [[ ${1:-} == --tap ]]; then tap=$2; shift 2; fi
(($#)) || { echo "usage: $0 [--tap FILE] SERIES|RELEASE..." >&2; exit 2; }

# pkg_version PACKAGE: its installed version, or nothing.
pkg_version() {
	{ dpkg-query -W -f='${db:Status-Abbrev} ${Version}' "$1" 2>/dev/null || true; } |
		sed -n 's/^ii *//p'
}

# The patches for siw alone, applied in the siw directory (-p5 strips
# a/drivers/infiniband/sw/siw/).
SIW_PATH=drivers/infiniband/sw/siw/
siw_patches=()
for p in "$TB_DIR"/patches/*.patch; do
	[[ -e $p ]] || continue
	files=$(sed -n 's,^+++ b/,,p' "$p")
	[[ -n $files ]] && ! grep -qv "^$SIW_PATH" <<<"$files" && siw_patches+=("$p")
done
patch_key=$(cat /dev/null "${siw_patches[@]}" | sha256sum | cut -c1-12)

n=0 failed=0 out=
for want in "$@"; do
	n=$((n + 1))
	start=$(tb_now)
	if ! kver=$(tb_kver "$want"); then
		out+="not ok $n siw for $want # no kernel $want installed"$'\n'
		failed=1
		continue
	fi
	pub=$KRPING_CACHE/ko/$kver/siw.ko
	kdir=$(tb_kdir "$kver")
	kroot=$(tb_kroot "$kver")
	config=$kdir/.config
	if grep -q '^CONFIG_RDMA_SIW=[ym]' "$config" 2>/dev/null; then
		rm -f "$pub"
		out+="ok $n siw for $kver # SKIP the kernel has its own"$'\n'
		continue
	fi
	series=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$kver")
	if [[ -n $kroot ]]; then
		# newest-kernel.sh checked that the two are of one version.
		image_v=$(cat "${kroot%/root}/version" 2>/dev/null || true)
		source_v=$image_v
		tarball=${kroot%/root}/src/linux-source-$series
	else
		image_v=$(pkg_version "linux-image-$kver")
		source_v=$(pkg_version "linux-source-$series")
		tarball=/usr/src/linux-source-$series.tar.xz
	fi
	why=
	if [[ -z $source_v || ! -r $tarball ]]; then
		why="linux-source-$series is not installed"
	elif [[ $source_v != "$image_v" ]]; then
		why="linux-source-$series is $source_v, the image linux-image-$kver is ${image_v:-not a package}"
	elif ! grep -q '^CONFIG_INFINIBAND_VIRT_DMA=y' "$config"; then
		why="the kernel has no CONFIG_INFINIBAND_VIRT_DMA, which siw needs"
	fi
	if [[ -n $why ]]; then
		rm -f "$pub"
		out+="not ok $n siw for $kver # $why"$'\n'
		tb_log "siw for $kver: $why"
		failed=1
		continue
	fi

	base=$KRPING_CACHE/siw
	dir=$base/$kver
	log=$base/$kver.log
	mkdir -p "$base" "${pub%/*}"
	exec {lock}>"$dir.lock"
	flock "$lock"
	stamp="$tarball $source_v patches $patch_key"
	if [[ -f $pub && $(cat "$dir.stamp" 2>/dev/null) == "$stamp" ]]; then
		out+="ok $n siw for $kver from linux-source-$series $source_v (cached)"$'\n'
		exec {lock}>&-
		continue
	fi
	rm -rf "$dir" "$dir.stamp"
	mkdir -p "$dir"
	rc=0
	(
		if [[ -d $tarball ]]; then
			cp -r "$tarball/$SIW_PATH." "$dir"
		else
			tar -xJf "$tarball" -C "$dir" --strip-components=5 \
				"linux-source-$series/${SIW_PATH%/}"
		fi &&
			for p in "${siw_patches[@]}"; do
				echo "patch: ${p##*/}"
				patch -d "$dir" -p5 --forward --batch <"$p" || exit 1
			done &&
			make -C "$kdir" M="$dir" CONFIG_RDMA_SIW=m \
				-j"$(nproc)" modules &&
			strip --strip-debug "$dir/siw.ko" &&
			[[ $(modinfo -F vermagic "$dir/siw.ko") == "$kver "* ]]
	) >"$log" 2>&1 || rc=$?
	secs=$(tb_elapsed "$start")
	if ((rc == 0)); then
		cp "$dir/siw.ko" "$pub.tmp.$$"
		mv -f "$pub.tmp.$$" "$pub"
		echo "$stamp" >"$dir.stamp"
		out+="ok $n siw for $kver from linux-source-$series $source_v, ${#siw_patches[@]} fix(es)"$'\n'
		tb_log "siw for $kver: ok in ${secs}s -> $pub"
	else
		rm -f "$pub"
		failed=1
		out+="not ok $n siw for $kver from linux-source-$series $source_v"$'\n'
		out+=$(tail -n 20 "$log" | sed 's/^/#   /')$'\n'
		tb_log "siw for $kver: FAILED in ${secs}s (log: $log)"
	fi
	exec {lock}>&-
done
printf 'TAP version 13\n1..%d\n%s' "$n" "$out" >"$tap"
exit "$failed"
