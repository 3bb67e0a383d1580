#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/package/deb.sh [--out DIR]
# `make deb`: build krping-dkms_<version>-<rev>_all.deb in DIR (default:
# the tree's top directory) with dpkg-deb, no network, no debhelper:
#   /usr/src/krping-<version>/   the sources of rdma_krping.ko and
#                                ropcie.ko with dkms.conf
#   /usr/sbin/krping             tools/krping
#   /usr/share/krping/krpinglib/ tools/krpinglib/*.py, the CLI's package
#   /usr/share/man/man8/krping.8.gz   from Documentation/man/krping.8.rst
#                                (rst2man, python3-docutils)
#   /usr/share/doc/krping-dkms/  copyright, changelog.Debian.gz, the guide
#   DEBIAN/postinst, prerm       dkms add, build and install for each
#                                installed kernel with headers; dkms remove
# <version> is scripts/package/version's (VERSION, +git<date>.<hash> off a
# release tag), <rev> the Debian revision, $KRPING_DEB_REVISION or 1.
# Maintainer: $DEBFULLNAME <$DEBEMAIL> if set, else HEAD's committer.
# File dates are HEAD's commit date (SOURCE_DATE_EPOCH), owners root:
# two builds of one commit give the same bytes. Prints the .deb's path.
set -euo pipefail
# shellcheck source=scripts/package/lib.sh
. "$(dirname "$0")/lib.sh"

out=$PKG_REPO
while (($#)); do
	case "$1" in
	--out) out=$2; shift 2 ;;
	*) echo "usage: $0 [--out DIR]" >&2; exit 2 ;;
	esac
done
for t in dpkg-deb rst2man; do
	command -v "$t" >/dev/null || pkg_die "$t not found (scripts/testbed/deps.sh installs it)"
done

version=$(pkg_version)
rev=${KRPING_DEB_REVISION:-1}
[[ $rev =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || pkg_die "KRPING_DEB_REVISION '$rev' is no Debian revision"
debver=$version-$rev
pkg=krping-dkms

git_head() { [[ -e $PKG_REPO/.git ]] && git -C "$PKG_REPO" log -1 "$@" HEAD 2>/dev/null; }
if [[ -n ${DEBFULLNAME:-} && -n ${DEBEMAIL:-} ]]; then
	maintainer="$DEBFULLNAME <$DEBEMAIL>"
else
	maintainer=$(git_head --format='%cn <%ce>') || maintainer=
	[[ -n $maintainer ]] || maintainer="krping developers <krping@users.noreply.github.com>"
fi
commit=$(git_head --format=%H) || commit=
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git_head --format=%ct || date +%s)}
changedate=$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")
# The copyright notice's years: the first commit's to HEAD's.
last=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y)
first=$([[ -e $PKG_REPO/.git ]] && git -C "$PKG_REPO" log --reverse --format=%ad --date=format:%Y HEAD |
	head -n 1) || first=
years=${first:-$last}
[[ $years == "$last" ]] || years+="-$last"

stage=$(mktemp -d "${TMPDIR:-/tmp}/krping-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/root
doc=$root/usr/share/doc/$pkg
tmpl=$PKG_DIR/debian
# fill FILE: a template with its comment lines dropped and @...@ filled in.
fill() {
	sed -e '/^#[^!]/d' -e "s|@VERSION@|$version|g" -e "s|@DEBVERSION@|$debver|g" \
		-e "s|@MAINTAINER@|$maintainer|g" -e "s|@SIZE@|${size:-0}|g" -e "s|@YEARS@|$years|g" "$1"
}

pkg_copy_sources "$root/usr/src/$PKG_NAME-$version" "$version"
pkg_install_cli "$root/usr"
pkg_man "$root/usr/share/man/man8/krping.8.gz"
install -d -m 0755 "$doc"
fill "$tmpl/copyright" >"$doc/copyright"
for f in "${PKG_DOCS[@]}"; do
	# Debian policy 12.3: documentation over 4 KiB is compressed.
	if (($(stat -c %s "$PKG_REPO/$f") > 4096)); then
		gzip -9n <"$PKG_REPO/$f" >"$doc/${f##*/}.gz"
	else
		install -m 0644 "$PKG_REPO/$f" "$doc/${f##*/}"
	fi
done
{
	printf '%s (%s) unstable; urgency=medium\n\n' "${PKG_NAME}" "$debver"
	printf '  * Built by scripts/package/deb.sh from the krping tree'
	if [[ -n $commit ]]; then
		printf ',\n    git commit %s.\n' "$commit"
	else
		printf '.\n'
	fi
	printf '\n -- %s  %s\n' "$maintainer" "$changedate"
} | gzip -9n >"$doc/changelog.Debian.gz"

# Not for Debian's archive: no ITP bug to close (lintian's
# initial-upload-closes-no-bugs); the override says so.
install -D -m 0644 "$tmpl/lintian-overrides" "$root/usr/share/lintian/overrides/$pkg"
sed -i '/^# SPDX/d' "$root/usr/share/lintian/overrides/$pkg"
install -d -m 0755 "$root/DEBIAN"
for f in postinst prerm; do
	fill "$tmpl/$f" >"$root/DEBIAN/$f"
	chmod 0755 "$root/DEBIAN/$f"
done
(cd "$root" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
# dpkg-gencontrol's way: one KiB per started KiB of each file.
size=$(find "$root/usr" -type f -printf '%s\n' | awk '{ k += int(($1 + 1023) / 1024) } END { print k + 0 }')
fill "$tmpl/control" >"$root/DEBIAN/control"
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control"

find "$root" -type d -exec chmod 0755 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
mkdir -p "$out"
deb=$(realpath "$out")/${pkg}_${debver}_all.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb.tmp" >/dev/null
mv -f "$deb.tmp" "$deb"
pkg_log "built $deb"
echo "$deb"
