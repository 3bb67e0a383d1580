// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link transport: what a consumer does with each descriptor it
 * took: serve a request of the peer as the responder of the QP it names
 * (responder.c decides everything about the target's memory, as on
 * loopback; a READ is queued for the read kthread, link_read.c), hand a
 * response to the requester waiting for it, and end at most the
 * connection a broken descriptor names.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "link_transport.h"

/*
 * The peer broke the protocol in a message of @qp's connection: that
 * connection ends (its QP fails, the peer gets a CLOSE), the link and
 * every other connection go on.
 */
static void ropcie_lx_conn_fault(struct ropcie_xport *x, struct ropcie_qp *qp,
				 const char *why)
{
	atomic64_inc(&x->stats.conn_faults);
	dev_warn_ratelimited(x->link->hw->dev,
			     "ropcie connection %u (QP %u) ends: %s\n",
			     qp->lx.conn, qp->ibqp.qp_num, why);
	ropcie_lx_up->conn_end(x, qp, ROPCIE_CONN_BROKEN);
}

/*
 * A descriptor that no correct peer writes (@why), naming
 * connection @dst of ours and @src of the peer's, unchecked: the
 * connection ends if it is one in @gen, else the descriptor is dropped.
 * Either way it was consumed: the ring itself is intact.
 */
void ropcie_lx_rx_fault(struct ropcie_xport *x, u32 gen, u32 dst, u32 src,
			const char *why)
{
	struct ropcie_qp *qp = ropcie_lx_conn_qp(x, gen, dst, src);

	if (!qp) {
		atomic64_inc(&x->stats.rx_dropped);
		dev_warn_ratelimited(x->link->hw->dev,
				     "ropcie link: dropped a descriptor: %s\n",
				     why);
		return;
	}
	ropcie_lx_conn_fault(x, qp, why);
	ropcie_qp_put(qp);
}

/*
 * The answer to message @m of the peer for @qp, with the QP's credit:
 * the receives posted on this connection so far (a stale count is only
 * lower). Context: the consumer of @qp's requests, its kthread or the
 * doorbell's bottom half.
 */
static void ropcie_lx_answer_qp(struct ropcie_xport *x, u32 gen,
				struct ropcie_lx_tx **rsp, struct ropcie_qp *qp,
				const struct ropcie_wire_msg *m,
				enum ropcie_wire_type type,
				enum ib_wc_status status)
{
	struct ropcie_wire_msg a = {
		.type = type,
		.flags = ROPCIE_WIRE_CREDIT,
		.status = status,
		.dst_qpn = m->src_qpn,
		.src_qpn = m->dst_qpn,
		.msn = m->msn,
		.credit = READ_ONCE(qp->rq.head) - qp->lx.rq_base,
	};

	ropcie_lx_answer_msg(x, gen, rsp, &a);
}

/*
 * A SEND or WRITE fragment of the peer, for one of our QPs. Its answer,
 * if it has one, goes into *@rsp when that is a slot taken already.
 */
void ropcie_lx_rx_data(struct ropcie_xport *x, u32 gen,
		       const struct ropcie_wire_msg *m, void *payload,
		       struct ropcie_lx_tx **rsp)
{
	struct ropcie_req req = {
		.rkey = m->rkey,
		.inv_rkey = m->inv_rkey,
		.remote_addr = m->raddr,
		.len = m->msg_len,
		.solicited = !!(m->flags & ROPCIE_WIRE_SOLICITED),
	};
	struct ropcie_segs data = {
		.n = m->len ? 1 : 0,
		.total = m->len,
		.seg[0] = { .addr = (uintptr_t)payload, .len = m->len },
	};
	bool first = m->flags & ROPCIE_WIRE_FIRST;
	bool last = m->flags & ROPCIE_WIRE_LAST;
	enum ib_wc_status st = IB_WC_SUCCESS;
	struct ropcie_qp *qp;
	struct ropcie_qp_lx *lx;
	int ret;

