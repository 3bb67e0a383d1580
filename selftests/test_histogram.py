# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The latency histogram: /sys/kernel/krping/<name>/latency/histogram.

After a wlat, rlat, slat or ping run the file holds one line "LOW_NS
HIGH_NS COUNT" per non-empty bucket: the counts add up to latency/samples,
the buckets ascend without overlapping, the first holds latency/min_ns
and the last latency/max_ns. It is empty before a run, while one goes
(the last run's histogram goes at start), for a test that takes no
samples, and after a reset. A run stopped mid-way publishes the samples
it took. Then the CLI's --histogram: its text after the table, its JSON
against Documentation/krping-results.schema.json, and "show --histogram"
against the file.

Counts are small: TCG is slow, and the checks do not need more (the
merging of buckets that keeps the file within a page is KUnit's part).
"""

import json
import os

import pytest

from lib import krping
from lib.krping import (bench_latency_samples, histogram_problems, run_pair,
                        session_histogram, session_latency, session_reset,
                        start_running)
from test_cli import cli as run_cli, valid, validator  # noqa: F401

COUNT = 20
SIZE = 64


def check_side(s, test, role, count):
    lat = session_latency(s)
    assert lat["samples"] == bench_latency_samples(test, role, count), \
        f"{s.name} latency {lat}"
    hist = session_histogram(s)
    assert histogram_problems(hist, lat) == [], f"{s.name}: {hist} {lat}"
    assert bool(hist) == bool(lat["samples"]), f"{s.name}: {hist} {lat}"
    return hist


@pytest.mark.either
@pytest.mark.parametrize("test", ["wlat", "rlat", "slat", "ping"])
def test_histogram_after_run(pool, test):
    srv, cli = pool.pair(count=COUNT, size=SIZE, test=test)
    for s in (srv, cli):
        assert session_histogram(s) == [], "not empty before a run"
    assert run_pair(srv, cli) == ("done", "done"), \
        f"{srv.describe()} | {cli.describe()}"
    hist = check_side(cli, test, "client", COUNT)
    check_side(srv, test, "server", COUNT)
    print(f"# {test} client: {len(hist)} buckets")
    for s in (srv, cli):
        assert session_reset(s) == 0
        assert session_histogram(s) == [], "not empty after reset"
        assert session_latency(s)["samples"] == 0


@pytest.mark.either
def test_histogram_bw_empty(pool):
    """bw takes no latency samples: an empty file on both sides."""
    srv, cli = pool.pair(count=COUNT, size=4096, test="bw")
    assert run_pair(srv, cli) == ("done", "done"), cli.describe()
    for s in (srv, cli):
        assert session_latency(s)["samples"] == 0
        assert session_histogram(s) == []


@pytest.mark.either
def test_histogram_while_running_and_after_stop(pool):
    """Empty while a run goes (a start drops the last run's histogram),
    the samples taken so far once it was stopped."""
    srv, cli = pool.pair(count=COUNT, size=SIZE, test="wlat")
    assert run_pair(srv, cli) == ("done", "done"), cli.describe()
    assert session_histogram(cli) != []
    cli.set("count", 0)
    srv.set("count", 0)
    start_running(srv, cli)
    assert session_histogram(cli) == []
    assert session_histogram(srv) == []
    cli.stop()
    srv.wait_end(10)
    lat = session_latency(cli)
    assert lat["samples"] > 0, lat
    hist = session_histogram(cli)
    assert histogram_problems(hist, lat) == [], f"{hist} {lat}"


# --------------------------------------------------------------------------
# the CLI

def cli(*args, check=0):
    return run_cli(*args, check=check)


@pytest.fixture
def name():
    prefix = krping.unique_name("h")
    yield prefix
    left = [p.name for p in krping.CONFIGFS.iterdir()
            if p.name.startswith(prefix)]
    for n in left:
        os.rmdir(krping.CONFIGFS / n)


def bars(text):
    """The bucket lines of the CLI's histogram text: (low, high, count)."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 4 and set(f[3]) == {"#"}:
            out.append((float(f[0]), float(f[1]), int(f[2])))
    return out


@krping.STOCK_ONLY
def test_cli_histogram(name, validator):
    common = ["--addr", krping.SERVER_ADDR, "--port", krping.next_port(),
              "--count", COUNT, "--size", SIZE, "--test", "wlat",
              "--name", name]
    # text: the table, then the client's histogram
    cp = cli("pair", *common, "--histogram", "--keep")
    assert "latency histogram, 64 bytes, client" in cp.stdout, cp.stdout
    assert "server" not in cp.stdout.split("latency histogram", 1)[1]
    shown = bars(cp.stdout)
    assert sum(c for _, _, c in shown) == COUNT, cp.stdout
    hist = session_histogram(krping.Session(name + "c", create=False))
    assert [c for _, _, c in shown] == [c for _, _, c in hist]
    assert [(lo, hi) for lo, hi, _ in shown] == \
        [(lo / 1000, hi / 1000) for lo, hi, _ in hist]

    # show --histogram: the same buckets, as text and as JSON
    out = cli("show", name + "c", "--histogram").stdout
    assert bars(out) == shown, out
    doc = json.loads(cli("show", name + "c", "--histogram", "--json").stdout)
    valid(validator, doc)
    assert [(b["low_ns"], b["high_ns"], b["count"])
            for b in doc["histogram"]] == hist
    # without --histogram the JSON is as before
    assert "histogram" not in json.loads(
        cli("show", name + "c", "--json").stdout)
    cli("rm", name + "c", name + "s")

    # pair --json --histogram: a list on each side, valid against the schema
    common[3] = krping.next_port()
    doc = json.loads(cli("pair", *common, "--histogram", "--json",
                         "--both").stdout)
    valid(validator, doc)
    sides = doc["results"][0]["sides"]
    for side in ("client", "server"):
        res = sides[side]
        assert sum(b["count"] for b in res["histogram"]) == \
            res["latency"]["samples"], res
        assert histogram_problems(
            [(b["low_ns"], b["high_ns"], b["count"])
             for b in res["histogram"]], res["latency"]) == []
