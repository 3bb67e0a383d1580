# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Documentation/ABI's entries, and the files a module created, for the
tests that hold the two against each other (test_abi.py,
test_ropcie_link.py)."""

import os
import re
from pathlib import Path

ABI = Path(__file__).resolve().parent.parent.parent / "Documentation" / "ABI"


def entries():
    """Every "What:" path of Documentation/ABI/*/*."""
    paths = set()
    for f in sorted(ABI.glob("*/*")):
        for line in f.read_text().splitlines():
            if line.startswith("What:"):
                paths.add(line.split(None, 1)[1].strip())
    assert paths, f"no What: lines under {ABI}"
    return paths


def entries_under(prefix, **names):
    """The entries below prefix (itself written with <name> parts), each
    <key> replaced by names[key]; directories keep their slash."""
    def fill(p):
        for key, value in names.items():
            p = p.replace(f"<{key}>", value)
        return p
    return {fill(p) for p in entries() if p.startswith(prefix)}


def documented(path):
    """Does an entry (its <...> parts taken for any name) name path?"""
    for p in entries():
        # re.escape() leaves < and > as they are.
        pattern = re.sub(r"<[a-z]+>", "[^/]+", re.escape(p))
        if re.fullmatch(pattern, path):
            return True
    return False


def tree(root):
    """Every file and directory below root, as absolute paths, the
    directories with a trailing slash, root itself among them."""
    root = str(root).rstrip("/")
    found = {f"{root}/"}
    for dirpath, dirs, files in os.walk(root):
        found |= {f"{dirpath}/{d}/" for d in dirs}
        found |= {f"{dirpath}/{f}" for f in files}
    return found
