# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A session's directories, defaults, permissions and good values."""

import errno
import os
import stat
import subprocess
import sys

import pytest

from lib import krping


def test_mkdir_creates_both_dirs_rmdir_removes_them(pool):
    s = pool.session("d")
    assert s.cfg.is_dir()
    assert s.sys.is_dir(), f"{s.sys} missing after mkdir"
    s.remove()
    assert not s.cfg.exists()
    assert not s.sys.exists(), f"{s.sys} still there after rmdir"


def test_defaults(pool):
    s = pool.session("d")
    for attr, value in krping.DEFAULTS.items():
        assert s.get(attr) == value, f"default of {attr}"
    assert s.get("start") == "0"
    assert s.get("options") == (
        "port=7174,count=0,size=64,test=ping,mem_mode=reg,txdepth=64,tos=0,"
        "peer_timeout_ms=30000")
    assert s.state == "idle"
    assert s.error == 0
    assert s.device == ""
    assert s.failed_wc == ("", "")
    assert s.stats() == {name: 0 for name in krping.STATS}


def test_attribute_files(pool):
    s = pool.session("d")
    assert sorted(os.listdir(s.cfg)) == sorted(krping.ALL_ATTRS)
    assert sorted(os.listdir(s.sys)) == sorted(["state", "error", "device",
                                                "failed_wr", "wc_status",
                                                "reset", "per_qp", "stats",
                                                "latency", "bandwidth",
                                                "progress"])
    assert sorted(os.listdir(s.sys / "stats")) == sorted(krping.STATS)
    assert sorted(os.listdir(s.sys / "latency")) == \
        sorted(krping.LATENCY_FILES)
    assert sorted(os.listdir(s.sys / "bandwidth")) == sorted(krping.BANDWIDTH)


def test_no_attribute_is_world_or_group_writable(pool):
    s = pool.session("d")
    paths = [s.cfg / a for a in krping.ALL_ATTRS]
    paths += [s.sys / f for f in ("state", "error", "device", "failed_wr",
                                  "wc_status", "reset", "per_qp")]
    paths += [s.sys / "stats" / f for f in krping.STATS]
    paths += [s.sys / "latency" / f for f in krping.LATENCY]
    paths += [s.sys / "bandwidth" / f for f in krping.BANDWIDTH]
    bad = [f"{p} {stat.filemode(p.stat().st_mode)}" for p in paths
           if p.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)]
    assert not bad
    # The results are read-only, for root too; "reset" is write-only.
    ro = [p for p in paths
          if str(p).startswith(str(krping.SYSFS)) and p.name != "reset"]
    writable = [str(p) for p in ro if p.stat().st_mode & stat.S_IWUSR]
    assert not writable
    assert stat.S_IMODE((s.sys / "reset").stat().st_mode) == 0o200


def test_sysfs_files_refuse_writes(pool):
    s = pool.session("d")
    for f in ("state", "error", "device", "stats/iterations"):
        err = krping.write_errno(s.sys / f, "0")
        assert err in (errno.EACCES, errno.EPERM, errno.EIO), \
            f"write to {f}: {krping.errname(err)}"
    assert s.state == "idle"


NOBODY = 65534


def _as_nobody(code):
    """Run python code as uid/gid nobody; return its exit status."""
    def drop():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    return subprocess.run([sys.executable, "-c", code], preexec_fn=drop,
                          capture_output=True, text=True, timeout=30)


def test_only_root_can_write(pool):
    s = pool.session("d", role="client", addr=krping.SERVER_ADDR)
    before = s.config()
    code = f"""
import errno, os, sys
bad = []
for attr in {list(krping.ALL_ATTRS)!r}:
    try:
        fd = os.open("{s.cfg}/" + attr, os.O_WRONLY)
    except PermissionError:
        continue
    try:
        os.write(fd, b"1")
        bad.append(attr)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM):
            bad.append(attr + ":" + errno.errorcode[e.errno])
    finally:
        os.close(fd)
try:
    os.mkdir("{krping.CONFIGFS}/nobody")
    bad.append("mkdir")
    os.rmdir("{krping.CONFIGFS}/nobody")
except PermissionError:
    pass
print(" ".join(bad))
sys.exit(1 if bad else 0)
"""
    cp = _as_nobody(code)
    assert cp.returncode == 0, f"nobody could write: {cp.stdout} {cp.stderr}"
    assert s.config() == before
    assert s.state == "idle"


def test_reads_are_allowed_to_everyone(pool):
    s = pool.session("d")
    code = f"""
import os
for p in ["{s.cfg}/role", "{s.sys}/state", "{s.sys}/stats/iterations"]:
    open(p).read()
"""
    cp = _as_nobody(code)
    assert cp.returncode == 0, cp.stderr


