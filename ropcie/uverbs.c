// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie from user space: the user context, the commands ib_uverbs serves
 * for it, and the rules a process's objects follow.
 *
 * libibverbs binds a device to the provider library that claims its
 * driver id. ropcie claims RDMA_DRIVER_QIB with uverbs ABI 1: Debian's
 * stock libipathverbs then runs every verb, the data path included, as a
 * plain ib_uverbs command (no driver data, no mmap), so unmodified
 * user space works without a provider library of its own. Nothing in the
 * kernel looks a device up by that id (only siw and rxe look up their
 * own ids), and a provider of our own could take over the same kernel
 * side with a driver id of its own. Documentation/ropcie.rst weighs the
 * choice.
 *
 * Every verb of a user's object runs in the kernel on the user's
 * behalf, so what a user names is checked here or where it is used: an
 * SGE of a user's QP never names the kernel's DMA lkey (sge.c), a user's
 * MR is never invalidated by a work request (mr.c), and a user's QP is
 * named in rdma_cm only by its own process (ropcie_may_connect()).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/pid.h>
#include <linux/sched.h>

#include <rdma/uverbs_ioctl.h>

#include "ropcie.h"

/**
 * ropcie_uverbs_setup() - open the data path's commands to user space
 * @ibdev: the device, before registration
 *
 * ib_core serves the commands whose verbs a device implements, except
 * these: a device whose provider library runs them in user space would
 * not want them. libipathverbs's ABI 1 issues every one of them.
 */
void ropcie_uverbs_setup(struct ib_device *ibdev)
{
	ibdev->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POLL_CQ) |
				  BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_RECV);
}

int ropcie_alloc_ucontext(struct ib_ucontext *uctx, struct ib_udata *udata)
{
	struct ropcie_ucontext *ctx = to_ructx(uctx);

	/* No driver data either way in ABI 1. */
	if (udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	ctx->owner = get_task_pid(current, PIDTYPE_TGID);
	return 0;
}

void ropcie_dealloc_ucontext(struct ib_ucontext *uctx)
{
	put_pid(to_ructx(uctx)->owner);
}

/*
 * Device removal, rdma link delete and rmmod while a process holds the
 * device open: ib_core destroys the process's objects itself (and with
 * them every pinned page), so this has nothing left to do. Having it
 * tells ib_core not to wait for the process to close its file.
 */
void ropcie_disassociate_ucontext(struct ib_ucontext *uctx)
{
}

/**
 * ropcie_may_connect() - may the caller connect @qp through rdma_cm?
 * @qp: the QP named by number in a connect or an accept
 *
 * rdma_cm passes a user's QP number as the user gave it (iWARP has no
 * QP handle in its connect). A user's QP may be named only by the
 * process that owns its context: in the ucma system call, current is
 * that process.
 *
 * Return: 0, or -EACCES with nothing done.
 */
int ropcie_may_connect(const struct ropcie_qp *qp)
{
	if (qp->owner && qp->owner != task_tgid(current)) {
		pr_debug("QP %u: named by pid %d, not by its owner\n",
			 qp->ibqp.qp_num, task_tgid_nr(current));
		return -EACCES;
	}
	return 0;
}

/**
 * ropcie_uverbs_qp_owner() - the process a new QP belongs to
 * @udata: the create command's data, NULL for a kernel consumer
 *
 * Return: the owning process's pid, held (put_pid()), or NULL for a
 * kernel QP.
 */
struct pid *ropcie_uverbs_qp_owner(struct ib_udata *udata)
{
	struct ropcie_ucontext *ctx;

	if (!udata)
		return NULL;
	ctx = rdma_udata_to_drv_context(udata, struct ropcie_ucontext, ibuc);
	return get_pid(ctx->owner);
}
