// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie requester: a SEND, WRITE or READ of a QP's send queue turned
 * into a request for the responder (struct ropcie_req) and the bytes
 * of its own SGEs, handed to the QP's transport. The requester
 * checks only its own memory; the target's is the responder's to check
 * (responder.c), on the host that owns it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "ropcie.h"

/*
 * The MR a READ_WITH_INV invalidates: its sink's, as siw and cxgb4 do.
 * rdma_rw fills in ex.invalidate_rkey when it builds the chain and bumps
 * the MR's key byte only when it posts it (rdma_rw_update_lkey()), so
 * the key it names is one generation old; only the index still matches.
 */
static u32 ropcie_read_inv_key(const struct ropcie_sqe *sqe)
{
	if (sqe->num_sge && (sqe->sge[0].lkey >> 8) == (sqe->inv_rkey >> 8))
		return sqe->sge[0].lkey;
	return sqe->inv_rkey;
}

/*
 * The request of @sqe, a SEND, WRITE or READ, without its length.
 * Return: false for another opcode.
 */
static bool ropcie_req_of(const struct ropcie_sqe *sqe, struct ropcie_req *req)
{
	*req = (struct ropcie_req){
		.rkey = sqe->rkey,
		.remote_addr = sqe->remote_addr,
		.solicited = !!(sqe->send_flags & IB_SEND_SOLICITED),
	};
	switch (sqe->opcode) {
	case IB_WR_SEND:
		req->op = ROPCIE_OP_SEND;
		return true;
	case IB_WR_SEND_WITH_INV:
		req->op = ROPCIE_OP_SEND_INV;
		req->inv_rkey = sqe->inv_rkey;
		return true;
	case IB_WR_RDMA_WRITE:
		req->op = ROPCIE_OP_WRITE;
		return true;
	case IB_WR_RDMA_READ:
	case IB_WR_RDMA_READ_WITH_INV:
		req->op = ROPCIE_OP_READ;
		return true;
	default:
		return false;
	}
}

/**
 * ropcie_request() - run a SEND, WRITE or READ of @qp's send queue
 * @qp: the requester
 * @sqe: the work request
 * @wc: its completion: status, and byte_len of a WRITE or READ
 * @may_sleep: false in a kernel poster's context (an inline WRITE)
 * @t_start: profile: when the worker took a WRITE (ns), else 0
 *
 * Return: 0 with @wc->status set, or -EAGAIN to be called again once
 * the peer posted a receive (a SEND found none).
 */
int ropcie_request(struct ropcie_qp *qp, const struct ropcie_sqe *sqe,
		   struct ib_wc *wc, bool may_sleep, u64 t_start)
{
	const struct ropcie_transport_ops *transport;
	struct ropcie_segs local;
	struct ropcie_req req;
	enum ib_wc_status st;
	int ret;

	if (!ropcie_req_of(sqe, &req)) {
		wc->status = IB_WC_LOC_QP_OP_ERR;
		return 0;
	}
	req.t_start = t_start;
	/* On iWARP, a READ sink is written by the peer: local write access. */
	st = ropcie_segs_get(qp, sqe->sge, sqe->num_sge,
			     req.op == ROPCIE_OP_READ, &local);
	if (st != IB_WC_SUCCESS) {
		wc->status = st;
		return 0;
	}
	/* Nothing answers through a cut port: the retries run out. */
	if (ropcie_fault_port_cut(qp->dev)) {
		ropcie_segs_put(&local);
		wc->status = IB_WC_RETRY_EXC_ERR;
		return 0;
	}
	req.len = local.total;
	transport = READ_ONCE(qp->transport);
	ret = transport->transfer(qp, &req, &local, may_sleep, &st);
	ropcie_segs_put(&local);
	if (ret)
		return ret;
	wc->status = st;
	if (st != IB_WC_SUCCESS)
		return 0;
	if (req.op == ROPCIE_OP_WRITE || req.op == ROPCIE_OP_READ)
		wc->byte_len = req.len;
	if (sqe->opcode == IB_WR_RDMA_READ_WITH_INV &&
	    ropcie_mr_invalidate(qp->dev, qp->ibqp.pd,
				 ropcie_read_inv_key(sqe)))
		wc->status = IB_WC_LOC_PROT_ERR;
	return 0;
}

/**
 * ropcie_request_post() - send a WRITE or SEND of @qp's send queue
 *	without waiting for its verdict
 * @qp: the requester
 * @sqe: the work request
 * @may_sleep: false in the poster's context
 *
 * For a transport that keeps several requests in flight
 * (ropcie_transport_ops.post); the worker takes the verdicts in order
 * with ropcie_transport_ops.reap.
 *
 * Return: 0 when sent, -EBUSY when the transport has as many in flight
 * as it takes, another error when @sqe must run through ropcie_request()
 * (not a WRITE or SEND, no post, a cut port or a local error for
 * ropcie_request() to report).
 */
int ropcie_request_post(struct ropcie_qp *qp, const struct ropcie_sqe *sqe,
			bool may_sleep)
{
	const struct ropcie_transport_ops *transport = READ_ONCE(qp->transport);
	struct ropcie_segs local;
	struct ropcie_req req;
	int ret;

	if (!transport->post || !ropcie_req_of(sqe, &req) ||
	    req.op == ROPCIE_OP_READ || ropcie_fault_port_cut(qp->dev))
		return -EOPNOTSUPP;
	if (ropcie_segs_get(qp, sqe->sge, sqe->num_sge, false, &local) !=
	    IB_WC_SUCCESS)
		return -EOPNOTSUPP;
	req.len = local.total;
	ret = transport->post(qp, &req, &local, may_sleep);
	ropcie_segs_put(&local);
	return ret;
}
