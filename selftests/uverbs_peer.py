#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A user-space verbs program with pyverbs (rdma-core's Python binding of
libibverbs and librdmacm), for what rping and perftest cannot be told
to do. Its QP is its own (created with ibv_create_qp, moved to INIT and
named by number in rdma_connect or rdma_accept), so it can post any
work request. Prints one JSON object on stdout.

usage:
  uverbs_peer.py server ADDR PORT [FILE]
                                      accept one connection, post two
                                      receives, report their completions;
                                      with FILE: post them only once
                                      connected and FILE exists
  uverbs_peer.py client ADDR PORT     connect; SEND with the MR's lkey,
                                      say so on stdout, then the same
                                      bytes with lkey 0 (the kernel's DMA
                                      lkey); report both completions
  uverbs_peer.py ordered-server ADDR PORT FILE [K [SINK_S]]
                                      post K receives (default 0), accept
                                      one connection; print the address
                                      and rkey of a zeroed sink MR; once
                                      FILE exists, report whether the
                                      sink was written, post a receive,
                                      report the K + 1 completions, then
                                      whether the last receive and the
                                      sink (within SINK_S seconds,
                                      default 30) got the pattern, and
                                      whether the sink is still zero
  uverbs_peer.py send-write ADDR PORT FILE [K]
                                      connect; once FILE holds the sink's
                                      address and rkey (JSON), post K + 1
                                      SENDs (default K 0) and a WRITE to
                                      the sink, say so, report every
                                      completion
  uverbs_peer.py connect ADDR PORT [QPN]
                                      rdma_connect naming QP number QPN
                                      (not ours), or a QP of our own:
                                      "ok" or the errno
  uverbs_peer.py accept ADDR PORT QPN listen, then rdma_accept the first
                                      request naming QP number QPN (not
                                      ours): "ok" or the errno
  uverbs_peer.py hold DEV             a QP in INIT on DEV, its number
                                      printed; waits for a line on stdin,
                                      then tries one more verb
  uverbs_peer.py events DEV           a QP in INIT on DEV, its number
                                      printed; once a line comes on
                                      stdin, the QP's state printed,
                                      then the context's next async
                                      event, by name
  uverbs_peer.py reg DEV BYTES [N]    register an MR of BYTES: the errno;
                                      with N, N times (each deregistered),
                                      and how many got each outcome
  uverbs_peer.py qps DEV N            create QPs on DEV until N or the
                                      first failure; prints how many and
                                      the errno, holds them until a line
                                      on stdin
  uverbs_peer.py stream-server ADDR PORT N
  uverbs_peer.py stream-client ADDR PORT N
                                      N SENDs through queues one entry
                                      deep: each side polls in a busy
                                      loop and posts its next entry as
                                      soon as a completion frees the
                                      last; reports every failed post
                                      by errno and every bad message
  uverbs_peer.py destroy-poll DEV     two receives flushed into the CQ of
                                      a QP in error, the first polled,
                                      the QP destroyed, then the CQ
                                      polled: what it still holds
