# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""
Where the suite runs: one host, or this host and a remote peer.

The settings follow the kernel's selftests for drivers with a remote
endpoint (tools/testing/selftests/drivers/net, net.config): KEY=VALUE
lines in selftests/krping.config (or the file KRPING_CONFIG names), each
of which an environment variable of the same name overrides:

  LOCAL_ADDR=192.168.50.1     this host's address on the RDMA link
  REMOTE_ADDR=192.168.50.2    the remote host's address on that link
  REMOTE_TYPE=ssh             how to reach the remote host (only ssh)
  REMOTE_ARGS=root@hostb      where: the ssh destination, with ssh
                              options before it if needed

With REMOTE_TYPE set the topology is "two-host": the suite's pairs put
one side on the remote host (through lib/remote.py) and the other here,
and LOCAL_ADDR and REMOTE_ADDR are required. Without it the topology is
"single-host": both sides here, on the test bed's addresses (lib/krping:
SERVER_ADDR, CLIENT_ADDR).

Blank lines and lines starting with # are ignored; a value may be
quoted as in a shell (shlex).
"""

import ipaddress
import os
import shlex
from pathlib import Path

NAMES = ("LOCAL_ADDR", "REMOTE_ADDR", "REMOTE_TYPE", "REMOTE_ARGS")
REMOTE_TYPES = ("ssh",)
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "krping.config"


class ConfigError(Exception):
    """The configuration cannot describe a topology."""


def parse_config(text, origin="config"):
    """{NAME: value} of a krping.config text; raises ConfigError on a
    line that is not NAME=value or names something unknown."""
    values = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or name not in NAMES:
            raise ConfigError(f"{origin}:{n}: expected one of "
                              f"{', '.join(NAMES)} as NAME=value: {line!r}")
        words = shlex.split(value, comments=True)
        values[name] = " ".join(words) if name == "REMOTE_ARGS" else \
            (words[0] if words else "")
    return values


def load(environ=None, path=None):
    """The settings: the config file, then the environment on top."""
    environ = os.environ if environ is None else environ
    path = Path(path or environ.get("KRPING_CONFIG") or DEFAULT_CONFIG)
    values = {}
    if path.is_file():
        values = parse_config(path.read_text(), str(path))
    for name in NAMES:
        if environ.get(name):
            values[name] = environ[name]
    return values


def _address(values, name):
    try:
        return str(ipaddress.ip_address(values[name]))
    except KeyError:
        raise ConfigError(f"{name} is required with REMOTE_TYPE") from None
    except ValueError:
        raise ConfigError(f"{name}={values[name]!r} is not an IP "
                          "address") from None


class Topology:
    """What the configuration says: .remote_type is None on one host.

    Attributes: kind ("single-host" or "two-host"), local_addr and
    remote_addr (two-host only), remote_type, remote_args.
    """

    def __init__(self, values):
        self.remote_type = values.get("REMOTE_TYPE") or None
        self.remote_args = values.get("REMOTE_ARGS", "")
        self.local_addr = self.remote_addr = None
        if self.remote_type is None:
            self.kind = "single-host"
            return
        if self.remote_type not in REMOTE_TYPES:
            raise ConfigError(f"REMOTE_TYPE={self.remote_type!r}: only "
                              f"{', '.join(REMOTE_TYPES)} is supported")
        if not self.remote_args:
            raise ConfigError("REMOTE_ARGS (the ssh destination) is "
                              "required with REMOTE_TYPE=ssh")
        self.kind = "two-host"
        self.local_addr = _address(values, "LOCAL_ADDR")
        self.remote_addr = _address(values, "REMOTE_ADDR")

    @property
    def two_host(self):
        return self.kind == "two-host"

    def __repr__(self):
        if not self.two_host:
            return "Topology(single-host)"
        return (f"Topology(two-host: {self.local_addr} here, "
                f"{self.remote_addr} on {self.remote_type} "
                f"{self.remote_args})")


_topology = None


def topology():
    """The suite's Topology, loaded once."""
    global _topology
    if _topology is None:
        _topology = Topology(load())
    return _topology
