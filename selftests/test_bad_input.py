# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Every attribute refuses bad input with the right errno and changes
nothing: the whole session reads back exactly as before.

The rules (configfs/krping_options.c): numbers are plain decimal digits
(no sign, no 0x, no leading zero, no spaces); a malformed value is EINVAL,
a well-formed number out of range ERANGE (also past 32 bits); booleans are
exactly 0 or 1; enums are the lower-case names; addresses are IPv4 dotted
quads without leading zeros or IPv6 literals, "%ifname" only on fe80::/10;
one trailing newline is accepted, nothing else; empty, NUL bytes and
writes over 1024 bytes are EINVAL.
"""

import errno

import pytest

from lib import krping

# Value tables through the option parser, whose KUnit cases run on the
# debug kernel; Debian's kernel runs these.
pytestmark = krping.STOCK_ONLY

EINVAL, ERANGE = errno.EINVAL, errno.ERANGE

# Malformed for every attribute, whatever its type.
# (A zero-length write never reaches the attribute: configfs core fails it
# with EFAULT; test_zero_length_write_changes_nothing covers that.)
COMMON = [
    ("\n", EINVAL),
    ("\n\n", EINVAL),
    (" ", EINVAL),
    ("x" * 2000, EINVAL),       # longer than any value may be
    (b"1\x00", EINVAL),          # NUL inside the write
    (b"\x00", EINVAL),
    (b"\xff", EINVAL),
]


def number_cases(lo, hi):
    """Bad inputs for a decimal attribute with range [lo, hi]."""
    cases = [
        ("abc", EINVAL), ("12a", EINVAL), ("a12", EINVAL), ("1 2", EINVAL),
        (" 12", EINVAL), ("12 ", EINVAL), ("12\t", EINVAL), ("12\n\n", EINVAL),
        ("\n12", EINVAL), ("12\r\n", EINVAL),
        ("-1", EINVAL), ("-0", EINVAL), ("+12", EINVAL), ("0x10", EINVAL),
        ("012", EINVAL), ("00", EINVAL), ("1e3", EINVAL), ("1.5", EINVAL),
        ("12,", EINVAL), ("½", EINVAL),
        ("4294967296", ERANGE),                 # 2^32
        ("18446744073709551616", ERANGE),       # 2^64
        ("9" * 40, ERANGE),
    ]
    if lo > 0:
        cases.append(("0", ERANGE))
    if lo > 1:
        cases.append((str(lo - 1), ERANGE))
    if hi < 2 ** 32 - 1:
        cases.append((str(hi + 1), ERANGE))
        cases.append(("4294967295", ERANGE))
    return cases


BOOL_BAD = [
    ("2", EINVAL), ("-1", EINVAL), ("01", EINVAL), ("00", EINVAL),
    ("y", EINVAL), ("n", EINVAL), ("yes", EINVAL), ("true", EINVAL),
    ("on", EINVAL), ("Y", EINVAL), ("1 ", EINVAL), (" 1", EINVAL),
    ("1\n\n", EINVAL), ("10", EINVAL), ("4294967296", EINVAL),
]

ROLE_BAD = [
    ("foo", EINVAL), ("Client", EINVAL), ("CLIENT", EINVAL),
    ("clientx", EINVAL), ("clien", EINVAL), (" client", EINVAL),
    ("client ", EINVAL), ("client\n\n", EINVAL), ("client,", EINVAL),
    ("1", EINVAL), ("0", EINVAL), ("server\r", EINVAL),
]

TEST_BAD = [
    ("foo", EINVAL), ("Ping", EINVAL), ("pingx", EINVAL), ("pin", EINVAL),
    ("0", EINVAL), ("latency", EINVAL), ("ping ", EINVAL), ("bw\n\n", EINVAL),
]

MEM_MODE_BAD = [
    ("fastreg", EINVAL), ("mr", EINVAL), ("mw", EINVAL), ("REG", EINVAL),
    ("0", EINVAL), ("dma ", EINVAL), ("reg\n\n", EINVAL),
]

ADDR_BAD = [
    ("10.9.0", EINVAL), ("10.9.0.", EINVAL), (".10.9.0.1", EINVAL),
    ("10.9.0.256", EINVAL), ("10.9.0.1.5", EINVAL), ("10.9.0.1x", EINVAL),
    ("10.9.0.-1", EINVAL), ("10..9.0", EINVAL), ("010.9.0.1", EINVAL),
    ("10.9.0.01", EINVAL), ("0x0a.9.0.1", EINVAL), ("10.9.0.1 ", EINVAL),
    (" 10.9.0.1", EINVAL), ("10.9.0.1\n\n", EINVAL), ("10.9.0.1/24", EINVAL),
    ("10.9.0.1:7174", EINVAL), ("10.9.0.1%va", EINVAL), ("167772161", EINVAL),
    ("localhost", EINVAL), ("example.com", EINVAL), ("4294967296", EINVAL),
    ("1.2.3.4294967297", EINVAL),
    ("::g", EINVAL), (":::", EINVAL), ("1::2::3", EINVAL), ("fd00:::1", EINVAL),
    ("1:2:3:4:5:6:7:8:9", EINVAL), ("12345::1", EINVAL), ("[::1]", EINVAL),
    ("::1%lo", EINVAL), ("fd00::1%va", EINVAL), ("::ffff:10.9.0.256", EINVAL),
    ("::ffff:010.9.0.1", EINVAL), ("::1 ", EINVAL), ("::1/64", EINVAL),
    ("fe80::1%", EINVAL), ("fe80::1%" + "x" * 16, EINVAL),
    ("fe80::1%a/b", EINVAL), ("fe80::1%a:b", EINVAL), ("fe80::1%a%b", EINVAL),
    ("fe80::1%a,b", EINVAL), ("fe80::1%.", EINVAL), ("fe80::1%..", EINVAL),
    ("fe80::1%a b", EINVAL), ("%va", EINVAL),
]

TABLE = {
    "role": ROLE_BAD,
    "addr": ADDR_BAD,
    "port": number_cases(1, 65535),
    "count": number_cases(0, 2 ** 32 - 1),
    "size": number_cases(1, 4194304),
    "test": TEST_BAD,
    "mem_mode": MEM_MODE_BAD,
    "txdepth": number_cases(4, 16384),
    "tos": number_cases(0, 255),
    "peer_timeout_ms": number_cases(0, 3600000),
    "duration_ms": number_cases(0, 86400000),
    "warmup": number_cases(0, 2 ** 32 - 1),
    "qps": number_cases(1, 16),
}
for _b in krping.BOOL_ATTRS:
    TABLE[_b] = BOOL_BAD


def _show(value):
    """A readable, backslash-free test id for a value."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    if len(text) > 24:
        text = f"{text[:8]}...({len(text)})"
    names = {"\n": "<nl>", "\r": "<cr>", "\t": "<tab>", "\x00": "<nul>",
             " ": "<sp>"}
    return "".join(names.get(c, c if " " < c < "\x7f" else f"<{ord(c):02x}>")
                   for c in text) or "<empty>"


