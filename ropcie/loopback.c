// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie loopback transport: both QPs of a connection are on this host,
 * so a request is handed to the responder of the peer QP as a function
 * call, and the bytes move in one copy between the requester's MRs and
 * the target's. Nothing of the verbs' semantics is here.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "ropcie.h"

/* The peer, held, or NULL when not connected. */
static struct ropcie_qp *ropcie_lo_peer(struct ropcie_qp *qp)
{
	struct ropcie_qp *peer;
	unsigned long flags;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	peer = qp->peer;
	if (peer)
		ropcie_qp_get(peer);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	return peer;
}

static int ropcie_lo_transfer(struct ropcie_qp *qp,
			      const struct ropcie_req *req,
			      const struct ropcie_segs *local, bool may_sleep,
			      enum ib_wc_status *status)
{
	struct ropcie_qp *peer = ropcie_lo_peer(qp);
	int ret;

	if (!peer) {
		*status = IB_WC_WR_FLUSH_ERR;
		return 0;
	}
	ret = ropcie_respond(peer, req, local, may_sleep, status);
	ropcie_qp_put(peer);
	return ret;
}

/* A SEND of the peer waits for a receive of @qp: wake its worker. */
static void ropcie_lo_recv_posted(struct ropcie_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	if (qp->peer)
		ropcie_qp_kick(qp->peer);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
}

const struct ropcie_transport_ops ropcie_loopback_transport = {
	.name = "loopback",
	.transfer = ropcie_lo_transfer,
	.recv_posted = ropcie_lo_recv_posted,
	.inline_exec = true,
};
