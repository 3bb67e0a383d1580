# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""
The remote host of a two-host topology (lib/env.py), reached over ssh.

As in the kernel's drivers/net selftests, a remote is an object with
cmd(): it runs one shell command on the remote host and returns what it
printed and its status. ssh is the only transport: no agent or daemon of
our own runs on the remote host, which needs sshd, a POSIX shell with
coreutils, configfs mounted and rdma_krping loaded; nothing of this
repository has to be there.

Each cmd() is one ssh invocation. Keep them cheap with connection
sharing in the ssh configuration of the user running the tests (the test
bed writes one):

    Host hostb
        ControlMaster auto
        ControlPath /run/krping-ssh-%C
        ControlPersist 60

ssh runs with BatchMode=yes: a host that asks for a password fails at
once instead of hanging the suite.
"""

import errno
import os
import shlex
import subprocess

# Remote shells report a failed write as "...: write error: <strerror>".
_ERRNO_OF = {os.strerror(e): e for e in errno.errorcode}


class RemoteError(Exception):
    """A remote command failed (or ssh could not run it)."""

    def __init__(self, msg, returncode=None, stderr=""):
        super().__init__(msg)
        self.returncode = returncode
        self.stderr = stderr


def errno_of(stderr):
    """The errno a shell's error message names (the text after the last
    ': ' of its last line), or EIO when it names none."""
    lines = stderr.strip().splitlines()
    text = lines[-1].rsplit(": ", 1)[-1].strip() if lines else ""
    return _ERRNO_OF.get(text, errno.EIO)


class SshRemote:
    """A host reached with `ssh [options] destination command`."""

    # ssh's own failures (connection refused, host key, auth) exit 255.
    SSH_FAILED = 255

    def __init__(self, args, timeout=60.0):
        self.args = shlex.split(args)
        if not self.args:
            raise ValueError("REMOTE_ARGS is empty")
        self.timeout = timeout

    def __repr__(self):
        return f"SshRemote({' '.join(self.args)!r})"

    def argv(self, command):
        """The ssh command line that runs command remotely."""
        return ["ssh", "-o", "BatchMode=yes", *self.args, command]

    def cmd(self, command, check=True, timeout=None, input=None):
        """Run a shell command remotely; return a CompletedProcess (text).

        check: raise RemoteError when it exits non-zero. ssh failing
        itself (exit 255) always raises.
        """
        timeout = self.timeout if timeout is None else timeout
        try:
            cp = subprocess.run(self.argv(command), capture_output=True,
                                text=True, timeout=timeout, input=input,
                                stdin=None if input is not None else
                                subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise RemoteError(f"{self}: {command!r} still running after "
                              f"{timeout:g}s") from None
        if cp.returncode == self.SSH_FAILED:
            raise RemoteError(f"{self}: ssh failed: {cp.stderr.strip()}",
                              cp.returncode, cp.stderr)
        if check and cp.returncode:
            raise RemoteError(f"{self}: {command!r} exited {cp.returncode}:"
                              f" {cp.stdout.strip()} {cp.stderr.strip()}",
                              cp.returncode, cp.stderr)
        return cp

    def popen(self, command):
        """Start a remote command in the background (its stdout/stderr
        piped); the caller waits for it or kills it. Give the remote
        command its own `timeout` so that it ends even if ssh is cut."""
        return subprocess.Popen(self.argv(command), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def write(self, path, value):
        """Write value to a remote file in one write(2), as configfs
        needs; raise OSError with the errno the remote kernel returned."""
        cp = self.cmd(f"printf %s {shlex.quote(value)} > {shlex.quote(path)}",
                      check=False)
        if cp.returncode:
            err = errno_of(cp.stderr)
            raise OSError(err, f"{os.strerror(err)} (remote {path})")

    def read(self, path):
        """A remote file's text, one trailing newline stripped."""
        text = self.cmd(f"cat {shlex.quote(path)}").stdout
        return text[:-1] if text.endswith("\n") else text

    def read_ints(self, directory):
        """{file name: int} of the files of a remote directory of
        counters (sysfs stats/, latency/, bandwidth/)."""
        out = self.cmd(f"cd {shlex.quote(directory)} && grep -H '' *").stdout
        values = {}
        for line in out.splitlines():
            name, _, value = line.partition(":")
            if name == "histogram":     # latency/: a table, not a number
                continue
            values[name] = int(value)
        return values


def connect(topology):
    """The Remote of a two-host topology, or None on one host."""
    if not topology.two_host:
        return None
    return SshRemote(topology.remote_args)
