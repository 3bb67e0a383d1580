// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie responder: a SEND, WRITE or READ carried out on the QP it
 * targets, by the host that owns that QP's memory. The key, PD, access
 * rights and bounds of the target's MR, the matching of a SEND to the
 * next receive, SEND with invalidate and the receive completion are
 * decided here and nowhere else; a transport only brings the request
 * and the requester's bytes (struct ropcie_req, struct ropcie_segs).
 * Every check comes before the first byte moves: a refused request
 * touches no memory of the target.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "ropcie.h"

/*
 * Push the receive completion of @tqp's RQE while the caller holds
 * tqp->rq_cons_lock: a flush of later receives (and ib_drain_rq's
 * marker) takes that lock too, so completions keep the RQ's order.
 * Return: what ropcie_recv_signal() must do once the lock is dropped.
 */
static unsigned long ropcie_recv_push(struct ropcie_qp *tqp, u64 wr_id,
				      enum ib_wc_status status, u32 len,
				      u32 inv_rkey, bool solicited)
{
	struct ib_wc wc = {
		.wr_id = wr_id,
		.status = status,
		.opcode = IB_WC_RECV,
		.byte_len = len,
		.qp = &tqp->ibqp,
	};

	lockdep_assert_held(&tqp->rq_cons_lock);
	if (inv_rkey && status == IB_WC_SUCCESS) {
		wc.wc_flags = IB_WC_WITH_INVALIDATE;
		wc.ex.invalidate_rkey = inv_rkey;
	}
	return ropcie_cq_push(tqp->rcq, &wc, solicited);
}

static void ropcie_recv_signal(struct ropcie_qp *tqp, unsigned long todo,
			       enum ib_wc_status status)
{
	if (ropcie_cq_signal(tqp->rcq, todo, false) ||
	    status != IB_WC_SUCCESS)
		ropcie_qp_set_error(tqp);
}

/* A SEND: into the next receive of @tqp. */
static int ropcie_respond_send(struct ropcie_qp *tqp,
			       const struct ropcie_req *req,
			       const struct ropcie_segs *src, bool may_sleep,
			       enum ib_wc_status *status)
{
	enum ib_wc_status st = IB_WC_SUCCESS, rst = IB_WC_SUCCESS;
	struct ropcie_segs dst;
	struct ropcie_rqe *rqe;
	unsigned long todo;
	u32 inv = 0;

	mutex_lock(&tqp->rq_cons_lock);
	WRITE_ONCE(tqp->rnr_wait, true);
	/* The flag, then the RQ: pairs with ropcie_post_recv(). */
	smp_mb();
	rqe = ropcie_ring_cons_slot(&tqp->rq);
	if (!rqe) {
		/* Like an infinite RNR retry: wait for a receive. */
		mutex_unlock(&tqp->rq_cons_lock);
		return -EAGAIN;
	}
	WRITE_ONCE(tqp->rnr_wait, false);
	st = ropcie_segs_get(tqp, rqe->sge, rqe->num_sge, true, &dst);
	if (st != IB_WC_SUCCESS) {
		rst = st;
		st = IB_WC_REM_OP_ERR;
	} else if (dst.total < req->len) {
		rst = IB_WC_LOC_LEN_ERR;
		st = IB_WC_REM_INV_REQ_ERR;
	} else if (!ropcie_copy(dst.seg, dst.n, src->seg, src->n, req->len,
				may_sleep)) {
		rst = IB_WC_LOC_PROT_ERR;
		st = IB_WC_REM_OP_ERR;
	}
	ropcie_segs_put(&dst);
	/*
	 * Invalidate once the message is placed, as RDMAP does, and once
	 * our own hold on the receive's MRs is dropped: the key may name
	 * one of them, and the invalidation waits for every transfer in it.
	 */
	if (st == IB_WC_SUCCESS && req->op == ROPCIE_OP_SEND_INV) {
		if (ropcie_mr_invalidate(tqp->dev, tqp->ibqp.pd,
					 req->inv_rkey)) {
			rst = IB_WC_LOC_PROT_ERR;
			st = IB_WC_REM_ACCESS_ERR;
		} else {
			inv = req->inv_rkey;
		}
	}
	todo = ropcie_recv_push(tqp, rqe->wr_id, rst, (u32)req->len, inv,
				req->solicited);
	ropcie_ring_consume(&tqp->rq);
	mutex_unlock(&tqp->rq_cons_lock);

