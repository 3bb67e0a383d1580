# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Oversized, binary, whitespace-wrapped and partial writes to every
configfs attribute (options and start too) and to the sysfs reset file.

Every attribute takes a good value built from the same pieces, so that
each refusal is the abuse's doing: the good value itself, bare and with
one newline, is accepted (the control). Around it:

- size: 1024 bytes is the largest write configfs/configfs.c lets
  through; 1025, 4 KiB and 64 KiB are EINVAL. (configfs core copies at
  most 4095 bytes of a write, so a 64 KiB write reaches the store as
  4095 bytes: still refused, never a prefix parsed.)
- NUL bytes before, inside, after the value and as padding: EINVAL,
  never "the C string up to the NUL".
- non-UTF-8 and look-alike bytes (0xff, overlong UTF-8, a BOM, NBSP,
  fullwidth digits, Latin-1): EINVAL.
- whitespace: one trailing "\\n" only; spaces, tabs, CR, VT, FF, a
  leading newline or two trailing ones are EINVAL.
- partial writes: each write(2) is a value of its own (configfs stores
  per write, whatever the file position), in one open file description
  or two: the chunks are judged alone, exactly as a lone write of each
  to a fresh session is, and the result is never their concatenation;
  one writev(2) of the chunks is one write of the whole value; the
  offset of pwrite(2) and O_APPEND change nothing.
- a write from an unmapped buffer: EFAULT (configfs copies nothing).

After every refused write the session's settings read back exactly as
before and it is still idle (for start: no run began).

