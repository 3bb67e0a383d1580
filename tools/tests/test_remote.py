# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krpinglib.remote.RemoteSession over a transport that runs its
commands in a local bash (as ssh runs them in the remote one), on a
configfs and sysfs of plain directories; and the messages the command
line makes of what the sessions raise (settings.configure(),
settings.start(), Runner.make())."""

import errno
import subprocess

import pytest

from krpinglib import cli, remote, run, settings
from krpinglib.errors import CliError, Refused

FEATURES = ("role enum none,client,server\naddr addr\n"
            "port number 1..65535\ncount number 0..4294967295\n"
            "size number 1..4194304\n")
ATTRS = ("role", "addr", "port", "count", "size", "start")


class LocalShell:
    """A transport: each command in its own shell (bash, or another
    POSIX one), here."""

    dest = "hostb"

    def __init__(self, shell="bash"):
        self.commands = []
        self.shell = shell

    def cmd(self, command, check=False, timeout=None):
        self.commands.append(command)
        cp = subprocess.run([self.shell, "-c", command], capture_output=True,
                            text=True, timeout=timeout or 30)
        assert not check or cp.returncode == 0, cp.stderr
        return cp


@pytest.fixture
def host(tmp_path, monkeypatch):
    """The remote host's configfs (with a features file without qps)
    and sysfs, as directories."""
    cfg, sysfs = tmp_path / "config", tmp_path / "sys"
    cfg.mkdir()
    sysfs.mkdir()
    (cfg / "features").write_text(FEATURES)
    monkeypatch.setattr(remote, "REMOTE_CONFIGFS", str(cfg))
    monkeypatch.setattr(remote, "REMOTE_SYSFS", str(sysfs))
    return cfg, sysfs


def session(host, name="r1", shell="bash"):
    """A RemoteSession whose directory has the attribute files a session
    has (plain files here) and a state."""
    sess = remote.RemoteSession(LocalShell(shell), name)
    cfg, sysfs = host
    for attr in ATTRS:
        (cfg / name / attr).write_text("")
    (sysfs / name).mkdir()
    (sysfs / name / "state").write_text("idle\n")
    sess.ssh.commands.clear()
    return sess


def args(*flags):
    return cli.build_parser().parse_args(
        ["run", "--addr", "10.0.0.1", *map(str, flags)])


def test_a_session_that_exists_there(host):
    """RemoteSession's own mkdir, through the transport: FileExistsError
    naming the path and host, which Runner.make() words."""
    session(host)
    with pytest.raises(FileExistsError) as e:
        remote.RemoteSession(LocalShell(), "r1")
    assert e.value.filename == f"{host[0]}/r1 on hostb"
    runner = run.Runner.__new__(run.Runner)
    runner.ssh = LocalShell()
    with pytest.raises(CliError) as c:
        runner.make("r1", True)
    assert str(c.value) == ("session 'r1' exists already on hostb; pick "
                            "another --name")


def test_an_option_the_remote_module_lacks_is_refused_before_any_write(host):
    sess = session(host)
    with pytest.raises(CliError) as e:
        settings.configure(sess, args("--qps", 2), "client", 64, 1)
    assert str(e.value) == ("rdma_krping on hostb has no option 'qps': it "
                            "is older than this krping; install the same "
                            "version there")
    # it read the features file, and wrote nothing
    assert [c.startswith("cat ") for c in sess.ssh.commands] == [True]
    assert (host[0] / "r1" / "addr").read_text() == ""


def test_settings_are_written_in_one_command(host):
    sess = session(host)
    settings.configure(sess, args("--port", 7000), "client", 64, 1)
    assert len(sess.ssh.commands) == 2          # features, then the writes
    assert {a: (host[0] / "r1" / a).read_text() for a in ATTRS[:5]} == \
        {"role": "client", "addr": "10.0.0.1", "port": "7000",
         "count": "1", "size": "64"}


def test_a_refused_value_names_the_host_and_what_it_takes(host):
    sess = session(host)
    (host[0] / "r1" / "size").unlink()
    (host[0] / "r1" / "size").mkdir()           # the write: EISDIR
    with pytest.raises(Refused) as r:
        sess.apply([("role", "client"), ("size", 0), ("count", 1)])
    assert (r.value.errno, r.value.attr, r.value.value, r.value.where) == \
        (errno.EISDIR, "size", 0, "hostb")
    assert (host[0] / "r1" / "count").read_text() == ""    # it stopped
    with pytest.raises(CliError) as e:
        settings.configure(sess, args(), "client", 64, 1)
    assert str(e.value) == ("r1 on hostb: size=64 refused: EISDIR (Is a "
                            "directory): size takes 1..4194304")


@pytest.mark.parametrize("shell", ["bash", "dash"])
def test_a_session_gone_there_is_enoent_not_eio(host, shell):
    sess = session(host, shell=shell)
    for f in (host[0] / "r1").iterdir():
        f.unlink()
    (host[0] / "r1").rmdir()
    with pytest.raises(Refused) as r:
        sess.start()
    assert (r.value.errno, r.value.attr) == (errno.ENOENT, "start")
    with pytest.raises(CliError) as e:
        settings.start(sess)
    assert str(e.value) == ("r1 on hostb: start refused: ENOENT (No such "
                            "file or directory)")


def test_start_refused_says_what_the_errno_means(host, monkeypatch):
    sess = session(host)
    monkeypatch.setattr(sess, "set", lambda attr, value: (_ for _ in ()).throw(
        Refused(errno.EINVAL, attr, value, "hostb")))
    with pytest.raises(CliError) as e:
        settings.start(sess)
    assert str(e.value).startswith("r1 on hostb: start refused: EINVAL "
                                   "(Invalid argument): the settings do "
                                   "not form a session")


def test_an_unreadable_features_file_names_itself(host):
    """cli.main() prints an OSError as "krping: FILENAME: ERRNO"."""
    (host[0] / "features").unlink()
    (host[0] / "features").mkdir()              # cat: EISDIR
    sess = session(host)
    with pytest.raises(OSError) as e:
        settings.configure(sess, args(), "client", 64, 1)
    assert (e.value.errno, e.value.filename) == \
        (errno.EISDIR, f"{host[0]}/features on hostb")


def test_remote_wait_reports_the_states_it_read(host, monkeypatch):
    monkeypatch.setattr(remote.RemoteSession, "WAIT_CHUNK", 1)
    sess = session(host)
    seen = []
    assert sess.wait(("done", "failed"), timeout=2.5, seen=seen) is None
    # several loops there, each of which read idle: seen once
    assert len(sess.ssh.commands) >= 2 and seen == ["idle"]
    (host[1] / "r1" / "state").write_text("done\n")
    assert sess.wait(("done",), timeout=5, seen=seen) == "done"
    assert seen == ["idle", "done"]


@pytest.mark.parametrize("remote_host,exc,message", [
    (False, FileExistsError(errno.EEXIST, "File exists"),
     "session 'k1' exists already ({cfg}/k1); pick another --name or "
     "remove it with 'krping rm k1'"),
    (False, PermissionError(errno.EACCES, "Permission denied"),
     "cannot create {cfg}/k1: permission denied (run as root)"),
    (True, FileExistsError(errno.EEXIST, "mkdir: cannot create directory: "
                                         "File exists"),
     "session 'k1' exists already on hostb; pick another --name"),
    (False, OSError(errno.ENAMETOOLONG, "File name too long"),
     "cannot create {cfg}/k1: ENAMETOOLONG (File name too long)"),
    (True, OSError(errno.EIO, "sh: 1: mkdir: not found", "/x/k1 on hostb"),
     "cannot create /x/k1 on hostb: sh: 1: mkdir: not found")])
def test_a_session_that_cannot_be_made(tmp_path, monkeypatch, remote_host,
                                       exc, message):
    monkeypatch.setattr(run.Session if not remote_host else
                        remote.RemoteSession, "__init__",
                        lambda *a, **k: (_ for _ in ()).throw(exc))
    monkeypatch.setattr("krpinglib.session.CONFIGFS", str(tmp_path))
    runner = run.Runner.__new__(run.Runner)
    runner.ssh = LocalShell()
    with pytest.raises(CliError) as e:
        runner.make("k1", remote_host)
    assert str(e.value) == message.format(cfg=tmp_path)
