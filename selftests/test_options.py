# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The legacy krping option string (the "options" attribute)."""

import errno

import pytest

from lib import krping

DEFAULT_CANON = ("port=7174,count=0,size=64,test=ping,mem_mode=reg,txdepth=64,"
                 "tos=0,peer_timeout_ms=30000")

# (written string, expected attributes (others default), canonical read back)
GOOD = [
    ("client,addr=10.9.0.1,port=9999,count=100,validate",
     dict(role="client", addr="10.9.0.1", port="9999", count="100",
          validate="1"),
     "client,addr=10.9.0.1,port=9999,count=100,size=64,test=ping,"
     "mem_mode=reg,txdepth=64,tos=0,peer_timeout_ms=30000,validate"),
    ("server,addr=0.0.0.0",
     dict(role="server", addr="0.0.0.0"),
     "server,addr=0.0.0.0,port=7174,count=0,size=64,test=ping,mem_mode=reg,"
     "txdepth=64,tos=0,peer_timeout_ms=30000"),
    # every option at once, through its legacy spelling where it has one
    ("server,addr6=fd00::1,port=1,count=4294967295,size=4194304,bw,"
     "mem_mode=dma,tx-depth=16384,tos=255,peer_timeout_ms=3600000,verbose,"
     "validate,duplex,poll,"
     "server_inv,local_dma_lkey,read_inv",
     dict(role="server", addr="fd00::1", port="1", count="4294967295",
          size="4194304", test="bw", mem_mode="dma", txdepth="16384",
          tos="255", peer_timeout_ms="3600000", validate="1", verbose="1",
          duplex="1", poll="1",
          server_inv="1", local_dma_lkey="1", read_inv="1"),
     "server,addr=fd00::1,port=1,count=4294967295,size=4194304,test=bw,"
     "mem_mode=dma,txdepth=16384,tos=255,peer_timeout_ms=3600000,validate,"
     "verbose,duplex,poll,"
     "server_inv,local_dma_lkey,read_inv"),
    # every option through its attribute name
    ("role=client,addr=fe80::1%va,port=65535,count=0,size=1,test=fr,"
     "mem_mode=reg,txdepth=4,tos=0,peer_timeout_ms=0,validate=1,verbose=0,"
     "duplex=0,poll=1,"
     "server_inv=0,local_dma_lkey=0,read_inv=0",
     dict(role="client", addr="fe80::1%va", port="65535", size="1",
          test="fr", txdepth="4", peer_timeout_ms="0", validate="1",
          poll="1"),
     "client,addr=fe80::1%va,port=65535,count=0,size=1,test=fr,mem_mode=reg,"
     "txdepth=4,tos=0,peer_timeout_ms=0,validate,poll"),
    ("wlat", dict(test="wlat"),
     "port=7174,count=0,size=64,test=wlat,mem_mode=reg,txdepth=64,tos=0,"
     "peer_timeout_ms=30000"),
    ("rlat", dict(test="rlat"),
     "port=7174,count=0,size=64,test=rlat,mem_mode=reg,txdepth=64,tos=0,"
     "peer_timeout_ms=30000"),
    ("fr", dict(test="fr"),
     "port=7174,count=0,size=64,test=fr,mem_mode=reg,txdepth=64,tos=0,"
     "peer_timeout_ms=30000"),
    ("slat", dict(test="slat"),
     "port=7174,count=0,size=64,test=slat,mem_mode=reg,txdepth=64,tos=0,"
     "peer_timeout_ms=30000"),
    ("sbw", dict(test="sbw"),
     "port=7174,count=0,size=64,test=sbw,mem_mode=reg,txdepth=64,tos=0,"
     "peer_timeout_ms=30000"),
    # named in the canonical string only when set
    ("wlat,warmup=10,duration_ms=2000", dict(test="wlat", warmup="10",
                                             duration_ms="2000"),
     "port=7174,count=0,size=64,test=wlat,mem_mode=reg,txdepth=64,tos=0,"
     "peer_timeout_ms=30000,duration_ms=2000,warmup=10"),
    ("bw,duration_ms=0,warmup=0", dict(test="bw"),
     "port=7174,count=0,size=64,test=bw,mem_mode=reg,txdepth=64,tos=0,"
     "peer_timeout_ms=30000"),
    # qps: named only when not 1
    ("bw,qps=16,warmup=1", dict(test="bw", qps="16", warmup="1"),
     "port=7174,count=0,size=64,test=bw,mem_mode=reg,txdepth=64,tos=0,"
     "peer_timeout_ms=30000,warmup=1,qps=16"),
    ("bw,qps=1", dict(test="bw"),
     "port=7174,count=0,size=64,test=bw,mem_mode=reg,txdepth=64,tos=0,"
     "peer_timeout_ms=30000"),
    ("role=none", {}, DEFAULT_CANON),
    ("count=0", {}, DEFAULT_CANON),
    ("client\n", dict(role="client"),
     "client,port=7174,count=0,size=64,test=ping,mem_mode=reg,txdepth=64,"
     "tos=0,peer_timeout_ms=30000"),
    # order does not matter; the canonical order is fixed
    ("validate,count=3,addr=10.9.0.2,client",
     dict(role="client", addr="10.9.0.2", count="3", validate="1"),
     "client,addr=10.9.0.2,port=7174,count=3,size=64,test=ping,mem_mode=reg,"
     "txdepth=64,tos=0,peer_timeout_ms=30000,validate"),
]


