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
 * MR is never invalidated by a work request (mr.c), and rdma_cm names a
 * user's QP only for its own process and a kernel QP only through the
 * rdma_cm id it was made on (ropcie_may_connect()).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/pid.h>
#include <linux/sched.h>

#include <rdma/iw_cm.h>
#include <rdma/rdma_cm.h>
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
	xa_init(&ctx->qp_names);
	return 0;
}

void ropcie_dealloc_ucontext(struct ib_ucontext *uctx)
{
	struct ropcie_ucontext *ctx = to_ructx(uctx);
	struct ib_qp *name;
	unsigned long qpn;

	xa_for_each(&ctx->qp_names, qpn, name)
		kfree(name);
	xa_destroy(&ctx->qp_names);
	put_pid(ctx->owner);
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

/*
 * The rdma_cm id that a connect or an accept comes through. In the tree
 * only rdma_cm makes iw_cm ids, with its private id as their context,
 * and that private id begins with the public struct rdma_cm_id
 * (cma_priv.h). A module that makes iw_cm ids of its own cannot name a
 * kernel QP (documented in ropcie.rst).
 */
static const struct rdma_cm_id *ropcie_rdma_cm_id(const struct iw_cm_id *cm_id)
{
	return cm_id->context;
}

/**
 * ropcie_may_connect() - may this connect or accept name @qp?
 * @qp: the QP named by number in a connect or an accept
 * @cm_id: the iw_cm id of the connect or the accept
 *
 * iWARP's connect names its QP by a number, and rdma_cm passes a user's
 * number as the user gave it, so the number alone proves nothing:
 *
 * - A user's QP may be named only by the process that owns its context
 *   (in the ucma system call, current is that process).
 * - A kernel QP may be named only through the rdma_cm id it was made on
 *   (rdma_create_qp() stores it there; every in-tree consumer makes its
 *   QP so). Otherwise any process could connect a kernel consumer's QP,
 *   in INIT between rdma_create_qp() and its own connect, to a peer of
 *   its choice, which then reads and writes what that QP's keys reach.
 *
 * Return: 0, or -EACCES with nothing done.
 */
int ropcie_may_connect(const struct ropcie_qp *qp,
		       const struct iw_cm_id *cm_id)
{
	const struct rdma_cm_id *id = ropcie_rdma_cm_id(cm_id);

	if (qp->owner && qp->owner != task_tgid(current)) {
		pr_debug("QP %u: named by pid %d, not by its owner\n",
			 qp->ibqp.qp_num, task_tgid_nr(current));
		return -EACCES;
	}
	if (!qp->owner && (!id || id->qp != &qp->ibqp)) {
		pr_debug("kernel QP %u: named by pid %d, not through its rdma_cm id\n",
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

/**
 * ropcie_uverbs_name_qp() - give a user's QP the name its completions carry
 * @qp: the new QP, numbered
 * @udata: its create command's data
 *
 * ib_uverbs polls a user's CQ with ib_poll_cq() and reads the QP number
 * through wc->qp only afterwards, with nothing that keeps the QP alive:
 * another thread of the process may destroy it in between. So a user's
 * completion, once polled, points at a stand-in that holds the number
 * and lives as long as the context. There is one per number, shared by
 * the QPs that reuse it: at most ROPCIE_MAX_QP per context, since a
 * device hands out its lowest free numbers.
 *
 * Return: 0, or -ENOMEM.
 */
int ropcie_uverbs_name_qp(struct ropcie_qp *qp, struct ib_udata *udata)
{
	struct ropcie_ucontext *ctx =
		rdma_udata_to_drv_context(udata, struct ropcie_ucontext, ibuc);
	u32 qpn = qp->ibqp.qp_num;
	struct ib_qp *name, *old;

	name = xa_load(&ctx->qp_names, qpn);
	if (!name) {
		name = kzalloc(sizeof(*name), GFP_KERNEL_ACCOUNT);
		if (!name)
			return -ENOMEM;
		name->qp_num = qpn;
		/* Another thread of the process may have named it first. */
		old = xa_cmpxchg(&ctx->qp_names, qpn, NULL, name,
				 GFP_KERNEL_ACCOUNT);
		if (old) {
			kfree(name);
			if (xa_is_err(old))
				return xa_err(old);
			name = old;
		}
	}
	qp->wc_name = name;
	return 0;
}
