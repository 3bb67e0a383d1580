#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Usage: selftests/run_tests.sh [PYTEST ARGS...]
#
# Run the krping selftests and print kselftest TAP 13 on stdout:
#   TAP version 13 / 1..N / ok N - name / not ok N - name /
#   ok N - name # SKIP reason, diagnostics as "# ..." lines.
# Needs root, Debian's /usr/bin/python3 with pytest (python3-pytest) and a
# loaded rdma_krping (if /sys/kernel/config/krping is missing and KRPING_KO
# names the module, it is insmod'ed). On one host the suite builds its
# topology when it is missing (lib/single_host.py: rxe0 on veth va
# 10.9.0.1/24, rxe1 on vb 10.9.0.2/24; siw with KRPING_PROVIDER=siw) and
# removes it after; across two hosts see lib/env.py. In the test bed:
#
#   scripts/testbed/vm-run --kver 6.12 -- selftests/run_tests.sh
#
# Extra arguments go to pytest, relative to selftests/, e.g.
#   selftests/run_tests.sh test_ping.py -k 'reg and 4096'
#
# Environment: KRPING_PYTHON (default /usr/bin/python3), KRPING_KO,
# KRPING_TEST_TIMEOUT (per wait, default 60 s), KRPING_TEST_WATCHDOG
# (per test, default 300 s), KRPING_TEST_PORT_BASE (default 20000).
#
# Exit status: 0 nothing failed (skips allowed), 1 a test failed or no
# test was selected, 4 (kselftest skip) nothing could run here (every
# selected test skipped), 2 a pytest usage error (a missing file, a bad
# option), other: pytest broke.
set -u

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${KRPING_PYTHON:-/usr/bin/python3}
ksft_skip=4

skip_all() {
	echo "TAP version 13"
	echo "1..0 # SKIP $*"
	exit $ksft_skip
}

[ "$(id -u)" -eq 0 ] || skip_all "must run as root"
"$python" -c 'import pytest' 2>/dev/null ||
	skip_all "$python has no pytest (apt-get install python3-pytest)"

if [ ! -d /sys/kernel/config/krping ] && [ -n "${KRPING_KO:-}" ]; then
	PATH=$PATH:/usr/sbin:/sbin insmod "$KRPING_KO" >&2 ||
		skip_all "insmod $KRPING_KO failed"
fi
[ -d /sys/kernel/config/krping ] ||
	skip_all "rdma_krping not loaded (/sys/kernel/config/krping missing)"

export PYTHONDONTWRITEBYTECODE=1
export PATH=$PATH:/usr/sbin:/sbin
cd "$dir" || exit 1
# pytest exits 4 both for kselftest's skip (every selected test skipped)
# and for its own usage errors: a bad option (no TAP at all), a missing
# file or a bad -k expression (lib/tap.py's "Bail out! pytest usage
# error"). The second is no skip.
tap=$(mktemp) || exit 1
trap 'rm -f "$tap"' EXIT
"$python" -m pytest -v -c "$dir/pytest.ini" \
	--rootdir "$dir" --tap --continue-on-collection-errors "$@" | tee "$tap"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq "$ksft_skip" ] && { ! grep -q '^1\.\.[0-9]' "$tap" ||
	grep -q '^Bail out! pytest usage error' "$tap"; }; then
	echo "# pytest usage error: exit status 4 is no skip here" >&2
	rc=2
fi
exit "$rc"
