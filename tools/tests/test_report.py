# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krpinglib.report: figures, the table's header and rows, a run's
outcome, the per-QP counters, histograms and the JSON output."""

import errno
import json
import math

import pytest

from conftest import side
from krpinglib import report

LAT_ROW = (" 64      1000              2.24           3.47             5.95"
           "           4.71             9.66                   7.18"
           "                     8.42")
BW_ROW = " 65536      2500                      253.13        0.004049"


def test_latency_figures_are_the_samples_in_usec(lat_side):
    assert report.figures(lat_side) == {
        "bytes": 64, "iterations": 1000, "kind": "latency",
        "samples": 1000, "t_min_usec": 2.237, "t_max_usec": 3.474,
        "t_typical_usec": 5.948, "t_avg_usec": 4.711,
        "t_stdev_usec": 9.659, "p99_usec": 7.185, "p999_usec": 8.422}


def test_bandwidth_figures_count_the_iterations_of_one_qp(bw_side):
    fig = report.figures(bw_side)
    # 327680000 B / 65536 B / 2 QPs
    assert fig["kind"] == "bandwidth" and fig["iterations"] == 2500
    assert fig["bw_average_mb_per_sec"] == pytest.approx(253.125)
    assert fig["msg_rate_mpps"] == pytest.approx(0.004049)


def test_fr_figures_are_a_count_and_a_passive_side_has_none():
    assert report.figures(side(test="fr", size=4096, iterations=900)) == \
        {"bytes": 4096, "iterations": 900, "kind": "count"}
    assert report.figures(side(test="fr", iterations=0)) is None
    assert report.figures(side(test="rlat", role="server")) is None
    # a bandwidth without a duration measured nothing
    assert report.figures(side(test="bw", bandwidth={
        "bytes": 10, "duration_ns": 0, "msgs_per_sec": 1})) is None


def test_rows_and_headers(lat_side, bw_side):
    assert report.row(report.figures(lat_side)) == LAT_ROW
    assert report.row(report.figures(bw_side)) == BW_ROW
    assert report.row({"kind": "count", "bytes": 4096,
                       "iterations": 900}) == " 4096       900"
    assert report.header("latency") == report.LAT_HEAD
    assert report.header("bandwidth") == report.BW_HEAD
    assert report.header("count") == report.FR_HEAD


def run_of(**sides):
    first = next(iter(sides.values()))
    return {"test": first["test"], "size": first["size"], "count": 10,
            "sides": sides}


def test_printer_shows_the_client_and_with_both_the_server(capsys,
                                                           lat_side):
    srv = side(name="s1", role="server", latency=lat_side["latency"])
    for res in (lat_side, srv):
        res["figures"] = report.figures(res)
    run = run_of(server=srv, client=lat_side)
    report.Printer(True, both=False).result(run)
    assert capsys.readouterr().out == "\n".join(
        ["-" * 79, report.LAT_HEAD, LAT_ROW]) + "\n"
    report.Printer(True, both=True).result(run)
    assert capsys.readouterr().out == "\n".join(
        ["-" * 79, report.LAT_HEAD, LAT_ROW + "   (client)",
         LAT_ROW + "   (server)"]) + "\n"
    srv["host"] = "hostb"
    p = report.Printer(True, both=True)
    p.result(run)
    p.result(run)       # one header per kind
    assert capsys.readouterr().out == "\n".join(
        ["-" * 79, report.LAT_HEAD] +
        [LAT_ROW + "   (client on this host)",
         LAT_ROW + "   (server on hostb)"] * 2) + "\n"
    report.Printer(False, both=True).result(run)
    assert capsys.readouterr().out == ""


def test_printer_says_why_a_finished_run_has_no_row(capsys):
    old = side(test="ping", size=64, iterations=10)
    old["figures"] = None
    report.Printer(True, both=False).result(run_of(client=old))
    assert capsys.readouterr().out == (
        " 64      client c1: done, 10 iterations; this module has no "
        "latency/ or bandwidth/ results\n")
    report.Printer(True, both=False).skipped(8388608, "too large")
    assert capsys.readouterr().out == " 8388608 skipped: too large\n"


def test_run_ok_and_failure_text():
    done = side()
    refused = side(name="c2", state="failed", error=-errno.ECONNREFUSED)
    assert report.run_ok(run_of(client=done), None)
    assert not report.run_ok(run_of(client=refused), None)
    assert report.failure_text(run_of(client=done, server=refused)) == [
        "server session c2 ended failed, error -111 (ECONNREFUSED): no "
        "server listens on that address and port, or it refused the "
        "connection (already serving one?)"]
    # after a ping's --duration: the stopped side and a peer that saw
    # it leave are fine, another failure is not
    stopped = side(state="stopped")
    reset = side(name="s1", state="failed", error=-errno.ECONNRESET)
    assert report.run_ok(run_of(client=stopped, server=reset), 2.0)
    assert not report.run_ok(run_of(client=stopped, server=reset), None)
    assert not report.run_ok(run_of(client=stopped, server=refused), 2.0)
    # a peer's ECONNRESET is not reported beside the failure behind it
    assert report.failure_text(run_of(client=refused, server=reset)) == \
        report.failure_text(run_of(client=refused))
    # a failed completion is named with its status
    read = side(name="s3", state="failed", error=-errno.ETIMEDOUT,
                failed_wr="rdma_read", wc_status="retry_exc_err")
    assert report.failure_text(run_of(server=read))[0].startswith(
        "server session s3 ended failed, error -110 (ETIMEDOUT), its "
        "rdma_read completed with retry_exc_err")


def test_rlat_note_only_for_rlat_on_a_local_rxe(monkeypatch):
    monkeypatch.setattr(report, "is_rxe", lambda device: device == "rxe0")
    local = run_of(client=side(test="rlat", device="rxe0"))
    assert report.rlat_note([local]) == report.RLAT_RXE_NOTE
    assert report.rlat_note([run_of(client=side(test="wlat"))]) is None
    assert report.rlat_note(
        [run_of(client=side(test="rlat", device="rxe0", host="b"))]) is None


def test_is_rxe_by_parent_or_node_desc(tmp_path):
    (tmp_path / "rxe0").mkdir()
    (tmp_path / "rxe0" / "parent").write_text("eth1\n")
    (tmp_path / "named").mkdir()
    (tmp_path / "named" / "node_desc").write_text("rxe\n")
    (tmp_path / "siw0").mkdir()
    (tmp_path / "siw0" / "node_desc").write_text("Software iWARP stack\n")
    got = {d: report.is_rxe(d, root=str(tmp_path))
           for d in ("rxe0", "named", "siw0", "absent", "", None)}
    assert got == {"rxe0": True, "named": True, "siw0": False,
                   "absent": False, "": False, None: False}


def test_finite_and_print_json_replace_nan_and_infinity(capsys):
    obj = {"a": [math.nan, 1.5, -math.inf], "b": (math.inf, 2),
           "c": {"d": None, "e": "x"}}
    assert report.finite(obj) == {"a": [None, 1.5, None], "b": [None, 2],
                                  "c": {"d": None, "e": "x"}}
    report.print_json(obj)
    out = capsys.readouterr().out
    assert out.endswith("}\n") and "NaN" not in out
    assert json.loads(out) == report.finite(obj)
    assert out.startswith('{\n  "a": [\n    null,\n    1.5,')


class FakeSession:
    """read_result() of a session whose sysfs holds files."""

    def __init__(self, files):
        self.files = files

    def read_result(self, path):
        return self.files.get(path)


def test_per_qp_and_histogram_files(capsys):
    sess = FakeSession({"per_qp": "qp send_msgs recv_msgs\n0 5 6\n1 0 0\n",
                        "latency/histogram": "1000 1999 10\n2000 3999 400\n"
                                             "4000 7999 3\n"})
    per_qp = report.read_per_qp(sess)
    assert per_qp == [{"qp": 0, "send_msgs": 5, "recv_msgs": 6},
                      {"qp": 1, "send_msgs": 0, "recv_msgs": 0}]
    hist = report.read_histogram(sess)
    assert hist == [{"low_ns": 1000, "high_ns": 1999, "count": 10},
                    {"low_ns": 2000, "high_ns": 3999, "count": 400},
                    {"low_ns": 4000, "high_ns": 7999, "count": 3}]
    assert report.read_per_qp(FakeSession({})) is None
    assert report.read_histogram(FakeSession({})) is None
    assert report.read_per_qp(FakeSession({"per_qp": ""})) == []
    assert report.histogram_lines("h", hist) == [
        "h: 413 samples",
        "       low[usec]     high[usec]      count",
        "           1.000          1.999         10 #",
        "           2.000          3.999        400 " + "#" * 40,
        "           4.000          7.999          3 #"]
    assert report.histogram_lines("h", None) == [
        "h: none (this module has no latency/histogram)"]
    assert report.histogram_lines("h", []) == ["h: empty (no latency "
                                               "samples)"]
    client = side(name="c1")
    client["per_qp"] = per_qp
    server = side(name="s1", role="server")
    server["per_qp"] = per_qp
    report.print_per_qp([run_of(client=client, server=server)], both=False)
    assert capsys.readouterr().out == (
        "\nper QP, 64 bytes, client c1:\n"
        " qp 0  send_msgs 5, recv_msgs 6\n"
        " qp 1  nothing\n")


def test_histograms_of_the_sides_the_table_shows(capsys):
    """--histogram prints the client's; with --both the server's too."""
    hist = [{"low_ns": 1000, "high_ns": 1999, "count": 2}]
    client = side(name="c1")
    client["histogram"] = hist
    server = side(name="s1", role="server")
    server["histogram"] = hist
    runs = [run_of(client=client, server=server)]
    body = ("h: 2 samples\n"
            "       low[usec]     high[usec]      count\n"
            "           1.000          1.999          2 " + "#" * 40 + "\n")
    report.print_histograms(runs, both=False)
    assert capsys.readouterr().out == \
        "\n" + body.replace("h:", "latency histogram, 64 bytes, client c1:")
    report.print_histograms(runs, both=True)
    assert capsys.readouterr().out == (
        "\n" + body.replace("h:", "latency histogram, 64 bytes, client c1:")
        + "\n" + body.replace("h:",
                              "latency histogram, 64 bytes, server s1:"))
