# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The commands on existing sessions: list, show, stop, reset and rm."""

import errno
import os
import sys

from . import session
from .errors import CliError, describe_errno, errname
from .prometheus import prometheus_text
from .report import (figures, header, histogram_lines, print_json,
                     read_histogram, read_per_qp, row)
from .session import (Session, check_module, session_names,
                      write_text)


def existing(name):
    """The session name, or CliError if there is none."""
    try:
        return Session(name, create=False)
    except FileNotFoundError:
        raise CliError(f"no session {name!r} "
                       f"({os.path.join(session.CONFIGFS, name)} "
                       f"missing)") from None


def cmd_list(args):
    check_module()
    rows = []
    for name in session_names():
        try:
            s = Session(name, create=False)
        except FileNotFoundError:
            continue            # removed since it was listed
        try:
            rows.append((name, s.state, s.get("role"), s.get("test"),
                         s.error, s.device))
        except OSError:
            continue
        finally:
            s.close()
    if args.json:
        print_json([dict(zip(("name", "state", "role", "test", "error",
                              "device"), r)) for r in rows])
        return 0
    if rows:
        print(f"{'NAME':<16} {'STATE':<11} {'ROLE':<7} {'TEST':<5} "
              f"{'ERROR':<6} DEVICE")
    for r in rows:
        print(f"{r[0]:<16} {r[1]:<11} {r[2]:<7} {r[3]:<5} {r[4]:<6} {r[5]}")
    return 0


def cmd_show(args):
    check_module()
    if args.json and args.prometheus:
        raise CliError("show: --json or --prometheus, not both")
    if not args.names and not args.prometheus:
        raise CliError("show: name the sessions (--prometheus alone: "
                       "every session)")
    status = 0
    all_res = []
    for name in args.names or session_names():
        try:
            s = existing(name)
            res = s.results()
        except (CliError, OSError):
            if args.names:
                raise
            continue            # removed while we read the others
        res["figures"] = figures(res)
        if args.histogram:
            res["histogram"] = read_histogram(s)
        per_qp = read_per_qp(s)
        if per_qp and len(per_qp) > 1:
            res["per_qp"] = per_qp
        s.close()
        all_res.append(res)
    if args.prometheus:
        sys.stdout.write(prometheus_text(all_res))
        return 0
    if args.json:
        print_json(all_res if len(all_res) > 1 else all_res[0])
        return 0
    for res in all_res:
        print(f"{res['name']}: {res['state']}, error {res['error']}"
              f"{' (' + errname(res['error']) + ')' if res['error'] else ''}"
              f", device {res['device'] or '-'}")
        print(f"  options: {res['options']}")
        print("  stats: " + " ".join(f"{k}={v}" for k, v in
                                     res["stats"].items()))
        for group in ("latency", "bandwidth"):
            if res[group] is not None:
                print(f"  {group}: " + " ".join(
                    f"{k}={v}" for k, v in res[group].items()))
        fig = res["figures"]
        if fig:
            print(header(fig["kind"]))
            print(row(fig))
        if args.histogram:
            for line in histogram_lines("  latency histogram",
                                        res["histogram"]):
                print(line)
        if res["state"] == "failed":
            status = 1
    return status


def cmd_stop(args):
    check_module()
    for name in args.names:
        s = existing(name)
        s.stop()
        print(f"{name}: {s.state}")
        s.close()
    return 0


def cmd_reset(args):
    check_module()
    status = 0
    for name in args.names:
        path = os.path.join(session.SYSFS, name, "reset")
        try:
            write_text(path, 1)
        except FileNotFoundError:
            print(f"krping: {name}: no {path} (no such session, or the "
                  f"module has no reset)", file=sys.stderr)
            status = 2
        except OSError as e:
            why = (": the session is running" if e.errno == errno.EBUSY
                   else "")
            print(f"krping: {name}: reset refused: "
                  f"{describe_errno(e.errno)}{why}", file=sys.stderr)
            status = 1
    return status


def cmd_rm(args):
    check_module()
    if not args.all and not args.names:
        raise CliError("rm: name the sessions, or --all")
    names = session_names() if args.all else args.names
    for name in names:
        try:
            os.rmdir(os.path.join(session.CONFIGFS, name))
        except FileNotFoundError:
            print(f"krping: no session {name!r}", file=sys.stderr)
            return 2
    return 0

