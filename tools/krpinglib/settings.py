# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The session settings a command line asks for: the flags and the
legacy option string (-o) they override, the test, role, count and
sizes they make, and their writing to a session."""

import errno

from .abi import TESTS
from .errors import START_HINTS, CliError, Refused, describe_errno

ALL_SIZES = [1 << i for i in range(1, 24)]      # 2 B .. 8 MiB, like perftest -a

# perftest's default iteration counts
DEFAULT_COUNT = {"bw": 5000, "sbw": 5000}
DEFAULT_COUNT_OTHER = 1000


SESSION_FLAGS = (
    # (attribute, argparse dest)
    ("addr", "addr"), ("port", "port"), ("count", "count"), ("size", "size"),
    ("test", "test"), ("mem_mode", "mem_mode"), ("txdepth", "txdepth"),
    ("tos", "tos"), ("peer_timeout_ms", "peer_timeout_ms"),
    ("duration_ms", "duration_ms"), ("warmup", "warmup"), ("qps", "qps"),
    ("validate", "validate"), ("verbose", "verbose_data"),
    ("duplex", "duplex"), ("poll", "poll"), ("server_inv", "server_inv"),
    ("local_dma_lkey", "local_dma_lkey"), ("read_inv", "read_inv"),
)


def configure(sess, args, role, size, count):
    """Option string first (it resets what it does not name), then flags."""
    settings = []
    if args.options:
        settings.append(("options", args.options))
    if role:
        settings.append(("role", role))
    for attr, dest in SESSION_FLAGS:
        value = getattr(args, dest, None)
        if attr == "size":
            value = size
        elif attr == "count":
            value = count
        if value is None:
            continue
        if isinstance(value, bool):
            value = int(value)
        settings.append((attr, value))
    features = sess.features()
    features.check(settings)
    try:
        sess.apply(settings)
    except Refused as e:
        raise CliError(refused(sess, e, features.hint(e.attr))) from None


def refused(sess, e, hint=""):
    """The message of a write the module refused (e: errors.Refused)."""
    where = f" on {e.where}" if e.where else ""
    return (f"{sess.name}{where}: {e.attr}={e.value!r} refused: "
            f"{describe_errno(e.errno)}{hint}")


def start(sess):
    """sess.start(), a refusal worded with what its errno usually means."""
    try:
        sess.start()
    except Refused as e:
        hint = START_HINTS.get(e.errno)
        if e.errno == errno.EOPNOTSUPP:
            hint = (f"the loaded module does not implement test "
                    f"{sess.get('test')!r}")
        where = f" on {e.where}" if e.where else ""
        raise CliError(f"{sess.name}{where}: start refused: "
                       f"{describe_errno(e.errno)}"
                       + (f": {hint}" if hint else "")) from None


def effective_test(args):
    if args.test:
        return args.test
    if args.options:
        for item in args.options.split(","):
            name, _, value = item.partition("=")
            if name == "test":
                return value
            if name in TESTS and not value:
                return name
    return "ping"


def option_value(args, key):
    """A value that -o sets, so sweeps and defaults respect it."""
    if not args.options:
        return None
    for item in args.options.split(","):
        name, _, value = item.partition("=")
        if name == key and value:
            return value
    return None


def default_count(args, test):
    if args.count is not None:
        return args.count
    if option_value(args, "count") is not None:
        return None             # -o names it
    if args.duration:
        return 0                # the time ends the run
    return DEFAULT_COUNT.get(test, DEFAULT_COUNT_OTHER)

def option_role(args):
    """The role of a single session: --server/--client or -o's."""
    if args.role:
        return args.role
    role = None
    for item in (args.options or "").split(","):
        name, _, value = item.partition("=")
        if name in ("server", "client") and not value:
            role = name
        elif name == "role" and value in ("server", "client"):
            role = value
    return role


def sizes_for(args):
    if args.all:
        return ALL_SIZES
    if args.sizes:
        return args.sizes
    if args.size is not None:
        return [args.size]
    v = option_value(args, "size")
    return [int(v)] if v else [None]