CASES = [(attr, value, err)
         for attr, cases in TABLE.items() for value, err in cases + COMMON]
IDS = [f"{a}={_show(v)}" for a, v, _ in CASES]

# Non-default settings, so that "nothing changed" also means "not reset".
PRESET = dict(role="server", addr="10.9.0.1", port=4242, count=7, size=333,
              test="rlat", mem_mode="dma", txdepth=99, tos=17,
              peer_timeout_ms=4321, duration_ms=1234, warmup=3, qps=2,
              validate=1, verbose=1, poll=1, local_dma_lkey=1)


@pytest.mark.parametrize("attr,value,err", CASES, ids=IDS)
def test_bad_value_refused(pool, attr, value, err):
    s = pool.session("b", **PRESET)
    before = s.config()
    got = s.try_set(attr, value)
    assert krping.errname(got) == krping.errname(err), \
        f"{attr} <- {value!r}"
    assert s.config() == before, f"{attr} <- {value!r} changed settings"
    assert s.state == "idle"


@pytest.mark.parametrize("attr", sorted(TABLE))
def test_bad_value_refused_on_default_session(pool, attr):
    """Same with a fresh session (defaults), a few cases per attribute."""
    s = pool.session("b")
    before = s.config()
    for value, err in TABLE[attr][:4] + COMMON[:2]:
        got = s.try_set(attr, value)
        assert krping.errname(got) == krping.errname(err), \
            f"{attr} <- {value!r}"
        assert s.config() == before, f"{attr} <- {value!r} changed settings"


