# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""
The remote host of a two-host topology (lib/env.py), reached over ssh.

As in the kernel's drivers/net selftests, a remote is an object with
cmd(): it runs one shell command on the remote host and returns what it
printed and its status. ssh is the only transport: no agent or daemon of
our own runs on the remote host, which needs sshd, a POSIX shell with
coreutils, configfs mounted and rdma_krping loaded; nothing of this
repository has to be there.

cmd() runs its command in a subshell of one remote `sh` that the
SshRemote keeps open over one ssh (RemoteShell): a command costs a fork
there, not a new ssh client here. Under TCG an ssh client costs about
half a second to start, and a two-host test runs a dozen commands, so
that was most of such a test's time. A command with input, or one issued
while another thread's command runs, takes its own ssh as before. Keep
those cheap with connection sharing in the ssh configuration of the user
running the tests (the test bed writes one):

    Host hostb
        ControlMaster auto
        ControlPath /run/krping-ssh-%C
        ControlPersist 60

ssh runs with BatchMode=yes: a host that asks for a password fails at
once instead of hanging the suite. After the remote host lost its power
or booted again, close_all() drops the open shells (lib/bed.py does).
"""

import os
import secrets
import selectors
import shlex
import subprocess
import threading
import time
import weakref

from krpinglib.remote import errno_of


# What the remote commands read, they read with the shell's builtins: under
# TCG every program started there (cat, grep, date) costs 0.1 to 0.2 s of
# the remote guest's one vCPU, and a two-host test reads a few dozen files.
# A builtin read costs a round trip (30 to 50 ms).


def cat_command(path):
    """A shell command printing the text file at path, line by line (a
    last line without newline gets one), with builtins only. A file it
    cannot open is handed to cat, for cat's message (errno_of reads it)."""
    q = shlex.quote(path)
    return ("{ while IFS= read -r l || [ -n \"$l\" ]; do "
            f"printf '%s\\n' \"$l\"; done < {q}; }} 2>/dev/null || cat {q}")


# "NAME:FIRST LINE" for each file of the current directory (grep -H '' *
# for files of one line; "NAME:" for an empty one), with builtins only;
# fails naming a file it cannot open (read's status 2; 1 is end of file).
READ_FIRST_LINES = ("for f in *; do v=; { read -r v < \"$f\"; } 2>/dev/null; "
                    "[ $? -le 1 ] || { echo \"$f: cannot open\" >&2; "
                    "exit 1; }; printf '%s:%s\\n' \"$f\" \"$v\"; done")


class RemoteError(Exception):
    """A remote command failed (or ssh could not run it)."""

    def __init__(self, msg, returncode=None, stderr=""):
        super().__init__(msg)
        self.returncode = returncode
        self.stderr = stderr


# Every RemoteShell still open, for close_all().
_shells = weakref.WeakSet()


def close_all():
    """Close every open RemoteShell: after a power cut or a boot of the
    remote host their ssh connections are dead or lead to a shell that
    is gone. The next command opens a new one."""
    for shell in list(_shells):
        shell.close()


