# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# shellcheck shell=bash
#
# Shared by install.sh and deb.sh; source it, do not run it.

PKG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PKG_REPO=$(cd "$PKG_DIR/../.." && pwd)
# The DKMS module name: /usr/src/krping-<version>, /var/lib/dkms/krping.
# shellcheck disable=SC2034 # used by the scripts that source this
PKG_NAME=krping
# The user documents shipped with the CLI (the test bed's are not).
# shellcheck disable=SC2034
PKG_DOCS=(README.md Documentation/krping.rst Documentation/ropcie.rst
	Documentation/krping-json.rst Documentation/krping-results.schema.json
	Documentation/ABI/testing/configfs-krping
	Documentation/ABI/testing/sysfs-kernel-krping)

pkg_log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
pkg_die() { pkg_log "error: $*"; exit 1; }

# The CLI's package (tools/krpinglib): where the installed krping looks
# for it, ../share/krping from its own directory (tools/krping says so).
# shellcheck disable=SC2034
PKG_CLI_LIB=share/krping

# pkg_install_cli ROOT: tools/krping as ROOT/sbin/krping and its package's
# modules (tools/krpinglib/*.py, no byte code) in ROOT/$PKG_CLI_LIB/krpinglib.
pkg_install_cli() {
	local root=$1 f
	install -D -m 0755 "$PKG_REPO/tools/krping" "$root/sbin/krping"
	install -d -m 0755 "$root/$PKG_CLI_LIB/krpinglib"
	for f in "$PKG_REPO"/tools/krpinglib/*.py; do
		install -m 0644 "$f" "$root/$PKG_CLI_LIB/krpinglib/${f##*/}"
	done
}

# pkg_version: the version of scripts/package/version.
pkg_version() { "$PKG_DIR/version"; }

# pkg_copy_sources DEST VERSION: the module sources DKMS builds (the
# kbuild files and the sources of rdma_krping.ko and ropcie.ko: every .c
# and .h of the module directories and any top-level header, a compat
# header included; not those of the test-only modules), with dkms.conf
# for VERSION, into DEST (created). Files 0644, directories 0755.
pkg_copy_sources() {
	local dest=$1 version=$2 f
	mkdir -p "$dest"
	(
		cd "$PKG_REPO" || exit 1
		shopt -s nullglob
		for f in Kbuild Kconfig ./*.h {krping,configfs,ropcie,compat,include}/*.[ch] \
			include/*/*.h; do
			f=${f#./}
			case "$f" in ropcie/ropcie_test*) continue ;; esac
			install -D -m 0644 "$f" "$dest/$f"
		done
	) || pkg_die "cannot copy the module sources to $dest"
	sed "s/@VERSION@/$version/" "$PKG_REPO/dkms.conf" >"$dest/dkms.conf"
	chmod 0644 "$dest/dkms.conf"
	grep -qF "PACKAGE_VERSION=\"$version\"" "$dest/dkms.conf" ||
		pkg_die "dkms.conf has no PACKAGE_VERSION line to fill in"
}

# pkg_man OUT: krping(8), rendered from Documentation/man/krping.8.rst
# with rst2man (python3-docutils) and compressed (gzip -9n) to OUT.
pkg_man() {
	local rst2man
	rst2man=$(command -v rst2man || command -v rst2man.py) ||
		pkg_die "rst2man not found (apt-get install python3-docutils)"
	mkdir -p "$(dirname "$1")"
	# --exit-status=2: a warning of docutils fails the build.
	"$rst2man" --exit-status=2 "$PKG_REPO/Documentation/man/krping.8.rst" >"$1.roff" ||
		pkg_die "rst2man failed on Documentation/man/krping.8.rst"
	gzip -9n <"$1.roff" >"$1"
	rm -f "$1.roff"
}
