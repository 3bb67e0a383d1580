#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Run the krping KUnit suites on UML with kunit.py from Debian's
# linux-source-6.12, and write one flat TAP line per test case.
#
#   scripts/kunit.sh [--tap FILE] [--cache DIR] [--source TARBALL]
#                    [--jobs N] [--prepare-only] [--install-deps]
#
# The kernel source is extracted once into a cache directory keyed by the
# source package version and reused; the UML build directory lives next to
# it, so a warm run only rebuilds what changed. The project is placed into
# the tree as drivers/krping (a symlink to this repository) and hooked into
# drivers/Kconfig and drivers/Makefile; both steps are idempotent.
#
# Environment: KRPING_CACHE (default /var/cache/krping), KRPING_LINUX_SOURCE
# (default /usr/src/linux-source-6.12.tar.xz), KRPING_KUNIT_JOBS.
#
# Exit status: 0 all tests passed, 1 a test failed or the run broke,
# 2 usage error or a missing prerequisite.

set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cache=${KRPING_CACHE:-/var/cache/krping}
tarball=${KRPING_LINUX_SOURCE:-/usr/src/linux-source-6.12.tar.xz}
jobs=${KRPING_KUNIT_JOBS:-$(nproc)}
tap=
prepare_only=0
install_deps=0
python=/usr/bin/python3

usage() {
	sed -n '4,21s/^# \{0,1\}//p' "$0"
	exit "${1:-2}"
}

while [ $# -gt 0 ]; do
	case $1 in
	--tap) tap=${2:?--tap needs a file}; shift 2 ;;
	--tap=*) tap=${1#*=}; shift ;;
	--cache) cache=${2:?--cache needs a directory}; shift 2 ;;
	--cache=*) cache=${1#*=}; shift ;;
	--source) tarball=${2:?--source needs a file}; shift 2 ;;
	--source=*) tarball=${1#*=}; shift ;;
	--jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
	--jobs=*) jobs=${1#*=}; shift ;;
	--prepare-only) prepare_only=1; shift ;;
	--install-deps) install_deps=1; shift ;;
	-h|--help) usage 0 ;;
	*) echo "kunit.sh: unknown argument '$1'" >&2; usage 2 >&2 ;;
	esac
done

log() { echo "kunit.sh: $*" >&2; }

# Fail before any test ran: still leave a TAP file that says so.
early_fail() {
	local code=$1
	shift
	log "$*"
	if [ -n "$tap" ]; then
		mkdir -p "$(dirname "$tap")"
		printf 'TAP version 13\n1..1\nnot ok 1 - kunit.setup # %s\n' \
			"$*" >"$tap"
	fi
	exit "$code"
}

start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

# --- prerequisites --------------------------------------------------------
deb_pkgs=(linux-source-6.12 flex bison bc libelf-dev make gcc python3)
missing=()
[ -r "$tarball" ] || missing+=("$tarball (package linux-source-6.12)")
for tool in flex bison bc make gcc xz "$python"; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ -e /usr/include/libelf.h ] || [ -e /usr/include/gelf.h ] ||
	missing+=("libelf headers (package libelf-dev)")
