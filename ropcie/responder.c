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

/*
 * A SEND, or a fragment of one at @off: into the next receive of @tqp.
 * The first fragment picks the receive; later ones land in the same one
 * if it is still there (a flush between two fragments completed it).
 * The last fragment, or the first failure, completes it.
 */
static int ropcie_respond_send(struct ropcie_qp *tqp,
			       const struct ropcie_req *req,
			       struct ropcie_inmsg *in, u64 off,
			       const struct ropcie_segs *src, bool last,
			       bool may_sleep, enum ib_wc_status *status)
{
	enum ib_wc_status st = IB_WC_SUCCESS, rst = IB_WC_SUCCESS;
	bool first = !off;
	struct ropcie_segs dst;
	struct ropcie_rqe *rqe;
	u32 inv = 0;

	mutex_lock(&tqp->rq_cons_lock);
	if (first) {
		WRITE_ONCE(tqp->rnr_wait, true);
		/* The flag, then the RQ: pairs with ropcie_post_recv(). */
		smp_mb();
	}
	rqe = ropcie_ring_cons_slot(&tqp->rq);
	if (!first && (!rqe || tqp->rq.tail != in->rq_tail)) {
		mutex_unlock(&tqp->rq_cons_lock);
		*status = IB_WC_WR_FLUSH_ERR;
		return 0;
	}
	if (!rqe) {
		/* Like an infinite RNR retry: wait for a receive. */
		mutex_unlock(&tqp->rq_cons_lock);
		return -EAGAIN;
	}
	if (first) {
		WRITE_ONCE(tqp->rnr_wait, false);
		in->rq_tail = tqp->rq.tail;
	}
	st = ropcie_segs_get(tqp, rqe->sge, rqe->num_sge, true, &dst);
	if (st != IB_WC_SUCCESS) {
		rst = st;
		st = IB_WC_REM_OP_ERR;
	} else if (dst.total < req->len) {
		rst = IB_WC_LOC_LEN_ERR;
		st = IB_WC_REM_INV_REQ_ERR;
	} else if (!ropcie_copy_at(dst.seg, dst.n, off, src->seg, src->n, 0,
				   src->total, may_sleep)) {
		rst = IB_WC_LOC_PROT_ERR;
		st = IB_WC_REM_OP_ERR;
	}
	ropcie_segs_put(&dst);
	if (st == IB_WC_SUCCESS && !last) {
		mutex_unlock(&tqp->rq_cons_lock);
		*status = st;
		return 0;
	}
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
	/* Completed by ropcie_respond_done(), the lock held until then. */
	in->recv_done = true;
	in->wr_id = rqe->wr_id;
	in->rst = rst;
	in->len = (u32)req->len;
	in->inv = inv;
	in->solicited = req->solicited;
	*status = st;
	return 0;
}

/**
 * ropcie_respond_done() - complete the receive a fragment ended
 * @tqp: the target QP of ropcie_respond_frag()
 * @in: its message state
 *
 * A transport calls this after ropcie_respond_frag() returned 0, once
 * the requester has its answer (or it is on its way, in order): the
 * receiver's ULP may react to the receive at once, by a disconnect for
 * one, and its reaction must not reach the requester before the answer
 * does. Nothing to do when no receive ended.
 */
void ropcie_respond_done(struct ropcie_qp *tqp, struct ropcie_inmsg *in)
{
	unsigned long todo;

	if (!in->recv_done)
		return;
	in->recv_done = false;
	/* The entry is free before a poller can see its completion. */
	ropcie_ring_consume(&tqp->rq);
	ropcie_fault_wc(tqp, IB_WC_RECV, &in->rst);
	todo = ropcie_recv_push(tqp, in->wr_id, in->rst, in->len, in->inv,
				in->solicited);
	mutex_unlock(&tqp->rq_cons_lock);
	ropcie_recv_signal(tqp, todo, in->rst);
}

/*
 * A WRITE or a READ, or a fragment of one at @off: @rkey must name an
 * MR of @tqp's PD that allows it. The first fragment checks the whole
 * message's range before its first byte moves, so a message that does
 * not fit touches nothing; each fragment checks its own range again,
 * since the MR may be invalidated between two.
 */
static void ropcie_respond_rdma(struct ropcie_qp *tqp,
				const struct ropcie_req *req, u64 off,
				const struct ropcie_segs *data, bool may_sleep,
				enum ib_wc_status *status)
{
	bool read = req->op == ROPCIE_OP_READ;
	int access = read ? IB_ACCESS_REMOTE_READ : IB_ACCESS_REMOTE_WRITE;
	struct ropcie_seg remote;
	bool copied;

