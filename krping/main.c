// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * krping: kernel-mode RDMA ping and benchmark sessions.
 *
 * Module entry: the sysfs results root must exist before configfs lets
 * anyone create a session, and configfs must be gone (no sessions left,
 * which configfs guarantees by pinning the module) before it is removed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>

#include "krping.h"

static int __init krping_init(void)
{
	int ret;

	ret = krping_results_init();
	if (ret)
		return ret;
	ret = krping_configfs_init();
	if (ret) {
		krping_results_exit();
		return ret;
	}
	return 0;
}

static void __exit krping_exit(void)
{
	krping_configfs_exit();
	krping_results_exit();
}

module_init(krping_init);
module_exit(krping_exit);

MODULE_AUTHOR("krping developers");
MODULE_DESCRIPTION("Kernel-mode RDMA ping and benchmark sessions (configfs)");
MODULE_LICENSE("Dual BSD/GPL");
