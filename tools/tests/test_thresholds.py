# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krpinglib.thresholds: the --max-*/--min-* limits, their usage errors
and their checks against runs, on synthetic results."""

import argparse

import pytest

from conftest import side
from krpinglib import report, thresholds
from krpinglib.cli import build_parser
from krpinglib.errors import CliError


def parse(*argv):
    return build_parser().parse_args([str(a) for a in argv])


def checked_run(args, **sides):
    for res in sides.values():
        res["figures"] = report.figures(res)
    first = next(iter(sides.values()))
    run = {"test": first["test"], "size": first["size"], "count": 10,
           "sides": sides}
    return thresholds.check_thresholds(run, args)


@pytest.mark.parametrize("text,value", [("50", 50.0), ("0.5", 0.5),
                                        ("1e-9", 1e-9)])
def test_limit_arg_takes_a_finite_number_above_0(text, value):
    assert thresholds.limit_arg(text) == value


@pytest.mark.parametrize("text,message", [
    ("abc", "not a number: 'abc'"),
    ("0", "must be a number above 0: '0'"),
    ("-1", "must be a number above 0: '-1'"),
    ("nan", "must be a number above 0: 'nan'"),
    ("inf", "must be a number above 0: 'inf'")])
def test_limit_arg_refuses(text, message):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        thresholds.limit_arg(text)
    assert str(e.value) == message


def test_a_latency_run_within_its_limits(lat_side):
    args = parse("pair", "--addr", "a", "--test", "wlat", "--max-median",
                 "5.948", "--max-p99", 8)
    checks, missed = checked_run(args, client=lat_side)
    assert missed == []
    assert checks == [
        {"option": "--max-median", "figure": "t_typical_usec",
         "side": "client", "limit": 5.948, "value": 5.948, "met": True},
        {"option": "--max-p99", "figure": "p99_usec", "side": "client",
         "limit": 8.0, "value": 7.185, "met": True}]


def test_missed_limits_say_by_how_much(lat_side, bw_side):
    args = parse("pair", "--addr", "a", "--max-p999", 8.42, "--max-avg", 1)
    checks, missed = checked_run(args, client=lat_side)
    # 8.422 shows as 8.42 in the table, the limit itself: one more digit
    assert missed == [
        "threshold missed: p99.9 8.422 usec > --max-p999 8.42 "
        "(client, 64 B)",
        "threshold missed: average 4.71 usec > --max-avg 1 (client, 64 B)"]
    assert [c["met"] for c in checks] == [False, False]
    args = parse("pair", "--addr", "a", "--test", "bw", "--min-bw", 300,
                 "--min-rate", 0.01)
    _, missed = checked_run(args, client=bw_side)
    assert missed == [
        "threshold missed: BW average 253.13 MB/sec < --min-bw 300 "
        "(client, 65536 B)",
        "threshold missed: message rate 0.004049 Mpps < --min-rate 0.01 "
        "(client, 65536 B)"]


def test_a_client_without_the_figure_misses_and_the_server_is_optional(
        lat_side):
    args = parse("pair", "--addr", "a", "--max-median", 100, "--both")
    passive = dict(side(name="s1", role="server"))
    checks, missed = checked_run(args, client=passive)
    assert missed == ["threshold missed: no median figure from the client "
                      "(--max-median 100, 64 B)"]
    assert checks[0]["value"] is None and checks[0]["met"] is False
    # --both: a server with figures is checked too, one without is not
    srv = side(name="s1", role="server", latency=dict(lat_side["latency"]))
    checks, missed = checked_run(args, client=lat_side, server=srv)
    assert [c["side"] for c in checks] == ["client", "server"]
    assert missed == []
    checks, _ = checked_run(args, client=lat_side, server=passive)
    assert [c["side"] for c in checks] == ["client"]


def test_show_value_adds_digits_only_to_tell_value_from_limit():
    assert thresholds.show_value(5.001, 5.0, 2) == "5.001"
    assert thresholds.show_value(5.1, 5.0, 2) == "5.10"
    assert thresholds.show_value(0.0040491, 0.004049, 6) == "0.0040491"


@pytest.mark.parametrize("argv,message", [
    (["pair", "--test", "bw", "--max-p99", 5],
     "--max-p99 applies to ping, wlat, rlat and slat, not to test 'bw'"),
    (["pair", "--test", "wlat", "--min-bw", 5],
     "--min-bw applies to bw and sbw, not to test 'wlat'"),
    (["run", "--server", "--test", "rlat", "--max-median", 5],
     "--max-median: the server of 'rlat' reports no latency figures; give "
     "the threshold to the client"),
    (["run", "-o", "server,test=bw", "--test", "bw", "--min-rate", 1],
     "--min-rate: the server of 'bw' reports no bandwidth figures; give "
     "the threshold to the client")])
def test_threshold_usage_errors(argv, message):
    args = parse(*argv)
    with pytest.raises(CliError) as e:
        thresholds.check_threshold_usage(args, args.test)
    assert str(e.value) == message


def test_threshold_usage_allowed():
    for argv, test in ((["run", "--server", "--max-p99", 5], "wlat"),
                       (["run", "--server", "--duplex", "--min-bw", 5], "bw"),
                       (["run", "-o", "server,duplex", "--min-bw", 5], "bw"),
                       (["pair", "--min-rate", 5], "sbw")):
        thresholds.check_threshold_usage(parse(*argv), test)
