# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krping - command-line front end of the rdma_krping kernel module.

Creates a session (a directory under /sys/kernel/config/krping/) from
flags or a legacy option string, starts it, sleeps in poll(2) on its sysfs
"state" file until the run ends, prints the results as a perftest-style
table (or JSON) and removes the session again.

Commands:
  run     one session (a server or a client, e.g. one side of two hosts);
          with --pair a local server and client on this host
  pair    the same as "run --pair"; with --remote HOST one side (the
          server unless --remote-side client) runs on HOST through ssh
  show    print the results of an existing session
  list    list the sessions and their states
  stop    stop a running session (start=0)
  reset   zero the results of a finished session
  rm      stop and remove sessions

Examples:
  krping pair --addr 10.9.0.1 --test wlat --size 64 --count 1000
  krping pair --addr 10.9.0.1 --test bw --all --count 100 --json
  krping run --server --addr 10.9.0.1 --test rlat --count 1000   # host A
  krping run --client --addr 10.9.0.1 --test rlat --count 1000   # host B
  krping run -o client,addr=10.9.0.1,count=100,validate
  krping pair --remote root@hostb --addr 192.168.50.2 --test wlat --size 4k

Run "krping COMMAND --help" for the options of a command. Needs root and
the module loaded; the paths can be moved with KRPING_CONFIGFS and
KRPING_SYSFS. Exit status: 0 success, 1 a run failed (or was stopped
before its end), 2 usage or setup error, 3 a run ended well but missed a
threshold (--max-median, --max-p99, --max-p999, --max-avg, --min-bw,
--min-rate; 1 wins over 3 when both happen in a sweep), 130 interrupted.
"""

# The first paragraph above is the description of "krping --help", the
# rest its epilog.

import argparse
import signal
import sys

from .abi import TESTS
from .commands import cmd_list, cmd_reset, cmd_rm, cmd_show, cmd_stop
from .errors import CliError, describe_errno
from .run import STOP_SIGNALS, cmd_run
from .thresholds import THRESHOLDS, limit_arg


def size_arg(text):
    """A size in bytes: 4096, 4k, 64K, 1m, 4M (powers of 1024)."""
    t = text.strip().lower().rstrip("b")
    mult = 1
    if t and t[-1] in "kmg":
        mult = 1024 ** ("kmg".index(t[-1]) + 1)
        t = t[:-1]
    try:
        n = int(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"size must be >= 1: {text!r}")
    return n


def sizes_arg(text):
    return [size_arg(x) for x in text.split(",") if x]


def add_session_flags(p, pair):
    g = p.add_argument_group("session settings (each is one configfs "
                             "attribute; unset ones keep the module's "
                             "default)")
    if not pair:
        role = g.add_mutually_exclusive_group()
        role.add_argument("-s", "--server", dest="role", action="store_const",
                          const="server", help="run the server side")
        role.add_argument("-c", "--client", dest="role", action="store_const",
                          const="client", help="run the client side")
    g.add_argument("-a", "--addr", help="the server's IPv4/IPv6 address "
                   "(a server listens on it, a client connects to it)")
    g.add_argument("-p", "--port", type=int, help="rdma_cm port (module "
                   "default 7174)")
    g.add_argument("-t", "--test", choices=TESTS,
                   help="ping (default), wlat, rlat, bw, fr, slat or sbw")
    g.add_argument("-n", "--count", type=int, help="iterations (default "
                   "1000, 5000 for bw and sbw, like perftest; 0 runs until "
                   "stopped: use --duration or Ctrl-C)")
    g.add_argument("-S", "--size", type=size_arg, help="bytes per "
                   "iteration, 1..4194304; takes 4k, 1m (default 64)")
    g.add_argument("-m", "--mem-mode", dest="mem_mode", choices=("reg", "dma"),
                   help="buffer registration (default reg); dma uses an "
                   "unsafe global rkey")
    g.add_argument("--txdepth", "--tx-depth", type=int, help="send queue "
                   "depth; writes in flight for bw (default 64)")
    g.add_argument("--duplex", action="store_true", default=None,
                   help="bw: both sides write")
    g.add_argument("--poll", action="store_true", default=None,
                   help="busy-poll the CQ instead of sleeping")
    g.add_argument("-V", "--validate", action="store_true", default=None,
                   help="ping: compare the data that came back")
    g.add_argument("--verbose-data", dest="verbose_data",
                   action="store_true", default=None,
                   help="ping: log the returned data (the 'verbose' "
                   "attribute)")
    g.add_argument("--server-inv", dest="server_inv", action="store_true",
                   default=None, help="server: SEND_WITH_INV go-aheads")
    g.add_argument("--local-dma-lkey", dest="local_dma_lkey",
                   action="store_true", default=None,
                   help="server: use the local DMA lkey")
    g.add_argument("--read-inv", dest="read_inv", action="store_true",
                   default=None, help="server: READ_WITH_INV (iWARP only)")
    g.add_argument("--tos", type=int, help="IP type of service")
    g.add_argument("--peer-timeout", dest="peer_timeout_ms", type=int,
                   metavar="MS", help="fail a run whose peer has given no "
                   "sign of life for MS ms (0: never; default 30000)")
    g.add_argument("--warmup", type=int, metavar="N",
                   help="benchmarks: run N iterations first, not measured "
                   "(both sides)")
    g.add_argument("--qps", type=int, metavar="N",
                   help="run N connections (QPs) at once, 1..16 (both "
                   "sides); the figures are their sums, per QP below the "
                   "table (like perftest's -q)")
    g.add_argument("-o", "--options", help="a legacy option string, e.g. "
                   "'client,addr=10.9.0.1,count=100,validate'; written "
                   "first, the flags above then override it")

    r = p.add_argument_group("running")
    if not pair:
        r.add_argument("--pair", action="store_true",
                       help="run a server and a client session on this "
                       "host (loopback/rxe)")
    r.add_argument("--remote", metavar="HOST",
                   help="with a pair: run one side on HOST through ssh "
                   "(an ssh destination, options first if needed: "
                   "--remote='-p 2222 root@hostb'; needs root there without a "
                   "password prompt, and rdma_krping loaded); --addr is "
                   "still the server's address")
    r.add_argument("--remote-side", choices=("server", "client"),
                   default="server", help="the side --remote HOST runs "
                   "(default server)")
    r.add_argument("--all", action="store_true",
                   help="sweep sizes 2 B .. 8 MiB in powers of two, like "
                   "perftest -a (sizes above 4 MiB are skipped)")
    r.add_argument("--sizes", type=sizes_arg, metavar="LIST",
                   help="sweep these sizes, e.g. 64,4k,64k,1m")
    r.add_argument("--duration", type=float, metavar="SEC",
                   help="a timed run of SEC seconds (count 0 unless "
                   "given): a benchmark's is the module's (duration_ms "
                   "on both sides; all percentiles); a ping is stopped "
                   "SEC seconds after it connected, and still reports")
    r.add_argument("--interval", type=float, metavar="SEC",
                   help="benchmarks: print one line every SEC seconds "
                   "while the run goes (iterations, their rate, MB/s, "
                   "samples; in the JSON as intervals)")
    r.add_argument("--timeout", type=float, metavar="SEC", default=0,
                   help="give up (stop the run, exit 1) after SEC seconds "
                   "(default: no limit)")
    r.add_argument("--connect-timeout", type=float, metavar="SEC",
                   default=30, help="--pair: how long the server may take "
                   "to listen (default 30)")
    r.add_argument("--retry", type=float, metavar="SEC", default=None,
                   help="client: restart after ECONNREFUSED for up to SEC "
                   "seconds (default 0, 10 in a sweep)")
    r.add_argument("--keep-going", action="store_true",
                   help="in a sweep, go on after a failed size")
    r.add_argument("--name", help="session name (prefix); default "
                   "k<pid>, with s/c for the sides of --pair")
    r.add_argument("--keep", action="store_true",
                   help="do not remove the sessions afterwards")
    r.add_argument("--both", action="store_true",
                   help="print the server's row too when it measured "
                   "something (ping, wlat, slat, duplex bw)")
    r.add_argument("--json", action="store_true",
                   help="print the results as JSON instead of a table")
    r.add_argument("--histogram", action="store_true",
                   help="print the latency histogram of each side after "
                   "the table (with --json: a \"histogram\" list per side)")

    t = p.add_argument_group(
        "thresholds", "Checked after each run that ended well, against the "
        "rows the table shows: the client's, with --both the server's too. "
        "A miss prints one line per threshold on stderr; the exit status "
        "is then 3 (1 if a run failed).")
    for th in THRESHOLDS:
        t.add_argument(th.option, dest=th.dest, type=limit_arg,
                       metavar=th.metavar, help=th.text)


def build_parser():
    top = argparse.ArgumentParser(
        prog="krping", description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("run", help="run one session, or a local pair with "
                       "--pair", description="Create a session, start it, "
                       "wait for its end, print the results, remove it.")
    add_session_flags(p, pair=False)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("pair", help="run a server and a client session on "
                       "this host", description="Create a server and a "
                       "client session on this host (the client connects "
                       "to --addr), run them, print the client's results "
                       "(--both: the server's too), remove them.")
    add_session_flags(p, pair=True)
    p.set_defaults(func=cmd_run, pair=True, role=None)

    p = sub.add_parser("show", help="print the results of sessions",
                       description="Print the results of sessions: a "
                       "summary, JSON, or the Prometheus text format "
                       "(every session if no NAME is given).")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("--json", action="store_true",
                   help="print the results as JSON")
    p.add_argument("--prometheus", action="store_true",
                   help="print the sysfs figures in the Prometheus text "
                   "exposition format, for node_exporter's textfile "
                   "collector")
    p.add_argument("--histogram", action="store_true",
                   help="print the latency histogram too (with --json: a "
                   "\"histogram\" list per session)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("list", help="list sessions")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("stop", help="stop running sessions")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("reset", help="zero the results of finished sessions")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.set_defaults(func=cmd_reset)

    p = sub.add_parser("rm", help="stop and remove sessions")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("--all", action="store_true", help="every session")
    p.set_defaults(func=cmd_rm)
    return top


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.func is cmd_run:
        if args.all and args.sizes:
            print("krping: --all and --sizes exclude each other",
                  file=sys.stderr)
            return 2
        if args.retry is None:
            args.retry = 10.0 if (args.all or args.sizes) else 0.0
    try:
        return args.func(args)
    except CliError as e:
        print(f"krping: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1
    except OSError as e:
        # e.g. ENODEV: somebody removed the session while we watched it
        print(f"krping: {e.filename or ''}: {describe_errno(e.errno)}"
              if e.errno else f"krping: {e}", file=sys.stderr)
        return 2


def script_main():
    """main() as the krping command runs it; returns the exit status."""
    # A run removes what it made before it lets go of the stop signals;
    # a Ctrl-C after that (while results print) ends with 130, and none
    # may interrupt the interpreter's exit.
    try:
        status = main()
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    except KeyboardInterrupt:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        status = 130
    return status
