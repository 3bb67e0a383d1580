# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A seeded random sequence of configfs/sysfs operations from several
processes at once.

WORKERS forked processes each take STEPS / WORKERS steps, drawn from
random.Random(f"{seed}-{worker}"): mkdir and rmdir of the worker's own
sessions, valid and invalid writes to every attribute (values from the
tables of test_session.py, test_bad_input.py and test_options.py, and
the test bed's addresses and a few shared ports so that real runs
happen), options strings, start, stop (also of other workers'
sessions), sysfs reset, and reads of every configfs and sysfs file of
any session.

What it proves: every write is answered with what the ABI documents (a
valid value: applied and read back, or EBUSY while running; an invalid
one: its errno from the tables, or EBUSY, and the session's settings
unchanged), every read gives a well-formed value (or ENOENT for a
session another worker just removed), no operation hangs (each worker
reports progress; the whole run is bounded), the module still runs a
real pair after, and at the end every directory is gone and nothing is
left in /sys/kernel/krping.

The seed is KRPING_SEED or random, and is printed (a "# KRPING_SEED=N"
line, and in every failure message). Replay:

    KRPING_SEED=N selftests/run_tests.sh -k random

(The interleaving of the workers differs from run to run; each worker's
own sequence does not.)
"""

import errno
import json
import os
import random
import select
import signal
import time

from lib import krping
import test_bad_input
import test_options
import test_session

WORKERS = 4
# 3000 steps took 10 to 15 s under TCG on the stock kernel alone, up to
# 58 s in make check's busy lanes; the debug kernel (KRPING_SLOW) takes
# some 50 times as long per operation.
STEPS = int(os.environ.get("KRPING_RANDOM_STEPS",
                           "300" if krping.SLOW else "2000"))
SLOTS = 3                       # sessions per worker
# A hang is one operation that does not return: STALL_MAX. The whole run
# has a bound only so that a slow machine cannot hold the suite forever;
# it is not a performance claim, so it leaves a wide margin.
RUN_MAX = 900.0 if krping.SLOW else 300.0
STALL_MAX = 60.0 if krping.SLOW else 20.0   # one operation of a worker
OP_MAX = 20.0                   # one stop or rmdir
CLEANUP_MAX = 60.0              # rmdir of what hung workers left

CONFIG_FILES = krping.ALL_ATTRS
SYSFS_FILES = (("state", "error", "device")
               + tuple("stats/" + s for s in krping.STATS)
               + tuple("latency/" + s for s in krping.LATENCY)
               + tuple("bandwidth/" + s for s in krping.BANDWIDTH))

GOOD = {}
for _attr, _value, _shown in test_session.GOOD:
    GOOD.setdefault(_attr, []).append((_value, _shown))
BAD = {a: cases + test_bad_input.COMMON
       for a, cases in test_bad_input.TABLE.items()}
BAD["options"] = test_bad_input.OPTIONS_BAD + test_bad_input.COMMON
BAD["start"] = [(v, errno.EINVAL) for v in test_bad_input.START_BAD]

SEED = int(os.environ.get("KRPING_SEED") or random.SystemRandom().randrange(2**32))


def slot_name(worker, k):
    return f"z{worker}_{k}"


class Worker:
    """One process's random walk; problems go to self.problems."""

    def __init__(self, index, ports, out_fd):
        self.index = index
        self.rng = random.Random(f"{SEED}-{index}")
        self.ports = ports
        self.out = out_fd
        self.problems = []
        self.counts = {}
        self.own = [slot_name(index, k) for k in range(SLOTS)]
        self.all = [slot_name(w, k) for w in range(WORKERS)
                    for k in range(SLOTS)]
        self.step = 0
        self.slowest = (0.0, "")        # (seconds, what)

    # --- helpers -------------------------------------------------------
    def report(self, op, target):
        line = json.dumps({"w": self.index, "s": self.step, "op": op,
                           "t": target}) + "\n"
        os.write(self.out, line.encode())

    def problem(self, text):
        self.problems.append(f"worker {self.index} step {self.step}: {text}")

    def cfg(self, name):
        return krping.CONFIGFS / name

    def config(self, name):
        return {a: krping.read_text(self.cfg(name) / a)
                for a in krping.OPTION_ATTRS + ("options",)}

    def valid_value(self, attr):
        rng = self.rng
        if attr == "port" and rng.random() < 0.7:
            p = str(rng.choice(self.ports))
            return p, p
        if attr == "addr" and rng.random() < 0.6:
            a = rng.choice((krping.SERVER_ADDR, krping.CLIENT_ADDR))
            return a, a
        if attr == "count" and rng.random() < 0.6:
            c = rng.choice(("1", "3", "10"))
            return c, c
        if attr == "size" and rng.random() < 0.8:
            s = rng.choice(("64", "1000", "4096"))
            return s, s
        value, shown = rng.choice(GOOD[attr])
        if rng.random() < 0.3:
            value += "\n"
        return value, shown

    def valid_options(self):
        """(string, {attr: value} it sets, others default)."""
        if self.rng.random() < 0.3:
            string, attrs, _ = self.rng.choice(test_options.GOOD)
            return string, attrs
        role = self.rng.choice(("client", "server"))
        port = str(self.rng.choice(self.ports))
        count = self.rng.choice(("1", "5", "20"))
        addr = self.rng.choice((krping.SERVER_ADDR, krping.CLIENT_ADDR))
        string = f"{role},addr={addr},port={port},count={count},validate"
        return string, dict(role=role, addr=addr, port=port, count=count,
                            validate="1")

    def any_session(self):
        return self.rng.choice(self.own if self.rng.random() < 0.6
                               else self.all)

    # --- operations ----------------------------------------------------
    def op_mkdir(self, name):
        try:
            os.mkdir(self.cfg(name))
        except FileExistsError:
            return "EEXIST"
        if not (krping.SYSFS / name).is_dir():
            self.problem(f"mkdir {name}: no sysfs dir")
        return "OK"

    def op_rmdir(self, name):
        t0 = time.monotonic()
        try:
            os.rmdir(self.cfg(name))
        except FileNotFoundError:
            return "ENOENT"
        except OSError as e:
            self.problem(f"rmdir {name}: {krping.errname(e.errno)}")
            return krping.errname(e.errno)
        took = time.monotonic() - t0
        if took > OP_MAX:
            self.problem(f"rmdir {name} took {took:.1f}s")
        if (krping.SYSFS / name).exists():
            self.problem(f"rmdir {name}: sysfs dir still there")
        return "OK"

    def op_write_valid(self, name):
        attr = self.rng.choice(krping.OPTION_ATTRS)
        value, shown = self.valid_value(attr)
        err = krping.write_errno(self.cfg(name) / attr, value)
        if err == errno.ENOENT:
            return "ENOENT"
        if err == 0:
            got = krping.read_text(self.cfg(name) / attr)
            if got != shown:
                self.problem(f"{name}/{attr} <- {value!r}: reads {got!r}")
        elif err != errno.EBUSY:
            self.problem(f"{name}/{attr} <- {value!r}: {krping.errname(err)}")
        return krping.errname(err)

    def op_write_invalid(self, name, own):
        attr = self.rng.choice(tuple(BAD))
        value, want = self.rng.choice(BAD[attr])
        before = self.config(name) if own else None
        err = krping.write_errno(self.cfg(name) / attr, value)
        if err == errno.ENOENT and not own:
            return "ENOENT"
        if err not in (want, errno.EBUSY):
            self.problem(f"{name}/{attr} <- {value!r}: {krping.errname(err)},"
                         f" want {krping.errname(want)} or EBUSY")
        if own:
            after = self.config(name)
            if after != before:
                self.problem(f"{name}/{attr} <- {value!r} "
                             f"({krping.errname(err)}) changed {before} -> "
                             f"{after}")
        return krping.errname(err)

    def op_options(self, name):
        string, attrs = self.valid_options()
        err = krping.write_errno(self.cfg(name) / "options", string)
        if err == 0:
            want = dict(krping.DEFAULTS, **attrs)
            got = {a: krping.read_text(self.cfg(name) / a)
                   for a in krping.OPTION_ATTRS}
            if got != want:
                self.problem(f"{name}/options <- {string!r}: {got} != {want}")
        elif err != errno.EBUSY:
            self.problem(f"{name}/options <- {string!r}: "
                         f"{krping.errname(err)}")
        return krping.errname(err)

    def op_start(self, name, own):
        err = krping.write_errno(self.cfg(name) / "start", "1")
        ok = (0, errno.EBUSY, errno.EINVAL, errno.ENODEV)
        if err not in ok and not (err == errno.ENOENT and not own):
            self.problem(f"{name}/start <- 1: {krping.errname(err)}")
        return krping.errname(err)

    def op_stop(self, name, own):
        t0 = time.monotonic()
        err = krping.write_errno(self.cfg(name) / "start", "0")
        took = time.monotonic() - t0
        if err and not (err == errno.ENOENT and not own):
            self.problem(f"{name}/start <- 0: {krping.errname(err)}")
        if took > OP_MAX:
            self.problem(f"{name}/start <- 0 took {took:.1f}s")
        return krping.errname(err)

    def op_reset(self, name, own):
        err = krping.write_errno(krping.SYSFS / name / "reset", "1")
        # A foreign session may vanish between open() and write(): sysfs
        # (kernfs) then fails the write with ENODEV, where configfs says
        # ENOENT.
        if err not in (0, errno.EBUSY) and not (
                err in (errno.ENOENT, errno.ENODEV) and not own):
            self.problem(f"{name}/reset <- 1: {krping.errname(err)}")
        return krping.errname(err)

    def check_value(self, name, f, text):
        if f == "state":
            return text in krping.STATES
        if f == "error":
            return text.lstrip("-").isdigit() and int(text) <= 0
        if f == "device":
            return len(text) < 64
        if "/" in f:
            return text.isdigit()
        if f == "start":
            return text in ("0", "1")
        if f == "options":
            return "port=" in text
        if f in krping.BOOL_ATTRS:
            return text in ("0", "1")
        if f in ("port", "count", "size", "txdepth", "tos",
                 "peer_timeout_ms", "duration_ms", "warmup", "qps"):
            return text.isdigit()
        return True

    def op_read_all(self, name, own):
        """Returns the state read."""
        state = "gone"
        for base, files in ((self.cfg(name), CONFIG_FILES),
                            (krping.SYSFS / name, SYSFS_FILES)):
            for f in files:
                try:
                    text = krping.read_text(base / f)
                except OSError as e:
                    if own or e.errno not in (errno.ENOENT, errno.ENODEV):
                        self.problem(f"read {base / f}: "
                                     f"{krping.errname(e.errno)}")
                    return state
                if not self.check_value(name, f, text):
                    self.problem(f"read {base / f}: {text!r}")
                if f == "state":
                    state = text
        return state

    # --- the walk ------------------------------------------------------
    OPS = (("mkdir", 2), ("rmdir", 1), ("write_valid", 10),
           ("write_invalid", 10), ("write_invalid_foreign", 2),
           ("options", 4), ("start", 6), ("start_foreign", 1),
           ("stop", 3), ("reset", 2), ("read_all", 6))

    def run(self, steps):
        names = [o for o, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        for self.step in range(steps):
            # Each kind once first, so that a short walk (the debug
            # kernel's) tries them all (an operation on a session not
            # made yet still becomes its mkdir); then at random.
            if self.step < len(names):
                op = names[(self.step + self.index) % len(names)]
            else:
                op = self.rng.choices(names, weights)[0]
            own_name = self.rng.choice(self.own)
            exists = self.cfg(own_name).is_dir()
            if op == "mkdir":
                target, fn = own_name, lambda n: self.op_mkdir(n)
            elif op == "rmdir":
                target, fn = own_name, lambda n: self.op_rmdir(n)
            elif not exists and op not in ("write_invalid_foreign",
                                           "start_foreign", "read_all"):
                op, target, fn = "mkdir", own_name, lambda n: self.op_mkdir(n)
            elif op == "write_valid":
                target, fn = own_name, self.op_write_valid
            elif op == "write_invalid":
                target, fn = own_name, lambda n: self.op_write_invalid(n, True)
            elif op == "write_invalid_foreign":
                target = self.rng.choice(self.all)
                fn = lambda n: self.op_write_invalid(n, False)
            elif op == "options":
                target, fn = own_name, self.op_options
            elif op == "start":
                target, fn = own_name, lambda n: self.op_start(n, True)
            elif op == "start_foreign":
                target = self.rng.choice(self.all)
                fn = lambda n: self.op_start(n, n in self.own)
            elif op == "stop":
                target = self.any_session()
                fn = lambda n: self.op_stop(n, n in self.own and
                                            self.cfg(n).is_dir())
            elif op == "reset":
                target = self.any_session()
                fn = lambda n: self.op_reset(n, n in self.own and
                                             self.cfg(n).is_dir())
            else:
                target = self.any_session()
                fn = lambda n: self.op_read_all(n, n in self.own and
                                                self.cfg(n).is_dir())
            self.report(op, target)
            if not self.cfg(target).is_dir() and op != "mkdir" and \
                    target in self.own:
                continue
            t0 = time.monotonic()
            try:
                result = fn(target)
            except OSError as e:
                # a foreign session vanishing under us is fine
                if target in self.own or e.errno not in (errno.ENOENT,
                                                         errno.ENODEV):
                    self.problem(f"{op} {target}: {e!r}")
                result = krping.errname(e.errno)
            took = time.monotonic() - t0
            if took > self.slowest[0]:
                self.slowest = (took, f"{op} {target}: {result}")
            key = f"{op}:{result}"
            self.counts[key] = self.counts.get(key, 0) + 1
            if len(self.problems) > 20:
                break
        # leave nothing behind
        for name in self.own:
            if self.cfg(name).is_dir():
                self.op_rmdir(name)


def child(index, steps, ports, wfd):
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    status = 0
    try:
        w = Worker(index, ports, wfd)
        w.run(steps)
        msg = {"w": index, "done": True, "problems": w.problems,
               "counts": w.counts, "slowest": w.slowest}
    except BaseException as e:          # reported to the parent
        msg = {"w": index, "done": True, "problems": [f"worker {index}: "
                                                       f"crashed: {e!r}"],
               "counts": {}, "slowest": (0.0, "")}
        status = 1
    try:
        os.write(wfd, (json.dumps(msg) + "\n").encode())
    finally:
        os._exit(status)


def kernel_stack(pid):
    """Where a process is in the kernel: /proc/PID/stack (root only)."""
    try:
        with open(f"/proc/{pid}/stack") as f:
            return f.read().strip() or "(not in the kernel)"
    except OSError as e:
        return f"(no stack: {krping.errname(e.errno)})"


def run_workers(steps_each, ports):
    """Fork the workers, follow their progress.

    Return (results, hung): hung is empty, or a text saying which worker
    stalled in which operation (with its kernel stack) or that the run
    passed RUN_MAX, and where every unfinished worker was.
    """
    procs = {}
    for i in range(WORKERS):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(i, steps_each, ports, w)
        os.close(w)
        procs[r] = dict(pid=pid, index=i, buf=b"", last=[], result=None,
                        seen=time.monotonic())
    t0 = time.monotonic()
    open_fds = set(procs)
    hung = ""
    while open_fds:
        now = time.monotonic()
        stalled = [procs[fd] for fd in open_fds
                   if now - procs[fd]["seen"] > STALL_MAX]
        if stalled or now - t0 > RUN_MAX:
            lines = [f"after {now - t0:.1f}s: " +
                     ("; ".join(f"worker {p['index']} made no progress for "
                                f"{now - p['seen']:.1f}s" for p in stalled)
                      if stalled else f"the run passed {RUN_MAX}s")]
            for fd in sorted(open_fds):
                p = procs[fd]
                lines.append(f"worker {p['index']} (silent "
                             f"{now - p['seen']:.1f}s), last steps "
                             f"{p['last'][-3:]}, kernel stack:\n"
                             f"{kernel_stack(p['pid'])}")
            hung = "\n".join(lines)
            break
        ready, _, _ = select.select(list(open_fds), [], [], 1.0)
        for fd in ready:
            p = procs[fd]
            data = os.read(fd, 65536)
            if not data:
                open_fds.discard(fd)
                continue
            p["seen"] = time.monotonic()
            p["buf"] += data
            *lines, p["buf"] = p["buf"].split(b"\n")
            for line in lines:
                rec = json.loads(line)
                if rec.get("done"):
                    p["result"] = rec
                else:
                    p["last"] = (p["last"] + [rec])[-8:]
    unfinished = [procs[fd] for fd in open_fds]
    for p in unfinished:
        os.kill(p["pid"], signal.SIGKILL)
    for fd, p in procs.items():
        os.close(fd)
        if p not in unfinished:
            os.waitpid(p["pid"], 0)
    return [p["result"] for p in procs.values()], hung


def remove_sessions_bounded():
    """rmdir every worker's session in a child given CLEANUP_MAX, so that
    a hung kernel path fails this test only, not the tests after it.
    Return what is left (a list of names), or None if the child hung."""
    pid = os.fork()
    if pid == 0:
        # What an rmdir refuses shows in the list the parent returns.
        for w in range(WORKERS):
            for k in range(SLOTS):
                try:
                    os.rmdir(krping.CONFIGFS / slot_name(w, k))
                except OSError:
                    pass
        os._exit(0)
    deadline = time.monotonic() + CLEANUP_MAX
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return [n for w in range(WORKERS) for k in range(SLOTS)
                    if (krping.CONFIGFS / (n := slot_name(w, k))).is_dir()]
        time.sleep(0.2)
    return None


def test_random_ops(capsys):
    """STEPS random configfs/sysfs operations from WORKERS processes (see
    the module's docstring); seed printed for replay."""
    tag = f"KRPING_SEED={SEED}"
    with capsys.disabled():
        print(f"# {tag} (replay: {tag} selftests/run_tests.sh -k random)")
    print(tag)
    assert krping.krping_leftovers() == [], tag
    ports = [krping.next_port() for _ in range(4)]
    t0 = time.monotonic()
    results, hung = run_workers(STEPS // WORKERS, ports)
    took = time.monotonic() - t0
    # whatever happened, remove what the workers left
    left = remove_sessions_bounded()
    assert not hung, f"{tag}: {hung}\nleft after cleanup: {left}"
    assert left == [], f"{tag}: rmdir failed or hung; left: {left}"
    problems = [x for r in results for x in (r or {}).get("problems", [])]
    missing = [i for i, r in enumerate(results) if r is None]
    assert not missing, f"{tag}: workers {missing} died without a result"
    assert not problems, f"{tag}:\n" + "\n".join(problems[:30])
    counts = {}
    for r in results:
        for k, v in r["counts"].items():
            counts[k] = counts.get(k, 0) + v
    slowest = max(tuple(r["slowest"]) for r in results)
    print(f"{sum(counts.values())} operations in {took:.1f}s: "
          + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    with capsys.disabled():
        print(f"# {sum(counts.values())} random operations in {took:.1f}s;"
              f" the slowest took {slowest[0]:.2f}s ({slowest[1]})")
    # every kind of operation took place, and some starts succeeded
    kinds = {k.split(":")[0] for k in counts}
    assert kinds >= {o for o, _ in Worker.OPS}, f"{tag}: only {kinds}"
    assert counts.get("start:OK", 0) > 0, f"{tag}: no start succeeded"
    krping.wait_for(lambda: not krping.krping_leftovers(), timeout=20,
                    what="nothing of krping left")
    # the module still runs a real pair
    pool = krping.SessionPool()
    try:
        srv, cli = pool.pair(count=5, size=64, validate=1)
        assert krping.run_pair(srv, cli) == ("done", "done"), tag
        assert cli.stats() == krping.ping_stats("client", 5, 64), tag
    finally:
        assert pool.cleanup() == []
    assert krping.krping_leftovers() == []
