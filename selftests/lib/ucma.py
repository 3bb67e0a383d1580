# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The raw rdma_cm ABI (/dev/infiniband/rdma_cm, include/uapi/rdma/
rdma_user_cm.h) from python's standard library, for tests that act as an
unprivileged user would. librdmacm refuses a device with no user-space
verbs provider, such as ropcie; the kernel does not, and any user may
open the device (mode 0666). So a hostile user speaks the ABI itself,
and so does this module: write() of a command header and its struct, the
answers written by the kernel to a buffer whose address we pass."""

import ctypes
import errno
import os
import socket
import struct
import time

DEVICE = "/dev/infiniband/rdma_cm"

# enum in rdma_user_cm.h
CMD_CREATE_ID = 0
CMD_DESTROY_ID = 1
CMD_RESOLVE_ROUTE = 4
CMD_CONNECT = 6
CMD_LISTEN = 7
CMD_ACCEPT = 8
CMD_GET_EVENT = 12
CMD_BIND = 20
CMD_RESOLVE_ADDR = 21

RDMA_PS_TCP = 0x0106
IB_QPT_RC = 2

# enum rdma_cm_event_type
EVENTS = ("ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR",
          "CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR",
          "UNREACHABLE", "REJECTED", "ESTABLISHED", "DISCONNECTED",
          "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR",
          "ADDR_CHANGE", "TIMEWAIT_EXIT")

SOCKADDR_STORAGE = 128
CONN_PARAM = struct.Struct("<II256sBBBBBBBB")      # rdma_ucm_conn_param
EVENT_RESP_SIZE = 336           # rdma_ucm_event_resp, ece included


def sockaddr_in(addr, port):
    """A struct sockaddr_in in a __kernel_sockaddr_storage."""
    raw = struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + \
        socket.inet_aton(addr)
    return raw.ljust(SOCKADDR_STORAGE, b"\0")


def conn_param(qp_num, private_data=b""):
    return CONN_PARAM.pack(qp_num, 0, private_data, len(private_data), 0, 1,
                           1, 0, 7, 7, 1)


class UcmError(OSError):
    pass


class Ucm:
    """One open rdma_cm file: ids created on it die with it."""

    def __init__(self):
        self.fd = os.open(DEVICE, os.O_RDWR | os.O_NONBLOCK)
        self.resp = ctypes.create_string_buffer(512)
        self.next_uid = 0

    def close(self):
        os.close(self.fd)

    def _write(self, cmd, payload, out=0):
        hdr = struct.pack("<IHH", cmd, len(payload), out)
        try:
            os.write(self.fd, hdr + payload)
        except OSError as e:
            raise UcmError(e.errno, f"rdma_cm command {cmd}: "
                           f"{os.strerror(e.errno)}") from None

    def _addr(self):
        return ctypes.addressof(self.resp)

    def create_id(self, uid=None):
        """A new id; ucma delivers events only for a non-zero uid (the
        user's context cookie, a pointer in librdmacm)."""
        if uid is None:
            self.next_uid += 1
            uid = self.next_uid
        self._write(CMD_CREATE_ID,
                    struct.pack("<QQHB5x", uid, self._addr(), RDMA_PS_TCP,
                                IB_QPT_RC), 4)
        return struct.unpack_from("<I", self.resp)[0]

    def destroy_id(self, cid):
        self._write(CMD_DESTROY_ID, struct.pack("<QII", self._addr(), cid, 0),
                    4)

    def bind(self, cid, addr, port):
        self._write(CMD_BIND, struct.pack("<IHH", cid, 16, 0) +
                    sockaddr_in(addr, port))

    def listen(self, cid, backlog=64):
        self._write(CMD_LISTEN, struct.pack("<II", cid, backlog))

    def resolve_addr(self, cid, addr, port, timeout_ms=2000):
        self._write(CMD_RESOLVE_ADDR,
                    struct.pack("<IIHHI", cid, timeout_ms, 0, 16, 0) +
                    bytes(SOCKADDR_STORAGE) + sockaddr_in(addr, port))

    def resolve_route(self, cid, timeout_ms=2000):
        self._write(CMD_RESOLVE_ROUTE, struct.pack("<II", cid, timeout_ms))

    def connect(self, cid, qp_num, private_data=b""):
        """rdma_connect naming any QP number, as the ABI lets one, with
        the private data the listener's CONNECT_REQUEST carries."""
        self._write(CMD_CONNECT, conn_param(qp_num, private_data) +
                    struct.pack("<II8x", cid, 0))

    def accept(self, cid, qp_num, uid=1 << 32):
        self._write(CMD_ACCEPT, struct.pack("<Q", uid) + conn_param(qp_num) +
                    struct.pack("<II8x", cid, 0))

    def get_event(self, timeout=10.0):
        """The next event as (id, name, status), or None after timeout."""
        end = time.monotonic() + timeout
        while True:
            try:
                self._write(CMD_GET_EVENT, struct.pack("<Q", self._addr()),
                            EVENT_RESP_SIZE)
            except UcmError as e:
                if e.errno != errno.EAGAIN:
                    raise
                if time.monotonic() > end:
                    return None
                time.sleep(0.01)
                continue
            _uid, cid, event, status = struct.unpack_from("<QIIi", self.resp)
            name = EVENTS[event] if event < len(EVENTS) else str(event)
            return cid, name, status

    def expect(self, cid, name, log, timeout=10.0):
        """Wait for event name on id cid, appending every event seen to
        log; raise if cid gets another event first or none comes."""
        while True:
            ev = self.get_event(timeout)
            if ev is None:
                raise TimeoutError(f"no {name} for id {cid}")
            log.append(ev)
            if ev[0] == cid and ev[1] == name:
                return ev
            if ev[0] == cid:
                raise UcmError(errno.EPROTO, f"id {cid}: {ev[1]} ({ev[2]}) "
                               f"instead of {name}")