@pytest.mark.parametrize("string,attrs,canon",
                         krping.representatives(GOOD, key=lambda g: 0),
                         ids=[g[0][:40].replace("\n", "\\n") for g in GOOD])
def test_options_string_sets_everything(pool, string, attrs, canon):
    s = pool.session("o")
    s.set("options", string)
    want = dict(krping.DEFAULTS)
    want.update(attrs)
    got = {a: s.get(a) for a in krping.OPTION_ATTRS}
    assert got == want
    assert s.get("options") == canon
    assert s.state == "idle", "writing options must not start the session"
    assert s.get("start") == "0"


@pytest.mark.parametrize("string,attrs,canon",
                         krping.representatives(GOOD, key=lambda g: 0),
                         ids=[g[0][:40].replace("\n", "\\n") for g in GOOD])
def test_options_round_trip(pool, string, attrs, canon):
    """The canonical string, written back (here and to a fresh session),
    gives the same settings and the same string."""
    a = pool.session("o")
    a.set("options", string)
    snap = a.config()
    a.set("options", snap["options"])
    assert a.config() == snap
    b = pool.session("o")
    b.set("options", snap["options"] + "\n")
    assert b.config() == snap


def test_options_reflects_attributes(pool):
    s = pool.session("o", role="client", addr="10.9.0.1", port=9999,
                     count=100, validate=1)
    assert s.get("options") == (
        "client,addr=10.9.0.1,port=9999,count=100,size=64,test=ping,"
        "mem_mode=reg,txdepth=64,tos=0,peer_timeout_ms=30000,validate")
    s.set("validate", 0)
    s.set("poll", 1)
    s.set("addr", "FE80::0001%vb")
    assert s.get("options") == (
        "client,addr=fe80::1%vb,port=9999,count=100,size=64,test=ping,"
        "mem_mode=reg,txdepth=64,tos=0,peer_timeout_ms=30000,poll")


def test_options_starts_from_defaults(pool):
    """A write describes the whole session: unnamed options are reset."""
    s = pool.session("o", role="server", addr="10.9.0.1", port=4242,
                     count=7, size=4096, test="bw", mem_mode="dma",
                     txdepth=128, tos=8, validate=1, verbose=1, duplex=1,
                     poll=1, server_inv=1, local_dma_lkey=1, read_inv=1)
    s.set("options", "client,addr=10.9.0.2")
    want = dict(krping.DEFAULTS, role="client", addr="10.9.0.2")
    assert {a: s.get(a) for a in krping.OPTION_ATTRS} == want


def test_options_bare_boolean_and_explicit_values(pool):
    s = pool.session("o")
    s.set("options", "validate,poll=0,verbose=1")
    assert (s.get("validate"), s.get("poll"), s.get("verbose")) == ("1", "0", "1")


@pytest.mark.parametrize("bad,err", [
    ("client,addr=10.9.0.1,count=5,size=0", errno.ERANGE),
    ("client,addr=10.9.0.1,count=5,validate,bogus", errno.EINVAL),
    ("server,addr=10.9.0.9,port=7000,txdepth=2", errno.ERANGE),
    ("client,addr=10.9.0.1,bw,qps=17", errno.ERANGE),
    ("client,addr=10.9.0.1,bw,qps=0", errno.ERANGE),
    ("server,addr=10.9.0.9,port=7000,addr6=fd00::1", errno.EINVAL),
])
def test_options_all_or_nothing(pool, bad, err):
    """Good items before the bad one are not applied either."""
    s = pool.session("o", role="server", addr="10.9.0.1", port=4242,
                     count=9, size=333, poll=1)
    before = s.config()
    assert krping.errname(s.try_set("options", bad)) == krping.errname(err)
    assert s.config() == before


def test_options_and_attributes_validate_alike(pool):
    """The same value is accepted or refused alike by both paths."""
    values = {"port": ["0", "1", "65535", "65536", "01", "x"],
              "size": ["0", "1", "4194304", "4194305"],
              "txdepth": ["3", "4", "16384", "16385"],
              "tos": ["255", "256"],
              "addr": ["10.9.0.1", "10.9.0.01", "fe80::1%va", "::1%va"]}
    for attr, vals in values.items():
        for v in vals:
            a = pool.session("o")
            b = pool.session("o")
            ea = a.try_set(attr, v)
            eb = b.try_set("options", f"{attr}={v}")
            assert krping.errname(ea) == krping.errname(eb), f"{attr}={v}"
            if not ea:
                assert a.get(attr) == b.get(attr)
            a.remove()
            b.remove()


def test_options_refused_while_running(pool):
    srv = pool.session("s", role="server", addr=krping.SERVER_ADDR,
                       port=krping.next_port())
    srv.start()
    srv.expect_state("listening")
    before = srv.config()
    err = srv.try_set("options", "client,addr=10.9.0.2")
    assert krping.errname(err) == "EBUSY"
    assert srv.config() == before
    srv.stop()
    srv.expect_state("stopped")