# Values every attribute accepts, and what it reads back.
GOOD = [
    ("role", "client", "client"),
    ("role", "server", "server"),
    ("role", "none", "none"),
    ("addr", "10.9.0.1", "10.9.0.1"),
    ("addr", "0.0.0.0", "0.0.0.0"),
    ("addr", "255.255.255.255", "255.255.255.255"),
    ("addr", "::", "::"),
    ("addr", "::1", "::1"),
    ("addr", "fd00::1", "fd00::1"),
    ("addr", "FD00:0:0:0:0:0:0:1", "fd00::1"),
    ("addr", "::ffff:10.9.0.1", "::ffff:10.9.0.1"),
    ("addr", "fe80::1%va", "fe80::1%va"),
    ("addr", "fe80::1", "fe80::1"),
    ("port", "1", "1"),
    ("port", "65535", "65535"),
    ("count", "0", "0"),
    ("count", "4294967295", "4294967295"),
    ("size", "1", "1"),
    ("size", "4194304", "4194304"),
    ("test", "ping", "ping"),
    ("test", "wlat", "wlat"),
    ("test", "rlat", "rlat"),
    ("test", "bw", "bw"),
    ("test", "fr", "fr"),
    ("test", "slat", "slat"),
    ("test", "sbw", "sbw"),
    ("mem_mode", "dma", "dma"),
    ("mem_mode", "reg", "reg"),
    ("txdepth", "4", "4"),
    ("txdepth", "16384", "16384"),
    ("tos", "0", "0"),
    ("tos", "255", "255"),
    ("peer_timeout_ms", "0", "0"),
    ("peer_timeout_ms", "5000", "5000"),
    ("peer_timeout_ms", "3600000", "3600000"),
    ("duration_ms", "0", "0"),
    ("duration_ms", "86400000", "86400000"),
    ("warmup", "4294967295", "4294967295"),
    ("qps", "1", "1"),
    ("qps", "16", "16"),
] + [(b, v, v) for b in krping.BOOL_ATTRS for v in ("1", "0")]


@pytest.mark.parametrize("attr,value,shown",
                         krping.representatives(
                             GOOD, key=lambda g: krping.ATTR_KIND[g[0]]),
                         ids=[f"{a}={v}" for a, v, _ in GOOD])
@pytest.mark.parametrize("newline", [False, True], ids=["raw", "echo"])
def test_good_value(pool, attr, value, shown, newline):
    s = pool.session("g")
    before = s.config()
    s.set(attr, value + ("\n" if newline else ""))
    assert s.get(attr) == shown
    # Nothing else changed.
    after = s.config()
    for other in krping.OPTION_ATTRS:
        if other != attr:
            assert after[other] == before[other], f"{attr} changed {other}"
    assert s.state == "idle"


def test_settings_are_per_session(pool):
    a = pool.session("a", size=128, port=1000)
    b = pool.session("b")
    assert b.get("size") == "64" and b.get("port") == "7174"
    assert a.get("size") == "128" and a.get("port") == "1000"


def test_mkdir_twice_fails_and_names_are_independent(pool):
    s = pool.session("d")
    with pytest.raises(FileExistsError):
        os.mkdir(s.cfg)
    assert s.sys.is_dir()


def test_many_sessions(pool):
    sessions = [pool.session("m") for _ in range(32)]
    assert all(s.sys.is_dir() for s in sessions)
    for s in sessions[::2]:
        s.remove()
    assert all(not s.sys.exists() for s in sessions[::2])
    assert all(s.sys.is_dir() and s.state == "idle" for s in sessions[1::2])


def test_start_zero_on_idle_session_is_a_noop(pool):
    s = pool.session("d")
    s.set("start", "0")
    assert s.state == "idle"
    assert s.get("start") == "0"


def test_session_directory_cannot_hold_files(pool):
    s = pool.session("d")
    with pytest.raises(OSError):
        os.mkdir(s.cfg / "sub")
    with pytest.raises(OSError):
        open(s.cfg / "newfile", "w").close()


def test_rmdir_of_unknown_session_fails():
    with pytest.raises(FileNotFoundError):
        os.rmdir(krping.CONFIGFS / "nosuchsession")


def test_wait_state_sleeps_in_poll(pool):
    """Waiting on a state that does not come times out on time and
    sleeps meanwhile: poll() on the state file does not return without a
    change (no busy loop in the helper, no spurious kernfs events)."""
    import resource
    import time
    s = pool.session("w")
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    with pytest.raises(krping.StateTimeout):
        s.wait_state("done", 2.0)
    took = time.monotonic() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    assert 1.9 <= took < 4.0
    assert cpu < 0.5, f"{cpu:.2f}s of CPU while waiting 2s"


def test_state_change_wakes_poll(pool):
    """Each state change is notified: start wakes a waiter in poll()."""
    import time
    s = pool.session("w", role="server", addr=krping.SERVER_ADDR,
                     port=krping.next_port())
    t0 = time.monotonic()
    s.start()
    assert s.wait_state("listening", krping.SHORT_TIMEOUT) == "listening"
    s.stop()
    assert s.wait_state("stopped", 5) == "stopped"
    assert time.monotonic() - t0 < krping.SHORT_TIMEOUT
