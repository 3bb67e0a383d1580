# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krpinglib.features: the features file's text, the options an older
module lacks, the hint after a refused value, and their use by a local
session (a configfs directory made of plain files here)."""

import errno

import pytest

from krpinglib import cli, features, session, settings
from krpinglib.errors import CliError, Refused

# The start of what rdma_krping's features file says (the KUnit test
# krping_test_features_text holds all of it).
TEXT = ("role enum none,client,server\n"
        "addr addr\n"
        "port number 1..65535\n"
        "count number 0..4294967295\n"
        "size number 1..4194304\n"
        "validate bool\n")


def test_parse():
    opts = features.parse(TEXT)
    assert list(opts) == ["role", "addr", "port", "count", "size",
                          "validate"]
    assert (opts["role"].kind, opts["role"].values) == \
        ("enum", ("none", "client", "server"))
    assert (opts["port"].low, opts["port"].high) == (1, 65535)
    assert [o.takes() for o in opts.values()] == [
        "one of none, client, server", "an IPv4 or IPv6 address",
        "1..65535", "0..4294967295", "1..4194304", "0 or 1"]


def test_parse_keeps_a_kind_it_does_not_know():
    opts = features.parse("port number 1..65535\nrate fraction 0..1/2\n")
    assert (opts["rate"].kind, opts["rate"].takes()) == \
        ("fraction", "a value of kind 'fraction'")
    assert list(opts) == ["port", "rate"]


@pytest.mark.parametrize("line,kind", [
    ("port", "?"), ("port number", "number?"), ("port number 1-2", "number?"),
    ("port number -1..2", "number?"), ("test enum", "enum?")])
def test_parse_keeps_what_it_cannot_read(line, kind):
    """A line in a shape this version does not read (the ABI lets later
    versions extend it) still names its option."""
    opts = features.parse("addr addr\n" + line + "\n")
    assert list(opts) == ["addr", line.split()[0]]
    assert (opts[line.split()[0]].kind, opts[line.split()[0]].low) == \
        (kind, None)


def test_an_older_module_lacks_an_option():
    f = features.Features(features.parse(TEXT), "hostb")
    f.check([("options", "client"), ("size", 64), ("port", 1)])
    with pytest.raises(CliError) as e:
        f.check([("size", 64), ("qps", 2)])
    assert str(e.value) == ("rdma_krping on hostb has no option 'qps': it "
                            "is older than this krping; install the same "
                            "version there")
    assert f.hint("size") == ": size takes 1..4194304"
    assert f.hint("qps") == ""


def test_a_module_without_the_file_is_taken_at_its_word():
    f = features.Features(None, "this host")
    assert f.has("qps") and f.hint("size") == ""
    f.check([("qps", 2)])


@pytest.fixture
def configfs(tmp_path, monkeypatch):
    """A configfs directory with a features file that has no qps."""
    monkeypatch.setattr(session, "CONFIGFS", str(tmp_path))
    (tmp_path / "features").write_text(TEXT)
    return tmp_path


def configure(sess, *flags):
    settings.configure(sess, cli.build_parser().parse_args(
        ["run", "--addr", "10.0.0.1", *map(str, flags)]), "client", 64, 1)


def test_session_refuses_an_option_the_module_lacks(configfs):
    s = session.Session("s1")
    with pytest.raises(CliError) as e:
        configure(s, "--qps", 2)
    assert "has no option 'qps'" in str(e.value)
    assert not (configfs / "s1" / "addr").exists()      # nothing written


def test_a_refused_value_says_what_the_option_takes(configfs):
    s = session.Session("s1")
    for attr in ("role", "addr", "port", "count"):
        (configfs / "s1" / attr).write_text("")
    (configfs / "s1" / "size").mkdir()          # open(O_WRONLY): EISDIR
    with pytest.raises(CliError) as e:
        configure(s)
    assert str(e.value) == ("s1: size=64 refused: EISDIR (Is a directory): "
                            "size takes 1..4194304")
    # The session itself says which write, and the errno.
    with pytest.raises(Refused) as r:
        s.set("size", 0)
    assert (r.value.errno, r.value.attr, r.value.value, r.value.where) == \
        (errno.EISDIR, "size", 0, None)
    assert isinstance(r.value, OSError)


def test_the_features_file_is_no_session(configfs):
    session.Session("b")
    session.Session("a")
    assert session.session_names() == ["a", "b"]