	req.op = m->type == ROPCIE_WIRE_SEND ? ROPCIE_OP_SEND :
		 m->type == ROPCIE_WIRE_SEND_INV ? ROPCIE_OP_SEND_INV :
		 ROPCIE_OP_WRITE;
	qp = ropcie_lx_conn_qp(x, gen, m->dst_qpn, m->src_qpn);
	if (!qp) {
		/* A closed connection: its requester may still wait. */
		if (last)
			ropcie_lx_answer(x, gen, rsp, ROPCIE_WIRE_ACK, m->src_qpn,
					 m->dst_qpn, m->msn, IB_WC_WR_FLUSH_ERR);
		return;
	}
	lx = &qp->lx;
	if (first) {
		lx->in_active = true;
		lx->in_skip = lx->in_broken;
		lx->in_msn = m->msn;
		if (lx->in_broken)
			ropcie_lx_answer(x, gen, rsp, ROPCIE_WIRE_ACK, m->src_qpn,
					 m->dst_qpn, m->msn, IB_WC_WR_FLUSH_ERR);
	} else if (!lx->in_active || lx->in_msn != m->msn) {
		/* Its requester hears why before the CLOSE. */
		ropcie_lx_answer(x, gen, rsp, ROPCIE_WIRE_ACK, m->src_qpn,
				 m->dst_qpn, m->msn, IB_WC_REM_INV_REQ_ERR);
		ropcie_lx_conn_fault(x, qp, "the peer broke a message's order");
		ropcie_qp_put(qp);
		return;
	}
	if (!lx->in_skip) {
		ret = ropcie_respond_frag(qp, &req, &lx->in, m->offset, &data,
					  last, !rsp, &st);
		if (ret == -EAGAIN) {
			lx->in_skip = true;
			atomic64_inc(&x->stats.rnr_answered);
			ropcie_lx_answer_qp(x, gen, rsp, qp, m, ROPCIE_WIRE_RNR,
					    0);
		} else if (st != IB_WC_SUCCESS || last) {
			lx->in_skip = true;
			lx->in_broken = st != IB_WC_SUCCESS;
			ropcie_lx_answer_qp(x, gen, rsp, qp, m, ROPCIE_WIRE_ACK,
					    st);
		}
		/* The receive completes once the answer is on its way. */
		if (!ret)
			ropcie_respond_done(qp, &lx->in);
	}
	if (last)
		lx->in_active = false;
	ropcie_qp_put(qp);
}

/* One descriptor of the request ring. */
void ropcie_lx_rx_request(struct ropcie_xport *x, u32 gen,
			  const struct ropcie_wire_msg *m, void *payload)
{
	struct ropcie_qp *qp;

	switch (m->type) {
	case ROPCIE_WIRE_CM: {
		struct ropcie_wire_cm w;
		struct ropcie_wire_cm_msg cm;

		memcpy(&w, payload, min_t(u32, m->len, sizeof(w)));
		barrier();	/* the copy, never the window, from here on */
		/* Names no connection: its connect times out. */
		if (ropcie_wire_cm_decode(&w, m->len, &cm))
			ropcie_lx_rx_fault(x, gen, 0, 0,
					   "the peer wrote a malformed CM message");
		else
			ropcie_lx_up->cm_msg(x, gen, &cm);
		break;
	}
	case ROPCIE_WIRE_RECV_POSTED:
		qp = ropcie_lx_conn_qp(x, gen, m->dst_qpn, m->src_qpn);
		if (qp) {
			ropcie_qp_kick(qp);
			ropcie_qp_put(qp);
		}
		break;
	case ROPCIE_WIRE_READ:
		qp = ropcie_lx_conn_qp(x, gen, m->dst_qpn, m->src_qpn);
		if (!qp) {
			ropcie_lx_answer(x, gen, NULL, ROPCIE_WIRE_ACK,
					 m->src_qpn, m->dst_qpn, m->msn,
					 IB_WC_WR_FLUSH_ERR);
			break;
		}
		if (ropcie_lx_rx_read(x, gen, m, qp))
			ropcie_lx_conn_fault(x, qp,
					     "the peer asked for a READ while its last one was answered");
		ropcie_qp_put(qp);
		break;
	case ROPCIE_WIRE_STREAM:
		ropcie_lx_rx_stream(x, m, payload);
		break;
	default:
		ropcie_lx_rx_data(x, gen, m, payload, NULL);
		break;
	}
}

/*
 * An answer to a posted request, under wait_lock; else it is dropped.
 * The QP completes it: its worker, or the caller through @answered (as
 * for ropcie_lx_rx_response()).
 */
static void ropcie_lx_posted_answer(struct ropcie_qp *qp,
				    const struct ropcie_wire_msg *m,
				    struct ropcie_qp **answered)
{
	struct ropcie_qp_lx *lx = &qp->lx;
	struct ropcie_lx_posted *p;

