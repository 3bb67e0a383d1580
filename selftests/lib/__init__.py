# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Helpers for the krping selftests (see krping.py)."""

import sys
from pathlib import Path

# The CLI's package, tools/krpinglib: the session classes and the helpers
# the tests share with the krping command.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
