# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""What a host's rdma_krping accepts: its "features" file at the top of
its configfs directory, one option per line (NAME number MIN..MAX, NAME
bool, NAME enum VALUE,..., NAME addr). A module older than that file
has none; then nothing is known in advance and the kernel's errno says
what was refused."""

from .errors import CliError


class Option:
    """One option: its kind and, for a number or an enum, what it takes."""

    def __init__(self, name, kind, low=None, high=None, values=()):
        self.name = name
        self.kind = kind
        self.low = low
        self.high = high
        self.values = tuple(values)

    def takes(self):
        """What the option takes, for a message."""
        if self.kind == "number":
            return f"{self.low}..{self.high}"
        if self.kind == "bool":
            return "0 or 1"
        if self.kind == "enum":
            return "one of " + ", ".join(self.values)
        if self.kind == "addr":
            return "an IPv4 or IPv6 address"
        return f"a value of kind {self.kind!r}"


def parse(text):
    """The options of a features file's text, by name, in its order.
    A line of a kind this version does not know, or in a shape it does
    not read, is kept as its name and kind: a newer module's lines do
    not break an older CLI."""
    options = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        name, kind = fields[0], fields[1] if len(fields) > 1 else "?"
        rest = fields[2] if len(fields) > 2 else ""
        low, sep, high = rest.partition("..")
        if kind == "number" and sep and low.isdigit() and high.isdigit():
            options[name] = Option(name, kind, int(low), int(high))
        elif kind == "enum" and rest:
            options[name] = Option(name, kind, values=rest.split(","))
        elif kind in ("number", "enum"):
            options[name] = Option(name, f"{kind}?")
        else:
            options[name] = Option(name, kind)
    return options


class Features:
    """A host's options (None: its module has no features file)."""

    def __init__(self, options, where):
        self.options = options
        self.where = where

    def has(self, name):
        """Whether the module takes the option; True when unknown."""
        return self.options is None or name in self.options

    def check(self, settings):
        """Refuse, before anything is written, an option the module
        does not have: it is older than this CLI."""
        for attr, _ in settings:
            if attr != "options" and not self.has(attr):
                raise CliError(f"rdma_krping on {self.where} has no option "
                               f"{attr!r}: it is older than this krping; "
                               f"install the same version there")

    def hint(self, attr):
        """What the option takes, to follow a refused value; "" if
        unknown."""
        o = self.options.get(attr) if self.options else None
        known = o and o.kind in ("number", "bool", "enum", "addr")
        return f": {attr} takes {o.takes()}" if known else ""
