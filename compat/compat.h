/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The kernel API differences between the kernels the modules build for
 * (Debian 12's 6.1 and 6.12, the newest kernel of Debian's unstable).
 *
 * Kbuild probes the target kernel's headers and defines one
 * KRPING_HAVE_* symbol per difference; each entry below turns one into
 * a definition the sources use, and names the kernel version and the
 * upstream change. No LINUX_VERSION_CODE: distributions backport.
 */
#ifndef KRPING_COMPAT_H
#define KRPING_COMPAT_H

#include <linux/hrtimer.h>
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

/*
 * hex2bin() and its kin: linux/hex.h since it was split out of
 * linux/kernel.h (6.1 has no hex.h, 6.12 has it), and kernel.h no
 * longer includes it since Linux 6.19 (24c776355f40 "kernel.h: drop
 * hex.h and update all hex.h users").
 */
#ifdef KRPING_HAVE_LINUX_HEX_H
#include <linux/hex.h>
#endif

/*
 * The last argument of ib_device_ops.create_cq: struct
 * uverbs_attr_bundle instead of struct ib_udata since Linux 6.11
 * ("RDMA: Pass uverbs_attr_bundle as part of '.create_cq' attr").
 */
#ifdef KRPING_HAVE_CQ_ATTR_BUNDLE
#define KRPING_COMPAT_CQ_ATTRS struct uverbs_attr_bundle
#else
#define KRPING_COMPAT_CQ_ATTRS struct ib_udata
#endif

/*
 * ib_device_ops.reg_user_mr takes the region's DMA handle (struct
 * ib_dmah, PCIe TPH hints) before its udata since Linux 6.17 (the DMA
 * handle series, "RDMA/core: Introduce a DMAH object and its
 * alloc/free APIs" and the change passing it to reg_user_mr). Put it
 * in a parameter list just before the udata.
 */
#ifdef KRPING_HAVE_REG_USER_MR_DMAH
#define KRPING_COMPAT_REG_USER_MR_DMAH struct ib_dmah *dmah,
#else
#define KRPING_COMPAT_REG_USER_MR_DMAH
#endif

/*
 * ib_mark_name_assigned_by_user(): a device whose name the user chose
 * (rdma link add NAME) says so, and netlink reports it, so that udev's
 * rdma_rename leaves the name alone; since Linux 6.11 ("RDMA/core:
 * Introduce "name_assign_type" for an IB device"). Before, there is
 * nothing to mark.
 */
static inline void krping_compat_mark_name_assigned(struct ib_device *ibdev)
{
#ifdef KRPING_HAVE_NAME_ASSIGNED
	ib_mark_name_assigned_by_user(ibdev);
#endif
}

/*
 * A per-CPU workqueue says so with WQ_PERCPU since Linux 6.17
 * ("workqueue: Add new WQ_PERCPU flag", in Debian's 6.12 too), as
 * workqueues are to become unbound by default; 7.2 warns at
 * alloc_workqueue() when neither WQ_PERCPU nor WQ_UNBOUND is given.
 * Before, no flag meant per-CPU.
 */
#ifdef KRPING_HAVE_WQ_PERCPU
#define KRPING_COMPAT_WQ_PERCPU WQ_PERCPU
#else
#define KRPING_COMPAT_WQ_PERCPU 0
#endif

/*
 * Pinning a user's virtual range for an MR: ib_umem_get() is called
 * ib_umem_get_va() in Debian's 7.2, beside the getters that take a
 * uverbs buffer descriptor or attribute; the arguments are the same.
 */
#ifdef KRPING_HAVE_UMEM_GET_VA
#define krping_compat_umem_get ib_umem_get_va
#else
#define krping_compat_umem_get ib_umem_get
#endif

/*
 * hrtimer_setup() initialises a timer with its function in one call
 * since Linux 6.13 ("hrtimers: Introduce hrtimer_setup() to replace
 * hrtimer_init()"); Debian's 7.2 has no hrtimer_init() any more, which
 * left the function to the caller.
 */
static inline void
krping_compat_hrtimer_setup(struct hrtimer *timer,
			    enum hrtimer_restart (*function)(struct hrtimer *),
			    clockid_t clock_id, enum hrtimer_mode mode)
{
#ifdef KRPING_HAVE_HRTIMER_SETUP
	hrtimer_setup(timer, function, clock_id, mode);
#else
	hrtimer_init(timer, clock_id, mode);
	timer->function = function;
#endif
}

#endif /* KRPING_COMPAT_H */