	if (m->msn - lx->posted_msn >= lx->nposted)
		return;
	p = &lx->posted[m->msn % ROPCIE_LX_POSTED];
	if (p->done)
		return;
	/*
	 * An ACK; or RNR to a SEND sent without credit, which goes again.
	 * Anything else fails: an RNR to a SEND the peer's credit covered
	 * breaks its word, and what was posted behind that SEND may have
	 * landed already.
	 */
	p->rnr = p->send && !p->credited && m->type == ROPCIE_WIRE_RNR;
	p->status = m->type == ROPCIE_WIRE_ACK ? m->status : IB_WC_REM_OP_ERR;
	p->answered_at = ropcie_prof_now();
	p->done = true;
	if (answered && (!*answered || *answered == qp)) {
		if (!*answered) {
			ropcie_qp_get(qp);
			*answered = qp;
		}
		return;
	}
	ropcie_qp_kick(qp);
}

/*
 * One descriptor of the response ring: to the requester waiting for it.
 * @answered: NULL in the kthread; in a user's poll, where the QP whose
 * posted request got its answer goes (see ropcie_lx_rx_fast()).
 * Return: 0; -EBUSY, with nothing done, when a poll would have to wait
 * for the QP's wait_lock (the kthread serves it then).
 */
int ropcie_lx_rx_response(struct ropcie_xport *x, u32 gen,
			  const struct ropcie_wire_msg *m, void *payload,
			  struct ropcie_qp **answered)
{
	struct ropcie_lx_wait *w;
	struct ropcie_qp *qp;

	qp = ropcie_lx_conn_qp(x, gen, m->dst_qpn, m->src_qpn);
	if (!qp)
		return 0;
	if (m->type == ROPCIE_WIRE_CLOSE) {
		/* After every answer the peer gave before it. */
		ropcie_lx_up->conn_end(x, qp, ROPCIE_CONN_CLOSED);
		ropcie_qp_put(qp);
		return 0;
	}
	if (!answered) {
		mutex_lock(&qp->lx.wait_lock);
	} else if (!mutex_trylock(&qp->lx.wait_lock)) {
		ropcie_qp_put(qp);
		return -EBUSY;
	}
	/* Receives only ever get posted: a count that moved back is stale. */
	if ((m->flags & ROPCIE_WIRE_CREDIT) &&
	    (s32)(m->credit - qp->lx.peer_recvs) > 0)
		qp->lx.peer_recvs = m->credit;
	w = qp->lx.wait;
	if (!w || w->msn != m->msn) {
		ropcie_lx_posted_answer(qp, m, answered);
		goto out;
	}
	/* An answer to a request its requester gave up on: dropped. */
	if (w->done)
		goto out;
	w->progress++;
	switch (m->type) {
	case ROPCIE_WIRE_ACK:
		w->status = m->status;
		WRITE_ONCE(w->done, true);
		break;
	case ROPCIE_WIRE_RNR:
		w->rnr = !w->read;
		w->status = IB_WC_REM_OP_ERR;
		WRITE_ONCE(w->done, true);
		break;
	case ROPCIE_WIRE_READ_DATA: {
		struct ropcie_seg src = {
			.addr = (uintptr_t)payload,
			.len = m->len,
		};

		if (!w->read || m->offset != w->next || m->msg_len != w->len) {
			/* No correct responder sends this: the QP fails. */
			w->status = IB_WC_REM_OP_ERR;
			WRITE_ONCE(w->done, true);
			break;
		}
		if (!ropcie_copy_at(w->sink->seg, w->sink->n, m->offset, &src,
				    1, 0, m->len, true)) {
			w->status = IB_WC_LOC_PROT_ERR;
			WRITE_ONCE(w->done, true);
			break;
		}
		w->next += m->len;
		if (m->flags & ROPCIE_WIRE_LAST) {
			w->status = m->status;
			WRITE_ONCE(w->done, true);
		}
		break;
	}
	default:
		break;
	}
	if (READ_ONCE(w->done)) {
		w->answered_at = ropcie_prof_now();
		ropcie_qp_kick(qp);
	}
out:
	mutex_unlock(&qp->lx.wait_lock);
	ropcie_qp_put(qp);
	return 0;
}
