# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""What perftest (ib_send_bw and its kin) prints."""


def iterations(text):
    """The #iterations column of perftest's result line, or None."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if "#bytes" in line and "#iterations" in line:
            fields = lines[i + 1].split()
            if len(fields) > 1 and fields[1].isdigit():
                return int(fields[1])
    return None