START_BAD = ["2", "-1", "01", "yes", "on", "\n", "1 ", "1\n\n", "10",
             "start", b"1\x00"]


@pytest.mark.parametrize("value", START_BAD, ids=[_show(v) for v in START_BAD])
def test_bad_start_value_refused(pool, value):
    s = pool.session("b", role="client", addr=krping.SERVER_ADDR,
                     port=krping.next_port())
    got = s.try_set("start", value)
    assert krping.errname(got) == "EINVAL", f"start <- {value!r}"
    assert s.state == "idle"
    assert s.get("start") == "0"
    assert krping.kthread_pids(s.name) == []


# All-or-nothing of the legacy string: a bad item anywhere leaves
# everything as it was.
OPTIONS_BAD = [
    ("bogus", EINVAL),
    ("client,bogus", EINVAL),
    ("client,addr=10.9.0.1,port=0", ERANGE),
    ("client,addr=10.9.0.1,port=65536", ERANGE),
    ("client,addr=10.9.0.1,size=0", ERANGE),
    ("client,addr=10.9.0.1,size=4194305", ERANGE),
    ("client,addr=10.9.0.1,count=4294967296", ERANGE),
    ("client,addr=10.9.0.1,txdepth=3", ERANGE),
    ("client,addr=10.9.0.1,tos=256", ERANGE),
    ("client,addr=10.9.0.1,port=-1", EINVAL),
    ("client,addr=10.9.0.1,port=", EINVAL),
    ("client,addr=10.9.0.1,port", EINVAL),
    ("client,addr=10.9.0.1,port=12a", EINVAL),
    ("client,addr=10.9.0.256", EINVAL),
    ("client,addr=", EINVAL),
    ("client,addr6=10.9.0.1", EINVAL),
    ("client,addr=10.9.0.1,addr6=fd00::1", EINVAL),
    ("client,addr=10.9.0.1,addr=10.9.0.2", EINVAL),
    ("client,server", EINVAL),
    ("client,client", EINVAL),
    ("client=1", EINVAL),
    ("client,role=server", EINVAL),
    ("role=bogus", EINVAL),
    ("client,bw,rlat", EINVAL),
    ("client,bw,test=bw", EINVAL),
    ("client,bw=1", EINVAL),
    ("client,test=foo", EINVAL),
    ("client,mem_mode=fastreg", EINVAL),
    ("client,validate=2", EINVAL),
    ("client,validate=", EINVAL),
    ("client,validate,validate", EINVAL),
    ("client,txdepth=64,tx-depth=64", EINVAL),
    ("client,,addr=10.9.0.1", EINVAL),
    ("client,addr=10.9.0.1,", EINVAL),
    (",client", EINVAL),
    (",", EINVAL),
    ("client addr=10.9.0.1", EINVAL),
    ("client;addr=10.9.0.1", EINVAL),
    (" client", EINVAL),
    ("Client", EINVAL),
    ("client,addr=10.9.0.1\n\n", EINVAL),
    ("client,start=1", EINVAL),
    ("client,options=x", EINVAL),
]


@pytest.mark.parametrize("value,err", OPTIONS_BAD + COMMON,
                         ids=[_show(v) for v, _ in OPTIONS_BAD + COMMON])
def test_bad_options_string_refused(pool, value, err):
    s = pool.session("b", **PRESET)
    before = s.config()
    got = s.try_set("options", value)
    assert krping.errname(got) == krping.errname(err), f"options <- {value!r}"
    assert s.config() == before, f"options <- {value!r} changed settings"


@pytest.mark.parametrize("attr", krping.ALL_ATTRS)
def test_zero_length_write_changes_nothing(pool, attr):
    """write(fd, "", 0) is answered by configfs itself (fill_write_buffer:
    nothing copied -> EFAULT in 6.1 and 6.12); the store never runs."""
    s = pool.session("b", **PRESET)
    before = s.config()
    got = s.try_set(attr, b"")
    assert got in (0, errno.EFAULT), f"{attr} <- b'': {krping.errname(got)}"
    assert s.config() == before
    assert s.state == "idle"
