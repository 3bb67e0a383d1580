#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# shellcheck disable=SC2317 # cleanup and write_tap run from the EXIT trap
#
# Usage: scripts/testbed/package-test.sh [--tap FILE] [--out DIR]
# The Debian package from install to purge, as a user meets it (check.sh's
# stage "package" of make check, make check-package alone):
#   1. the host has nothing of krping installed (a package left by an
#      aborted run of this test is purged first);
#   2. scripts/package/deb.sh builds krping-dkms_<version>-1_all.deb, which
#      holds what it should and which lintian passes (no error or warning);
#   3. dpkg -i installs it on the host: its postinst has DKMS build the
#      modules for every installed kernel with headers; for each kernel
#      of the build matrix (KRPING_PACKAGE_KVERS, default "6.12 6.1") DKMS
#      says installed, rdma_krping and ropcie are in
#      /lib/modules/<kver>/updates/dkms/ and depmod knows them there;
#   4. a 6.12 guest (vm-run, the host's root over 9p: it sees the installed
#      package; none of the tree's modules is loaded, --no-krping
#      --no-ropcie) runs this script with --guest: modprobe rdma_krping
#      and ropcie load the updates/ files (modprobe -v and modinfo -n say
#      which), and the packaged /usr/sbin/krping runs a ping pair (10
#      iterations, validated) over rxe on the veth pair, then the modules
#      unload;
#   5. dpkg --purge removes it, and nothing of it is left: no package
#      state, /usr/src/krping-*, /var/lib/dkms/krping, modules under
#      /lib/modules/*/updates or in modules.dep, CLI, man page or docs.
# Whatever fails, the package is purged at the end. TAP to FILE (default
# stdout); the guest's kernel log to FILE's <name>-dmesg.tap; the .deb,
# dpkg's and DKMS's logs and the guest's output dir in DIR (default
# $KRPING_CACHE/package). Exit 1 if any test failed.
set -euo pipefail
# shellcheck source=scripts/testbed/lib.sh
. "$(dirname "$0")/lib.sh"

PKG=krping-dkms
ADDR=10.9.0.1
COUNT=10

