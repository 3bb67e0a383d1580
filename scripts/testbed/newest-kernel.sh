#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/testbed/newest-kernel.sh [--release]
# The newest kernel of Debian's unstable archive, made usable on this
# Debian 12 host without installing anything of unstable: the newest
# linux-image-<release> for amd64 (found with apt at run time, never
# hard-coded), its modules, headers, kbuild and the linux-source of the
# same version, fetched with a private apt state (the machine's own
# sources are never touched) and unpacked with dpkg -x into
#   $KRPING_CACHE/newest/<release>/root   the packages' files, where the
#                                         test bed looks for this kernel:
#                                         usr/lib/modules/<release>/vmlinuz,
#                                         usr/lib/modules/<release>,
#                                         usr/src/linux-headers-<release>
#   $KRPING_CACHE/newest/<release>/src    the kernel's own source
# Unstable's packaged build tools do not run here, so the kbuild dir is
# made usable with Debian 12's gcc (Documentation/testing.rst, "The newest
# Debian kernel"):
#  - the host programs of linux-kbuild that need a newer libc (modpost,
#    objtool, genksyms, kconfig, kallsyms, unifdef, resolve_btfids) are
#    rebuilt from that source with the host's gcc; those that run stay;
#  - the headers' configuration, made by unstable's gcc, is regenerated
#    for the host's gcc (make olddefconfig in that source). Only symbols
#    that describe the toolchain (compiler, assembler, linker, pahole,
#    rustc, the host's openssl) and what depends on Rust may change;
#    anything else fails the script. The diff is kept in
#    $KRPING_CACHE/newest/<release>/config.diff, the packaged files as
#    <file>.debian;
#  - the headers' Makefile names /usr/src/linux-headers-<release>-common
#    and the compiler gcc-<N> of unstable: both are rewritten to the tree
#    and the host's gcc.
# Then `make -C <root>/usr/src/linux-headers-<release> M=<dir> modules`
# works (scripts/testbed/build.sh newest does it). The downloads and the
# tree are cached: a warm run costs an apt update and a few seconds. When
# the archive cannot be reached, the cached kernel is used (with a
# warning). Prints the release on stdout.
#   --release  print the cached release only (no network); fails when
#              there is none
# Environment: KRPING_UNSTABLE_MIRROR (default: the machine's Debian
# mirror, else http://deb.debian.org/debian).
set -euo pipefail
# shellcheck source=scripts/testbed/lib.sh
. "$(dirname "$0")/lib.sh"

only_release=0
case ${1:-} in
--release) only_release=1 ;;
'') ;;
*) echo "usage: $0 [--release]" >&2; exit 2 ;;
esac

base=$KRPING_CACHE/newest
if ((only_release)); then
	rel=$(tb_kver newest) || exit 1
	echo "$rel"
	exit 0
fi
mkdir -p "$base"
exec {lock}>"$base/.lock"
flock "$lock"

step_start=$(tb_now)
step() { tb_log "$1 (${2:+$2, }$(tb_elapsed "$step_start") s)"; step_start=$(tb_now); }