"""

import errno
import json
import os
import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMID, ConnParam
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

SIZE = 64
PATTERN = bytes(range(SIZE))
POLL_S = 30.0


def resources(ctx):
    pd = PD(ctx)
    cq = CQ(ctx, 8)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1,
                max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    mr = MR(pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE)
    return pd, cq, qp, mr


def to_init(cmid, qp):
    attr, mask = cmid.init_qp_attr(e.IBV_QPS_INIT)
    qp.modify(attr, mask)


def poll_one(cq):
    """The next completion within POLL_S, as a dict, or None."""
    end = time.monotonic() + POLL_S
    while time.monotonic() < end:
        n, wcs = cq.poll()
        if n:
            wc = wcs[0]
            return {"status": wc.status, "opcode": wc.opcode,
                    "byte_len": wc.byte_len, "wr_id": wc.wr_id,
                    "qp_num": wc.qp_num}
        time.sleep(0.001)
    return None


def spin_poll(cq):
    """The next completion, polled without a pause, or None after
    POLL_S."""
    end = time.monotonic() + POLL_S
    while True:
        n, wcs = cq.poll()
        if n:
            return wcs[0]
        if time.monotonic() > end:
            return None


def post_counted(post, failed):
    """post() until it succeeds, counting its failures by errno in
    failed; False when it never did within POLL_S."""
    end = time.monotonic() + POLL_S
    while time.monotonic() < end:
        try:
            post()
            return True
        except PyverbsError as exc:
            name = errno_of(exc)
            failed[name] = failed.get(name, 0) + 1
    return False


def stream_resources(ctx):
    pd, cq = PD(ctx), CQ(ctx, 4)
    cap = QPCap(max_send_wr=1, max_recv_wr=1, max_send_sge=1,
                max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    mr = MR(pd, 8, e.IBV_ACCESS_LOCAL_WRITE)
    return pd, cq, qp, mr


def stream_server(addr, port, n):
    lid, cid = first_request(addr, port)
    pd, cq, qp, mr = stream_resources(cid.context)
    to_init(cid, qp)
    failed, bad, got = {}, [], 0

    def recv():
        qp.post_recv(RecvWR(wr_id=got, num_sge=1,
                            sg=[SGE(mr.buf, 8, mr.lkey)]))
    recv()
    cid.accept(ConnParam(qp_num=qp.qp_num))
    while got < n:
        wc = spin_poll(cq)
        if wc is None or wc.status != e.IBV_WC_SUCCESS:
            bad.append(f"receive {got}: {wc and wc.status}")
            break
        seq = int.from_bytes(mr.read(8, 0), "little")
        if seq != got or wc.wr_id != got:
            bad.append(f"receive {got}: message {seq}, wr_id {wc.wr_id}")
        got += 1
        if got < n and not post_counted(recv, failed):
            break
    return {"received": got, "failed_posts": failed, "bad": bad[:4]}


def stream_client(addr, port, n):
    cid = CMID(creator=AddrInfo(dst=addr, dst_service=port,
                                port_space=ce.RDMA_PS_TCP))
    pd, cq, qp, mr = stream_resources(cid.context)
    to_init(cid, qp)
    cid.connect(ConnParam(qp_num=qp.qp_num, rnr_retry=7))
    failed, bad, sent = {}, [], 0

    def send():
        qp.post_send(SendWR(wr_id=sent, opcode=e.IBV_WR_SEND, num_sge=1,
                            sg=[SGE(mr.buf, 8, mr.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
    while sent < n:
        mr.write(sent.to_bytes(8, "little"), 8)
        if not post_counted(send, failed):
            break
        wc = spin_poll(cq)
        if wc is None or wc.status != e.IBV_WC_SUCCESS:
            bad.append(f"send {sent}: {wc and wc.status}")
            break
        sent += 1
    return {"sent": sent, "failed_posts": failed, "bad": bad[:4]}


def ordered_server(addr, port, go, ahead=0, sink_s=POLL_S):
    lid, cid = first_request(addr, port)
    pd, cq, qp, mr = resources(cid.context)
    sink = MR(pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    sink.write(bytes(SIZE), SIZE)
    to_init(cid, qp)

    def recv(i):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1,
                            sg=[SGE(mr.buf, SIZE, mr.lkey)]))
    for i in range(ahead):
        recv(i)
    cid.accept(ConnParam(qp_num=qp.qp_num))
    print(json.dumps({"addr": sink.buf, "rkey": sink.rkey}), flush=True)
    wait_for_file(go)
    early = sink.read(SIZE, 0) != bytes(SIZE)
    mr.write(bytes(SIZE), SIZE)
    recv(ahead)
    recvs = [poll_one(cq) for _ in range(ahead + 1)]
    end = time.monotonic() + sink_s
    while sink.read(SIZE, 0) != PATTERN and time.monotonic() < end:
        time.sleep(0.001)
    last = sink.read(SIZE, 0)
    return {"sink_written_before_the_receive": early, "recvs": recvs,
            "recv_ok": mr.read(SIZE, 0) == PATTERN,
            "sink_ok": last == PATTERN, "sink_zero": last == bytes(SIZE)}


def send_write(addr, port, sink_file, ahead=0):
    cid = CMID(creator=AddrInfo(dst=addr, dst_service=port,
                                port_space=ce.RDMA_PS_TCP))
    pd, cq, qp, mr = resources(cid.context)
    to_init(cid, qp)
    cid.connect(ConnParam(qp_num=qp.qp_num, rnr_retry=7))
    mr.write(PATTERN, SIZE)
    wait_for_file(sink_file)
    with open(sink_file) as f:
        sink = json.load(f)
    send = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                  sg=[SGE(mr.buf, SIZE, mr.lkey)],
                  send_flags=e.IBV_SEND_SIGNALED)
    write = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                   sg=[SGE(mr.buf, SIZE, mr.lkey)],
                   send_flags=e.IBV_SEND_SIGNALED)
    write.set_wr_rdma(sink["rkey"], sink["addr"])
    for _ in range(ahead + 1):
        qp.post_send(send)
    qp.post_send(write)
    print(json.dumps({"posted": True}), flush=True)
    return {"wcs": [poll_one(cq) for _ in range(ahead + 2)]}


def outcome(verb):
    """"ok" when verb() succeeds, else the errno's name."""
    try:
        verb()
    except PyverbsError as exc:
        return errno_of(exc)
    return "ok"