# --guest VERSION: inside the VM (vm-run runs it from the repo root).
# Prints "ok - ..." / "not ok - ..." lines and "# " diagnostics, which
# the host numbers into its TAP.
guest() {
	local ver=$1 kver m path log json
	kver=$(uname -r)
	ok() { echo "ok - $kver: $*"; }
	notok() { echo "not ok - $kver: $*"; }
	diag() { sed 's/^/# /'; }
	log=$(mktemp)
	for m in rdma_krping ropcie; do
		if [[ -d /sys/module/$m ]]; then
			notok "$m not loaded before modprobe (the bed loaded one)"
		else
			ok "$m not loaded before modprobe"
		fi
		if modprobe -v "$m" >"$log" 2>&1; then
			ok "modprobe $m"
		else
			notok "modprobe $m"
		fi
		diag <"$log"
		# modprobe -v prints what it loads: "insmod PATH [ARGS]".
		path=$(awk -v m="/$m.ko" '$1 == "insmod" && index($2, m) { print $2 }' "$log")
		if [[ $path == /lib/modules/$kver/updates/* && -d /sys/module/$m ]]; then
			ok "modprobe loaded $m from $path"
		else
			notok "modprobe loaded $m from /lib/modules/$kver/updates/ (it printed '${path:-nothing}')"
		fi
		path=$(modinfo -n "$m" 2>&1) || true
		if [[ $path == /lib/modules/$kver/updates/dkms/$m.ko* ]]; then
			ok "modinfo -n $m: $path"
		else
			notok "modinfo -n $m is in /lib/modules/$kver/updates/dkms (it is '$path')"
		fi
	done
	if dpkg-query -S /usr/sbin/krping 2>&1 | grep -q "^$PKG: "; then
		ok "/usr/sbin/krping belongs to $PKG"
	else
		notok "/usr/sbin/krping belongs to $PKG"
	fi
	if /usr/bin/python3 selftests/lib/single_host.py up >"$log" 2>&1; then
		ok "rxe0 and rxe1 on the veth pair"
	else
		notok "rxe0 and rxe1 on the veth pair"
	fi
	diag <"$log"
	json=$(mktemp)
	if /usr/sbin/krping pair --addr "$ADDR" --count "$COUNT" --validate --json \
		--timeout 120 >"$json" 2>"$log"; then
		ok "/usr/sbin/krping pair --count $COUNT --validate: exit 0"
	else
		notok "/usr/sbin/krping pair --count $COUNT --validate: exit 0"
		diag <"$log"
	fi
	# Both sides done, no error, every iteration counted.
	if /usr/bin/python3 - "$json" "$COUNT" >"$log" 2>&1 <<-'EOF'; then
		import json, sys
		out = json.load(open(sys.argv[1]))
		count = int(sys.argv[2])
		assert out["skipped"] == [] and len(out["results"]) == 1, out
		run = out["results"][0]
		assert run["ok"] and run["test"] == "ping", run
		for role in ("client", "server"):
		    side = run["sides"][role]
		    assert side["state"] == "done" and side["error"] == 0, side
		    assert side["stats"]["iterations"] == count, side
		    print(f"{role}: {side['device']}, {count} iterations, validated")
	EOF
		ok "ping pair: both sides done, $COUNT iterations, error 0"
		diag <"$log"
	else
		notok "ping pair: both sides done, $COUNT iterations, error 0"
		diag <"$log"
		diag <"$json"
	fi
	/usr/bin/python3 selftests/lib/single_host.py down >/dev/null 2>&1 || true
	if modprobe -r rdma_krping ropcie >"$log" 2>&1 &&
		[[ ! -d /sys/module/rdma_krping && ! -d /sys/module/ropcie ]]; then
		ok "modprobe -r rdma_krping ropcie"
	else
		notok "modprobe -r rdma_krping ropcie"
		diag <"$log"
	fi
	rm -f "$log" "$json"
	echo "# guest done ($PKG $ver)"
}

if [[ ${1:-} == --guest ]]; then
	guest "${2:-?}"
	exit 0
fi

tap=/dev/stdout out=$KRPING_CACHE/package
while (($#)); do
	case "$1" in
	--tap) tap=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "usage: $0 [--tap FILE] [--out DIR]" >&2; exit 2 ;;
	esac
done
read -r -a MATRIX <<<"${KRPING_PACKAGE_KVERS:-6.12 6.1}"
GUEST_SERIES=6.12
dmesg_tap=${tap%.tap}-dmesg.tap
[[ $tap == /dev/stdout ]] && dmesg_tap=$out/dmesg.tap
rm -rf "$out"
mkdir -p "$out"
out=$(realpath "$out")

results=() failed=0
# result ok|not-ok DESCRIPTION [DIAGNOSTICS]
result() {
	local line
	if [[ $1 == ok ]]; then line="ok $((${#results[@]} + 1)) - $2"; else
		line="not ok $((${#results[@]} + 1)) - $2"
		failed=1
	fi
	[[ -z ${3:-} ]] || line+=$'\n'"# ${3//$'\n'/$'\n'# }"
	results+=("$line")
	printf '%s\n' "$line"
}
write_tap() {
	{
		echo "TAP version 13"
		echo "1..${#results[@]}"
		printf '%s\n' "${results[@]}"
	} >"$tap"
}

# installed: does dpkg have any state of the package (but "not installed")?
installed() {
	local st
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$PKG" 2>/dev/null) || return 1
	[[ -n $st && ${st:1:1} != n ]]
}
installed_by_us=0
purge() { dpkg --purge "$PKG" >>"$out/dpkg-purge.log" 2>&1; }
# Whatever happened, the host keeps nothing of the package.
cleanup() {
	local names=${hidden[*]:-}

	# A stop signals the whole stage: the tee and sed that carry our
	# output may be gone, and a message to them must not end us here,
	# neither by SIGPIPE nor, once that is ignored, by set -e.
	set +e
	trap '' PIPE

	# First: a stop's KILL may come during a long purge, and the hidden
	# kernels have nothing of the package.
	show_bed_kernels || tb_log "could not put back the kernels $names in /lib/modules"
	if ((installed_by_us)) && installed; then
		tb_log "purging $PKG (the test did not get to it)"
		purge || tb_log "dpkg --purge $PKG failed: see $out/dpkg-purge.log"
	fi
	write_tap
}
trap cleanup EXIT

# The test bed's own kernels (the debug kernels that debug-kernel.sh
# publishes as links in /lib/modules) are no user's: a DKMS build for one
# of them proves nothing the build stage does not, and cost a third of
# the install. They leave the postinst's sight (a dot name, which its
# glob skips) while the package is installed and purged, and come back
# at the end; debug-kernel.sh publishes them again in any case.
hidden=()
hide_bed_kernels() {
	local d rel
	for d in /lib/modules/*; do
		rel=${d##*/}
		if [[ -L $d ]] && tb_is_debug "$rel"; then
			mv -T "$d" "/lib/modules/.hidden-$rel" || return 1
			hidden+=("$rel")
		fi
	done
}
show_bed_kernels() {
	local rel rc=0
	for rel in "${hidden[@]}"; do
		mv -T "/lib/modules/.hidden-$rel" "/lib/modules/$rel" || rc=1
	done
	hidden=()
	return "$rc"
}

# leftovers: what of krping is on the host, one line each.
leftovers() {
	local f
	installed && echo "package $PKG: $(dpkg-query -W -f='${db:Status-Abbrev}' "$PKG")"
	for f in /usr/src/krping-* /var/lib/dkms/krping /usr/sbin/krping /usr/share/krping \
		/usr/share/man/man8/krping.8.gz /usr/share/doc/$PKG /usr/share/lintian/overrides/$PKG; do
		[[ -e $f ]] && echo "$f"
	done
	find /lib/modules/*/updates \( -name 'rdma_krping.ko*' -o -name 'ropcie.ko*' \) 2>/dev/null
	return 0
}

# 1. A clean host.
if installed; then
	tb_log "$PKG is installed (an aborted run?): purging it first"
	purge || true
fi
left=$(leftovers)
if [[ -z $left ]]; then
	result ok "host: nothing of krping installed before the test"
else
	result not-ok "host: nothing of krping installed before the test (make uninstall?)" "$left"
fi

# 2. The package.
start=$(tb_now)
version=$("$REPO_DIR/scripts/package/version")
deb=$out/${PKG}_${version}-1_all.deb
if KRPING_DEB_REVISION=1 "$REPO_DIR/scripts/package/deb.sh" --out "$out" >"$out/deb.log" 2>&1 && [[ -f $deb ]]; then
	result ok "make deb: ${deb##*/} in $(tb_elapsed "$start") s"
else
	result not-ok "make deb: ${deb##*/}" "$(tail -n 20 "$out/deb.log")"
	exit 1
fi
dpkg-deb -c "$deb" | awk '{ print $NF }' | sed 's|^\./||' >"$out/contents"
missing=
for f in "usr/src/krping-$version/dkms.conf" "usr/src/krping-$version/Kbuild" \
	"usr/src/krping-$version/krping/main.c" "usr/src/krping-$version/ropcie/main.c" \
	usr/sbin/krping usr/share/krping/krpinglib/cli.py usr/share/man/man8/krping.8.gz \
	"usr/share/doc/$PKG/copyright" \
	"usr/share/doc/$PKG/changelog.Debian.gz"; do
	grep -qxF "$f" "$out/contents" || missing+="$f "
done
grep -q 'ropcie_test\|kunit' "$out/contents" && missing+="(and it holds test-only sources) "
if [[ -z $missing ]]; then
	result ok "the .deb holds the sources with dkms.conf, the CLI, krping(8), copyright, changelog"
else
	result not-ok "the .deb holds the sources with dkms.conf, the CLI, krping(8), copyright, changelog" "missing: $missing"
fi
if lintian --fail-on error,warning "$deb" >"$out/lintian.log" 2>&1; then
	result ok "lintian: no error or warning" "$(grep -v '^running with root' "$out/lintian.log")"
else
	result not-ok "lintian: no error or warning" "$(cat "$out/lintian.log")"
fi

# 3. Install: DKMS builds for every kernel with headers.
if hide_bed_kernels; then
	result ok "host: the test bed's kernels out of DKMS's sight: ${hidden[*]:-none}"
else
	result not-ok "host: the test bed's kernels out of DKMS's sight (/lib/modules not writable?)"
fi
start=$(tb_now)
installed_by_us=1
if dpkg -i "$deb" >"$out/dpkg-install.log" 2>&1; then
	result ok "dpkg -i: installed and configured in $(tb_elapsed "$start") s"
else
	result not-ok "dpkg -i" "$(tail -n 30 "$out/dpkg-install.log")"
fi
grep -E '^krping-dkms: ' "$out/dpkg-install.log" | sed 's/^/# postinst: /' || true
for series in "${MATRIX[@]}"; do
	if ! kver=$(tb_kver "$series" 2>/dev/null); then
		result ok "DKMS for $series # SKIP no kernel $series with headers installed"
		continue
	fi
	st=$(dkms status -m krping -v "$version" -k "$kver" 2>&1 || true)
	if [[ $st == *": installed"* ]]; then
		result ok "dkms status: krping/$version installed for $kver"
	else
		result not-ok "dkms status: krping/$version installed for $kver" "$st"
		cat "/var/lib/dkms/krping/$version/build/make.log" >"$out/make-$kver.log" 2>/dev/null || true
	fi
	d=/lib/modules/$kver/updates/dkms
	files=$(find "$d" \( -name 'rdma_krping.ko*' -o -name 'ropcie.ko*' \) 2>/dev/null | sort || true)
	if [[ $(grep -c . <<<"$files") == 2 ]]; then
		result ok "$kver: rdma_krping and ropcie in $d" "$files"
	else
		result not-ok "$kver: rdma_krping and ropcie in $d" "found: ${files:-nothing}"
	fi
	bad=
	for m in rdma_krping ropcie; do
		p=$(modinfo -k "$kver" -n "$m" 2>&1) || true
		[[ $p == "$d/$m.ko"* ]] || bad+="$m: $p; "
	done
	if [[ -z $bad ]]; then
		result ok "$kver: depmod resolves rdma_krping and ropcie to $d"
	else
		result not-ok "$kver: depmod resolves rdma_krping and ropcie to $d" "$bad"
	fi
done

# 4. A guest loads them with modprobe and pings with the packaged CLI.
start=$(tb_now)
rc=0
"$TB_DIR/vm-run" --kver "$GUEST_SERIES" --no-krping --no-ropcie --provider rxe \
	--out "$out/vm" --timeout 600 --dmesg-tap "$dmesg_tap" -- \
	scripts/testbed/package-test.sh --guest "$version" >"$out/guest.out" 2>"$out/vm-run.log" || rc=$?
n=0
while IFS= read -r line; do
	case "$line" in
	"ok - "* | "not ok - "*)
		st=ok
		[[ $line == not* ]] && st=not-ok
		result "$st" "guest ${line#*ok - }"
		n=$((n + 1))
		;;
	"# "*) results[-1]+=$'\n'$line ;;
	esac