# --- the private apt state ---------------------------------------------
apt_dir=$base/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$base/debs"
: >"$apt_dir/status"
mirror=${KRPING_UNSTABLE_MIRROR:-}
if [[ -z $mirror ]]; then
	mirror=$(sed -n 's,^URIs: *\(https\?://[^ ]*/debian\)/*$,\1,p' \
		/etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
	mirror=${mirror:-http://deb.debian.org/debian}
fi
printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s unstable main\n' \
	"$mirror" >"$apt_dir/sources.list"
APT_OPTS=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o Dir::Etc::sourceparts=/dev/null
	-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
	-o "Dir::State::status=$apt_dir/status" -o APT::Sandbox::User=root)
apt_cache() { apt-cache "${APT_OPTS[@]}" "$@"; }

if ! apt-get -q "${APT_OPTS[@]}" update >"$base/apt-update.log" 2>&1; then
	if rel=$(tb_kver newest 2>/dev/null); then
		tb_log "warning: unstable's lists could not be updated ($base/apt-update.log); using the cached $rel"
		echo "$rel"
		exit 0
	fi
	tail -n 5 "$base/apt-update.log" >&2
	tb_die "cannot update the lists of unstable ($mirror)"
fi
step "lists of unstable updated from $mirror"

# pkg_fields PACKAGE...: "PACKAGE VERSION SIZE FILENAME" for the candidate
# of each, one apt-cache call (each call reads the whole list).
pkg_fields() {
	local out
	out=$(apt_cache show --no-all-versions "$@" 2>/dev/null) || true
	awk '/^Package: / { p = $2 } /^Version: / { v = $2 } /^Size: / { s = $2 }
		/^Filename: / { f = $2 }
		/^$/ { if (p != "") print p, v, s, f; p = v = s = f = "" }
		END { if (p != "") print p, v, s, f }' <<<"$out"
}

# The newest image: linux-image-<X.Y.Z...>-amd64 (or -amd64-unsigned),
# not the cloud or rt flavour, nor the meta package or debug symbols.
img_pkg=$(apt_cache pkgnames linux-image- |
	grep -E '^linux-image-[0-9]+\.[0-9]+[^-]*-amd64(-unsigned)?$' | sort -V | tail -n 1)
[[ -n $img_pkg ]] || tb_die "no linux-image-*-amd64 in unstable"
rel=${img_pkg#linux-image-}
rel=${rel%-unsigned}
series=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$rel")

# The packages: the image and the packages of this release it depends on
# (newer images keep vmlinuz and the modules in linux-binary-* and
# linux-modules-*), the headers with theirs (common, kbuild), the source.
# rel_deps PACKAGE: PACKAGE and its direct dependencies named after the
# release (the headers' kbuild is named without the flavour).
rel_deps() {
	local short=${rel%-amd64}
	echo "$1"
	apt_cache depends "$1" 2>/dev/null |
		sed -n 's/^ *Depends: //p' | grep -F -e "$short" || true
}
mapfile -t pkgs < <({ rel_deps "$img_pkg"; rel_deps "linux-headers-$rel"; } | sort -u)
pkgs+=("linux-source-$series")
declare -A pver psize pfile
while read -r p v size f; do
	pver[$p]=$v psize[$p]=$size pfile[$p]=$f
done < <(pkg_fields "${pkgs[@]}")
version=${pver[$img_pkg]:-}
src_version=${pver[linux-source-$series]:-}
tb_log "newest kernel in unstable: $rel (package version ${version:-unknown})"
[[ -n $version && $src_version == "$version" ]] ||
	tb_die "linux-source-$series is ${src_version:-missing}, the image ${version:-missing}: no source for this kernel yet"

# --- downloads (cached by file name and size) --------------------------
debs=()
need=()
for p in "${pkgs[@]}"; do
	[[ -n ${pfile[$p]:-} ]] || tb_die "package $p not in unstable"
	f=$base/debs/${pfile[$p]##*/}
	debs+=("$f")
	[[ -f $f && $(stat -c %s "$f") == "${psize[$p]}" ]] || need+=("$p")
done
if ((${#need[@]})); then
	(cd "$base/debs" && apt-get -q "${APT_OPTS[@]}" download "${need[@]}") >"$base/download.log" 2>&1 ||
		{ tail -n 5 "$base/download.log" >&2; tb_die "apt-get download failed"; }
	step "downloaded ${need[*]}"
fi
for f in "${debs[@]}"; do [[ -f $f ]] || tb_die "$f missing after the download"; done

# --- the tree ----------------------------------------------------------
tree=$base/$rel
gcc_major=$(gcc -dumpversion | cut -d. -f1)
key=$( {
	printf '%s\n' "${debs[@]##*/}" "gcc-$gcc_major" "$(pahole --version 2>/dev/null || true)"
	sed -n '/^# --- the tree/,$p' "$0"
} | sha256sum | cut -c1-16)
if [[ -f $tree/.complete && $(<"$tree/.complete") == "$key" ]]; then
	echo "$rel" >"$base/current"
	step "cached tree $tree"
	echo "$rel"
	exit 0
fi

# Unpacked once per set of packages; the steps after it start from the
# packaged files (kept as <file>.debian where they change), so a run
# that failed half-way is taken up again.
root=$tree/root
hdr=$root/usr/src/linux-headers-$rel
src=$tree/src/linux-source-$series
unpack_key=$(printf '%s\n' "${debs[@]##*/}" | sha256sum | cut -c1-16)
if [[ $(cat "$tree/.unpacked" 2>/dev/null) != "$unpack_key" ]]; then
	rm -rf "$tree"
	mkdir -p "$root" "$tree/src"
	# The source (a tarball in a package) beside the rest: two cores.
	pids=()
	for f in "${debs[@]}"; do
		case ${f##*/} in
		linux-source-*)
			(
				tmp=$(mktemp -d "$tree/.deb.XXXXXX")
				dpkg -x "$f" "$tmp"
				tar -xJf "$tmp/usr/src/linux-source-$series.tar.xz" -C "$tree/src"
				rm -rf "$tmp"
			) &
			pids+=($!)
			;;
		*) dpkg -x "$f" "$root" ;;
		esac
	done
	for p in "${pids[@]}"; do wait "$p" || tb_die "unpacking linux-source-$series failed"; done
	[[ -f $hdr/.config && -d $src && -f $root/usr/lib/modules/$rel/vmlinuz ]] ||
		tb_die "the packages of $rel lack the headers' .config, the source or vmlinuz"
	# Tools that take a root (depmod -b, modinfo -b) look in <root>/lib.
	[[ -e $root/lib ]] || ln -s usr/lib "$root/lib"
	echo "$unpack_key" >"$tree/.unpacked"
	step "unpacked ${#debs[@]} packages into $tree"
fi
rm -f "$tree/.complete"
# keep_debian FILE: keep the packaged FILE as FILE.debian (once).
keep_debian() { [[ -e $1.debian ]] || cp -p "$1" "$1.debian"; }
for f in .config Makefile .kernelvariables include/config/auto.conf \
	include/generated/autoconf.h include/generated/rustc_cfg; do
	[[ -f $hdr/$f ]] && keep_debian "$hdr/$f"
done

# The configuration for the host's gcc: the packaged one through
# olddefconfig, which probes the toolchain again.
make_src() { make -C "$src" -s CC="gcc-$gcc_major" HOSTCC=gcc "$@"; }
cp "$hdr/.config.debian" "$src/.config"
make_src olddefconfig >"$tree/config.log" 2>&1 ||
	{ tail -n 20 "$tree/config.log" >&2; tb_die "olddefconfig failed"; }
# The symbols whose value changed, one "CONFIG_X: OLD -> NEW" a line; a
# symbol that is not set or no longer visible counts as n.
config_symbols() {
	sed -n -e 's/^\(CONFIG_[A-Za-z0-9_]*\)=\(.*\)/\1=\2/p' \
		-e 's/^# \(CONFIG_[A-Za-z0-9_]*\) is not set/\1=n/p' "$1"
}
awk 'FNR == 1 { f++ }
	{ k = $0; sub(/=.*/, "", k); v = substr($0, length(k) + 2); val[f, k] = v; seen[k] = 1 }
	END {
		for (k in seen) {
			a = ((1, k) in val) ? val[1, k] : "n"
			b = ((2, k) in val) ? val[2, k] : "n"
			if (a != b)
				print k ": " a " -> " b
		}
	}' <(config_symbols "$hdr/.config.debian") <(config_symbols "$src/.config") | sort >"$tree/config.diff"
# What may differ: the toolchain's own symbols, and Rust (no rustc here)
# with what depends on it, directly or through another symbol that
# changed with it. Anything else would be another kernel.
toolchain_re='^CONFIG_((CC|GCC|AS|LD|PAHOLE|RUSTC|BINDGEN|TOOLCHAIN|OPENSSL)_[A-Z0-9_]*|RUST|RUST_[A-Z0-9_]*)$'
declare -A entry=()
accepted='RUST'
mapfile -t kconfigs < <(find "$src" -name 'Kconfig*' -type f)
while read -r sym; do
	if [[ $sym =~ $toolchain_re ]]; then
		accepted+="|${sym#CONFIG_}"
		continue
	fi
	# The dependencies in its Kconfig entry; one that probes the
	# toolchain ($(cc-option,...), $(ld-option,...), ...) is the
	# toolchain's too.
	entry[$sym]=$(grep -hs -A 15 -E "^(menu)?config ${sym#CONFIG_}\$" "${kconfigs[@]}" |
		sed '1d;/^\(menu\)\{0,1\}config \|^--$/,$d' |
		sed -n 's/^[[:space:]]*\(depends on\|def_bool\) //p')
	if grep -qE '[$][(](cc|ld|as|rustc)-(option|instr)|[$][(]success,' <<<"${entry[$sym]}"; then
		accepted+="|${sym#CONFIG_}"
		unset "entry[$sym]"
	fi
done < <(sed 's/:.*//' "$tree/config.diff")
changed=1
while ((changed)); do
	changed=0
	for sym in "${!entry[@]}"; do
		grep -qwE "$accepted" <<<"${entry[$sym]}" || continue
		accepted+="|${sym#CONFIG_}"
		unset "entry[$sym]"
		changed=1
	done
done
bad="${!entry[*]}"
[[ -z $bad ]] || tb_die "regenerating the config for gcc-$gcc_major changed more than the toolchain: $bad (see $tree/config.diff)"
step "config regenerated for gcc-$gcc_major ($(grep -c . "$tree/config.diff") symbol(s) differ, $tree/config.diff)"

# The host programs, from the same source with the host's gcc. BTF for
# modules is left out (pahole here is older than the one the kernel was
# built with), so resolve_btfids is built but not used.
if ! { make_src -j"$(nproc)" modules_prepare &&
	make_src CONFIG_GENKSYMS=y scripts/genksyms/ scripts_unifdef; } >"$tree/tools.log" 2>&1; then
	tail -n 20 "$tree/tools.log" >&2
	tb_die "building the kbuild host programs failed ($tree/tools.log)"
fi
kbuild=$(readlink -f "$hdr/scripts/..")
unusable=()
while IFS= read -r -d '' f; do
	[[ $(head -c 4 "$f" | od -An -c | tr -d ' ') == '177ELF' ]] || continue
	# Not "ldd | grep -q": with pipefail, grep's early exit can make
	# ldd's next write fail the pipeline.
	deps=$(LC_ALL=C ldd "$f" 2>&1 || true)
	[[ $deps == *'not found'* ]] || continue
	rp=${f#"$kbuild"/}
	case $rp in
	scripts/mod/modpost.real-lsb-64) from=scripts/mod/modpost ;;
	tools/objtool/objtool.real-x86) from=tools/objtool/objtool ;;
	*) from=$rp ;;
	esac
	if [[ -x $src/$from && ! -d $src/$from ]]; then
		keep_debian "$f"
		cp "$src/$from" "$f"
	else
		# Another target's variant (modpost for 32-bit or big-endian
		# ELF, objtool for powerpc): never run for amd64.
		unusable+=("$rp")
	fi
done < <(find "$kbuild" -type f ! -name '*.debian' -print0)
printf '%s\n' "${unusable[@]}" >"$tree/tools.unusable"
step "kbuild host programs rebuilt with gcc-$gcc_major (${#unusable[@]} other-target variant(s) left: ${unusable[*]})"

# The kbuild dir: the regenerated config, the tree's paths, the host's gcc.
for f in .config include/config/auto.conf include/generated/autoconf.h include/generated/rustc_cfg; do
	cp "$src/$f" "$hdr/$f"
done
sed "s,/usr/src/,$root/usr/src/,g" "$hdr/Makefile.debian" >"$hdr/Makefile"
sed -E "s/^(CC = .*)gcc-[0-9]+\$/\1gcc-$gcc_major/" "$hdr/.kernelvariables.debian" >"$hdr/.kernelvariables"
grep -q "gcc-$gcc_major\$" "$hdr/.kernelvariables" ||
	tb_die "$hdr/.kernelvariables names no compiler that could be replaced"
# The image ships no modules.dep.
depmod -b "$root" "$rel"
echo "$version" >"$tree/version"
echo "$key" >"$tree/.complete"
echo "$rel" >"$base/current"
# Older kernels' trees and packages are dead weight now.
for d in "$base"/*/; do
	d=${d%/}
	[[ -f $d/.complete && $d != "$tree" ]] && rm -rf "$d"
done
for f in "$base"/debs/*.deb; do
	[[ " ${debs[*]} " == *" $f "* ]] || rm -f "$f"
done
step "ready: $hdr"
echo "$rel"
