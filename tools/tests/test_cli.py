# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krpinglib.cli and krpinglib.settings: sizes, the parser's arguments
and errors, what the flags and -o ask for, and the usage errors of run
and pair found before any session is made."""

import argparse
import os
import subprocess
import sys

import pytest

from conftest import TOOLS
from krpinglib import cli, features, session, settings

KRPING = os.path.join(TOOLS, "krping")


@pytest.mark.parametrize("text,size", [
    ("64", 64), ("4k", 4096), ("64K", 65536), ("1m", 1 << 20),
    ("4MB", 4 << 20), ("1g", 1 << 30), (" 2b ", 2)])
def test_size_arg(text, size):
    assert cli.size_arg(text) == size


@pytest.mark.parametrize("text,message", [
    ("0", "size must be >= 1: '0'"), ("-4k", "size must be >= 1: '-4k'"),
    ("4q", "not a size: '4q'"), ("", "not a size: ''"),
    ("k", "not a size: 'k'")])
def test_size_arg_refuses(text, message):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        cli.size_arg(text)
    assert str(e.value) == message


def test_sizes_arg():
    assert cli.sizes_arg("64,4k,,1m") == [64, 4096, 1 << 20]
    with pytest.raises(argparse.ArgumentTypeError):
        cli.sizes_arg("4k,0")


def parse(*argv):
    return cli.build_parser().parse_args([str(a) for a in argv])


def test_pair_defaults_and_flags():
    a = parse("pair", "-a", "10.0.0.1", "-t", "bw", "-S", "64k", "-n", 5,
              "--duplex", "--max-p99", "3.5")
    assert (a.cmd, a.func, a.pair, a.role) == ("pair", cli.cmd_run, True,
                                               None)
    assert (a.addr, a.test, a.size, a.count, a.duplex) == \
        ("10.0.0.1", "bw", 65536, 5, True)
    assert (a.poll, a.validate, a.remote_side, a.connect_timeout,
            a.timeout, a.retry, a.max_p99, a.min_bw) == \
        (None, None, "server", 30, 0, None, 3.5, None)
    r = parse("run", "-c", "--pair", "-o", "client,addr=x")
    assert (r.role, r.pair, r.options) == ("client", True, "client,addr=x")
    s = parse("show", "--prometheus", "a", "b")
    assert (s.func, s.names, s.prometheus, s.json) == \
        (cli.cmd_show, ["a", "b"], True, False)
    assert parse("rm", "--all").all is True


@pytest.mark.parametrize("argv,message", [
    (["pair", "--size", "0"],
     "argument -S/--size: size must be >= 1: '0'"),
    (["pair", "--max-p99", "nan"],
     "argument --max-p99: must be a number above 0: 'nan'"),
    (["pair", "--test", "foo"],
     "argument -t/--test: invalid choice: 'foo' (choose from 'ping', "
     "'wlat', 'rlat', 'bw', 'fr', 'slat', 'sbw')"),
    (["run", "--server", "--client"],
     "argument -c/--client: not allowed with argument -s/--server"),
    (["pair", "--bogus"], "unrecognized arguments: --bogus"),
    (["stop"], "the following arguments are required: NAME"),
    ([], "the following arguments are required: COMMAND")])
def test_parser_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        parse(*argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"error: {message}")


def test_effective_test_option_value_and_role():
    a = parse("run", "-o", "client,rlat,size=4k,count=7")
    assert settings.effective_test(a) == "rlat"
    assert settings.option_value(a, "size") == "4k"
    assert settings.option_value(a, "addr") is None
    assert settings.option_role(a) == "client"
    assert settings.effective_test(parse("run", "-o", "test=bw,x")) == "bw"
    assert settings.effective_test(parse("run", "-s")) == "ping"
    b = parse("run", "-s", "-t", "wlat", "-o", "client,test=bw")
    assert settings.effective_test(b) == "wlat"
    assert settings.option_role(b) == "server"
    assert settings.option_role(parse("run", "-o", "role=server")) == \
        "server"


def test_default_count_and_sizes():
    assert settings.default_count(parse("pair"), "bw") == 5000
    assert settings.default_count(parse("pair"), "wlat") == 1000
    assert settings.default_count(parse("pair", "-n", 3), "bw") == 3
    assert settings.default_count(parse("pair", "--duration", 2), "bw") == 0
    assert settings.default_count(parse("pair", "-o", "count=9"), "bw") is None
    assert settings.sizes_for(parse("pair", "--all")) == \
        [1 << i for i in range(1, 24)]
    assert settings.sizes_for(parse("pair", "--sizes", "4k,8")) == [4096, 8]
    assert settings.sizes_for(parse("pair", "-S", "1m")) == [1 << 20]
    assert settings.sizes_for(parse("pair", "-o", "size=256")) == [256]
    assert settings.sizes_for(parse("pair")) == [None]


class Recorder:
    def __init__(self):
        self.settings = None

    def features(self):
        return features.Features(None, "this host")

    def apply(self, settings):
        self.settings = settings


def test_configure_writes_the_option_string_first_then_the_flags():
    a = parse("pair", "-o", "validate", "-a", "10.0.0.1", "-p", 7000,
              "--poll", "--verbose-data", "--qps", 2)
    a.duration_ms = 1500
    sess = Recorder()
    settings.configure(sess, a, "client", 4096, 10)
    assert sess.settings == [
        ("options", "validate"), ("role", "client"), ("addr", "10.0.0.1"),
        ("port", 7000), ("count", 10), ("size", 4096),
        ("duration_ms", 1500), ("qps", 2), ("verbose", 1), ("poll", 1)]


@pytest.fixture
def no_sessions(tmp_path, monkeypatch):
    """An empty configfs directory: a run that gets past its checks
    fails to make its session there (a directory, not configfs)."""
    monkeypatch.setattr(session, "CONFIGFS", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("argv,message", [
    (["run", "--addr", "a"], "say --server or --client (or --pair, or -o "
     "with client/server)"),
    (["run", "--pair", "--server", "--addr", "a"],
     "--pair runs both sides: leave out --server/--client"),
    (["run", "--server", "--remote", "h", "--addr", "a"],
     "--remote runs one side of a pair there: use 'krping pair --remote "
     "HOST' (or run --pair)"),
    (["pair"], "--addr is required (the server's address)"),
    (["pair", "--addr", "a", "--duration", 0],
     "--duration takes 0 < SEC <= 86400"),
    (["pair", "--addr", "a", "--interval", -1], "--interval takes SEC > 0"),
    (["pair", "--addr", "a", "--min-bw", 1],
     "--min-bw applies to bw and sbw, not to test 'ping'"),
    (["show", "--json", "--prometheus"],
     "show: --json or --prometheus, not both"),
    (["show"], "show: name the sessions (--prometheus alone: every "
     "session)"),
    (["show", "x"], "no session 'x' ({dir}/x missing)"),
    (["rm"], "rm: name the sessions, or --all")])
def test_usage_errors_exit_2(capsys, no_sessions, argv, message):
    assert cli.main([str(a) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "krping: " + message.format(dir=no_sessions)
                          + "\n")
    assert os.listdir(no_sessions) == []


def test_all_and_sizes_exclude_each_other(capsys):
    assert cli.main(["pair", "--all", "--sizes", "4k"]) == 2
    assert capsys.readouterr().err == \
        "krping: --all and --sizes exclude each other\n"


def test_no_module(capsys, monkeypatch):
    monkeypatch.setattr(session, "CONFIGFS", "/nonexistent/krping")
    assert cli.main(["list"]) == 2
    assert capsys.readouterr().err == (
        "krping: /nonexistent/krping not found: is rdma_krping loaded "
        "(modprobe rdma_krping) and configfs mounted (mount -t configfs "
        "none /sys/kernel/config)?\n")


def run_krping(path, *argv):
    return subprocess.run([sys.executable, path, *argv], text=True,
                          capture_output=True, timeout=60,
                          env={**os.environ,
                               "KRPING_CONFIGFS": "/nonexistent/krping"})


def test_the_command_is_the_package(capsys):
    cp = run_krping(KRPING, "--help")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert (cp.returncode, cp.stdout) == (0, capsys.readouterr().out)
    assert cp.stdout.startswith("usage: krping [-h] COMMAND ...\n\n"
                                "krping - command-line front end of the "
                                "rdma_krping kernel module.\n")
    assert run_krping(KRPING, "list").returncode == 2


def test_an_installed_command_finds_its_package(tmp_path):
    """make install's layout: PREFIX/sbin/krping and
    PREFIX/share/krping/krpinglib, reached through a symlink too."""
    sbin, lib = tmp_path / "sbin", tmp_path / "share" / "krping" / "krpinglib"
    sbin.mkdir()
    lib.mkdir(parents=True)
    (sbin / "krping").write_text(open(KRPING).read())
    src = os.path.join(TOOLS, "krpinglib")
    for f in os.listdir(src):
        if f.endswith(".py"):
            (lib / f).write_text(open(os.path.join(src, f)).read())
    (tmp_path / "link").symlink_to(sbin / "krping")
    for path in (sbin / "krping", tmp_path / "link"):
        cp = run_krping(str(path), "list")
        assert (cp.returncode, cp.stderr) == (
            2, "krping: /nonexistent/krping not found: is rdma_krping "
               "loaded (modprobe rdma_krping) and configfs mounted (mount "
               "-t configfs none /sys/kernel/config)?\n")
    assert not (lib / "__pycache__").exists()
    (lib / "cli.py").unlink()
    cp = run_krping(str(sbin / "krping"), "list")
    assert cp.returncode == 1 and "its package krpinglib is neither" in \
        cp.stderr