done < <(grep -E '^(ok - |not ok - |# )' "$out/guest.out")
if ((rc == 0 && n > 0)) && grep -q '^# guest done' "$out/guest.out"; then
	result ok "guest $GUEST_SERIES: ran to its end in $(tb_elapsed "$start") s"
else
	result not-ok "guest $GUEST_SERIES: ran to its end (vm-run exit $rc)" \
		"$(tail -n 20 "$out/vm-run.log"; tail -n 20 "$out/guest.out")"
fi

# 5. Purge: nothing of it is left.
start=$(tb_now)
if purge; then
	result ok "dpkg --purge $PKG in $(tb_elapsed "$start") s"
else
	result not-ok "dpkg --purge $PKG" "$(tail -n 30 "$out/dpkg-purge.log")"
fi
if installed; then
	result not-ok "dpkg: $PKG gone" "$(dpkg-query -W -f='${db:Status-Abbrev}' "$PKG")"
else
	result ok "dpkg: $PKG gone"
fi
for f in "/usr/src/krping-*" /var/lib/dkms/krping; do
	# shellcheck disable=SC2086 # the glob is the point
	if compgen -G "$f" >/dev/null; then
		result not-ok "no $f left" "$(ls -d $f)"
	else
		result ok "no $f left"
	fi
