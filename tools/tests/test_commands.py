# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krpinglib.commands and session.Session's reads, on a configfs and a
sysfs of plain directories that hold what the module's would."""

import json

import pytest

from conftest import BANDWIDTH, LATENCY
from krpinglib import cli, session
from krpinglib.abi import PROGRESS, STATS


def make(cfg, sys_, name, role, test, size, state, error=0, device="rxe0",
         latency=None, bandwidth=None, histogram=None):
    c, s = cfg / name, sys_ / name
    for d in (c, s / "stats", s / "progress"):
        d.mkdir(parents=True)
    for attr, value in (("role", role), ("test", test), ("size", size),
                        ("count", 1000), ("mem_mode", "reg"), ("qps", 1),
                        ("options", f"{role},addr=10.0.0.1,test={test}")):
        (c / attr).write_text(f"{value}\n")
    for attr, value in (("state", state), ("error", error),
                        ("device", device)):
        (s / attr).write_text(f"{value}\n")
    for i, k in enumerate(STATS):
        (s / "stats" / k).write_text(f"{(i + 1) * 100}\n")
    for k in PROGRESS:
        (s / "progress" / k).write_text("7\n")
    for group, values in (("latency", latency), ("bandwidth", bandwidth)):
        if values:
            (s / group).mkdir()
            for k, v in values.items():
                (s / group / k).write_text(f"{v}\n")
    if histogram:
        (s / "latency" / "histogram").write_text(histogram)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    cfg, sys_ = tmp_path / "cfg", tmp_path / "sys"
    make(cfg, sys_, "alat", "client", "wlat", 64, "done", latency=LATENCY,
         histogram="1000 1999 10\n2000 3999 400\n")
    make(cfg, sys_, "bbw", "client", "bw", 65536, "done",
         bandwidth=BANDWIDTH)
    make(cfg, sys_, "cfail", "server", "ping", 64, "failed", error=-104,
         device="siw0")
    monkeypatch.setattr(session, "CONFIGFS", str(cfg))
    monkeypatch.setattr(session, "SYSFS", str(sys_))
    return tmp_path


def krping(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


STATS_LINE = ("  stats: send_bytes=100 send_msgs=200 recv_bytes=300 "
              "recv_msgs=400 write_bytes=500 write_msgs=600 read_bytes=700 "
              "read_msgs=800 iterations=900")


def test_list(tree, capsys):
    assert krping(capsys, "list") == (0, (
        "NAME             STATE       ROLE    TEST  ERROR  DEVICE\n"
        "alat             done        client  wlat  0      rxe0\n"
        "bbw              done        client  bw    0      rxe0\n"
        "cfail            failed      server  ping  -104   siw0\n"), "")
    rc, out, _ = krping(capsys, "list", "--json")
    assert json.loads(out)[2] == {"name": "cfail", "state": "failed",
                                  "role": "server", "test": "ping",
                                  "error": -104, "device": "siw0"}


def test_show(tree, capsys):
    from krpinglib.report import BW_HEAD, LAT_HEAD
    rc, out, err = krping(capsys, "show", "alat", "bbw", "cfail")
    # a failed session makes show's exit status 1
    assert (rc, err) == (1, "")
    assert out.splitlines() == [
        "alat: done, error 0, device rxe0",
        "  options: client,addr=10.0.0.1,test=wlat",
        STATS_LINE,
        "  latency: samples=1000 min_ns=2237 max_ns=3474 mean_ns=4711 "
        "p50_ns=5948 p99_ns=7185 p999_ns=8422 stdev_ns=9659",
        LAT_HEAD,
        " 64      1000              2.24           3.47             5.95"
        "           4.71             9.66                   7.18"
        "                     8.42",
        "bbw: done, error 0, device rxe0",
        "  options: client,addr=10.0.0.1,test=bw",
        STATS_LINE,
        "  bandwidth: bytes=327680000 duration_ns=1234567890 "
        "mbytes_per_sec=265 msgs_per_sec=4049",
        BW_HEAD,
        " 65536      5000                      253.13        0.004049",
        "cfail: failed, error -104 (ECONNRESET), device siw0",
        "  options: server,addr=10.0.0.1,test=ping",
        STATS_LINE]


def test_show_json_and_histogram(tree, capsys):
    rc, out, _ = krping(capsys, "show", "--json", "--histogram", "alat")
    res = json.loads(out)
    assert rc == 0
    assert res["histogram"] == [
        {"low_ns": 1000, "high_ns": 1999, "count": 10},
        {"low_ns": 2000, "high_ns": 3999, "count": 400}]
    assert (res["name"], res["host"], res["size"], res["qps"],
            res["latency"]["p99_ns"], res["bandwidth"],
            res["progress"]["elapsed_ns"], res["figures"]["p99_usec"]) == \
        ("alat", None, 64, 1, 7185, None, 7, 7.185)


def test_show_prometheus_of_every_session(tree, capsys):
    rc, out, _ = krping(capsys, "show", "--prometheus")
    assert rc == 0
    assert ('krping_error{session="cfail",role="server",test="ping",'
            'device="siw0"} -104') in out.splitlines()
    assert out.count('state="done"} 1\n') == 2


def test_reset_and_rm(tree, capsys):
    (tree / "sys" / "alat" / "reset").write_text("")
    assert krping(capsys, "reset", "alat") == (0, "", "")
    assert (tree / "sys" / "alat" / "reset").read_text() == "1"
    rc, _, err = krping(capsys, "reset", "bbw")
    assert rc == 2 and err == (f"krping: bbw: no {tree}/sys/bbw/reset (no "
                               "such session, or the module has no reset)\n")
    rc, _, err = krping(capsys, "rm", "nosuch")
    assert (rc, err) == (2, "krping: no session 'nosuch'\n")