def errno_of(exc):
    code = getattr(exc, "error_code", 0) or 0
    return errno.errorcode.get(abs(code), str(exc))


def first_request(addr, port):
    """Listen on addr:port, say so on stdout, and take the first
    connection request: (listening id, the request's new id)."""
    ai = AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP,
                  flags=ce.RAI_PASSIVE)
    lid = CMID(creator=ai)
    lid.listen()
    print(json.dumps({"listening": True}), flush=True)
    return lid, lid.get_request()


def wait_for_file(path):
    """Until path exists; exit 1 after POLL_S without it."""
    end = time.monotonic() + POLL_S
    while not os.path.exists(path):
        if time.monotonic() > end:
            sys.exit(f"{path} did not appear in {POLL_S} s")
        time.sleep(0.01)


def server(addr, port, late=None):
    lid, cid = first_request(addr, port)
    pd, cq, qp, mr = resources(cid.context)
    to_init(cid, qp)
    if late:
        cid.accept(ConnParam(qp_num=qp.qp_num))
        wait_for_file(late)
    for i in range(2):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1,
                            sg=[SGE(mr.buf, SIZE, mr.lkey)]))
    if not late:
        cid.accept(ConnParam(qp_num=qp.qp_num))
    first = poll_one(cq)
    data = mr.read(SIZE, 0)
    second = poll_one(cq)
    return {"first": first, "data_ok": data == PATTERN, "second": second,
            "qpn": qp.qp_num}


