# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The CLI's errors and what the kernel's errnos mean to a user."""

import errno
import os

# What an error of a failed session usually means (Documentation/krping.rst).
ERROR_HINTS = {
    errno.ECONNREFUSED: "no server listens on that address and port, or it "
                        "refused the connection (already serving one?)",
    errno.ECONNRESET: "the peer disconnected in the middle of the run",
    errno.EHOSTUNREACH: "address resolution failed: no RDMA device leads "
                        "to the address",
    errno.ENETUNREACH: "route resolution failed",
    errno.ETIMEDOUT: "the address did not resolve, or the peer stopped "
                     "answering",
    errno.EADDRINUSE: "another listener owns the port",
    errno.EADDRNOTAVAIL: "no interface has the server address",
    errno.ENODEV: "the address's interface has no RDMA device",
    errno.EOPNOTSUPP: "the device lacks an operation the settings need",
    errno.EBADMSG: "validation: the data that came back differs",
    errno.EMSGSIZE: "the client's buffer is larger than the server's size",
    errno.EACCES: "a remote access was refused (key, rights or bounds)",
    errno.EREMOTEIO: "the peer refused a remote invalidation (server_inv "
                     "with a client that does not register its buffers)",
    errno.EPROTO: "a message from the peer was too short",
}

# What an errno from writing "start" means.
START_HINTS = {
    errno.EINVAL: "the settings do not form a session (role or addr "
                  "missing, duplex without test=bw, server_inv/read_inv "
                  "with mem_mode=dma, link-local address without %%if)",
    errno.EOPNOTSUPP: "the loaded module does not implement this test",
    errno.ENODEV: "the interface of the link-local address does not exist",
    errno.EBUSY: "the session is already running",
}


class CliError(Exception):
    """A problem to report in one line; exit status 2."""


class Refused(OSError):
    """A write the module refused: the kernel's errno, the attribute and
    the value written, and the host (None: this one). The sessions raise
    it; the command line turns it into its message (refused())."""

    def __init__(self, err, attr, value, where=None):
        super().__init__(err, os.strerror(err))
        self.attr = attr
        self.value = value
        self.where = where


class Interrupted(Exception):
    pass


def errname(err):
    err = abs(err)
    if err == errno.EOPNOTSUPP:
        return "EOPNOTSUPP"
    if err == errno.EAGAIN:
        return "EAGAIN"
    return errno.errorcode.get(err, str(err))


def describe_errno(err):
    return f"{errname(err)} ({os.strerror(abs(err))})"

