# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Small real kernel modules for the bed's own tests: built with kbuild
against Debian's installed 6.12 headers, as the project's modules are."""

import os
import subprocess

TB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODULE_C = """// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <linux/module.h>
#include <linux/kernel.h>

static int __init {name}_init(void)
{{
	{body}
	return 0;
}}
module_init({name}_init);

static void __exit {name}_exit(void)
{{
}}
module_exit({name}_exit);

MODULE_DESCRIPTION("a test of the krping test bed");
MODULE_LICENSE("Dual BSD/GPL");
"""


def release(series="6.12"):
    """The installed release of SERIES (scripts/testbed/kver)."""
    cp = subprocess.run([os.path.join(TB, "kver"), series], capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode == 0, (f"no {series} kernel installed (the deps "
                                f"stage installs it): {cp.stderr}")
    return cp.stdout.strip()


def write_sources(src, modules):
    """A kbuild tree in SRC: {module name: its init's body}."""
    src.mkdir(parents=True, exist_ok=True)
    (src / "Kbuild").write_text("".join(f"obj-m += {m}.o\n" for m in modules))
    for name, body in modules.items():
        (src / f"{name}.c").write_text(MODULE_C.format(name=name, body=body))


def build(src, kver):
    """make modules in SRC for KVER; returns the CompletedProcess."""
    return subprocess.run(["make", "-C", f"/usr/src/linux-headers-{kver}",
                           f"M={src}", "modules"], capture_output=True,
                          text=True, timeout=600)
