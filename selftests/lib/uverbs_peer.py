# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Start selftests/uverbs_peer.py (a pyverbs program that posts the work
requests rping and perftest cannot be told to post) on this host or on
the remote one, and read what it prints: one JSON object per line."""

import json
import shlex
import subprocess
import sys
import threading
from pathlib import Path

from lib import krping

PEER = str(Path(__file__).resolve().parent.parent / "uverbs_peer.py")


def start(*args, user=None, remote=None):
    """uverbs_peer.py ARGS in the background: here (as NOBODY when user
    is set, stdin a pipe), or on remote (a lib.remote.SshRemote, ended by
    timeout(1) whatever happens; the selftests are at the same path
    there)."""
    argv = [sys.executable, PEER, *map(str, args)]
    if remote is not None:
        return remote.popen(f"timeout {krping.TIMEOUT} "
                            f"{shlex.join(argv)}")
    return subprocess.Popen(argv, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=user)


def result(p, timeout=krping.TIMEOUT):
    """The last JSON line of a peer that ended with exit 0."""
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"uverbs_peer.py exit {p.returncode}: {err}"
    return json.loads(out.strip().splitlines()[-1])


def first_line(p, timeout=krping.SHORT_TIMEOUT):
    """The first JSON line a peer prints, within timeout."""
    box = []
    t = threading.Thread(target=lambda: box.append(p.stdout.readline()),
                         daemon=True)
    t.start()
    t.join(timeout)
    assert box and box[0], f"uverbs_peer.py said nothing in {timeout} s"
    return json.loads(box[0])


# enum ibv_wc_status, enum ibv_wc_opcode
WC_SUCCESS, WC_LOC_PROT_ERR, WC_WR_FLUSH_ERR = 0, 4, 5
WC_REM_ACCESS_ERR, WC_RETRY_EXC_ERR = 10, 12
WC_SEND, WC_RDMA_WRITE = 0, 1


def pass_sink(srv, sink_file):
    """Hand the sink an ordered-server printed (its address and rkey) to
    a send-write peer, through sink_file, written whole at once."""
    sink = first_line(srv)
    assert set(sink) == {"addr", "rkey"}, sink
    tmp = Path(f"{sink_file}.tmp")
    tmp.write_text(json.dumps(sink))
    tmp.rename(sink_file)


def assert_write_refused(res, out):
    """A send-write peer's SEND landed in the ordered-server's receive,
    its WRITE was refused (REM_ACCESS_ERR) and the sink stayed zero."""
    assert [(w["wr_id"], w["status"]) for w in res["wcs"]] == \
        [(1, WC_SUCCESS), (2, WC_REM_ACCESS_ERR)], res
    assert out == {"sink_written_before_the_receive": False,
                   "recvs": out["recvs"], "recv_ok": True,
                   "sink_ok": False, "sink_zero": True}, out
    assert [r["status"] for r in out["recvs"]] == [WC_SUCCESS], out
