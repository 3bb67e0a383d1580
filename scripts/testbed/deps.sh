#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: scripts/testbed/deps.sh
# Install (as root, Debian 12) every package the test bed needs. Idempotent:
# when dpkg already has all of them it returns at once without touching apt.
# If another apt/dpkg is running it waits for the dpkg lock instead of
# failing. Extra packages can be added with KRPING_EXTRA_PKGS="a b".
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
PKGS=(
	# Guest kernels (meta packages: newest 6.12, and 6.1) and their kbuild.
	linux-headers-6.12-amd64 linux-image-6.12-amd64
	linux-headers-amd64 linux-image-amd64
	# KUnit on UML builds from the kernel source.
	linux-source-6.12 flex bison bc libelf-dev libssl-dev xz-utils
	make gcc libc6-dev
	# build.sh compiles the modules through ccache: a warm check
	# recompiles only the sources that changed.
	ccache
	# Unstable's newest kernel (newest-kernel.sh): its kbuild programs
	# are rebuilt here (the above, and pahole, whose version its config
	# records); apt-get download and dpkg -x fetch it, nothing of
	# unstable is installed.
	pahole
	# VM: emulator, initramfs pieces, module tools.
	qemu-system-x86 busybox-static kmod cpio initramfs-tools
	# The guest uses the host's userland over 9p.
	rdma-core ibverbs-utils rdmacm-utils perftest iproute2
	# User-space verbs over ropcie (test_ropcie_uverbs.py): pyverbs.
	python3-pyverbs
	python3 python3-pytest
	# Real ULPs over ropcie in the guest (test_ulp.py): nfsd's tools and
	# mount.nfs4. Their services are never started on the host.
	nfs-kernel-server nfs-common
	# fio writes and verifies an NVMe-oF namespace through ropcie's
	# injected faults (test_ulp.py).
	fio
	# The two-guest bed (vm-pair): sshd in the remote guest, ssh and ping
	# in the local one. sshd never runs on the host (policy-rc.d below).
	openssh-server openssh-client iputils-ping
	# The Debian package (make deb, the package stage): DKMS builds its
	# modules, rst2man renders krping(8), lintian checks the .deb.
	dkms python3-docutils lintian
	# The selftests validate the CLI's JSON against its schema; make bench
	# draws its plots.
	python3-jsonschema python3-matplotlib
	# Test bed plumbing (patch: the debug kernel's fixes).
	patch
	coreutils util-linux
)
# shellcheck disable=SC2206
PKGS+=(${KRPING_EXTRA_PKGS:-})

missing() {
	local p st
	for p in "${PKGS[@]}"; do
		st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
		[[ $st == ii* ]] || printf '%s\n' "$p"
	done
}

mapfile -t need < <(missing)
if ((${#need[@]} == 0)); then
	echo "deps: all ${#PKGS[@]} packages installed"
	exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "deps: need root to install: ${need[*]}" >&2; exit 1; }

echo "deps: installing: ${need[*]}"
# Wait for a concurrent apt/dpkg (e.g. unattended upgrades, a second
# checkout) rather than dying on the lock.
APT=(apt-get -q -y -o DPkg::Lock::Timeout=1800 -o Dpkg::Use-Pty=0)

# Refresh the lists only when they are missing, stale, or lack a package.
lists_ok() {
	local p
	compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null || return 1
	[[ -z $(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages' -mmin +1440 -print -quit) ]] || return 1
	for p in "${need[@]}"; do
		apt-cache show "$p" >/dev/null 2>&1 || return 1
	done
}
updated=0
if ! lists_ok; then
	"${APT[@]}" update </dev/null
	updated=1
fi

# Packages such as nfs-kernel-server and rpcbind start their services on
# install: the host needs none of them (the guests run what they need), so
# services stay down, through Debian's policy-rc.d, unless the machine
# already has its own policy.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi

# INITRD=No: the kernel packages' hooks make no initramfs (the test bed
# boots its own, initramfs.sh), which saved minutes: initramfs-tools built
# one per kernel and then once more from its trigger.
install() {
	INITRD=No "${APT[@]}" install --no-install-recommends "${need[@]}" </dev/null
}
if ! install; then
	# A stale list can point at versions the mirror no longer has.
	((updated)) && exit 1
	"${APT[@]}" update </dev/null
	install
fi

mapfile -t need < <(missing)
if ((${#need[@]})); then
	echo "deps: still missing after install: ${need[*]}" >&2
	exit 1
fi
echo "deps: done"
