# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The run and pair commands: sessions made, configured, started and
waited for (here, or one side on a remote host), their results checked
and reported, and every session removed however the run ends."""

import errno
import os
import signal
import sys
import time

from .abi import MAX_SIZE, TERMINAL
from .errors import (ERROR_HINTS, CliError, Interrupted, describe_errno,
                     errname)
from .report import (Printer, failure_text, figures, print_histograms,
                     print_json, print_per_qp, read_histogram, read_per_qp,
                     rlat_note, run_ok)
from .session import Session, check_module
from .settings import (configure, default_count, effective_test,
                       option_value, sizes_for, start)
from .thresholds import (check_threshold_usage, check_thresholds,
                         given_thresholds)
from .watch import Watch

# Exit status of a run that ended well but missed a threshold.
EXIT_THRESHOLD = 3


# The signals that end a run: the first stops it, cleanup() removes its
# sessions, and one that arrives meanwhile waits for that to end.
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def say_from_handler(line):
    """Print line on stderr from a signal handler. The handler may run
    inside a print to the same buffered stream, which raises RuntimeError
    when re-entered, so it writes to the descriptor (an in-memory stderr
    has none and takes the print). A write that fails is dropped: what
    the handler interrupted (the sessions' removal) must go on."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        print(line, file=sys.stderr)
        return
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass


class Runner:
    def __init__(self, args):
        self.args = args
        self.live = []          # sessions to clean up on exit
        self.prefix = args.name or f"k{os.getpid() % 100000}"
        self.ssh = None
        if args.remote:
            from .remote import Ssh
            self.ssh = Ssh(args.remote)
        self.watch = Watch.make(args)

    def new(self, suffix, remote=False):
        """A new session, recorded for cleanup() before a stop signal can
        end the run: they wait while it is made (a remote one: at most
        the ssh command's timeout)."""
        # A signal already pending runs its handler in either call:
        # before anything is made, or once the session is noted.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
            sess = self.make(self.prefix + suffix, remote)
            self.live.append(sess)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return sess

    def make(self, name, remote):
        """The session, or CliError saying why it could not be made."""
        from .session import CONFIGFS
        cfg = os.path.join(CONFIGFS, name)
        try:
            if remote:
                from .remote import RemoteSession
                return RemoteSession(self.ssh, name)
            return Session(name)
        except FileExistsError:
            if remote:
                raise CliError(f"session {name!r} exists already on "
                               f"{self.ssh.dest}; pick another --name") \
                    from None
            raise CliError(f"session {name!r} exists already ({cfg}); pick "
                           f"another --name or remove it with 'krping rm "
                           f"{name}'") from None
        except OSError as e:
            if not remote and e.errno in (errno.EACCES, errno.EPERM):
                raise CliError(f"cannot create {cfg}: permission denied "
                               f"(run as root)") from None
            if remote:        # strerror: the remote shell's message
                raise CliError(f"cannot create {e.filename}: "
                               f"{e.strerror}") from None
            raise CliError(f"cannot create {cfg}: "
                           f"{describe_errno(e.errno)}") from None

    def finish(self, sess):
        sess.close()
        if not self.args.keep:
            sess.remove()
        if sess in self.live:
            self.live.remove(sess)

    def cleanup(self):
        """Stop and remove what is left, here and on the remote host,
        whatever ended the run; say what could not be removed."""
        for sess in reversed(self.live):
            try:
                sess.stop()
                if not self.args.keep:
                    sess.remove()
                else:
                    sess.close()
            except (CliError, OSError) as e:
                where = sess.where()
                print(f"krping: could not remove session {sess.name}"
                      f"{' on ' + where if where else ''}: {e}; remove it "
                      f"with 'krping rm {sess.name}'"
                      f"{' there' if where else ''}", file=sys.stderr)
        self.live.clear()
        if self.ssh:
            self.ssh.close()
            self.ssh = None

    def side_result(self, sess):
        res = sess.results()
        res["figures"] = figures(res)
        if getattr(self.args, "histogram", False):
            res["histogram"] = read_histogram(sess)
        per_qp = read_per_qp(sess)
        if per_qp and len(per_qp) > 1:
            res["per_qp"] = per_qp
        return res

    def run_one(self, size, count):
        """One run (pair or single side); returns its result dict."""
        a = self.args
        test = effective_test(a)
        suffix = f"_{size}" if a.sweep else ""
        timeout = a.timeout or None
        sides = {}
        if a.pair:
            srv = self.new("s" + suffix, remote=a.remote and
                           a.remote_side == "server")
            cli = self.new("c" + suffix, remote=a.remote and
                           a.remote_side == "client")
            configure(srv, a, "server", size, count)
            configure(cli, a, "client", size, count)
            start(srv)
            st = srv.wait(("listening",) + TERMINAL, a.connect_timeout)
            if st != "listening":
                err = srv.error
                why = f"state {st or srv.state}"
                if err:
                    why += f", error {err} ({errname(err)})"
                    if ERROR_HINTS.get(-err):
                        why += f": {ERROR_HINTS[-err]}"
                where = srv.where()
                raise CliError(f"server {srv.name}"
                               f"{' on ' + where if where else ''} did not "
                               f"listen ({why})")
            start(cli)
            cst = self.wait_run(cli, timeout, count)
            # a client that ended normally lets the server end by itself
            sst = srv.wait(TERMINAL, 30 if cst == "done" else 5)
            if sst is None:
                srv.stop()
                srv.wait(TERMINAL, 10)
            sides["server"] = self.side_result(srv)
            sides["client"] = self.side_result(cli)
            self.finish(cli)
            self.finish(srv)
        else:
            sess = self.new(suffix)
            configure(sess, a, a.role, size, count)
            role = sess.get("role")
            deadline = time.monotonic() + a.retry
            while True:
                start(sess)
                st = self.wait_run(sess, timeout, count)
                err = sess.error
                # in a sweep the peer may still be setting up its next size
                if (st == "failed" and err == -errno.ECONNREFUSED
                        and role == "client" and time.monotonic() < deadline):
                    time.sleep(0.5)
                    continue
                break
            sides[role] = self.side_result(sess)
            self.finish(sess)
        run = {"test": test, "size": size, "count": count, "sides": sides}
        if self.watch and self.watch.lines:
            run["intervals"] = self.watch.lines
        return run

    def wait_run(self, sess, timeout, count):
        """Wait for the end of a run, printing its progress (--interval,
        or a bar on a terminal); stop a ping after --duration (counted
        from the moment it runs, as perftest's -D: connecting under a
        slow kernel can take seconds; a benchmark's time is the
        module's, duration_ms) or any run after --timeout."""
        a = self.args
        deadline = None if not timeout else time.monotonic() + timeout
        if a.cli_timer:
            st = sess.wait(("running",) + TERMINAL, timeout)
            if st == "running":
                st = sess.wait(TERMINAL, a.cli_timer)
        elif self.watch:
            st = self.watch.follow(sess, deadline, count)
        else:
            st = sess.wait(TERMINAL, timeout)
        if st is None:
            sess.stop()
            st = sess.wait(TERMINAL, 30)
        return st

def cmd_run(args):
    check_module()
    if not args.pair and not args.role and not args.options:
        raise CliError("say --server or --client (or --pair, or -o with "
                       "client/server)")
    if args.pair and args.role:
        raise CliError("--pair runs both sides: leave out --server/--client")
    if args.remote and not args.pair:
        raise CliError("--remote runs one side of a pair there: use "
                       "'krping pair --remote HOST' (or run --pair)")
    if args.remote:
        args.both = True
    if args.addr is None and option_value(args, "addr") is None \
            and option_value(args, "addr6") is None:
        raise CliError("--addr is required (the server's address)")
    args.sweep = args.all or bool(args.sizes)
    test = effective_test(args)
    check_threshold_usage(args, test)
    if args.duration is not None and not 0 < args.duration <= 86400:
        raise CliError("--duration takes 0 < SEC <= 86400")
    if args.interval is not None and not args.interval > 0:
        raise CliError("--interval takes SEC > 0")
    # A benchmark's time is kept by the module; a ping's by this tool.
    args.duration_ms = None
    args.cli_timer = None
    if args.duration and test != "ping":
        args.duration_ms = max(1, round(args.duration * 1000))
    elif args.duration:
        args.cli_timer = args.duration
    count = default_count(args, test)
    printer = Printer(not args.json, args.both)
    out = {"results": [], "skipped": [],
           "thresholds": [{"option": t.option, "figure": t.figure,
                           "limit": limit, "unit": t.unit}
                          for t, limit in given_thresholds(args)],
           "thresholds_met": None}
    status = 0
    failed = missed = False

    ending = {"stopping": False, "told": False}

    def on_signal(signum, frame):
        # The first signal ends the run; any later one must not cut
        # cleanup() short and leave sessions running in the kernel.
        if not ending["stopping"]:
            ending["stopping"] = True
            raise Interrupted()
        if not ending["told"]:
            ending["told"] = True
            say_from_handler("krping: still removing the sessions, "
                             "please wait")
    old = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    runner = None
    try:
        runner = Runner(args)
        if runner.ssh:
            runner.ssh.check_module()
        for size in sizes_for(args):
            if size is not None and size > MAX_SIZE:
                reason = (f"larger than the module's maximum size "
                          f"{MAX_SIZE} (4 MiB)")
                out["skipped"].append({"size": size, "reason": reason})
                printer.skipped(size, reason)
                continue
            run = runner.run_one(size, count)
            if run["size"] is None:
                run["size"] = next(iter(run["sides"].values()))["size"]
            if run["count"] is None:
                run["count"] = next(iter(run["sides"].values()))["count"]
            run["ok"] = run_ok(run, args.cli_timer)
            run["checks"] = []
            out["results"].append(run)
            printer.result(run)
            if not run["ok"]:
                failed = True
                for line in failure_text(run):
                    print(f"krping: {line}", file=sys.stderr)
                if args.sweep and not args.keep_going:
                    break
                continue
            run["checks"], misses = check_thresholds(run, args)
            for line in misses:
                print(f"krping: {line}", file=sys.stderr)
            if run["checks"]:
                met = not misses and out["thresholds_met"] is not False
                out["thresholds_met"] = met
                missed = missed or bool(misses)
        status = 1 if failed else EXIT_THRESHOLD if missed else 0
    except Interrupted:
        print("krping: interrupted, stopping", file=sys.stderr)
        status = 130
    finally:
        ending["stopping"] = True
        try:
            if runner:
                runner.cleanup()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
    if not args.json:
        print_per_qp(out["results"], args.both)
    if args.histogram and not args.json:
        print_histograms(out["results"], args.both)
    note = None if args.json else rlat_note(out["results"])
    if note:
        print(f"krping: {note}", file=sys.stderr)
    if args.json:
        print_json(out)
    return status

