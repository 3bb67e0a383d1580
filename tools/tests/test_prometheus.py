# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krpinglib.prometheus: the text exposition format of results."""

from conftest import LATENCY, side
from krpinglib.prometheus import prom_label, prom_value, prometheus_text


def families(text):
    return [line.split()[2] for line in text.splitlines()
            if line.startswith("# TYPE ")]


def test_a_bandwidth_session():
    res = side(name="s1", test="bw", size=4096, count=100, device='rxe"0\\',
               bandwidth={"bytes": 409600, "duration_ns": 2000000,
                          "mbytes_per_sec": 195, "msgs_per_sec": 50000})
    res["stats"]["write_msgs"] = 5
    text = prometheus_text([res])
    labels = 'session="s1",role="client",test="bw",device="rxe\\"0\\\\"'
    lines = text.splitlines()
    assert lines[:3] == [
        "# HELP krping_state 1 for the session's state (label state), 0 "
        "for the other states",
        "# TYPE krping_state gauge",
        f'krping_state{{{labels},state="idle"}} 0']
    assert f'krping_state{{{labels},state="done"}} 1' in lines
    assert sum(line.startswith("krping_state{") for line in lines) == 8
    for sample in (f"krping_error{{{labels}}} 0",
                   f"krping_size_bytes{{{labels}}} 4096",
                   f"krping_write_messages_total{{{labels}}} 5",
                   f"krping_iterations_total{{{labels}}} 1000",
                   f"krping_bandwidth_duration_seconds{{{labels}}} 0.002",
                   f"krping_bandwidth_bytes_per_second{{{labels}}} "
                   "204800000.0",
                   f"krping_bandwidth_messages_per_second{{{labels}}} "
                   "50000"):
        assert sample in lines
    # no latency/ and no progress/: their families are left out
    assert families(text) == [
        "krping_state", "krping_error", "krping_size_bytes", "krping_count",
        "krping_send_bytes_total", "krping_send_messages_total",
        "krping_recv_bytes_total", "krping_recv_messages_total",
        "krping_write_bytes_total", "krping_write_messages_total",
        "krping_read_bytes_total", "krping_read_messages_total",
        "krping_iterations_total", "krping_bandwidth_bytes",
        "krping_bandwidth_duration_seconds",
        "krping_bandwidth_bytes_per_second",
        "krping_bandwidth_messages_per_second"]
    assert text.endswith(" 50000\n")


def test_each_family_holds_every_session_together():
    a = side(name="a", latency=dict(LATENCY),
             progress={"iterations": 3, "bytes": 192, "samples": 3,
                       "elapsed_ns": 1500})
    b = side(name="b", state="failed", error=-104, latency=dict(LATENCY))
    lines = prometheus_text([a, b]).splitlines()
    i = lines.index("# TYPE krping_latency_p99_seconds gauge")
    assert lines[i - 1] == ("# HELP krping_latency_p99_seconds 99th "
                            "percentile of the last run's latency samples "
                            "(latency/p99_ns)")
    assert lines[i + 1:i + 3] == [
        'krping_latency_p99_seconds{session="a",role="client",test="wlat",'
        'device="rxe0"} 7.185e-06',
        'krping_latency_p99_seconds{session="b",role="client",test="wlat",'
        'device="rxe0"} 7.185e-06']
    assert ('krping_error{session="b",role="client",test="wlat",'
            'device="rxe0"} -104') in lines
    assert ('krping_progress_elapsed_seconds{session="a",role="client",'
            'test="wlat",device="rxe0"} 1.5e-06') in lines
    assert not any(line.startswith("krping_progress_elapsed_seconds"
                                   "{session=\"b\"") for line in lines)
    assert prometheus_text([]) == ""


def test_labels_and_values():
    assert prom_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert prom_label(None) == ""
    assert [prom_value(v) for v in (True, 7, 0.5, 2e-06)] == \
        ["1", "7", "0.5", "2e-06"]