class RemoteShell:
    """One remote `sh` over one ssh, fed one command after the other.

    Each command runs as `( eval 'COMMAND' ) </dev/null` there, so that
    its exit, cd, variables or syntax errors stay in its subshell; a
    line with a random mark and the status ends its stdout, another mark
    its stderr.
    """

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        for f in (self.proc.stdout, self.proc.stderr):
            os.set_blocking(f.fileno(), False)
        _shells.add(self)

    @property
    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def close(self):
        proc, self.proc = self.proc, None
        if proc is None:
            return
        _shells.discard(self)
        try:
            proc.kill()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f.close()
            except OSError:
                pass

    def run(self, command, timeout):
        """(returncode, stdout, stderr) of command; returncode None when
        the shell ended before the command did (ssh failed or the host
        went), TimeoutError after timeout s. Either closes the shell."""
        mark = secrets.token_hex(12)
        script = (f"( eval {shlex.quote(command)}\n) </dev/null; "
                  f"printf '\\n{mark} %d\\n' $?; printf '\\n{mark}\\n' >&2\n")
        out_end = f"\n{mark} ".encode()
        err_end = f"\n{mark}\n".encode()
        bufs = {self.proc.stdout: bytearray(), self.proc.stderr: bytearray()}
        try:
            self.proc.stdin.write(script.encode())
            self.proc.stdin.flush()
        except OSError:
            self.close()
            return None, "", "the remote shell is gone"
        deadline = time.monotonic() + timeout
        done = {self.proc.stdout: False, self.proc.stderr: False}
        with selectors.DefaultSelector() as sel:
            for f in bufs:
                sel.register(f, selectors.EVENT_READ)
            while not all(done.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    raise TimeoutError
                for key, _ in sel.select(left):
                    chunk = os.read(key.fileobj.fileno(), 65536)
                    if not chunk:
                        err = bytes(bufs[self.proc.stderr])
                        self.close()
                        return None, "", err.decode(errors="replace")
                    buf = bufs[key.fileobj]
                    buf += chunk
                    if key.fileobj is self.proc.stdout:
                        i = buf.find(out_end)
                        done[key.fileobj] = i >= 0 and buf.endswith(b"\n")
                    else:
                        done[key.fileobj] = buf.endswith(err_end)
        out = bytes(bufs[self.proc.stdout])
        i = out.find(out_end)
        rc = int(out[i + len(out_end):].strip())
        err = bytes(bufs[self.proc.stderr])[:-len(err_end)]
        return (rc, out[:i].decode(errors="replace"),
                err.decode(errors="replace"))


class SshRemote:
    """A host reached with `ssh [options] destination command`."""

    # ssh's own failures (connection refused, host key, auth) exit 255.
    SSH_FAILED = 255

    def __init__(self, args, timeout=60.0):
        self.args = shlex.split(args)
        if not self.args:
            raise ValueError("REMOTE_ARGS is empty")
        self.timeout = timeout
        self._shell = None
        self._shell_lock = threading.Lock()

    def __repr__(self):
        return f"SshRemote({self.dest!r})"

    @property
    def dest(self):
        """The host as ssh is given it (the CLI's sessions name it so)."""
        return " ".join(self.args)

    def argv(self, command):
        """The ssh command line that runs command remotely."""
        return ["ssh", "-o", "BatchMode=yes", *self.args, command]

    def cmd(self, command, check=True, timeout=None, input=None):
        """Run a shell command remotely; return a CompletedProcess (text).

        check: raise RemoteError when it exits non-zero. ssh failing
        itself (exit 255) always raises.
        """
        timeout = self.timeout if timeout is None else timeout
        if input is None and self._shell_lock.acquire(blocking=False):
            try:
                cp = self._shell_cmd(command, timeout)
            finally:
                self._shell_lock.release()
        else:
            cp = self._ssh_cmd(command, timeout, input)
        if cp.returncode == self.SSH_FAILED:
            raise RemoteError(f"{self}: ssh failed: {cp.stderr.strip()}",
                              cp.returncode, cp.stderr)
        if check and cp.returncode:
            raise RemoteError(f"{self}: {command!r} exited {cp.returncode}:"
                              f" {cp.stdout.strip()} {cp.stderr.strip()}",
                              cp.returncode, cp.stderr)
        return cp

    def _shell_cmd(self, command, timeout):
        """command in the open RemoteShell (opened first if need be)."""
        if self._shell is None or not self._shell.alive:
            self._shell = RemoteShell(self.argv("exec sh"))
        argv = self.argv(command)
        try:
            rc, out, err = self._shell.run(command, timeout)
        except TimeoutError:
            raise RemoteError(f"{self}: {command!r} still running after "
                              f"{timeout:g}s") from None
        if rc is None:
            return subprocess.CompletedProcess(argv, self.SSH_FAILED, out, err)
        return subprocess.CompletedProcess(argv, rc, out, err)

    def _ssh_cmd(self, command, timeout, input):
        """command in an ssh of its own."""
        try:
            cp = subprocess.run(self.argv(command), capture_output=True,
                                text=True, timeout=timeout, input=input,
                                stdin=None if input is not None else
                                subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise RemoteError(f"{self}: {command!r} still running after "
                              f"{timeout:g}s") from None
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
        text = self.cmd(cat_command(path)).stdout
        return text[:-1] if text.endswith("\n") else text

    def read_ints(self, directory):
        """{file name: int} of the files of a remote directory of
        counters (sysfs stats/, latency/, bandwidth/)."""
        out = self.cmd(f"cd {shlex.quote(directory)} && {READ_FIRST_LINES}"
                       ).stdout
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