done
left=$(find /lib/modules/*/updates \( -name 'rdma_krping.ko*' -o -name 'ropcie.ko*' \) 2>/dev/null || true)
if [[ -z $left ]]; then
	result ok "no krping module under /lib/modules/*/updates"
else
	result not-ok "no krping module under /lib/modules/*/updates" "$left"
fi
bad=
for series in "${MATRIX[@]}"; do
	kver=$(tb_kver "$series" 2>/dev/null) || continue
	for m in rdma_krping ropcie; do
		p=$(modinfo -k "$kver" -n "$m" 2>/dev/null) && bad+="$kver $m: $p; "
	done
done
if [[ -z $bad ]]; then
	result ok "depmod: no rdma_krping or ropcie left in modules.dep"
else
	result not-ok "depmod: no rdma_krping or ropcie left in modules.dep" "$bad"
fi
left=$(leftovers)
if [[ -z $left ]]; then
	result ok "no CLI, man page, docs or sources of krping left"
else
	result not-ok "no CLI, man page, docs or sources of krping left" "$left"
fi
back=${hidden[*]:-}
if show_bed_kernels; then
	result ok "host: the test bed's kernels back in /lib/modules: ${back:-none}"
else
	result not-ok "host: the test bed's kernels back in /lib/modules: $back"
fi
exit "$failed"