	*status = IB_WC_SUCCESS;
	/* Refused as a whole, before the first fragment moves a byte. */
	if (!off && ropcie_fault_respond(tqp, req->op, status))
		return;
	if (!req->len)
		return;
	if (!off && data->total != req->len) {
		remote.mr = ropcie_mr_access(tqp->dev, req->rkey, tqp->ibqp.pd,
					     req->remote_addr, req->len,
					     access);
		if (!remote.mr) {
			*status = IB_WC_REM_ACCESS_ERR;
			return;
		}
		ropcie_mr_leave(remote.mr);
	}
	remote.addr = req->remote_addr + off;
	remote.len = data->total;
	remote.mr = ropcie_mr_access(tqp->dev, req->rkey, tqp->ibqp.pd,
				     remote.addr, remote.len, access);
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
		copied = ropcie_copy(data->seg, data->n, &remote, 1,
				     remote.len, may_sleep);
	else
		copied = ropcie_copy(&remote, 1, data->seg, data->n,
				     remote.len, may_sleep);
	ropcie_mr_leave(remote.mr);
	if (!copied) {
		if (req->t_start && !read)
			atomic64_cmpxchg(&tqp->prof_write, req->t_start, 0);
		*status = IB_WC_LOC_PROT_ERR;
	}
}

/**
 * ropcie_respond_frag() - carry out a fragment of a request on its QP
 * @tqp: the target QP, on this host
 * @req: what the requester asks of the whole message (opcode, key,
 *	address, length)
 * @in: the state of a message received in fragments, kept by the caller
 *	from one fragment to the next (no reference is held in it)
 * @off: where this fragment lies in the message; 0 for the first
 * @data: the requester's bytes of this fragment: the source of a SEND or
 *	WRITE, the sink of a READ. The transport vouches for them (the
 *	requester's own MRs on loopback, a checked slot of the link's
 *	window otherwise).
 * @last: this fragment ends the message
 * @may_sleep: false in a kernel poster's context (an inline WRITE)
 * @status: the requester's completion status, when 0 is returned
 *
 * A transport that carries a message in one piece calls this once, with
 * @off 0 and @last true (ropcie_respond()). After each call that returned
 * 0, it answers the requester and then calls ropcie_respond_done().
 *
 * Return: 0 with *@status: IB_WC_SUCCESS when the fragment is placed
 * (and, for the last one, the message complete); any other status ends
 * the message, and the caller drops its later fragments. -EAGAIN when
 * the first fragment of a SEND found no receive posted: the transport
 * tries again once one is (ropcie_transport_ops.recv_posted).
 */
int ropcie_respond_frag(struct ropcie_qp *tqp, const struct ropcie_req *req,
			struct ropcie_inmsg *in, u64 off,
			const struct ropcie_segs *data, bool last,
			bool may_sleep, enum ib_wc_status *status)
{
	int ret = 0;

	if (req->len > ROPCIE_MAX_MSG || off > req->len ||
	    data->total > req->len - off ||
	    last != (off + data->total == req->len)) {
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
		ret = ropcie_respond_send(tqp, req, in, off, data, last,
					  may_sleep, status);
		break;
	case ROPCIE_OP_WRITE:
	case ROPCIE_OP_READ:
		ropcie_respond_rdma(tqp, req, off, data, may_sleep, status);
		break;
	default:
		*status = IB_WC_REM_INV_REQ_ERR;
	}
	ropcie_qp_target_leave(tqp);
	return ret;
}

/**
 * ropcie_respond() - carry out a whole request on the QP it targets
 * @tqp: the target QP, on this host
 * @req: what the requester asks (opcode, key, address, length)
 * @data: the requester's bytes, exactly @req->len of them
 * @may_sleep: false in a kernel poster's context (an inline WRITE)
 * @status: the requester's completion status, when 0 is returned
 *
 * Return: as ropcie_respond_frag() for a message in one fragment.
 */
int ropcie_respond(struct ropcie_qp *tqp, const struct ropcie_req *req,
		   const struct ropcie_segs *data, bool may_sleep,
		   enum ib_wc_status *status)
{
	struct ropcie_inmsg in = {};
	int ret;

	ret = ropcie_respond_frag(tqp, req, &in, 0, data, true, may_sleep,
				  status);
	ropcie_respond_done(tqp, &in);
	return ret;
}