if [ ${#missing[@]} -gt 0 ] && [ $install_deps = 1 ]; then
	log "installing ${deb_pkgs[*]}"
	apt-get install -y "${deb_pkgs[@]}" >&2
	missing=()
	[ -r "$tarball" ] || missing+=("$tarball")
fi
if [ ${#missing[@]} -gt 0 ]; then
	log "install them with: apt-get install -y ${deb_pkgs[*]} (or pass --install-deps)"
	early_fail 2 "missing prerequisites: ${missing[*]}"
fi

# --- the cached source tree -----------------------------------------------
# Key the cache by the package version; fall back to the tarball's size and
# mtime when the tarball did not come from the package.
version=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || true)
if [ -z "$version" ] || [ "$tarball" != /usr/src/linux-source-6.12.tar.xz ]; then
	version=$(stat -c '%s-%Y' "$tarball")
fi
key=linux-source-6.12_$(printf '%s' "$version" | tr -c 'A-Za-z0-9.+-' '_')
base=$cache/$key
src=$base/src
build=$base/build-uml

if ! mkdir -p "$base" 2>/dev/null || [ ! -w "$base" ]; then
	# Not root: fall back to the user's cache.
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/krping
	base=$cache/$key
	src=$base/src
	build=$base/build-uml
	mkdir -p "$base" || early_fail 2 "cannot create a cache in $base"
fi
exec 9>"$base/.lock"
if ! flock -n 9; then
	log "waiting for another kunit.sh run on $base"
	flock 9
fi

if [ ! -e "$src/.krping-extracted" ]; then
	log "extracting $tarball into $src"
	rm -rf "$src" "$base/src.tmp"
	mkdir -p "$base/src.tmp"
	tar -xJf "$tarball" -C "$base/src.tmp" --strip-components=1
	touch "$base/src.tmp/.krping-extracted"
	mv "$base/src.tmp" "$src"
	log "extracted in $(elapsed) s"
fi

# Place the project into the tree as drivers/krping. If it pointed at
# another checkout before, drop its objects: make compares timestamps
# only, and another checkout's files may be older than those objects.
if [ "$(readlink "$src/drivers/krping" || true)" != "$repo" ]; then
	rm -rf "$build/drivers/krping"
fi
ln -sfn "$repo" "$src/drivers/krping"
grep -qxF 'source "drivers/krping/Kconfig"' "$src/drivers/Kconfig" ||
	echo 'source "drivers/krping/Kconfig"' >>"$src/drivers/Kconfig"
grep -qxF 'obj-y += krping/' "$src/drivers/Makefile" ||
	echo 'obj-y += krping/' >>"$src/drivers/Makefile"

if [ $prepare_only = 1 ]; then
	log "tree ready: $src (build dir $build)"
	exit 0
fi

# --- run -------------------------------------------------------------------
kunitconfig=$repo/kunit/.kunitconfig
[ -r "$kunitconfig" ] || early_fail 2 "no $kunitconfig"
mkdir -p "$build"
rm -f "$build/test.log"	# never report an earlier run's results
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

status=0
(cd "$src" && "$python" tools/testing/kunit/kunit.py run \
	--build_dir="$build" --kunitconfig="$kunitconfig" \
	--jobs="$jobs") >"$work/kunit.out" 2>&1 || status=$?
# kunit.py's summary: the test results, plus whatever the build said
# about our own files; everything when kunit.py never started the kernel.
if grep -q 'Starting KUnit Kernel' "$work/kunit.out"; then
	grep -F -e 'drivers/krping/' -e "$repo/" "$work/kunit.out" || true
	sed -n '/Starting KUnit Kernel/,$p' "$work/kunit.out"
else
	cat "$work/kunit.out"
fi

# One TAP line per test case (and per parameter of a parameterised case).
flat=$work/flat.tap
if [ -s "$build/test.log" ]; then
	"$python" "$repo/scripts/kunit_flatten.py" "$src/tools/testing/kunit" \
		"$build/test.log" >"$flat" || status=1
fi
if [ ! -s "$flat" ]; then
	log "kunit.py produced no results (see its output above)"
	{ echo "TAP version 13"; echo "1..1"
	  echo "not ok 1 - kunit.run # kunit.py exit status $status"; } >"$flat"
	[ $status != 0 ] || status=1
elif [ $status != 0 ] && ! grep -q '^not ok ' "$flat"; then
	# kunit.py failed in a way the results do not show: say so.
	n=$(grep -c '^ok ' "$flat" || true)
	sed -i "s/^1\.\.$n\$/1..$((n + 1))/" "$flat"
	echo "not ok $((n + 1)) - kunit.run # kunit.py exit status $status" >>"$flat"
fi

if [ -n "$tap" ]; then
	mkdir -p "$(dirname "$tap")"
	cp "$flat" "$tap"
fi
passed=$(grep -c '^ok ' "$flat" || true)
failed=$(grep -c '^not ok ' "$flat" || true)
log "$passed passed, $failed failed, stage took $(elapsed) s"
exit $(( status != 0 ))