	ropcie_recv_signal(tqp, todo, rst);
	*status = st;
	return 0;
}

/* A WRITE or a READ: @rkey must name an MR of @tqp's PD that allows it. */
static void ropcie_respond_rdma(struct ropcie_qp *tqp,
				const struct ropcie_req *req,
				const struct ropcie_segs *data, bool may_sleep,
				enum ib_wc_status *status)
{
	bool read = req->op == ROPCIE_OP_READ;
	struct ropcie_seg remote;
	bool copied;

	*status = IB_WC_SUCCESS;
	if (!req->len)
		return;
	remote.addr = req->remote_addr;
	remote.len = req->len;
	remote.mr = ropcie_mr_access(tqp->dev, req->rkey, tqp->ibqp.pd,
				     remote.addr, remote.len,
				     read ? IB_ACCESS_REMOTE_READ :
					    IB_ACCESS_REMOTE_WRITE);
	if (!remote.mr) {
		*status = IB_WC_REM_ACCESS_ERR;
		return;
	}
	if (req->t_start && !read) {
		atomic64_set(&tqp->prof_write, req->t_start);
		/* The stamp before the data: the target may answer at once. */
		smp_wmb();
	}
	if (read)
		copied = ropcie_copy(data->seg, data->n, &remote, 1, req->len,
				     may_sleep);
	else
		copied = ropcie_copy(&remote, 1, data->seg, data->n, req->len,
				     may_sleep);
	ropcie_mr_leave(remote.mr);
	if (!copied) {
		if (req->t_start && !read)
			atomic64_cmpxchg(&tqp->prof_write, req->t_start, 0);
		*status = IB_WC_LOC_PROT_ERR;
	}
}

/**
 * ropcie_respond() - carry out a request on the QP it targets
 * @tqp: the target QP, on this host
 * @req: what the requester asks (opcode, key, address, length)
 * @data: the requester's bytes, exactly @req->len of them: the source of
 *	a SEND or WRITE, the sink of a READ. The transport vouches for
 *	them (the requester's own MRs on loopback, a checked slice of the
 *	link's window otherwise).
 * @may_sleep: false in the poster's context (an inline WRITE)
 * @status: the requester's completion status, when 0 is returned
 *
 * Return: 0, or -EAGAIN when a SEND found no receive posted: the
 * transport tries again once one is (ropcie_transport_ops.recv_posted).
 */
int ropcie_respond(struct ropcie_qp *tqp, const struct ropcie_req *req,
		   const struct ropcie_segs *data, bool may_sleep,
		   enum ib_wc_status *status)
{
	int ret = 0;

	if (req->len > ROPCIE_MAX_MSG || req->len != data->total) {
		*status = IB_WC_REM_INV_REQ_ERR;
		return 0;
	}
	if (!ropcie_qp_target_enter(tqp)) {
		*status = IB_WC_WR_FLUSH_ERR;
		return 0;
	}
	switch (req->op) {
	case ROPCIE_OP_SEND:
	case ROPCIE_OP_SEND_INV:
		ret = ropcie_respond_send(tqp, req, data, may_sleep, status);
		break;
	case ROPCIE_OP_WRITE:
	case ROPCIE_OP_READ:
		ropcie_respond_rdma(tqp, req, data, may_sleep, status);
		break;
	default:
		*status = IB_WC_REM_INV_REQ_ERR;
	}
	ropcie_qp_target_leave(tqp);
	return ret;
}
