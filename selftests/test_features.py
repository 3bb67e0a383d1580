# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""/sys/kernel/config/krping/features against what the module does: it
lists exactly a session's option attributes, and each line's range or
values are what the attribute takes, through configfs (the KUnit test
krping_test_features_agree checks the same of the parser alone, on the
debug kernel; this runs on every kernel)."""

import errno

import pytest

from lib import krping

FEATURES = krping.CONFIGFS / "features"
# Every session has them; the features file lists the options only.
ALWAYS = {"options", "start"}


def features():
    """(name, kind, values) per line of the file, in its order."""
    rows = []
    for line in krping.read_text(FEATURES).splitlines():
        name, kind, *rest = line.split(" ")
        assert len(rest) <= 1, line
        rows.append((name, kind, rest[0] if rest else None))
    return rows


def test_lists_every_option_attribute_once(pool):
    names = [name for name, _, _ in features()]
    assert len(names) == len(set(names))
    s = pool.session("f")
    have = {p.name for p in s.cfg.iterdir()} - ALWAYS
    assert set(names) == have
    # ... in the order the canonical options string names them
    s.configure(options="server,addr=10.0.0.1,duration_ms=5,warmup=3,"
                "qps=2,validate,verbose,duplex,poll,server_inv,"
                "local_dma_lkey,read_inv")
    named = [item.split("=")[0] for item in s.get("options").split(",")]
    named[0] = "role"                       # "server" is role's keyword
    assert named == names


def test_each_line_is_what_its_attribute_takes(pool):
    s = pool.session("f")
    checked = 0
    for name, kind, values in features():
        default = s.get(name)
        if kind == "number":
            low, high = (int(v) for v in values.split(".."))
            for ok in (low, high):
                assert s.try_set(name, ok) == 0, f"{name}={ok}"
                assert s.get(name) == str(ok)
            bad = [high + 1] + ([low - 1] if low else [])
            for v in bad:
                assert s.try_set(name, v) == errno.ERANGE, f"{name}={v}"
        elif kind == "bool":
            assert values is None
            for ok in ("1", "0"):
                assert s.try_set(name, ok) == 0
                assert s.get(name) == ok
            assert s.try_set(name, "2") == errno.EINVAL
        elif kind == "enum":
            for ok in values.split(","):
                assert s.try_set(name, ok) == 0, f"{name}={ok}"
                assert s.get(name) == ok
            assert s.try_set(name, "other") == errno.EINVAL
        else:
            assert (kind, values) == ("addr", None)
            assert s.try_set(name, "10.0.0.1") == 0
            assert s.try_set(name, "10.0.0.256") == errno.EINVAL
            continue
        if default:
            assert s.try_set(name, default) == 0
        checked += 1
    assert checked == len(features()) - 1


def test_is_read_only_and_no_session_can_take_its_name():
    assert krping.write_errno(FEATURES, "x") == errno.EACCES
    with pytest.raises(FileExistsError):
        krping.CONFIGFS.joinpath("features").mkdir()
    assert krping.read_text(FEATURES).startswith("role enum ")
