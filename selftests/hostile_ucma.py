#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Act as a hostile unprivileged rdma_cm user: listen on ADDR:PORT, then
connect to ourselves once per QP number in FIRST..LAST, naming that QP
in rdma_connect (and, for every request that reaches the listener, the
next QP number in rdma_accept). The QPs are not ours: a provider must
refuse them. Prints one JSON object: per QP number what connect did
("taken" or the errno's name), the accepts that were taken, and every
event seen.

usage: hostile_ucma.py ADDR PORT FIRST LAST
"""

import errno
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib.ucma import Ucm, UcmError  # noqa: E402


def main():
    addr, port, first, last = sys.argv[1], int(sys.argv[2]), \
        int(sys.argv[3]), int(sys.argv[4])
    out = {"uid": os.getuid(), "connect": {}, "accept": {}, "events": []}
    ucm = Ucm()
    lid = ucm.create_id()
    ucm.bind(lid, addr, port)
    ucm.listen(lid)
    for qpn in range(first, last + 1):
        cid = ucm.create_id()
        ucm.resolve_addr(cid, addr, port)
        ucm.expect(cid, "ADDR_RESOLVED", out["events"])
        ucm.resolve_route(cid)
        ucm.expect(cid, "ROUTE_RESOLVED", out["events"])
        try:
            ucm.connect(cid, qpn)
            out["connect"][qpn] = "taken"
        except UcmError as e:
            out["connect"][qpn] = errno.errorcode.get(e.errno, str(e.errno))
            continue
        # Whatever reaches the listener: accept it naming another QP.
        while True:
            ev = ucm.get_event(2.0)
            if ev is None:
                break
            out["events"].append(ev)
            if ev[1] == "CONNECT_REQUEST":
                try:
                    ucm.accept(ev[0], qpn + 1)
                    out["accept"][ev[0]] = "taken"
                except UcmError as e:
                    out["accept"][ev[0]] = errno.errorcode.get(e.errno,
                                                               str(e.errno))
    out["events"] = [list(e) for e in out["events"]]
    print(json.dumps(out))
    ucm.close()


if __name__ == "__main__":
    main()
