# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The Prometheus text exposition format of sessions' results, for
node_exporter's textfile collector."""

from .abi import STATES

# (metric, type, help, value of a results dict or None to leave it out)
PROM_METRICS = (
    ("krping_state", "gauge", "1 for the session's state (label state), "
     "0 for the other states", None),
    ("krping_error", "gauge", "the negative errno that failed the session, "
     "0 otherwise", lambda r: r["error"]),
    ("krping_size_bytes", "gauge", "bytes per iteration (the size "
     "setting)", lambda r: r["size"]),
    ("krping_count", "gauge", "iterations of a run (the count setting; "
     "0: until stopped)", lambda r: r["count"]),
) + tuple(
    (f"krping_{op}_{unit}_total", "counter",
     f"{what} of the completed {op.upper()} work requests of the run "
     f"(stats/{op}_{sysfs})",
     lambda r, k=f"{op}_{sysfs}": r["stats"][k])
    for op in ("send", "recv", "write", "read")
    for unit, sysfs, what in (("bytes", "bytes", "bytes"),
                              ("messages", "msgs", "number"))
) + (
    ("krping_iterations_total", "counter", "iterations completed in the "
     "run (stats/iterations)", lambda r: r["stats"]["iterations"]),
    ("krping_latency_samples", "gauge", "latency samples of the last run "
     "(latency/samples)", lambda r: lat(r, "samples", 1)),
) + tuple(
    (f"krping_latency_{name}_seconds", "gauge", f"{what} of the last run's "
     f"latency samples (latency/{name}_ns)",
     lambda r, k=f"{name}_ns": lat(r, k, 1e9))
    for name, what in (("min", "smallest"), ("max", "largest"),
                       ("mean", "mean"), ("p50", "median"),
                       ("p99", "99th percentile"),
                       ("p999", "99.9th percentile"),
                       ("stdev", "population standard deviation"))
) + (
    ("krping_bandwidth_bytes", "gauge", "bytes written or sent in the "
     "last bw or sbw run (bandwidth/bytes)",
     lambda r: bwv(r, "bytes", 1)),
    ("krping_bandwidth_duration_seconds", "gauge", "duration of the "
     "last bw or sbw run (bandwidth/duration_ns)",
     lambda r: bwv(r, "duration_ns", 1e9)),
    ("krping_bandwidth_bytes_per_second", "gauge", "bandwidth of the last "
     "bw or sbw run: bandwidth/bytes over bandwidth/duration_ns",
     lambda r: bytes_per_second(r)),
    ("krping_bandwidth_messages_per_second", "gauge", "message rate of "
     "the last bw or sbw run (bandwidth/msgs_per_sec)",
     lambda r: bwv(r, "msgs_per_sec", 1)),
    ("krping_progress_iterations", "gauge", "measured iterations of the "
     "running (or last) benchmark so far (progress/iterations)",
     lambda r: prog(r, "iterations", 1)),
    ("krping_progress_bytes", "gauge", "bytes of those iterations on this "
     "side (progress/bytes)", lambda r: prog(r, "bytes", 1)),
    ("krping_progress_samples", "gauge", "latency samples taken so far "
     "(progress/samples)", lambda r: prog(r, "samples", 1)),
    ("krping_progress_elapsed_seconds", "gauge", "time since the measured "
     "part began, or its length once ended (progress/elapsed_ns)",
     lambda r: prog(r, "elapsed_ns", 1e9)),
)


def lat(res, key, div):
    v = (res["latency"] or {}).get(key)
    return None if v is None else v if div == 1 else v / div


def prog(res, key, div):
    v = (res.get("progress") or {}).get(key)
    return None if v is None else v if div == 1 else v / div


def bwv(res, key, div):
    v = (res["bandwidth"] or {}).get(key)
    return None if v is None else v if div == 1 else v / div


def bytes_per_second(res):
    bw = res["bandwidth"] or {}
    if bw.get("bytes") is None or bw.get("duration_ns") is None:
        return None
    return bw["bytes"] * 1e9 / bw["duration_ns"] if bw["duration_ns"] else 0


def prom_label(value):
    text = "" if value is None else str(value)
    return (text.replace("\\", "\\\\").replace("\"", "\\\"")
            .replace("\n", "\\n"))


def prom_value(v):
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


def prometheus_text(results):
    """The metrics of the sessions' results, one family after the other
    (the format wants each family's lines together), HELP and TYPE
    first."""
    lines = []
    for metric, kind, text, get in PROM_METRICS:
        samples = []
        for r in results:
            labels = (f'session="{prom_label(r["name"])}",'
                      f'role="{prom_label(r["role"])}",'
                      f'test="{prom_label(r["test"])}",'
                      f'device="{prom_label(r["device"])}"')
            if get is None:
                samples += [f'{metric}{{{labels},state="{st}"}} '
                            f'{int(st == r["state"])}' for st in STATES]
                continue
            v = get(r)
            if v is not None:
                samples.append(f"{metric}{{{labels}}} {prom_value(v)}")
        if samples:
            lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}"]
            lines += samples
    return "".join(line + "\n" for line in lines)

