#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/package/install.sh install|uninstall
# `make install` and `make uninstall`. Installs
#   the modules (rdma_krping.ko, ropcie.ko):
#     with dkms: the module sources and dkms.conf to
#       $DESTDIR/usr/src/krping-<version>/, then (DESTDIR empty only)
#       dkms add, build and install for the kernel of KDIR; DKMS builds
#       them again for every kernel installed later (AUTOINSTALL). With a
#       DESTDIR (a staging tree) the registration is the packager's.
#     without dkms (or KRPING_NO_DKMS=1): kbuild's modules_install of the
#       modules `make` built against KDIR, into
#       $DESTDIR/lib/modules/<release of KDIR>/updates/, then depmod
#       (DESTDIR empty only)
#   the CLI: tools/krping to $DESTDIR$PREFIX/sbin/krping, its package
#     tools/krpinglib to $DESTDIR$PREFIX/share/krping/krpinglib
#   the man page krping(8) to $DESTDIR$PREFIX/share/man/man8/krping.8.gz
#     (when rst2man, python3-docutils, is there)
#   the docs to $DESTDIR$PREFIX/share/doc/krping/
# uninstall removes exactly those, for the version of this tree
# (scripts/package/version; KRPING_VERSION=... names another).
#
# Environment (the Makefile passes them): KDIR (kbuild dir of the target
# kernel), PREFIX (default /usr), DESTDIR (default empty), MAKE.
# /usr/src stays /usr/src whatever PREFIX is: DKMS looks there only.
set -euo pipefail
# shellcheck source=scripts/package/lib.sh
. "$(dirname "$0")/lib.sh"

if (($# != 1)) || [[ $1 != install && $1 != uninstall ]]; then
	echo "usage: $0 install|uninstall" >&2
	exit 2
fi
action=$1
PREFIX=${PREFIX:-/usr}
DESTDIR=${DESTDIR:-}
MAKE=${MAKE:-make}
KDIR=${KDIR:-}
# Debian keeps dkms and depmod in /usr/sbin, which a non-login PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac

version=$(pkg_version)
src=$DESTDIR/usr/src/$PKG_NAME-$version
sbin=$DESTDIR$PREFIX/sbin/krping
clilib=$DESTDIR$PREFIX/$PKG_CLI_LIB
man=$DESTDIR$PREFIX/share/man/man8/krping.8.gz
doc=$DESTDIR$PREFIX/share/doc/krping
MODULES=(rdma_krping ropcie)

use_dkms=0
[[ -z ${KRPING_NO_DKMS:-} ]] && command -v dkms >/dev/null && use_dkms=1

# have_kdir: is KDIR a kernel build tree?
have_kdir() { [[ -n $KDIR && -f $KDIR/include/generated/utsrelease.h ]]; }
# krel: the release of KDIR's kernel, as uname -r says it. (Debian's 6.1
# headers have the upstream version in include/config/kernel.release and
# override kbuild's KERNELRELEASE; UTS_RELEASE is right everywhere.)
krel() {
	have_kdir || pkg_die "no kernel build tree in KDIR='$KDIR' (install the headers or pass KDIR=)"
	sed -n 's/^#define UTS_RELEASE "\(.*\)"$/\1/p' "$KDIR/include/generated/utsrelease.h"
}

# The Debian package owns the same paths: one or the other.
if [[ -z $DESTDIR ]] && command -v dpkg-query >/dev/null &&
	[[ $(dpkg-query -W -f='${db:Status-Abbrev}' krping-dkms 2>/dev/null) == ii* ]]; then
	pkg_die "the krping-dkms package is installed; remove it (apt-get remove krping-dkms) before make $action"
fi

do_install() {
	local rel f
	if ((use_dkms)); then
		if [[ -z $DESTDIR ]]; then
			rel=$(krel)
			# The same version again (a second make install): DKMS
			# refuses to add it twice, so its old build goes first.
			if [[ -n $(dkms status -m "$PKG_NAME" -v "$version" 2>/dev/null) ]]; then
				dkms remove -m "$PKG_NAME" -v "$version" --all
			fi
		fi
		rm -rf "$src"
		pkg_copy_sources "$src" "$version"
		pkg_log "module sources: $src"
		if [[ -z $DESTDIR ]]; then
			dkms add -m "$PKG_NAME" -v "$version"
			dkms build -m "$PKG_NAME" -v "$version" -k "$rel" --kernelsourcedir "$KDIR"
			dkms install -m "$PKG_NAME" -v "$version" -k "$rel"
		else
			pkg_log "DESTDIR set: not registering with DKMS (run dkms add -m $PKG_NAME -v $version on the target)"
		fi
	else
		rel=$(krel)
		# `make install` built them first (the modules target).
		for f in "${MODULES[@]}"; do
			[[ -f $PKG_REPO/$f.ko ]] || pkg_die "$f.ko not built (run make first)"
		done
		# Unsigned, as make built them: the key that signed the
		# distribution's modules is not in its headers.
		"$MAKE" -C "$KDIR" M="$PKG_REPO" INSTALL_MOD_PATH="$DESTDIR" \
			INSTALL_MOD_DIR=updates DEPMOD=true CONFIG_MODULE_SIG_ALL= modules_install
		# Into a staging tree (a package), depmod is the target's job.
		[[ -n $DESTDIR ]] || depmod "$rel"
		pkg_log "modules installed in $DESTDIR/lib/modules/$rel/updates"
	fi
	# An earlier make install may have left modules this tree lacks.
	rm -rf "$clilib/krpinglib"
	pkg_install_cli "$DESTDIR$PREFIX"
	if command -v rst2man >/dev/null || command -v rst2man.py >/dev/null; then
		pkg_man "$man"
	else
		pkg_log "no rst2man (apt-get install python3-docutils): krping(8) not installed"
	fi
	for f in "${PKG_DOCS[@]}"; do
		install -D -m 0644 "$PKG_REPO/$f" "$doc/${f##*/}"
	done
	pkg_log "installed krping $version: $sbin, $clilib/krpinglib, $doc"
}

do_uninstall() {
	local rel d f m ko
	if command -v dkms >/dev/null && [[ -z $DESTDIR ]] &&
		[[ -n $(dkms status -m "$PKG_NAME" -v "$version" 2>/dev/null) ]]; then
		dkms remove -m "$PKG_NAME" -v "$version" --all
	fi
	rm -rf "$src"
	# What modules_install put there (for KDIR's kernel).
	if have_kdir; then
		rel=$(krel)
		d=$DESTDIR/lib/modules/$rel/updates
		m=0
		for f in "${MODULES[@]}"; do
			for ko in "$d/$f".ko "$d/$f".ko.*; do
				[[ -e $ko ]] || continue
				rm -f "$ko"
				m=1
			done
		done
		if ((m)); then
			rmdir "$d" 2>/dev/null || true
			[[ -n $DESTDIR ]] || depmod "$rel"
		fi
	fi
	rm -f "$sbin" "$man"
	# krpinglib is the CLI's alone (a __pycache__ of a python run too).
	rm -rf "$clilib/krpinglib"
	rmdir "$clilib" 2>/dev/null || true
	for f in "${PKG_DOCS[@]}"; do
		rm -f "$doc/${f##*/}"
	done
	rmdir "$doc" 2>/dev/null || true
	pkg_log "uninstalled krping $version"
}

"do_$action"
