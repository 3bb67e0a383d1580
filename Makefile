# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# krping top level. The module itself is described in ./Kbuild, which kbuild
# reads in preference to this file, so this Makefile is only the front end.
#
#   make / make modules   build the modules a user loads, rdma_krping.ko and
#                         ropcie.ko, in place against KDIR (the test-only
#                         ropcie_test.ko and the KUnit suites are the test
#                         bed's: scripts/testbed/build.sh)
#   make install          the modules through DKMS when dkms is installed
#                         (sources to /usr/src/krping-VERSION, dkms add,
#                         build, install for KDIR's kernel), else kbuild's
#                         modules_install to /lib/modules/<kver>/updates;
#                         tools/krping to $(PREFIX)/sbin/krping (its
#                         package to $(PREFIX)/share/krping), krping(8),
#                         the docs to $(PREFIX)/share/doc/krping.
#                         PREFIX=/usr, DESTDIR= (a staging tree: no dkms add)
#   make uninstall        remove exactly what make install added
#   make deb              krping-dkms_VERSION-1_all.deb in this directory
#                         (scripts/package/deb.sh; VERSION is
#                         scripts/package/version's: VERSION+git<date>.<hash>)
#   make clean            remove in-place build products, results/ and the .deb
#   make deps             install the Debian packages the test bed needs
#   make build            W=1 builds for 6.12 and 6.1 in $KRPING_CACHE
#   make check            deps, builds, the selftests in a VM of each kernel
#                         (6.12, 6.1, unstable's newest: newest),
#                         the debug kernel (KASAN, lockdep, kmemleak) with
#                         KUnit and the selftests over rxe and siw, the suite
#                         across a 6.12 and a 6.1 guest over rxe (two-host)
#                         and over ropcie's PCI link (two-host-ropcie), and
#                         two 6.12 guests over siw (two-host-siw),
#                         the Debian package (package), stages overlapping;
#                         summary, last line "N passed, N failed, ..."
#   make check-STAGE      one stage of check (deps build bed selftests
#                         selftests-6.1 newest debug-kernel debug-rxe debug-siw
#                         two-host two-host-ropcie two-host-siw), or
#                         debug-kunit: the KUnit suites alone in a debug-kernel
#                         VM (not in check: debug-siw runs them), or
#                         two-host-rxe: RoCE across two 6.12 guests (not in check), or
#                         package: the .deb installed on the host, DKMS builds,
#                         modprobe and a ping in a 6.12 guest, purge, or
#                         kunit: the KUnit suites on UML (not in check), or
#                         smoke: a short ping in a 6.1 VM (not in check), or
#                         kcsan: the selftests on a KCSAN kernel (not in check), or
#                         two-host-all: every two-host test across two 6.12 guests (not in check), or
#                         two-host-ropcie-debug: the PCI link's hostile-input tests
#                         against a debug-kernel guest (not in check)
#   make run              deps, builds, then the demo in a 6.12 VM
#   make vm CMD='...'     run CMD in a VM (KVER=6.12|6.1; see scripts/testbed/vm-run)
#   make bench            krping against perftest on rxe in a 6.12 VM (not in check)
#   make bench-pair       krping over ropcie's PCI link vs rxe, two 6.12 VMs
#
# KDIR defaults to the running kernel's build dir; when that does not exist
# (a host whose own kernel has no headers, like our CI machine) it falls
# back to the newest installed Debian 6.12 headers, the primary target.

TB := scripts/testbed
KDIR ?= $(shell d=/lib/modules/$$(uname -r)/build; \
	if [ -d "$$d" ]; then echo "$$d"; else $(TB)/kver --headers 6.12 2>/dev/null; fi)
KVER ?= 6.12
CMD ?= sh -c 'uname -a; rdma link show'

CHECK_STAGES := deps build bed selftests selftests-6.1 smoke newest debug-kernel debug-kunit debug-rxe debug-siw kunit kcsan \
	two-host two-host-rxe two-host-ropcie two-host-siw two-host-all two-host-ropcie-debug package

# The modules a user loads (dkms.conf builds the same two).
USER_MODULES := CONFIG_RDMA_KRPING=m CONFIG_ROPCIE=m
PREFIX ?= /usr
DESTDIR ?=

.PHONY: all modules clean deps build check run vm install uninstall deb \
	$(addprefix check-,$(CHECK_STAGES))

all: modules

modules:
	@test -n "$(KDIR)" || { echo "no kernel headers: run $(TB)/deps.sh or pass KDIR=" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(USER_MODULES) modules

# With dkms, DKMS builds the modules itself from the copied sources;
# without it (or with KRPING_NO_DKMS=1) kbuild installs what make built.
DKMS = $(shell PATH="$$PATH:/usr/sbin:/sbin" command -v dkms 2>/dev/null)
install: $(if $(KRPING_NO_DKMS),modules,$(if $(DKMS),,modules))
	KDIR="$(KDIR)" PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" MAKE="$(MAKE)" \
		scripts/package/install.sh install

uninstall:
	KDIR="$(KDIR)" PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" MAKE="$(MAKE)" \
		scripts/package/install.sh uninstall

deb:
	scripts/package/deb.sh --out $(CURDIR)

# Works without headers too, so a fresh checkout can always be cleaned.
clean:
	@if [ -n "$(KDIR)" ] && [ -d "$(KDIR)" ]; then \
		$(MAKE) -C $(KDIR) M=$(CURDIR) clean; \
	else \
		find . -path ./.git -prune -o \( -name '*.o' -o -name '*.ko' -o -name '*.mod' \
			-o -name '*.mod.c' -o -name '.*.cmd' -o -name '*.a' \) -type f -print0 | xargs -0r rm -f; \
		rm -f Module.symvers modules.order; \
	fi
	rm -rf results
	rm -f krping-dkms_*.deb

deps:
	$(TB)/deps.sh

build: deps
	$(TB)/build.sh 6.12 6.1

check:
	@$(TB)/check.sh

$(addprefix check-,$(CHECK_STAGES)):
	@$(TB)/check.sh $(@:check-%=%)

run: deps
	$(TB)/build.sh --tap /dev/null 6.12 6.1
	$(TB)/vm-run --kver 6.12 -- $(TB)/demo.sh

vm:
	$(TB)/vm-run --kver $(KVER) -- $(CMD)

# make bench: krping against perftest on rxe in one 6.12 VM
# (results/bench.txt, results/bench.json), then perftest over ropcie
# against perftest over rxe and krping over ropcie (results/
# bench-uverbs.txt). Not part of make check.
.PHONY: bench bench-pair
bench: deps
	scripts/bench/run.sh $(BENCH_ARGS)
# make bench-pair: krping over ropcie's PCI link against krping over rxe
# on the data link of the same two 6.12 VMs (results/bench-pair.txt),
# then the perftest table across them (results/bench-pair-uverbs.txt).
bench-pair: deps
	scripts/bench/run.sh --pair $(BENCH_ARGS)
