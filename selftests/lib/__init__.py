# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Helpers for the krping selftests (see krping.py)."""