def client(addr, port):
    cid = CMID(creator=AddrInfo(dst=addr, dst_service=port,
                                port_space=ce.RDMA_PS_TCP))
    pd, cq, qp, mr = resources(cid.context)
    to_init(cid, qp)
    cid.connect(ConnParam(qp_num=qp.qp_num))
    mr.write(PATTERN, SIZE)
    out = {"qpn": qp.qp_num}
    for name, lkey in (("mr_lkey", mr.lkey), ("dma_lkey", 0)):
        qp.post_send(SendWR(wr_id=lkey, opcode=e.IBV_WR_SEND, num_sge=1,
                            sg=[SGE(mr.buf, SIZE, lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
        print(json.dumps({"posted": name}), flush=True)
        out[name] = poll_one(cq)
    return out


def connect(addr, port, qpn=None):
    cid = CMID(creator=AddrInfo(dst=addr, dst_service=port,
                                port_space=ce.RDMA_PS_TCP))
    if qpn is None:
        pd, cq, qp, mr = resources(cid.context)
        to_init(cid, qp)
        qpn = qp.qp_num
    return {"connect": outcome(lambda: cid.connect(ConnParam(qp_num=qpn)))}


def accept(addr, port, qpn):
    lid, cid = first_request(addr, port)
    out = {"accept": outcome(lambda: cid.accept(ConnParam(qp_num=qpn)))}
    # A refused accept leaves the request's event with the new id:
    # destroying the listener first would wait for its ack for ever.
    cid.close()
    lid.close()
    return out


def qp_in_init(dev):
    """A QP in INIT on DEV, the process's pid and the QP's number printed;
    returns once a line comes on stdin: the context and resources()."""
    ctx = Context(name=dev)
    res = resources(ctx)
    qp = res[2]
    qp.modify(QPAttr(qp_state=e.IBV_QPS_INIT), e.IBV_QP_STATE)
    print(json.dumps({"pid": os.getpid(), "qpn": qp.qp_num}), flush=True)
    sys.stdin.readline()
    return ctx, res


def hold(dev):
    ctx, _ = qp_in_init(dev)
    return {"after": outcome(lambda: PD(ctx))}


def enum_name(prefix, value):
    """The name of pyverbs' enum value that starts with prefix."""
    names = [n for n in dir(e) if n.startswith(prefix)
             and getattr(e, n) == value]
    return names[0] if names else str(value)


def events(dev):
    ctx, (pd, cq, qp, mr) = qp_in_init(dev)
    attr, _ = qp.query(e.IBV_QP_STATE)
    print(json.dumps({"qp_state": enum_name("IBV_QPS_", attr.qp_state)}),
          flush=True)
    ev = ctx.get_async_event()
    kind = ev.event_type
    ev.ack()
    return {"event": enum_name("IBV_EVENT_", kind)}


def reg(dev, size, n=None):
    pd = PD(Context(name=dev))

    def once():
        MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE).close()
    if n is None:
        return {"reg": outcome(once)}
    counts = {}
    for _ in range(n):
        got = outcome(once)
        counts[got] = counts.get(got, 0) + 1
    return {"reg": counts}


def qps(dev, n):
    ctx = Context(name=dev)
    pd, cq = PD(ctx), CQ(ctx, 8)
    cap = QPCap(max_send_wr=1, max_recv_wr=1, max_send_sge=1,
                max_recv_sge=1)
    held, error = [], None
    while len(held) < n and error is None:
        try:
            held.append(QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq,
                                          rcq=cq, cap=cap)))
        except PyverbsError as exc:
            error = errno_of(exc)
    print(json.dumps({"created": len(held), "error": error}), flush=True)
    sys.stdin.readline()
    return {"held": len(held)}


def destroy_poll(dev):
    ctx = Context(name=dev)
    pd, cq, qp, mr = resources(ctx)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_INIT), e.IBV_QP_STATE)
    for wr_id in (7, 8):
        qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                            sg=[SGE(mr.buf, SIZE, mr.lkey)]))
    qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    # The QP's worker flushes both receives in one pass: the first one
    # polled proves the second is in the CQ too.
    first = poll_one(cq)
    qp.close()
    n, wcs = cq.poll(4)
    return {"first": first and first["wr_id"], "polled": n,
            "wcs": [{"wr_id": w.wr_id, "qp_num": w.qp_num}
                    for w in wcs[:n]]}


def main():
    role, args = sys.argv[1], sys.argv[2:]
    if role == "server":
        out = server(args[0], args[1], *args[2:3])
    elif role == "client":
        out = client(args[0], args[1])
    elif role == "ordered-server":
        out = ordered_server(args[0], args[1], args[2], *map(int, args[3:4]),
                             *map(float, args[4:5]))
    elif role == "send-write":
        out = send_write(args[0], args[1], args[2], *map(int, args[3:4]))
    elif role == "connect":
        out = connect(args[0], args[1], *map(int, args[2:3]))
    elif role == "accept":
        out = accept(args[0], args[1], int(args[2]))
    elif role == "stream-server":
        out = stream_server(args[0], args[1], int(args[2]))
    elif role == "stream-client":
        out = stream_client(args[0], args[1], int(args[2]))
    elif role == "hold":
        out = hold(args[0])
    elif role == "destroy-poll":
        out = destroy_poll(args[0])
    elif role == "qps":
        out = qps(args[0], int(args[1]))
    elif role == "reg":
        out = reg(args[0], int(args[1]),
                  int(args[2]) if len(args) > 2 else None)
    elif role == "events":
        out = events(args[0])
    else:
        sys.exit(__doc__)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