test_bad_input.py has the per-type tables (numbers, enums, addresses,
option strings) and the zero-length write (EFAULT from configfs core).
"""

import ctypes
import errno
import os

import pytest

from lib import krping
from test_bad_input import PRESET

EINVAL = errno.EINVAL

# A good value for each attribute, different from PRESET, and what it
# reads back as. start: "0" on an idle session is a no-op.
GOOD = {
    "role": ("client", "client"),
    "addr": ("10.9.0.2", "10.9.0.2"),
    "port": ("4243", "4243"),
    "count": ("88", "88"),
    "size": ("4096", "4096"),
    "test": ("wlat", "wlat"),
    "mem_mode": ("reg", "reg"),
    "txdepth": ("128", "128"),
    "tos": ("16", "16"),
    "peer_timeout_ms": ("5000", "5000"),
    "duration_ms": ("1500", "1500"),
    "warmup": ("7", "7"),
    "qps": ("3", "3"),
    "validate": ("0", "0"),
    "verbose": ("0", "0"),
    "duplex": ("1", "1"),
    "poll": ("0", "0"),
    "server_inv": ("1", "1"),
    "local_dma_lkey": ("0", "0"),
    "read_inv": ("1", "1"),
    "options": ("client,addr=10.9.0.2,port=4243,count=88",
                "client,addr=10.9.0.2,port=4243,count=88,size=64,test=ping,"
                "mem_mode=reg,txdepth=64,tos=0,peer_timeout_ms=30000"),
    "start": ("0", None),
}
assert set(GOOD) == set(krping.ALL_ATTRS)
# Every attribute here; on the debug kernel one of each kind of parser.
ATTRS = krping.representatives(krping.ALL_ATTRS, key=krping.ATTR_KIND.get)


def abuses(v):
    """(id, bytes) of writes that must all be EINVAL, around good value v."""
    b = v.encode()
    cases = [
        ("1025B", (b + b"\n" * 1025)[:1025]),
        ("1025B_junk", b"x" * 1025),
        ("1024B_nul_padded", b + b"\x00" * (1024 - len(b))),
        ("4KiB", b * (4096 // len(b) + 1)),
        ("4KiB_A", b"A" * 4096),
        ("4KiB_spaces", b + b" " * (4096 - len(b))),
        ("4KiB_nul", b + b"\x00" * (4096 - len(b))),
        ("64KiB", b"7" * 65536),
        ("64KiB_value_first", b + b"\n" + b"\xff" * 65535),
        ("1MiB", b"1" * (1 << 20)),
        ("nul_end", b + b"\x00"),
        ("nul_after_newline", b + b"\n\x00"),
        ("nul_start", b"\x00" + b),
        ("nul_inside", b[:1] + b"\x00" + b[1:]),
        ("nul_nul", b"\x00\x00"),
        ("ff_end", b + b"\xff"),
        ("ff_start", b"\xff" + b),
        ("bad_utf8", b[:1] + b"\xc3\x28" + b[1:]),
        ("overlong_utf8", b + b"\xc0\xb1"),
        ("bom", b"\xef\xbb\xbf" + b),
        ("nbsp_end", b + b"\xc2\xa0"),
        ("latin1", b + b"\xe9"),
        ("fullwidth", "\uff11".encode()),
        ("fullwidth_end", b + "\uff11".encode()),
        ("lead_space", b" " + b),
        ("trail_space", b + b" "),
        ("trail_space_nl", b + b" \n"),
        ("lead_tab", b"\t" + b),
        ("trail_tab", b + b"\t"),
        ("crlf", b + b"\r\n"),
        ("cr", b + b"\r"),
        ("lead_nl", b"\n" + b),
        ("two_nl", b + b"\n\n"),
        ("vt", b + b"\v"),
        ("ff", b + b"\f"),
        ("twice", b + b"\n" + b),
    ]
    return cases


def idle_server(pool):
    """A server session that would start (and listen) if a write to start
    were taken as 1."""
    return pool.session("a", role="server", addr=krping.SERVER_ADDR,
                        port=krping.next_port())


def session_for(pool, attr):
    return idle_server(pool) if attr == "start" else pool.session("a", **PRESET)


def assert_unchanged(s, before, what, attr=None):
    """Settings as before, idle, no run. With attr, the quick check after
    one of many writes: that attribute, "options" (the canonical string
    holds every setting) and state; the full check once at the end."""
    if attr is not None:
        assert s.get("options") == before["options"], f"{what} changed settings"
        assert s.get(attr) == before[attr], f"{what} changed {attr}"
        assert s.state == "idle", f"{what}: {s.describe()}"
        return
    assert s.config() == before, f"{what} changed settings"
    assert s.state == "idle", f"{what}: {s.describe()}"
    assert s.get("start") == "0", what
    assert krping.kthread_pids(s.name) == [], f"{what}: a thread runs"


def raw_write(path, chunks, fds=1, flags=0):
    """Write chunks (a list of bytes) to path with one write(2) each,
    through fds open file descriptions in turn. Returns the errno (0 for
    success) of each write."""
    opened = [os.open(path, os.O_WRONLY | flags) for _ in range(fds)]
    errs = []
    try:
        for i, chunk in enumerate(chunks):
            try:
                n = os.write(opened[i % fds], chunk)
                errs.append(0 if n == len(chunk) else -n)
            except OSError as e:
                errs.append(e.errno)
    finally:
        for fd in opened:
            os.close(fd)
    return errs


@pytest.mark.parametrize("attr", ATTRS)
def test_good_value_control(pool, attr):
    """The good value the abuses are built on is accepted bare and with
    one newline (so every refusal below is the abuse's doing)."""
    value, shown = GOOD[attr]
    for data in (value.encode(), value.encode() + b"\n"):
        s = session_for(pool, attr)
        assert raw_write(s.cfg / attr, [data]) == [0], f"{attr} <- {data!r}"
        if shown is not None:
            assert s.get(attr) == shown
        assert s.state == "idle"


@pytest.mark.parametrize("attr", ATTRS)
def test_abusive_writes_refused(pool, attr):
    """Every abuse of abuses() on one session: EINVAL each time, the
    settings unchanged after each, no run started."""
    s = session_for(pool, attr)
    before = s.config()
    wrong = []
    # start: also "1" abused, on a server that would listen if it took it
    values = [GOOD[attr][0]] + (["1"] if attr == "start" else [])
    for value in values:
        for name, data in abuses(value):
            err = raw_write(s.cfg / attr, [data])[0]
            if err != EINVAL:
                wrong.append(f"{value!r} {name}: "
                             f"{krping.errname(err) if err >= 0 else err}")
            assert_unchanged(s, before, f"{attr} <- {value!r} {name}", attr)
    assert not wrong, f"{attr}: {wrong}"
    assert_unchanged(s, before, f"{attr} <- all abuses")


def test_1024_bytes_reach_the_parser(pool):
    """1024 bytes is not refused for its size: a 1024-byte number is
    ERANGE (parsed, too large), where 1025 bytes is EINVAL unparsed."""
    s = pool.session("a", **PRESET)
    before = s.config()
    assert raw_write(s.cfg / "count", [b"9" * 1024]) == [errno.ERANGE]
    assert raw_write(s.cfg / "count", [b"9" * 1025]) == [EINVAL]
    # with the newline in the 1024
    assert raw_write(s.cfg / "count", [b"9" * 1023 + b"\n"]) == [errno.ERANGE]
    assert_unchanged(s, before, "count <- 1024 bytes")


def split(value):
    """Chunks of a value for partial writes: halves, and first byte /
    rest; for start "0\\n" as "0" + "\\n"."""
    if len(value) < 2:
        value += "\n"
    b = value.encode()
    half = len(b) // 2
    return [[b[:half], b[half:]], [b[:1], b[1:]]]


def lone_outcome(pool, attr, chunks):
    """The oracle: each chunk written alone, in turn, to a fresh session:
    its errnos and the settings after."""
    s = session_for(pool, attr)
    errs = [raw_write(s.cfg / attr, [c])[0] for c in chunks]
    return errs, s.config()


def config_without_port(cfg):
    """Settings to compare between two sessions: start sessions have
    their own ports."""
    return {k: v for k, v in cfg.items() if k not in ("port", "options")}


@pytest.mark.parametrize("fds", [1, 2], ids=["one_fd", "two_fds"])
@pytest.mark.parametrize("attr", ATTRS)
def test_partial_writes_are_separate_values(pool, attr, fds):
    """A value written in pieces, through one open file description or
    two: each write(2) is judged alone, exactly as the oracle (the same
    pieces written alone to a fresh session) is, never concatenated."""
    value, shown = GOOD[attr]
    for chunks in split(value):
        want_errs, want_cfg = lone_outcome(pool, attr, chunks)
        s = session_for(pool, attr)
        errs = raw_write(s.cfg / attr, chunks, fds=fds)
        assert errs == want_errs, f"{attr} <- {chunks}: {errs} != {want_errs}"
        got = s.config()
        if attr == "start":
            got, want = config_without_port(got), config_without_port(want_cfg)
        else:
            want = want_cfg
        assert got == want, f"{attr} <- {chunks}"
        assert s.state == "idle"


def test_partial_number_is_not_concatenated(pool):
    """port "42" then "43" on one descriptor is port 43, not 4243."""
    s = pool.session("a", **PRESET)
    assert raw_write(s.cfg / "port", [b"42", b"43"]) == [0, 0]
    assert s.get("port") == "43"
    assert raw_write(s.cfg / "port", [b"42", b"43"], fds=2) == [0, 0]
    assert s.get("port") == "43"
    # a piece that is bad alone fails alone, the good one before stays
    assert raw_write(s.cfg / "port", [b"5", b"0000000"]) == [0, EINVAL]
    assert s.get("port") == "5"


@pytest.mark.parametrize("attr", ATTRS)
def test_writev_is_one_value(pool, attr):
    """One writev(2) of the pieces is one write of the whole value."""
    value, shown = GOOD[attr]
    for chunks in split(value):
        s = session_for(pool, attr)
        fd = os.open(s.cfg / attr, os.O_WRONLY)
        try:
            assert os.writev(fd, chunks) == sum(map(len, chunks))
        finally:
            os.close(fd)
        if shown is not None:
            assert s.get(attr) == shown
        assert s.state == "idle"


def test_writev_over_1024_refused(pool):
    """writev(2) pieces adding up to more than 1024 bytes: EINVAL, as one
    write of that size."""
    s = pool.session("a", **PRESET)
    before = s.config()
    fd = os.open(s.cfg / "size", os.O_WRONLY)
    try:
        with pytest.raises(OSError) as exc:
            os.writev(fd, [b"1" * 600, b"2" * 600])
    finally:
        os.close(fd)
    assert exc.value.errno == EINVAL
    assert_unchanged(s, before, "size <- writev 1200 bytes")


def test_offset_and_append_do_not_matter(pool):
    """pwrite(2) at an offset and writes through O_APPEND store the whole
    value, as a plain write does."""
    s = pool.session("a", **PRESET)
    fd = os.open(s.cfg / "size", os.O_WRONLY)
    try:
        assert os.pwrite(fd, b"1000", 100) == 4
        assert s.get("size") == "1000"
        assert os.pwrite(fd, b"2000\n", 4096) == 5
        assert s.get("size") == "2000"
        with pytest.raises(OSError) as exc:
            os.pwrite(fd, b"20x", 2)
        assert exc.value.errno == EINVAL
        assert s.get("size") == "2000"
    finally:
        os.close(fd)
    assert raw_write(s.cfg / "size", [b"3000", b"4000"],
                     flags=os.O_APPEND) == [0, 0]
    assert s.get("size") == "4000"


@pytest.mark.parametrize("attr", ATTRS)
def test_write_from_unmapped_buffer(pool, attr):
    """write(2) from an address that is not mapped: EFAULT (configfs
    copies nothing, the store never runs), settings unchanged."""
    libc = ctypes.CDLL(None, use_errno=True)
    s = session_for(pool, attr)
    before = s.config()
    fd = os.open(s.cfg / attr, os.O_WRONLY)
    try:
        for n in (1, 4, 5000):
            ctypes.set_errno(0)
            rc = libc.write(fd, ctypes.c_void_p(16), ctypes.c_size_t(n))
            assert rc == -1 and ctypes.get_errno() == errno.EFAULT, \
                f"{attr}: write({n} bytes from 0x10) = {rc}, " \
                f"{krping.errname(ctypes.get_errno())}"
    finally:
        os.close(fd)
    assert_unchanged(s, before, f"{attr} <- unmapped buffer")


RESET_BAD = [
    ("nul_end", b"1\x00"), ("nul_inside", b"1\x00x"),
    ("nul_start", b"\x00" + b"1"), ("two_nl", b"1\n\n"),
    ("lead_space", b" 1"), ("trail_space", b"1 "), ("crlf", b"1\r\n"),
    ("zero", b"0"), ("two", b"2"), ("ff", b"\xff"),
    ("4KiB", b"1" * 4096), ("64KiB", b"1" + b"\n" * 65535),
]


def test_reset_refuses_anything_but_1(pool):
    """sysfs reset takes "1" (with one newline) and nothing else: each of
    RESET_BAD is EINVAL and keeps the counters of the last run; then
    "1\\n" zeroes them."""
    srv, cli = pool.pair(count=3, size=64, validate=1)
    assert krping.run_pair(srv, cli) == ("done", "done")
    st = cli.stats()
    assert st["iterations"] == 3
    wrong = []
    for name, data in RESET_BAD:
        err = raw_write(cli.sys / "reset", [data])[0]
        if err != EINVAL:
            wrong.append(f"{name}: {krping.errname(err)}")
        assert cli.stats() == st, f"reset <- {name} zeroed the counters"
    assert not wrong, f"reset: {wrong}"
    assert raw_write(cli.sys / "reset", [b"1\n"]) == [0]
    assert cli.stats() == {k: 0 for k in krping.STATS}
